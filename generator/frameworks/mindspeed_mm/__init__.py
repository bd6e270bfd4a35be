"""The mindspeed-mm plugin (contract: generator/frameworks/contract.py): Qwen2.5-VL with MindSpeed-MM v2.2.0."""

from __future__ import annotations

from ..base import LazyOutput, LazyPlanning
from ..contract import Plugin

# Each side imported when first used (base.py): a plan asks the frameworks it lists, render and validate the output.
PLUGIN = Plugin("mindspeed-mm", planning=LazyPlanning("mindspeed-mm", f"{__name__}.planning"),
                output=LazyOutput("mindspeed-mm", f"{__name__}.output"))
