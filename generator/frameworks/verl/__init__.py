"""The verl plugin (contract: generator/frameworks/contract.py): verl 0.7.0's GRPO, DAPO and PPO with an actor, a
vLLM rollout engine, a reference and (PPO) a critic colocated on every card; its own config checks in checks.py."""

from __future__ import annotations

from ..base import LazyOutput
from ..contract import Plugin
from .planning import PLANNING

PLUGIN = Plugin("verl", planning=PLANNING, output=LazyOutput("verl", f"{__name__}.output"))
