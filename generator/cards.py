"""Card counts: the minimum-card table's row for a job (or a validated preset, for a framework whose plugin puts
presets first), the counts a platform allows, and the count a spec asks for, explicitly or through a time
budget."""

from __future__ import annotations

import math
from collections.abc import Callable

from .api.notes import Note
from .context import Context
from .errors import SpecError
from .plan import Layout, MinCards
from .tables import Hardware, Preset, Tables

# The largest count any search considers, on every hardware row: no row's source states a largest cluster (that
# is how many nodes a site has, not a fact of the card), so the planner's own bound stands for all of them;
# 65,536 cards is 8,192 eight-card nodes. A time budget is searched up to it (resolve.py), in O(log) count steps.
MAX_SEARCH_CARDS = 65536


# The rows a method without its own reads, in order. Seed 000's MindSpeed-MM "pretrain" row (qwen2.5_vl-7b 4096)
# counts pretrain_vlm.py training every module: MindSpeed-MM v2.2.0 has no other Qwen2.5-VL training than
# fine-tuning (examples/qwen2.5vl/finetune_qwen2_5_vl_*.sh), so that row is full_vision's.
ROWS_LIKE = {"pretrain": ("full",), "qlora": ("lora",), "full_vision": ("pretrain", "full")}


def table_row(ctx: Context, tables: Tables):
    """(row, case) of the minimum-card table for this job in the framework's own column, or None."""
    spec = ctx.spec
    own = tables.rows_for(ctx.model.name, ctx.fw.min_cards_from)
    # The method's own rows where the table has them, else those of the first method it trains like that has a row
    # at this seq_len, else of the first that has rows at all
    methods = [m for m in (spec.method, *ROWS_LIKE.get(spec.method, ())) if any(m in r.methods for r in own)]
    exact_at = [m for m in methods if any(m in r.methods and spec.seq_len in r.seq_lens for r in own)]
    row_method = (exact_at or methods or [spec.method])[0]
    rows = [r for r in own if row_method in r.methods]
    if not rows or ctx.hw.name not in rows[0].cards:  # the table has Ascend columns only
        return None
    exact = [r for r in rows if spec.seq_len in r.seq_lens]
    larger = sorted((r for r in rows if max(r.seq_lens) >= spec.seq_len),
                    key=lambda r: min(s for s in r.seq_lens if s >= spec.seq_len))
    if exact:
        row, case = exact[0], "exact row"
    elif larger:
        row, case = larger[0], "next larger seq_len row"
    else:
        row, case = max(rows, key=lambda r: max(r.seq_lens)), "largest seq_len row"
    if row_method != spec.method:
        case = f"{spec.method} uses the {row_method} row; {case}"
    return row, case


# Why the memory model sets the minimum, as the plan states it (MinCards.case).
NO_ROW, SILENT = "memory model (no table row)", "memory model (the table gives no count)"
FORWARD = "memory model (the table and presets count training cards)"


def minimum_cards(ctx: Context, tables: Tables, notes: list[Note]) -> tuple[MinCards | None, str]:
    """The table's minimum for this framework; None when only the memory model can say, with why (NO_ROW, SILENT,
    or FORWARD for a first role that does not train). A '-' cell gives no count: the seed's table is silent there,
    it does not say the job cannot run (min_cards_notes.md), so the memory model decides, as for a model without a
    row."""
    spec, hw = ctx.spec, ctx.hw
    if not ctx.role_kind.trains:  # a server: its weights and cache alone decide
        return None, FORWARD
    if ctx.planning.presets_first:
        preset = preset_for(ctx, tables, cards=None)
        if preset is not None:
            return MinCards(preset.cards, f"validated config of {ctx.planning.preset_source} ({preset.model} "
                                          f"{spec.method} {preset.seq_len} on {preset.hardware}, level {preset.level})",
                            "preset"), ""
        if ctx.planning.min_cards_stand_in is not None:
            notes.append(ctx.planning.min_cards_stand_in)
    found = table_row(ctx, tables)
    if found is None:
        notes.append(Note("cards.no_row", f"minimum cards: the table has no row for {ctx.model.name} {spec.method}; "
                                          f"the memory model decides"))
        return None, NO_ROW
    row, case = found
    value = row.cards[hw.name]
    if value is None:
        notes.append(Note("cards.table_silent", f"minimum cards: the table is silent for {hw.name} "
                                                f"({row.cite(hw.name)}: '-' gives no count, not a refusal); the memory "
                                                f"model decides"))
        return None, SILENT
    if value % hw.parallel_unit:
        raised = value + hw.parallel_unit - value % hw.parallel_unit
        why = ctx.planning.whole_nodes or f"{hw.name} uses dies in pairs"
        notes.append(Note("cards.table_raised", f"minimum cards: table value {value} raised to {raised}: {why}"))
        value = raised
    return MinCards(value, row.cite(hw.name), case), ""


