"""llama-factory: the files' side of the plugin (generator/frameworks/contract.py Output)."""

from __future__ import annotations

from ..contract import CheckOption, Launcher
from .render import plan_section, render
from .validate import check


class Output:
    options: tuple[CheckOption, ...] = ()
    launchers: tuple[Launcher, ...] = ()  # its commands.txt runs gen-launch's launch.sh
    render = staticmethod(render)
    plan_section = staticmethod(plan_section)
    check = staticmethod(check)


OUTPUT = Output()
