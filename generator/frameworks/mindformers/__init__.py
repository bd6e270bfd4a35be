"""The mindformers plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..base import LazyOutput, LazyPlanning
from ..contract import Plugin

# Each side imported when first used (base.py): a plan asks the frameworks it lists, render and validate the output.
PLUGIN = Plugin("mindformers", planning=LazyPlanning("mindformers", f"{__name__}.planning"),
                output=LazyOutput("mindformers", f"{__name__}.output"))
