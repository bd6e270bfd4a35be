"""The mindspeed-mm plugin (contract: generator/frameworks/contract.py): Qwen2.5-VL with MindSpeed-MM v2.2.0."""

from __future__ import annotations

from ..contract import Plugin

# Each side imported when first used (contract.py Plugin)
PLUGIN = Plugin("mindspeed-mm", planning=f"{__name__}.planning", output=f"{__name__}.output")
