"""The published end-to-end Ascend RL throughput an RL plan's time comes from (data: generator/data/rl/throughput.yaml,
MindSpeed-RL's and MindSpeed-MM's measurements, by method, model and hardware)."""

from __future__ import annotations

from functools import cache

from ...api.frozen import frozen
from ...tables import load_data


@frozen
class Published:
    """A published end-to-end RL throughput: tokens/s per card (die on Snt9b23), with its source."""

    method: str
    model: str
    hardware: str
    tokens_per_card_s: float
    source: str


@cache
def published() -> tuple[Published, ...]:
    doc = load_data("rl/throughput.yaml")
    return tuple(Published(**row) for row in doc["published"])
