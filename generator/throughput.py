"""Throughput per card, training time, and the card count a time budget needs (seed 000's formulas).

Seed 000 writes Time = Tok / (TPS * N) * eff and N = Tok / (Time * TPS) * eff, which makes a worse scaling
efficiency need FEWER cards. We use the physically right forms, efficiency as a divisor:
    Time = Tok / (TPS * N * eff)        N = Tok / (Time * TPS * eff)
(shared/spec/min_cards_notes.md records the same correction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .tables import Framework, Hardware, Model, trains_adapters


def flops_per_token(model: Model, method: str, seq_len: int) -> float:
    """Model FLOPs per trained token: 6N + 12*L*q*s for training (N = active parameters, q = heads x head_dim);
    LoRA computes no weight gradients of the frozen base, so 4N instead of 6N."""
    dense_factor = 4.0 if trains_adapters(method) else 6.0
    return dense_factor * model.active_params + 12.0 * model.layers * model.q_dim * seq_len


@dataclass(frozen=True)
class Throughput:
    tokens_per_card_s: float
    source: str
    is_estimate: bool


def throughput(model: Model, method: str, seq_len: int, framework: Framework, hardware: Hardware,
               measured: float | None) -> Throughput:
    """The spec's measured tokens/s per card, else MFU x peak / FLOPs per token."""
    if measured is not None:
        return Throughput(measured, "measured (spec tokens_per_card_s)", False)
    key = "moe" if model.is_moe and not trains_adapters(method) else method
    mfu = framework.mfu[key]
    tps = mfu * hardware.peak_tflops_bf16 * 1e12 / flops_per_token(model, method, seq_len)
    return Throughput(tps, f"estimate: MFU {mfu:.1%} x {hardware.peak_tflops_bf16:g} TFLOPS / "
                           f"{flops_per_token(model, method, seq_len) / 1e9:.1f} GFLOP per token "
                           f"({framework.mfu_source})", True)


def hours(tokens: float, tps: float, cards: int, efficiency: float) -> float:
    """Time = Tok / (TPS * N * eff), in hours."""
    return tokens / (tps * cards * efficiency) / 3600.0


def cards_for_budget(tokens: float, budget_hours: float, tps: float, efficiency: float) -> int:
    """N = Tok / (Time * TPS * eff), rounded up to whole cards (the seed's multiple-of-8 rounding is the caller's)."""
    return max(1, math.ceil(tokens / (budget_hours * 3600.0 * tps * efficiency)))
