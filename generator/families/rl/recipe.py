"""What the RL family reads of a framework's RL recipe (verl: frameworks/verl/rl.py RL)."""

from __future__ import annotations

from typing import Protocol


class Recipe(Protocol):
    """The RL values of one job the family's models read, each with its source (`sources`, by field name)."""

    @property
    def n(self) -> int:
        """Responses sampled per prompt."""
        ...

    @property
    def gpu_memory_utilization(self) -> float:
        """The followed example's vLLM share of the card."""
        ...

    @property
    def sources(self) -> dict[str, str]:
        ...

    @property
    def max_num_seqs(self) -> tuple[int, str]:
        """vLLM's limit on running sequences as the framework configures it, and its source."""
        ...

    @property
    def seq_len(self) -> int:
        """Prompt + response tokens of one sequence."""
        ...
