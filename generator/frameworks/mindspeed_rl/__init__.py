"""The MindSpeed-RL plugin (contract: generator/frameworks/contract.py): MindSpeed-RL v2.3.0's GRPO with its
integrated worker (actor, reference and vLLM rollout time-sharing every card), the rules its start-up leaves to run
time (rules.py) and its config keys (checks.py)."""

from __future__ import annotations

from ..contract import Plugin

# Each side imported when first used (contract.py Plugin)
PLUGIN = Plugin("mindspeed-rl", planning=f"{__name__}.planning", output=f"{__name__}.output")
