"""PLAN.md (the plan in words) and plan.json (the plan as data): written for every job."""

from __future__ import annotations

import json

import jinja2

from ..plan import HEADROOM, Plan
from .common import master_addr
from .submit import Submit


def plan_json(plan: Plan, extra: dict | None = None) -> str:
    """plan.json's text; `extra`: keys `plan --json` adds on request (candidates)."""
    return json.dumps({**plan.to_json(), **(extra or {})}, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render(plan: Plan, env: jinja2.Environment, sections: dict[str, str],
           submits: dict[str, Submit | None]) -> dict[str, str]:
    """`sections`: each framework renderer's part of PLAN.md (its files and how to launch them); `submits`: how each
    is submitted under cluster.scheduler (None: by hand)."""
    # The address the launch files use: the spec's, the local host on one node, else MASTER_ADDR at launch time
    elsewhere = ("MASTER_ADDR from the environment" if plan.scheduler.kind == "none"
                 else f"the first host of the {plan.scheduler.kind} job, at launch time")
    masters = {name: master_addr(plan, fp) or elsewhere for name, fp in plan.frameworks.items()}
    master = (next(iter(masters.values())) if len(set(masters.values())) == 1
              else ", ".join(f"{name}: {address}" for name, address in masters.items()))
    text = env.get_template("PLAN.md.j2").render(plan=plan, headroom_pct=round(HEADROOM * 100), sections=sections,
                                                 master=master, submits=submits)
    return {"PLAN.md": text, "plan.json": plan_json(plan)}
