"""The llama-factory plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..base import LazyOutput, LazyPlanning
from ..contract import Plugin

# Each side imported when first used (base.py): a plan asks the frameworks it lists, render and validate the output.
PLUGIN = Plugin("llama-factory", planning=LazyPlanning("llama-factory", f"{__name__}.planning"),
                output=LazyOutput("llama-factory", f"{__name__}.output"))
