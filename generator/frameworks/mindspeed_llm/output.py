"""mindspeed-llm: the files' side of the plugin (generator/frameworks/contract.py Output)."""

from __future__ import annotations

from ..contract import Output
from ..module_output import ModuleOutput
from .render import plan_section, render
from .validate import check

OUTPUT: Output = ModuleOutput(render=render, plan_section=plan_section, check=check)
