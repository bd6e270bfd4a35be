"""The mindspeed-mm plugin (contract: generator/frameworks/contract.py): Qwen2.5-VL with MindSpeed-MM v2.2.0."""

from __future__ import annotations

from ..base import LazyOutput
from ..contract import Plugin
from .planning import PLANNING

PLUGIN = Plugin("mindspeed-mm", planning=PLANNING, output=LazyOutput("mindspeed-mm", f"{__name__}.output"))
