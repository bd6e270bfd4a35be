"""The model-parallel grid: the search space of a framework that splits the model by tensor, pipeline, context and
expert parallelism (Megatron-style), with its choices of each size. A plugin names this space for a role, or
brings its own (generator/frameworks/contract.py SearchSpace)."""

from __future__ import annotations

import math
from itertools import product

from .api.contract import Structure
from .api.frozen import frozen
from .api.notes import Note
from .context import Context
from .plan import Layout, Rejected

RECOMPUTE = ("none", "selective", "full")
TP_CHOICES = (1, 2, 4, 8, 16)
EP_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CP_CHOICES = (1, 2, 4, 8, 16)
CP_SEQ_THRESHOLD = 8192  # context parallel is considered only above this sequence length


def divisors(n: int) -> list[int]:
    """The divisors of `n` (> 0), ascending: those up to its square root, then their cofactors."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


@frozen
class GridSpace:
    """Every TP x PP x CP x EP that can tile the cards (each within its choices, TP within a node, PP within the
    layers, CP only for long sequences, EP only for MoE models), each with every recompute setting."""

    tp_choices: tuple[int, ...] = TP_CHOICES
    pp_choices: tuple[int, ...] | None = None  # None: every divisor of the cards up to the layers

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        pins, model, seq = ctx.pins, ctx.model, ctx.spec.seq_len
        tps = [pins.tp] if pins.tp else [t for t in self.tp_choices if t <= ctx.hw.cards_per_node and t <= cards]
        pps = [pins.pp] if pins.pp else [p for p in divisors(cards) if p <= model.layers
                                         and (self.pp_choices is None or p in self.pp_choices)]
        cps = [pins.cp] if pins.cp else ([1] if seq <= CP_SEQ_THRESHOLD else list(CP_CHOICES))
        eps = [pins.ep] if pins.ep else ([1] if not model.is_moe else [e for e in EP_CHOICES if e <= cards])
        # Only combinations that can tile the cards are candidates, unless a pin makes them the user's choice.
        return [Structure(tp, pp, cp, ep) for tp, pp, cp, ep in product(tps, pps, cps, eps)
                if cards % (tp * pp * cp) == 0 or ctx.pinned]

    def recomputes(self, ctx: Context) -> list[str]:
        return [ctx.pins.recompute] if ctx.pins.recompute else list(RECOMPUTE)

    def micro_batches(self, ctx: Context, cards: int) -> list[int] | None:
        return None

    def label(self, structure: Structure) -> str:
        parts = [f"tp={structure.tp}", f"pp={structure.pp}"]
        if structure.cp > 1:
            parts.append(f"cp={structure.cp}")
        if structure.ep > 1:
            parts.append(f"ep={structure.ep}")
        return " ".join(parts)

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> Note | None:
        return None