def from_table(minimum: MinCards) -> bool:
    """The minimum is the seed's minimum-card table's count (not a validated preset's, nor the memory model's)."""
    return minimum.case not in ("preset", NO_ROW, SILENT)


def table_above_memory(minimum: MinCards, fewer: Layout) -> Note:
    """The note for a table minimum above the cards the memory model needs (`fewer`: a layout that fits on fewer)."""
    return Note("cards.table_above_memory",
                f"minimum cards: the table's {minimum.value} ({minimum.source}) is more than the memory model needs: "
                f"{fewer.describe()} fits on {fewer.cards} cards ({fewer.memory.total:.1f} GiB per card, "
                f"{fewer.budget_gb:.1f} GiB budget). The plan keeps the table's count; to train on fewer, set cards: "
                f"{fewer.cards} and pass --force (a count below the table's minimum needs it)")


def valid_counts(hw: Hardware, start: int):
    """Card counts the platform allows, from `start` up: multiples of the parallel unit up to one node,
    whole nodes beyond."""
    unit, node = hw.parallel_unit, hw.cards_per_node
    first = max(start, unit)
    yield from range(first + -first % unit, min(node, MAX_SEARCH_CARDS) + 1, unit)
    whole = max(first, node + 1)
    yield from range(whole + -whole % node, MAX_SEARCH_CARDS + 1, node)


def first_holding(size: int, holds: Callable[[int], bool], scan: int = 0,
                  rank: Callable[[int], int] = lambda i: 0) -> int | None:
    """The first index of range(`size`) where `holds` is true, for a `holds` that is false and then true: the index
    grows geometrically until it holds, then a bisection between the last two, O(log size) calls. Each step tries the
    index of highest `rank` in its range (the furthest while growing, the middlemost while bisecting, among equals):
    where `holds` is only about monotone, ranking the indices where it is most regular first (for card counts, the
    roundest) keeps a stray index from misleading the search, and the bisection stays O(log) for a rank such as
    trailing zero bits (each range then holds one index of top rank). The `scan` indices below the answer are tried
    as well (each one that holds moves the answer down and restarts the count). None when it does not hold at the
    last index."""
    low, high = -1, 0
    while not holds(high):
        if high == size - 1:
            return None
        top = min(size - 1, 2 * high + 1)
        low, high = high, max(range(high + 1, top + 1), key=lambda i: (rank(i), i))
    while high - low > 1:
        middle = max(range(low + 1, high), key=lambda i: (rank(i), -abs(2 * i - low - high)))
        low, high = (low, middle) if holds(middle) else (middle, high)
    below, misses = high - 1, 0
    while below >= 0 and misses < scan:
        if holds(below):
            high, misses = below, 0
        else:
            misses += 1
        below -= 1
    return high


def trailing_zeros(n: int) -> int:
    """How many times 2 divides `n` (> 0): a card count's roundness, the rank the budget search tries counts by."""
    return (n & -n).bit_length() - 1


def round_up(hw: Hardware, n: int, key: str = "cards") -> int:
    """The smallest count the platform allows from `n` up; `key`: the spec key that asked for `n`."""
    found = next(valid_counts(hw, n), None)
    if found is None:
        raise SpecError.at(key, f"needs {n:,} cards, more than the {MAX_SEARCH_CARDS:,} the planner considers; "
                                f"allow more time or train on fewer tokens")
    return found


