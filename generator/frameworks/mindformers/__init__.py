"""The mindformers plugin (contract: generator/frameworks/contract.py)."""

from __future__ import annotations

from ..contract import Plugin
from .output import OUTPUT
from .planning import PLANNING

PLUGIN = Plugin("mindformers", planning=PLANNING, output=OUTPUT)
