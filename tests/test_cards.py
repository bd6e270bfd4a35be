"""Card counts (generator/cards.py) as values: the table row a job takes and why, the counts a platform allows, the
refusals of a count it does not, and the search's probes. The mutation run of issue 42 (bench/mutants.py) changed
these unseen by the budget tests."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import make_spec, note_lines

from generator.api.roles import RoleKind
from generator.cards import (
    FORWARD,
    MAX_SEARCH_CARDS,
    NO_ROW,
    SILENT,
    auto_cards,
    explicit_cards,
    first_holding,
    from_table,
    minimum_cards,
    preset_for,
    round_up,
    table_row,
    trailing_zeros,
    valid_counts,
)
from generator.context import Context
from generator.errors import SpecError
from generator.plan import MinCards
from generator.tables import load_tables

TABLES = load_tables()


def context(framework: str = "mindspeed-llm", force: bool = False, **fields) -> Context:
    spec = make_spec(**fields)
    return Context(spec, TABLES.models[spec.model], TABLES.hardware[spec.hardware], TABLES.frameworks[framework],
                   force, None, None)  # type: ignore[arg-type]  # no layout is searched: no adapter or defaults


def rows(model: str, method: str):
    return [r for r in TABLES.rows_for(model, "mindspeed-llm") if method in r.methods]


def test_an_exact_row_is_taken_first():
    row, case = table_row(context(model="qwen3-32b", method="full", seq_len=8192), TABLES)
    assert (row, case) == (rows("qwen3-32b", "full")[1], "exact row")
    assert row.seq_lens == (8192,)


def test_a_shorter_sequence_takes_the_row_of_the_next_larger_seq_len():
    lora = rows("qwen3-32b", "lora")
    assert [(r.seq_lens, r.cards["snt9b23"]) for r in lora] == [((4096,), 8), ((8192,), 16)]
    row, case = table_row(context(model="qwen3-32b", method="lora", seq_len=2048, hardware="snt9b23"), TABLES)
    assert (row, case) == (lora[0], "next larger seq_len row")
    row, case = table_row(context(model="qwen3-32b", method="full", seq_len=6144), TABLES)
    assert (row.seq_lens, case) == ((8192,), "next larger seq_len row")


def test_the_next_larger_row_is_by_its_smallest_seq_len_above_the_jobs():
    """A row listing several lengths is as near as its smallest one that holds the job's (the table lists such
    rows: qwen3-8b full/lora 4096/8192)."""
    wide, narrow = rows("qwen3-32b", "lora")
    wide, narrow = replace(wide, seq_lens=(4096, 32768)), replace(narrow, seq_lens=(8192,))
    tables = replace(TABLES, min_cards=[narrow, wide])
    assert table_row(context(model="qwen3-32b", method="lora", seq_len=2048), tables)[0] == wide


def test_a_longer_sequence_takes_the_longest_row():
    row, case = table_row(context(model="qwen3-32b", method="full", seq_len=32768), TABLES)
    assert (row.seq_lens, case) == ((8192,), "largest seq_len row")


@pytest.mark.parametrize("method,row_method", [("pretrain", "full"), ("qlora", "lora")])
def test_pretrain_and_qlora_read_the_full_and_lora_rows_and_say_so(method, row_method):
    bits = {"quantization_bit": 4} if method == "qlora" else {}
    row, case = table_row(context(model="qwen3-32b", method=method, seq_len=4096, **bits), TABLES)
    assert row_method in row.methods
    assert case == f"{method} uses the {row_method} row; exact row"
    assert table_row(context(model="qwen3-32b", method="lora", seq_len=4096), TABLES)[1] == "exact row"


def test_a_gpu_has_no_table_column():
    assert table_row(context(hardware="a800"), TABLES) is None


def test_the_table_minimum_its_source_and_the_memory_models_cases():
    notes: list[str] = []
    minimum, why = minimum_cards(context(model="qwen3-32b", seq_len=8192), TABLES, notes)
    row = rows("qwen3-32b", "full")[1]
    assert (minimum, why, notes) == (MinCards(16, row.cite("snt9b"), "exact row"), "", [])
    assert from_table(minimum)
    silent, why = minimum_cards(context(model="mixtral-8x7b", hardware="snt9b23"), TABLES, notes)
    assert (silent, why) == (None, SILENT)
    assert "the table is silent for snt9b23" in notes[-1]
    assert minimum_cards(context(hardware="a800"), TABLES, notes) == (None, NO_ROW)
    for case, table in [("preset", False), (NO_ROW, False), (SILENT, False), ("exact row", True),
                        ("largest seq_len row", True)]:
        assert from_table(MinCards(8, "s", case)) is table


def test_a_validated_preset_comes_first_where_the_framework_puts_presets_first():
    notes: list[str] = []
    ctx = context("mindformers", model="qwen3-32b", seq_len=4096)
    minimum, why = minimum_cards(ctx, TABLES, notes)
    assert (minimum.value, minimum.case, why) == (16, "preset", "")
    preset = preset_for(ctx, TABLES, cards=None)
    assert (preset.model, preset.methods, preset.seq_len, preset.cards) == ("qwen3-32b", ("full",), 4096, 16)
    assert preset_for(ctx, TABLES, cards=16) is preset
    assert preset_for(ctx, TABLES, cards=8) is None
    assert preset_for(context("mindformers", model="qwen3-32b", seq_len=8192), TABLES, None) is None
    assert preset_for(context("mindspeed-llm", model="qwen3-32b", seq_len=4096), TABLES, None) is None
    assert preset_for(context("mindformers", model="qwen3-32b", method="lora"), TABLES, None).methods == ("lora",)


def test_counts_are_die_pairs_up_to_a_node_then_whole_nodes():
    a3 = TABLES.hardware["snt9b23"]  # 16 dies a node, in pairs
    assert list(zip(range(11), valid_counts(a3, 1))) == list(enumerate([2, 4, 6, 8, 10, 12, 14, 16, 32, 48, 64]))
    assert next(valid_counts(a3, 17)) == 32
    snt9b = TABLES.hardware["snt9b"]
    assert list(zip(range(10), valid_counts(snt9b, 5))) == list(enumerate([5, 6, 7, 8, 16, 24, 32, 40, 48, 56]))
    assert round_up(a3, 33) == 48 and round_up(snt9b, 8) == 8


def test_the_search_stops_at_its_largest_count():
    snt9b = TABLES.hardware["snt9b"]
    assert MAX_SEARCH_CARDS == 65536
    assert round_up(snt9b, MAX_SEARCH_CARDS) == 65536
    with pytest.raises(SpecError, match="needs 65,537 cards, more than the 65,536 the planner considers"):
        round_up(snt9b, MAX_SEARCH_CARDS + 1, "time_budget_hours")


def test_an_explicit_count_is_checked_against_dies_nodes_and_the_minimum():
    minimum = MinCards(16, "the row", "exact row")
    a3 = context(hardware="snt9b23")
    assert explicit_cards(a3, 16, minimum, []) == 16
    # 18 would be refused next: above one node, whole nodes
    with pytest.raises(SpecError, match="17 is odd: snt9b23 uses dies in pairs .* use 32"):
        explicit_cards(a3, 17, minimum, [])
    with pytest.raises(SpecError, match="40 is not a whole number of snt9b23 nodes .* use 32 or 48"):
        explicit_cards(a3, 40, minimum, [])
    with pytest.raises(SpecError, match="8 is below the minimum of 16 .*the row.*--force"):
        explicit_cards(a3, 8, minimum, [])
    notes: list[str] = []
    assert explicit_cards(context(hardware="snt9b23", force=True), 8, minimum, notes) == 8
    assert note_lines(notes) == ["FORCED: 8 cards is below the table minimum 16 (the row)"]


@pytest.mark.parametrize("hardware,budget,cards", [("snt9b23", 9, 16), ("snt9b23", 7, 8), ("snt9b23", 5, 8),
                                                   ("snt9b23", 17, 32), ("snt9b", 12, 16), ("snt9b", None, 8)])
def test_a_budgets_count_is_a_multiple_of_8_above_8_and_never_below_the_minimum(hardware, budget, cards):
    notes: list[str] = []
    ctx = context(hardware=hardware, time_budget_hours=10 if budget else None,
                  data={"total_tokens": 10**9} if budget else None)
    assert auto_cards(ctx, MinCards(8, "row", "exact row"), budget, notes) == cards
    if budget:
        assert f"= {budget} card(s)" in notes[0]


def test_first_holding_grows_then_bisects_trying_the_roundest_index():
    probes: list[int] = []

    def holds(i: int) -> bool:
        probes.append(i)
        return i >= 37

    assert first_holding(64, holds, rank=trailing_zeros) == 37
    assert probes == [0, 1, 2, 4, 8, 16, 32, 48, 40, 36, 38, 37]
    probes.clear()
    assert first_holding(64, holds) == 37  # no rank: the furthest while growing, the middlemost while bisecting
    assert probes == [0, 1, 3, 7, 15, 31, 63, 47, 39, 35, 37, 36]
    probes.clear()
    assert first_holding(20, lambda i: probes.append(i) or False) is None
    assert probes == [0, 1, 3, 7, 15, 19]


def test_first_holding_scans_below_its_answer():
    holding = {34} | set(range(37, 64))  # the bisection never tries 34
    assert first_holding(64, holding.__contains__) == 37
    assert first_holding(64, holding.__contains__, scan=2) == 37  # 36 and 35 miss: the scan stops
    assert first_holding(64, holding.__contains__, scan=3) == 34
    assert first_holding(1, lambda i: True) == 0


@pytest.mark.parametrize("n,zeros", [(1, 0), (2, 1), (12, 2), (64, 6), (96, 5), (65536, 16)])
def test_a_counts_roundness_is_its_trailing_zero_bits(n, zeros):
    assert trailing_zeros(n) == zeros


def test_a_method_takes_its_own_row_at_the_jobs_seq_len_before_a_like_methods():
    """cards.py table_row: qlora reads lora's rows (ROWS_LIKE) where its own have no row at the job's seq_len, and its
    own row where only a longer one exists for either."""
    lora = rows("qwen3-32b", "lora")
    own_longer = replace(lora[1], methods=("qlora",), seq_lens=(8192,))
    like_exact = replace(lora[0], methods=("lora",), seq_lens=(4096,))
    tables = replace(TABLES, min_cards=[own_longer, like_exact])
    qlora = context(model="qwen3-32b", method="qlora", seq_len=4096, quantization_bit=4)
    assert table_row(qlora, tables) == (like_exact, "qlora uses the lora row; exact row")
    longer = context(model="qwen3-32b", method="qlora", seq_len=6144, quantization_bit=4)
    assert table_row(longer, tables) == (own_longer, "next larger seq_len row")
    alone = replace(TABLES, min_cards=[replace(like_exact, seq_lens=(8192,))])
    assert table_row(qlora, alone) == (alone.min_cards[0], "qlora uses the lora row; next larger seq_len row")


def test_an_odd_table_value_is_raised_to_the_next_die_pair_and_the_plan_says_so():
    """cards.py minimum_cards: snt9b23 runs dies in pairs (hardware.yaml parallel_unit 2), so a table count of 9 is
    10, with the note naming both."""
    row = rows("qwen3-32b", "full")[1]
    tables = replace(TABLES, min_cards=[replace(row, cards={**row.cards, "snt9b23": 9})])
    notes: list = []
    minimum, why = minimum_cards(context(model="qwen3-32b", seq_len=8192, hardware="snt9b23"), tables, notes)
    assert (minimum.value, minimum.case, why) == (10, "exact row", "")
    assert [str(note) for note in notes] == ["minimum cards: table value 9 raised to 10: snt9b23 uses dies in pairs"]


@pytest.mark.parametrize("role", [RoleKind.ROLLOUT, RoleKind.REFERENCE, RoleKind.SERVE])
def test_a_role_that_does_not_train_takes_no_table_minimum(role):
    """cards.py minimum_cards: the table counts training cards; a role that only runs forward is sized by its
    weights and cache (the memory model), with no note."""
    notes: list[str] = []
    ctx = replace(context(model="qwen3-32b", seq_len=8192), role=role)
    assert minimum_cards(ctx, TABLES, notes) == (None, FORWARD)
    assert notes == []
    assert minimum_cards(replace(ctx, role=RoleKind.ACTOR), TABLES, notes)[0].value == 16


def test_the_scan_below_the_answer_restarts_its_count_at_each_hit_and_reaches_index_0():
    """cards.py first_holding: each index that holds moves the answer down and allows `scan` misses again, and the
    scan goes down to index 0 (every probe in order)."""
    probes: list[int] = []
    holding = {29, 33} | set(range(37, 64))  # the bisection ends at 37; 33 and 29 are each within 4 misses
    assert first_holding(64, lambda i: probes.append(i) or i in holding, scan=4) == 29
    assert probes == [0, 1, 3, 7, 15, 31, 63, 47, 39, 35, 37, 36, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25]
    probes.clear()
    assert first_holding(4, lambda i: probes.append(i) or i >= 2, scan=5) == 2
    assert probes == [0, 1, 3, 2, 1, 0]


@pytest.mark.parametrize("force,cards,minimum,message", [
    (True, 1, 16, "1 is odd: snt9b23 uses dies in pairs (2 dies is the smallest parallel unit); use 2"),
    (False, 15, 15, "15 is odd: snt9b23 uses dies in pairs (2 dies is the smallest parallel unit); use 16"),
    (False, 40, 40, "40 is not a whole number of snt9b23 nodes (16 cards each): a job larger than one node uses whole "
                    "nodes; use 48"),
    (False, 40, 48, "40 is not a whole number of snt9b23 nodes (16 cards each): a job larger than one node uses whole "
                    "nodes; use 48 (the minimum for qwen3-8b is 48: the row)"),
])
def test_a_refused_count_names_the_minimum_only_when_the_count_is_below_it(force, cards, minimum, message):
    """cards.py explicit_cards: the counts it suggests meet the minimum, which --force lowers to 1; the minimum is
    named only where the given count is below it."""
    with pytest.raises(SpecError) as refused:
        explicit_cards(context(hardware="snt9b23", force=force), cards, MinCards(minimum, "the row", "exact row"), [])
    assert [(p.path, p.message) for p in refused.value.problems] == [("cards", message)]


@pytest.mark.parametrize("budget,starts_at_minimum", [(7, True), (3, True), (9, False)])
def test_a_budget_that_rounds_to_the_minimum_or_below_says_the_search_starts_there(budget, starts_at_minimum):
    """cards.py auto_cards: snt9b23's counts from 7 round to 8, the minimum here: the plan says the search starts at
    the minimum; 9 rounds to 16, above it: no such note."""
    notes: list = []
    ctx = context(hardware="snt9b23", time_budget_hours=10, data={"total_tokens": 10**9})
    auto_cards(ctx, MinCards(8, "row", "exact row"), budget, notes)
    said = [str(note) for note in notes[1:]]
    assert (said == ["time budget: the search starts at the minimum, 8 cards (no fewer than that count)"]) \
        is starts_at_minimum
    assert len(notes) == (2 if starts_at_minimum else 1)


@pytest.mark.parametrize("hardware", sorted(TABLES.hardware))
def test_counts_are_exactly_the_units_within_a_node_then_whole_nodes(hardware):
    """cards.valid_counts against its definition, count by count up to the planner's largest: a multiple of the
    parallel unit up to one node, then whole nodes (it steps through ranges, not every count)."""
    hw = TABLES.hardware[hardware]
    for start in (0, 1, hw.parallel_unit + 1, hw.cards_per_node, hw.cards_per_node + 1, 1000, MAX_SEARCH_CARDS):
        wanted = [n for n in range(max(start, hw.parallel_unit), MAX_SEARCH_CARDS + 1)
                  if (n % hw.parallel_unit == 0 if n <= hw.cards_per_node else n % hw.cards_per_node == 0)]
        assert list(valid_counts(hw, start)) == wanted, start
