"""The mindspeed-mm plugin (contract: generator/frameworks/contract.py): Qwen2.5-VL with MindSpeed-MM v2.2.0."""

from __future__ import annotations

from ..contract import Plugin
from .output import OUTPUT
from .planning import PLANNING

PLUGIN = Plugin("mindspeed-mm", planning=PLANNING, output=OUTPUT)
