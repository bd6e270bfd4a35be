"""PLAN.md (the plan in words) and plan.json (the plan as data): written for every job."""

from __future__ import annotations

import json

import jinja2

from ..plan import HEADROOM, Plan
from .submit import Submit


def plan_json(plan: Plan, extra: dict | None = None) -> str:
    """plan.json's text; `extra`: keys `plan --json` adds on request (candidates)."""
    return json.dumps({**plan.to_json(), **(extra or {})}, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render(plan: Plan, env: jinja2.Environment, sections: dict[str, str],
           submits: dict[str, Submit | None]) -> dict[str, str]:
    """`sections`: each framework renderer's part of PLAN.md (its files and how to launch them); `submits`: how each
    is submitted under cluster.scheduler (None: by hand)."""
    text = env.get_template("PLAN.md.j2").render(plan=plan, headroom_pct=round(HEADROOM * 100), sections=sections,
                                                 submits=submits)
    return {"PLAN.md": text, "plan.json": plan_json(plan)}