def explicit_cards(ctx: Context, cards: int, minimum: MinCards, notes: list[Note]) -> int:
    """`cards`: the spec's own count, checked against the platform and the minimum."""
    hw = ctx.hw
    # A count the platform refuses is answered with counts that also meet the minimum (unless --force): "use 4"
    # for 3 dies of a model that needs 32 was a second refusal away.
    floor = 1 if ctx.force else minimum.value
    at_least = "" if floor <= cards else f" (the minimum for {ctx.model.name} is {floor}: {minimum.source})"
    # A spec's own count needs the platform's unit only (a framework that counts in whole nodes holds them in
    # ctx.hw for the counts it chooses).
    platform = ctx.tables.hardware.get(hw.name, hw) if ctx.tables is not None else hw
    if cards % platform.parallel_unit:
        raise SpecError.at("cards", f"{cards} is odd: {hw.name} uses dies in pairs (2 dies is the smallest "
                                    f"parallel unit); use {round_up(hw, max(cards + 1, floor))}{at_least}")
    if cards > hw.cards_per_node and cards % hw.cards_per_node:
        lower = cards - cards % hw.cards_per_node
        upper = round_up(hw, max(lower + hw.cards_per_node, floor))
        raise SpecError.at("cards", f"{cards} is not a whole number of {hw.name} nodes ({hw.cards_per_node} "
                                    f"cards each): a job larger than one node uses whole nodes; use "
                                    f"{f'{lower} or ' if lower >= floor else ''}{upper}{at_least}")
    if cards < minimum.value:
        if not ctx.force:
            nodes = (f" ({-(-minimum.value // hw.cards_per_node)} {hw.name} nodes of {hw.cards_per_node})"
                     if minimum.value > hw.cards_per_node else "")
            raise SpecError.at("cards", f"{cards} is below the minimum of {minimum.value}{nodes} for {ctx.model.name} "
                                        f"{ctx.spec.method} {ctx.spec.seq_len} with {ctx.fw.name} on {hw.name} "
                                        f"({minimum.source}); use --force to try anyway")
        notes.append(Note("cards.forced", f"FORCED: {cards} cards is below the table minimum {minimum.value} "
                                          f"({minimum.source})"))
    return cards


def auto_cards(ctx: Context, minimum: MinCards, budget_cards: int | None, notes: list[Note]) -> int:
    cards = minimum.value
    if budget_cards is not None:
        wanted = budget_cards
        if wanted > 8:  # seed 000: above 8 cards, a multiple of 8
            wanted = math.ceil(wanted / 8) * 8
        rounded = round_up(ctx.hw, wanted, "time_budget_hours")
        # The rate here is one card's compute-bound rate (rate(ctx, None)), not a layout's: a lower bound on the
        # cards, where the search starts; whether a count meets the budget is the search's to say.
        notes.append(Note("budget.ideal_cards",
                          f"time budget {ctx.spec.time_budget_hours:g} h: N = Tok / (Time x TPS x eff) = "
                          f"{budget_cards} card(s) at one card's compute-bound TPS (no communication or pipeline "
                          f"bubble: no layout is faster, so no fewer cards can meet it), rounded to {rounded} "
                          f"(multiple of 8 above 8, whole nodes on {ctx.hw.name})"))
        if rounded > cards:
            cards = rounded
        else:
            notes.append(Note("budget.starts_at_minimum", f"time budget: the search starts at the minimum, {cards} "
                                                          f"cards (no fewer than that count)"))
    return round_up(ctx.hw, cards)


def preset_for(ctx: Context, tables: Tables, cards: int | None) -> Preset | None:
    for p in tables.presets:
        if (p.framework == ctx.fw.name and p.model == ctx.model.name and ctx.spec.method in p.methods
                and p.hardware == ctx.hw.name and p.seq_len == ctx.spec.seq_len
                and (cards is None or p.cards == cards)):
            return p
    return None
