"""verl: the files' side of the plugin, a stub until its renderer lands: one file, the plan's Hydra overrides."""

from __future__ import annotations

import jinja2

from ...plan import Plan
from ..base import ModuleOutput
from .settings import VerlSettings


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    settings = plan.frameworks["verl"].settings
    assert isinstance(settings, VerlSettings)
    return {"verl/overrides.txt": "".join(f"{line}\n" for line in settings.override_lines())}


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    settings = plan.frameworks["verl"].settings
    assert isinstance(settings, VerlSettings)
    rows = "".join(f"| `{key}` | `{value}` | {source} |\n" for key, value, source in settings.rows())
    return (f"verl: `verl/overrides.txt` holds the Hydra overrides for `python3 -m {settings.entry}`, following "
            f"{settings.upstream}:\n\n| override | value | source |\n|---|---|---|\n{rows}")


def check(job, path: str):
    return None


OUTPUT = ModuleOutput(render=render, plan_section=plan_section, check=check)
