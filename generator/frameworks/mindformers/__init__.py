"""The mindformers plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..base import LazyOutput
from ..contract import Plugin
from .planning import PLANNING

PLUGIN = Plugin("mindformers", planning=PLANNING, output=LazyOutput("mindformers", f"{__name__}.output"))
