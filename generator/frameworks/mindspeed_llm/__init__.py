"""The mindspeed-llm plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..base import LazyOutput
from ..contract import Plugin
from .planning import PLANNING

PLUGIN = Plugin("mindspeed-llm", planning=PLANNING, output=LazyOutput("mindspeed-llm", f"{__name__}.output"))
