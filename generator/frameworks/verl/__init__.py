"""The verl plugin (contract: generator/frameworks/contract.py): verl 0.7.0's GRPO, DAPO and PPO with an actor, a
vLLM rollout engine, a reference and (PPO) a critic colocated on every card; its own config checks in checks.py."""

from __future__ import annotations

from ..contract import Plugin

# Each side imported when first used (contract.py Plugin)
PLUGIN = Plugin("verl", planning=f"{__name__}.planning", output=f"{__name__}.output")
