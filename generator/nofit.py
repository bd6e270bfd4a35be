"""When no layout of one framework fits in memory: whether more cards help, and the concrete ways out.

The memory model decides. At the largest count the planner considers every term that more cards shrink (sharded
states, TP / PP / CP splits) is as small as it gets: if nothing fits there, what is left per card (activations,
logits, the runtime) does not shrink with cards, and only a shorter sequence, adapters instead of every weight, or
planning without that framework help.
"""

from __future__ import annotations

from dataclasses import replace

from .cards import MAX_SEARCH_CARDS, first_holding, round_up, valid_counts
from .context import Context
from .layouts import search
from .plan import Layout
from .recipe import adapter
from .tables import Tables

SEQ_STEP = 256  # seq_len is a multiple of this (the schema's rule)


def _free(ctx: Context, **changes) -> Context:
    """`ctx` as the memory alone decides: no pins, no global batch a card count may not divide; `changes` to the
    spec (a shorter seq_len, another method)."""
    return replace(ctx, spec=replace(ctx.spec, layout={}, global_batch_size=None, cards=None, **changes),
                   free_batch=True)


def _fewest_cards(ctx: Context, start: int) -> Layout | None:
    """A layout that fits on about the fewest cards from `start` up: counts double until one fits, then a bisection
    between the last two (memory shrinks with cards, so the count it finds is the fewest but for a count where
    the cards do not tile a layout); None when nothing fits at the largest count."""
    counts = list(valid_counts(ctx.hw, start))
    found = first_holding(len(counts), lambda i: search(ctx, counts[i])[0] is not None)
    return None if found is None else search(ctx, counts[found])[0]


def _longest_seq(ctx: Context, largest: int) -> int | None:
    """The longest seq_len (a multiple of 256, below the spec's) at which a layout fits on `largest` cards."""
    low, high = 0, ctx.spec.seq_len // SEQ_STEP  # in steps of 256: `low` fits (0: none found), `high` does not
    while high - low > 1:
        middle = (low + high) // 2
        fits = search(_free(ctx, seq_len=middle * SEQ_STEP), largest)[0] is not None
        low, high = (middle, high) if fits else (low, middle)
    return low * SEQ_STEP or None


def _with_adapters(ctx: Context, tables: Tables) -> Context | None:
    """`ctx` training LoRA adapters instead of every weight, where the framework offers it; else None."""
    if ctx.spec.method not in ("full", "pretrain") or "lora" not in ctx.fw.methods:
        return None
    lora = _free(ctx, method="lora", lora={})
    return replace(lora, adapter=adapter(lora.spec, tables.recipes["lora"]), defaults=tables.recipes["lora"])


def way_out(ctx: Context, tables: Tables, cards: int) -> str:
    """What to change when no layout fits on `cards` (and the counts the plan tried above it): more cards when
    some count fits, else why more cards do not help and what does."""
    free = _free(ctx)
    largest = round_up(ctx.hw, MAX_SEARCH_CARDS)
    more = _fewest_cards(free, cards + 1) if cards < largest else None
    if more is not None:
        return (f"More cards help: {more.describe()} fits on {more.cards} cards ({more.memory.total:.1f} GiB per "
                f"card); set cards: {more.cards}")
    closest = search(free, largest)[1]
    text = "More cards do not help"
    if closest is not None:
        parts = ", ".join(f"{name} {gib:.1f}" for name, gib in closest.memory.items() if gib >= 0.05)
        text += (f": even on {largest:,} cards the least is {closest.memory.total:.1f} GiB per card ({parts}) "
                 f"> {closest.budget_gb:.1f} GiB budget, and what is left there does not shrink with more cards")
    options = []
    for at in dict.fromkeys((cards, largest)):  # the count the plan tried, else any
        seq = _longest_seq(ctx, at)
        if seq is not None:
            fewest = _fewest_cards(_free(ctx, seq_len=seq), 1)
            options.append(f"seq_len {seq} or less ({ctx.fw.name} fits on {fewest.cards if fewest else at} "
                           f"card(s) at {seq})")
            break
    lora = _with_adapters(ctx, tables)
    fewest = _fewest_cards(lora, 1) if lora is not None else None
    if fewest is not None:
        options.append(f"method lora ({ctx.fw.name} fits on {fewest.cards} card(s))")
    return text + (f". Ways out: {'; '.join(options)}" if options else "")
