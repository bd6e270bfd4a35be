"""The llama-factory plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..base import LazyOutput
from ..contract import Plugin
from .planning import PLANNING

PLUGIN = Plugin("llama-factory", planning=PLANNING, output=LazyOutput("llama-factory", f"{__name__}.output"))
