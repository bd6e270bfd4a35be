"""The per-card rate a multi-node plan may claim: never more than the same job's fastest layout on fewer nodes.

The step model rates each layout on its own. More nodes leave less to hold per card, so layouts with less recompute
or a smaller TP fit, and the chosen layouts' modelled MFU rose with scale (issue 40: a Llama-3.1-70B pretrain 38.9%
on 32 cards, 44.0% on 256, where the measured MFU table gives a 70B 44.1% on 32 and nothing measured at scale shows a
gain). Per-card efficiency does not rise with scale: a plan on N nodes claims at most the fastest layout's rate on
each node count it halves to, times the multi-node efficiency lost between the two (none where the spec gives its
own scaling_efficiency: the time formula divides by it at every count alike). The counts compared are N's halvings
(N/2, N/4, ... while whole nodes halve evenly, down to one node or the first count nothing fits on) at the plan's
global batch, so each tiles it as the plan's layout does. The rate of the chosen layout itself still ranks the
layouts at N; the cap is what the plan's time uses."""

from __future__ import annotations

from dataclasses import replace

from .context import Context
from .layouts import fastest as fastest_at
from .layouts import rate
from .plan import Layout
from .throughput import Throughput, multi_node_efficiency, uses_step_model


def capped_rate(ctx: Context, layout: Layout) -> tuple[Throughput, float]:
    """`layout`'s rate as the plan claims it, and the share of its own rate that is (1: not capped)."""
    own = rate(ctx, layout)
    per_node = ctx.hw.cards_per_node
    if layout.cards % per_node or layout.cards <= per_node or not own.is_estimate or own.tokens_per_card_s <= 0 \
            or not uses_step_model(ctx.fw, ctx.hw):
        return own, 1.0
    nodes = layout.cards // per_node
    # The same job: its global batch, which each halved count must tile as the plan's does.
    same = replace(ctx, spec=replace(ctx.spec, global_batch_size=layout.global_batch_size), free_batch=False)
    cap, at = own.tokens_per_card_s, None
    fewer = nodes
    while fewer % 2 == 0:
        fewer //= 2
        key = (fewer * per_node, layout.global_batch_size)
        if key not in ctx.fastest:
            ctx.fastest[key] = fastest_at(same, fewer * per_node)
        fastest = ctx.fastest[key]
        if fastest is None:  # nothing fits here, so nothing fits on fewer cards either
            break
        lost = 1.0 if ctx.spec.scaling_given else \
            multi_node_efficiency(ctx.hw, nodes) / multi_node_efficiency(ctx.hw, fewer)
        bound = rate(same, fastest).tokens_per_card_s * lost
        if bound < cap:
            cap, at = bound, fastest
    if at is None:
        return own, 1.0
    share = cap / own.tokens_per_card_s
    mfu = None if own.mfu is None else own.mfu * share
    source = (f"{own.source}; capped at {cap:.0f} tokens/s per card{'' if mfu is None else f' (MFU {mfu:.1%})'}: "
              f"the fastest layout on {at.nodes} node(s) ({at.describe()}) with its multi-node efficiency, "
              f"as per-card efficiency does not rise with scale")
    return replace(own, tokens_per_card_s=cap, mfu=mfu, source=source), share
