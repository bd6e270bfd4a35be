"""The llama-factory plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..contract import Plugin

# Each side imported when first used (contract.py Plugin)
PLUGIN = Plugin("llama-factory", planning=f"{__name__}.planning", output=f"{__name__}.output")
