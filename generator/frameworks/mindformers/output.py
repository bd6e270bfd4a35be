"""mindformers: the files' side of the plugin (generator/frameworks/contract.py Output)."""

from __future__ import annotations

import jinja2

from ...api.output import Launcher
from ...plan import Plan
from ..contract import Output
from ..module_output import ModuleOutput
from . import predict_files as predict
from . import render as training
from .validate import PYTHON_OPTION, check


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    """A predict job's files (predict_files.py), or a training job's (render.py)."""
    return (predict if plan.method == "predict" else training).render(plan, env)


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    return (predict if plan.method == "predict" else training).plan_section(plan, env)


# msrun_launcher.sh's positional arguments: "CMD" WORKER_NUM LOCAL_WORKER MASTER_ADDR MASTER_PORT NODE_RANK ...
OUTPUT: Output = ModuleOutput(render=render, plan_section=plan_section, check=check, options=(PYTHON_OPTION,),
                      launchers=(Launcher("msrun_launcher.sh", 6, "MindFormers scripts/msrun_launcher.sh"),))
