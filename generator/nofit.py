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
from .errors import SpecError
from .layouts import search
from .plan import Layout
from .recipe import adapter, algorithm_batch
from .tables import Tables

SEQ_STEP = 256  # seq_len is a multiple of this (the schema's rule)


def _free(ctx: Context, **changes) -> Context:
    """`ctx` as the memory alone decides: no pins, no global batch a card count may not divide (but an algorithm's,
    RL's, which no count moves: a way out the batch does not tile would be refused); `changes` to the spec (a
    shorter seq_len, another method)."""
    batch = ctx.spec.global_batch_size if algorithm_batch(ctx.defaults) else None
    return replace(ctx, spec=replace(ctx.spec, layout={}, global_batch_size=batch, cards=None, **changes),
                   free_batch=True)


def _fewest_cards(ctx: Context, start: int) -> Layout | None:
    """A layout that fits on about the fewest cards from `start` up: counts double until one fits, then a bisection
    between the last two (memory shrinks with cards, so the count it finds is the fewest but for a count where
    the cards do not tile a layout); None when nothing fits at the largest count."""
    counts = list(valid_counts(ctx.hw, start))
    found = first_holding(len(counts), lambda i: search(ctx, counts[i])[0] is not None)
    return None if found is None else search(ctx, counts[found])[0]


def _fits(ctx: Context, seq_len: int, cards: int | None) -> bool | None:
    """Whether a layout fits on `cards` (None: on any count) at `seq_len`; None where the spec refuses that seq_len
    (an RL prompt that leaves no response within it)."""
    free = _free(ctx, seq_len=seq_len)
    try:
        return (search(free, cards)[0] if cards else _fewest_cards(free, 1)) is not None
    except SpecError:
        return None


def _seq_range(ctx: Context, cards: int | None) -> tuple[int, int] | None:
    """The shortest seq_len the spec accepts and the longest at which a layout fits on `cards` (None: any count),
    multiples of 256 below the spec's; None when no accepted length fits. Shorter lengths are refused (an RL prompt
    fills them), then fit, then do not: one bisection walks up past both the refused and the fitting ones."""
    low, high, fits = 0, ctx.spec.seq_len // SEQ_STEP, False  # in steps of 256: `high` does not fit
    while high - low > 1:
        middle = (low + high) // 2
        found = _fits(ctx, middle * SEQ_STEP, cards)
        if found is False:
            high = middle
        else:
            low, fits = middle, bool(found)
    if not fits:
        return None
    refused, accepted = 0, low  # the shortest accepted length: refused below it, accepted from it
    while accepted - refused > 1:
        middle = (refused + accepted) // 2
        refused, accepted = (middle, accepted) if _fits(ctx, middle * SEQ_STEP, cards) is None \
            else (refused, middle)
    return accepted * SEQ_STEP, low * SEQ_STEP


def _shorter_seq(ctx: Context, cards: int) -> str | None:
    """A shorter seq_len that fits, on the count the plan tried, else on any; where the spec's own RL lengths leave
    none, with them left to the plan (the example's prompt length)."""
    without = {key: value for key, value in ctx.spec.rl.items() if key not in ("prompt_length", "response_length")}
    for rl, told in ((ctx.spec.rl, ""), (without, " without rl.prompt_length and rl.response_length")):
        ctx_rl = replace(ctx, spec=replace(ctx.spec, rl=rl))
        for at in (cards, None):
            found = _seq_range(ctx_rl, at)
            if found is not None:
                shortest, longest = found
                fewest = _fewest_cards(_free(ctx_rl, seq_len=longest), 1)
                span = f"{longest} or less" if shortest == SEQ_STEP else f"{shortest} to {longest}"
                assert fewest is not None  # a layout fits at `longest`
                return f"seq_len {span}{told} ({ctx.fw.name} fits on {fewest.cards} card(s) at {longest})"
        if rl == without:  # the spec gave no lengths: nothing else to try
            break
    return None


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
    # The least memory any layout takes, whether or not it tiles the batch: what more cards cannot shrink.
    closest = search(replace(free, spec=replace(free.spec, global_batch_size=None)), largest)[1]
    text = "More cards do not help"
    if closest is not None:
        parts = ", ".join(f"{name} {gib:.1f}" for name, gib in closest.memory.items() if gib >= 0.05)
        text += (f": even on {largest:,} cards the least is {closest.memory.total:.1f} GiB per card ({parts}) "
                 f"> {closest.budget_gb:.1f} GiB budget, and what is left there does not shrink with more cards")
    shorter = _shorter_seq(ctx, cards)
    options = [shorter] if shorter else []
    lora = _with_adapters(ctx, tables)
    fewest = _fewest_cards(lora, 1) if lora is not None else None
    if fewest is not None:
        options.append(f"method lora ({ctx.fw.name} fits on {fewest.cards} card(s))")
    return text + (f". Ways out: {'; '.join(options)}" if options else "")
