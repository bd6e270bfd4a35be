"""mindformers: the files' side of the plugin (generator/frameworks/contract.py Output)."""

from __future__ import annotations

from ..contract import CheckOption, Launcher
from .render import plan_section, render
from .validate import PYTHON_OPTION, check


class Output:
    options: tuple[CheckOption, ...] = (PYTHON_OPTION,)
    # msrun_launcher.sh's positional arguments: "CMD" WORKER_NUM LOCAL_WORKER MASTER_ADDR MASTER_PORT NODE_RANK ...
    launchers: tuple[Launcher, ...] = (Launcher("msrun_launcher.sh", 6, "MindFormers scripts/msrun_launcher.sh"),)
    render = staticmethod(render)
    plan_section = staticmethod(plan_section)
    check = staticmethod(check)


OUTPUT = Output()
