"""mindformers: the files' side of the plugin (generator/frameworks/contract.py Output)."""

from __future__ import annotations

from ..base import ModuleOutput
from ..contract import Launcher, Output
from .render import plan_section, render
from .validate import PYTHON_OPTION, check

# msrun_launcher.sh's positional arguments: "CMD" WORKER_NUM LOCAL_WORKER MASTER_ADDR MASTER_PORT NODE_RANK ...
OUTPUT: Output = ModuleOutput(render=render, plan_section=plan_section, check=check, options=(PYTHON_OPTION,),
                      launchers=(Launcher("msrun_launcher.sh", 6, "MindFormers scripts/msrun_launcher.sh"),))
