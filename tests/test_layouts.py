"""The layout search's rules as values (generator/layouts.py): how layers split over stages, each structure rule at
its pin key, the global batch a layout takes or why it cannot, the pipeline bubble bound and the card floor the
model states set. The mutation run of issue 42 (bench/mutants.py) changed these unseen by the plan tests."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from helpers import make_spec, note_lines

from generator import layouts
from generator.api.contract import Structure
from generator.api.roles import RoleKind
from generator.context import Context
from generator.errors import SpecError
from generator.frameworks import plugin_of
from generator.layouts import (
    MAX_BUBBLE,
    STATE_BYTES,
    NoFit,
    _chains,
    _global_batch,
    _layout,
    _micro_batches,
    _preset_layout,
    _sequence_parallel,
    _speed_key,
    _states_floor,
    _structure_problems,
    _validate_pins,
    fastest,
    fits_below,
    rate,
    search,
    smallest_batch,
    smallest_fit,
    split_layers,
    tiles,
)
from generator.memory import GIB
from generator.recipe import adapter, batch_target
from generator.resolve import resolve
from generator.spaces import CP_SEQ_THRESHOLD
from generator.tables import load_tables
from generator.throughput import Throughput

TABLES = load_tables()


def context(framework: str = "mindspeed-llm", **fields) -> Context:
    spec = make_spec(**fields)
    model, fw = TABLES.models[spec.model], TABLES.frameworks[framework]
    defaults = plugin_of(fw).planning.recipe_defaults(TABLES.recipes[spec.method], model, fw)
    return Context(spec, model, TABLES.hardware[spec.hardware], fw, False, adapter(spec, TABLES.recipes[spec.method]),
                   defaults)


@pytest.mark.parametrize("layers,pp,mtp,stages", [(36, 1, 0, (36,)), (36, 4, 0, (9, 9, 9, 9)),
                                                  (30, 4, 0, (7, 7, 8, 8)), (61, 8, 1, (7, 8, 8, 8, 8, 8, 8, 6)),
                                                  (4, 4, 1, (1, 1, 1, 1)), (10, 3, 1, (4, 4, 2)), (37, 2, 0, (18, 19)),
                                                  (61, 1, 1, (61,))])
def test_layers_split_evenly_the_rest_on_the_last_stages_and_mtp_weighs_two(layers, pp, mtp, stages):
    assert split_layers(layers, pp, mtp) == stages
    assert sum(stages) == layers


def rules(ctx: Context, cards: int, tp=1, pp=1, cp=1, ep=1) -> list[tuple[str, str]]:
    return _structure_problems(ctx, cards, tp, pp, cp, ep)


def test_a_structure_that_breaks_no_rule_has_no_problem():
    assert rules(context(), 16, tp=8, pp=2) == []
    assert rules(context(model="qwen3-8b", seq_len=16384), 16, tp=2, cp=2) == []


@pytest.mark.parametrize("tp,key,words", [
    (16, "tp", "TP (16) must stay within one node (8 cards on snt9b)"),
    (3, "tp", "TP (3) must divide the 32 attention heads of qwen3-8b"),
    (32, "tp", "TP (32) must divide the 8 KV heads (query groups) of qwen3-8b"),
])
def test_tensor_parallel_rules(tp, key, words):
    assert (key, words) in rules(context(), 96, tp=tp)


def test_one_node_bounds_tp_by_its_cards():
    assert rules(context(), 16, tp=8) == []
    a3 = context(hardware="snt9b23")  # 16 dies a node
    assert not any("within one node" in w for _, w in rules(a3, 32, tp=16))


def test_pipeline_and_dense_stage_rules():
    assert ("pp", "PP (37) exceeds the 36 layers of qwen3-8b") in rules(context(), 37, pp=37)
    assert not any("exceeds" in w for _, w in rules(context(), 36, pp=36))
    deepseek = context(model="deepseek-v3")  # its first 3 layers are dense; MindSpeed-LLM's dense stage rule
    assert [k for k, w in rules(deepseek, 512, tp=8, pp=16, ep=4) if "dense layers" in w] == ["pp"]  # 61 // 16 = 3
    assert not any("dense layers" in w for _, w in rules(deepseek, 512, tp=8, pp=8, ep=4))  # 61 // 8 = 7
    assert not any("dense layers" in w for _, w in rules(context("mindformers", model="deepseek-v3"), 512, tp=8,
                                                         pp=16, ep=4))  # a framework without the rule


def test_context_parallel_rules():
    long = context(model="qwen3-8b", seq_len=16384)
    assert rules(long, 16, cp=2) == []
    assert ("cp", "CP (3) needs seq_len divisible by 2 x CP = 6; 16384 is not") in rules(long, 24, cp=3)
    at = context(model="qwen3-8b", seq_len=CP_SEQ_THRESHOLD)
    assert ("cp", f"CP (2) is for long sequences (> {CP_SEQ_THRESHOLD}); seq_len is {CP_SEQ_THRESHOLD}") in \
        rules(at, 16, cp=2)


def test_expert_parallel_rules():
    assert ("ep", "EP (2) applies to MoE models; qwen3-8b is dense") in rules(context(), 16, ep=2)
    mixtral = context(model="mixtral-8x7b")  # 8 experts; MindSpeed-LLM: EP divides DP x CP
    assert ("ep", "EP (3) must divide the 8 experts of mixtral-8x7b") in rules(mixtral, 24, ep=3)
    assert [w for k, w in rules(mixtral, 16, tp=4, ep=8) if k == "ep"] == \
        [f"EP (8) must divide DP 4 x CP 1 = 4 ({TABLES.frameworks['mindspeed-llm'].ep_rule})"]
    assert rules(mixtral, 32, tp=4, ep=8) == []


def test_the_layout_must_divide_the_cards_at_the_key_that_breaks_it():
    assert rules(context(), 12, tp=8)[-1] == ("tp", "TP (8) x PP (1) x CP (1) = 8 must divide the 12 cards")
    assert rules(context(), 12, tp=1, pp=8)[-1][0] == "pp"
    assert rules(context(model="qwen3-8b", seq_len=16384), 12, cp=8)[-1][0] == "cp"


def test_a_pin_that_breaks_a_rule_is_refused_at_its_key():
    with pytest.raises(SpecError) as refused:
        _validate_pins(context(layout={"mindspeed-llm": {"tp": 3}}), 24)
    assert {p.path for p in refused.value.problems} == {"layout.mindspeed-llm.tp"}  # heads, KV heads, MLP, cards
    with pytest.raises(SpecError, match="sequence parallel .* needs a pinned tp > 1"):
        _validate_pins(context(layout={"mindspeed-llm": {"sequence_parallel": True}}), 8)
    _validate_pins(context(layout={"mindspeed-llm": {"sequence_parallel": True, "tp": 2}}), 8)


def test_a_global_batch_must_tile_micro_batch_times_dp():
    ctx = context(global_batch_size=64)
    assert _global_batch(ctx, 2, 8, 1, 16) == (64, None)
    assert _global_batch(ctx, 3, 8, 1, 24) == (64, "global_batch_size 64 is not divisible by micro batch 3 x DP 8 = 24")


def test_the_pipeline_bubble_is_bounded():
    assert MAX_BUBBLE == 0.25
    ctx = context(global_batch_size=32)
    assert _global_batch(ctx, 1, 8, 2, 16) == (32, None)  # 4 micro batches: a bubble of 1/4 is allowed
    gbs, why = _global_batch(ctx, 1, 16, 2, 32)  # 2 micro batches: 1/2
    assert why == "pipeline bubble (PP-1)/micro batches = 1/2 = 50% > 25%"
    gbs, why = _global_batch(ctx, 1, 8, 3, 24)  # 4 micro batches for PP 3: 2/4
    assert why == "pipeline bubble (PP-1)/micro batches = 2/4 = 50% > 25%"


def test_mindformers_needs_pp_micro_batches_per_step():
    ctx = context("mindformers", global_batch_size=8)
    gbs, why = _global_batch(ctx, 1, 4, 4, 16)
    assert why.startswith("PP (4) needs at least 4 micro batches per step; global batch 8 / (MBS 1 x DP 4) = 2 (")
    gbs, why = _global_batch(context("mindformers", global_batch_size=4), 1, 4, 2, 8)
    assert why.startswith("PP (2) needs at least 2 micro batches per step; global batch 4 / (MBS 1 x DP 4) = 1 (")


def test_a_free_batch_takes_the_smallest_multiple_with_a_small_bubble():
    ctx = replace(context(), free_batch=True)
    target = batch_target(ctx.defaults, ctx.spec)[0]
    step = 2 * 8
    gbs, why = _global_batch(ctx, 2, 8, 4, 64)
    assert why is None
    assert gbs == step * max(math.ceil(target / step), 4, math.ceil(3 / MAX_BUBBLE))
    assert _global_batch(ctx, 1, 1, 16, 16) == (max(target, 60), None)  # (16 - 1) / 0.25 = 60 micro batches


def test_the_card_floor_is_the_model_states_over_the_budget():
    assert STATE_BYTES[("megatron-distopt", False)] == 6 and STATE_BYTES[("megatron-fp32", False)] == 16
    assert STATE_BYTES[("megatron-distopt", True)] == 2 and STATE_BYTES[("megatron-fp32", True)] == 4
    ctx = context(model="qwen3-32b")
    budget = ctx.usable_gb * (1.0 - 0.1) * GIB
    assert _states_floor(ctx) == math.ceil(ctx.model.params * 6 / budget)
    lora = context(model="qwen3-32b", method="lora")
    assert _states_floor(lora) == math.ceil(lora.model.params * 2 / budget)


def table_minimum(value: int, hardware: str = "snt9b", model: str = "qwen3-32b"):
    """The tables with `model`'s full 4096 MindSpeed-LLM row on `hardware` lowered to `value` cards."""
    rows = [replace(r, cards={**r.cards, hardware: value})
            if (r.model, r.framework, "full" in r.methods, 4096 in r.seq_lens) == (model, "mindspeed-llm", True,
                                                                                   True) else r
            for r in TABLES.min_cards]
    return replace(TABLES, min_cards=rows)


def test_the_memory_model_raises_a_table_count_it_cannot_fit_up_to_four_times():
    plan = resolve(make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"]), table_minimum(4))
    assert (plan.frameworks["mindspeed-llm"].min_cards.value, plan.frameworks["mindspeed-llm"].layout.cards) == (4, 16)
    assert "mindspeed-llm: the memory model raised the card count from 4 to 16: no layout fits on 4 (see rejected)" \
        in note_lines(plan.notes)
    with pytest.raises(SpecError) as refused:  # 2 x 4 = 8 at most: 16 is beyond the raise
        resolve(make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"]), table_minimum(2))
    [problem] = refused.value.problems
    assert problem.path == "model"
    assert problem.message.startswith("no mindspeed-llm layout of qwen3-32b fits on 2 to 8 cards of snt9b; ")


def test_the_raise_tries_the_very_next_count_first():
    """layouts.py: the raise starts at the count one above the table's (valid_counts(hw, cards + 1)): qwen3-8b full
    fits on 4 snt9b cards (test_the_smallest_count_that_fits_...), so a table minimum of 3 becomes 4, not 5."""
    plan = resolve(make_spec(frameworks=["mindspeed-llm"]), table_minimum(3, model="qwen3-8b"))
    assert (plan.frameworks["mindspeed-llm"].min_cards.value, plan.frameworks["mindspeed-llm"].layout.cards) == (3, 4)
    assert "mindspeed-llm: the memory model raised the card count from 3 to 4: no layout fits on 3 (see rejected)" \
        in note_lines(plan.notes)


def test_a_count_the_spec_gives_is_never_raised():
    with pytest.raises(SpecError) as refused:
        resolve(make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"], cards=4), table_minimum(4))
    [problem] = refused.value.problems
    assert problem.path == "cards"
    assert problem.message.startswith("no mindspeed-llm layout of qwen3-32b fits on 4 cards of snt9b; ")


def test_a_pinned_layout_that_does_not_fit_is_refused_unless_forced():
    pinned = make_spec(frameworks=["mindspeed-llm"], layout={"mindspeed-llm": {"tp": 1, "pp": 1}}, cards=8)
    with pytest.raises(SpecError) as refused:
        resolve(pinned, TABLES)
    [problem] = refused.value.problems
    assert problem.path == "layout.mindspeed-llm"
    assert problem.message == ("tp=1 pp=1 dp=8 mbs=1 recompute=full needs 64.1 GiB per card (weights 15.3, gradients "
                               "30.5, optimizer states 11.4, activations 1.6, logits 2.3, runtime overhead 3.0) > 52.2 "
                               "GiB budget (usable 58 GiB less 10% headroom); without the pins, tp=1 pp=2 dp=4 mbs=1 "
                               "recompute=selective fits on 8 cards (51.4 GiB). Change the pins, or --force to keep "
                               "them")
    plan = resolve(pinned, TABLES, force=True)
    assert plan.frameworks["mindspeed-llm"].layout.describe() == "tp=1 pp=1 dp=8 mbs=1 recompute=full"
    assert plan.frameworks["mindspeed-llm"].layout.pinned_at == "layout.mindspeed-llm"  # where the plan says it came
    free = resolve(make_spec(frameworks=["mindspeed-llm"], cards=8), TABLES).frameworks["mindspeed-llm"].layout
    assert free.pinned_at is None
    assert "mindspeed-llm: layout tp=1 pp=1 dp=8 mbs=1 recompute=full may not fit: estimated 64.1 GiB per card > " \
           "52.2 GiB (usable 58 GiB less 10% headroom)" in note_lines(plan.warnings)


def test_a_validated_preset_takes_its_own_global_batch():
    """seed 003's qwen3-32b full 4096 config on 16 snt9b: micro batch 1 x 4 micro batches x DP 1."""
    layout = resolve(make_spec(model="qwen3-32b", frameworks=["mindformers"]), TABLES).frameworks["mindformers"].layout
    assert (layout.cards, layout.tp, layout.pp, layout.dp, layout.micro_batch_size, layout.global_batch_size) == \
        (16, 4, 4, 1, 1, 4)
    assert type(layout.global_batch_size) is int  # MindFormers reads an int (micro batch x micro batches x DP)
    assert layout.source == "preset: validated (MindFormers' Qwen3 guide, level Validated)"


def test_a_validated_preset_that_fits_is_kept_without_a_memory_note():
    """layouts.py choose_layout: the preset's memory note only where the estimate is above the budget (here 35.9 of
    52.2 GiB)."""
    plan = resolve(make_spec(model="qwen3-32b", frameworks=["mindformers"]), TABLES)
    assert plan.frameworks["mindformers"].layout.fits
    assert not [n for n in plan.notes if "for the validated preset; the preset is kept" in str(n)]


def test_a_structure_memory_rejects_names_the_last_setting_tried():
    plan = resolve(make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"]), TABLES)
    rejected = {r.layout: r.reason for r in plan.rejected}
    assert rejected["tp=1 pp=1"] == ("memory: 214.7 GiB per card > 52.2 GiB budget (usable 58 less 10%; tried up to "
                                     "recompute=full, mbs=1)")


@pytest.mark.parametrize("framework,fields,counts", [
    # The budget example's model: nothing fits on 8 cards, few settings on 64, most on 320; 312 = 8 x 39.
    ("mindspeed-llm", {"model": "llama3.1-70b", "method": "pretrain", "seq_len": 8192}, [8, 64, 176, 312, 320]),
    ("mindspeed-llm", {"model": "deepseek-v3", "method": "pretrain"}, [256, 512]),
    ("mindformers", {"model": "qwen3-32b"}, [8, 16, 32]),
    ("llama-factory", {"model": "qwen2.5-7b", "method": "lora", "seq_len": 1024, "hardware": "rtx4090"}, [1, 2, 8]),
    # Upstream's own measured layout (a published rate for it alone) is the fastest on 8 and 16 cards, not on 32.
    ("mindspeed-mm", {"model": "qwen2.5_vl-7b", "method": "full", "seq_len": 1024, "global_batch_size": 192},
     [8, 16, 32]),
    ("mindspeed-mm", {"model": "qwen2.5_vl-32b", "method": "full", "seq_len": 1024}, [16, 32]),
    ("mindspeed-llm", {"model": "qwen3-32b", "method": "lora", "tokens_per_card_s": 500.0}, [8, 16]),
])
def test_the_fastest_first_search_finds_what_the_full_search_ranks_first(framework, fields, counts):
    # layouts.fastest rates settings lazily and stops at the first that fits: it must give the full search's best
    # (the budget search and scaling.capped_rate take it instead).
    ctx = context(framework, **fields)
    found = [(fastest(ctx, cards), search(ctx, cards)[0]) for cards in counts]
    assert all(fast == full for fast, full in found)
    assert any(full is not None for _, full in found)  # not only counts where nothing fits


@pytest.mark.parametrize("framework,fields,counts", [
    ("mindspeed-llm", {"model": "llama3.1-70b", "method": "pretrain", "seq_len": 8192}, [8, 176, 312, 320]),
    ("mindspeed-llm", {"model": "qwen3-32b", "global_batch_size": 96}, [16, 24, 40]),
    ("llama-factory", {"model": "qwen2.5-7b", "method": "lora", "seq_len": 1024, "hardware": "rtx4090"}, [1, 2, 3]),
    # Micro batches 1 and 2 tile 6 samples on 3 cards, 4 does not: a structure's chains are those of the first two.
    ("llama-factory", {"model": "qwen2.5-7b", "method": "lora", "seq_len": 1024, "hardware": "rtx4090",
                       "global_batch_size": 6}, [3]),
])
def test_the_chains_are_the_settings_that_tile_the_batch(framework, fields, counts):
    # _chains asks _settings for the settings with a shape alone (explain=False skips the rest unbuilt): they must be
    # the ones the full search lays out, chain by chain.
    ctx = context(framework, **fields)
    for cards in counts:
        recomputes, mbs_options = layouts._recomputes(ctx), layouts._micro_batches(ctx, cards)
        every = [[(s.key, s.shape) for s in layouts._settings(ctx, cards, order, structure, recomputes, [mbs])
                  if s.shape is not None]
                 for order, structure in enumerate(ctx.space.structures(ctx, cards))
                 if not layouts._structure_problems(ctx, cards, structure.tp, structure.pp, structure.cp, structure.ep)
                 for mbs in mbs_options]
        assert _chains(ctx, cards) == [chain for chain in every if chain]
    assert any(_chains(ctx, cards) for cards in counts)


def test_the_fastest_first_search_rates_a_setting_only_when_it_may_come_next(monkeypatch):
    """layouts.fastest merges the chains (a structure's settings at one micro batch, least recompute first): on 176
    cards of the budget example the fourth setting taken fits, and 12 of the 24 are rated, those of the chains that
    came up (every one was before, and rating was most of a budget search)."""
    ctx = context(model="llama3.1-70b", method="pretrain", seq_len=8192)
    rated = []
    real = layouts._speed_key
    monkeypatch.setattr(layouts, "_speed_key", lambda at, shape, key: rated.append(key) or real(at, shape, key))
    found = fastest(ctx, 176)
    assert (found.describe(), len(rated), sum(map(len, _chains(ctx, 176)))) == \
        ("tp=4 pp=11 dp=4 mbs=1 recompute=selective", 12, 24)
    assert found == search(ctx, 176)[0]


def test_a_later_setting_that_rounds_one_step_faster_is_still_found_first():
    """Full recompute can tie with none in the step model (one stage, one micro batch: the longer backward hides as
    much gradient sync as the forward run again adds) and its float sum round one step faster; a calibration's rate
    can put the rounding boundary there. The full search ranks full first, and so must layouts.fastest, which bounds
    a setting it has not rated by the one before it less UNRATED_LEAD (found by an independent review)."""
    shape = {"cards": 16, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "micro_batch_size": 1, "global_batch_size": 16,
             "recompute": "none", "sequence_parallel": False}
    calibration = {"framework": "mindspeed-llm", "model": "llama3.2-3b", "method": "pretrain", "hardware": "snt9b",
                   "seq_len": 2048, "tokens_per_card_s": 2000.0000005, "step_time_s": 10.0, "peak_memory_gib": None,
                   "steps": 50, "layout": shape, "log_sha256": ["0" * 64], "gen_launch_version": "0.0.0"}
    ctx = context(model="llama3.2-3b", method="pretrain", seq_len=2048, global_batch_size=16,
                  layout={"mindspeed-llm": {"tp": 1, "pp": 1, "micro_batch_size": 1}}, calibration=calibration)
    [chain] = _chains(ctx, 16)
    assert [(shape.recompute, _speed_key(ctx, shape, key)[0]) for key, shape in chain] == \
        [("none", -2000.0), ("selective", -2000.0), ("full", -2000.000001)]
    assert fastest(ctx, 16).recompute == search(ctx, 16)[0].recompute == "full"


SWEEP = [(framework, {"model": model, "method": method, "seq_len": seq}, counts)
         for framework in ("mindspeed-llm", "mindformers")
         for model, counts in (("llama3.1-8b", (8, 16)), ("qwen3-32b", (16, 64)), ("qwen3_moe-30b_a3b", (16, 32)),
                               ("llama3.1-70b", (64, 176, 320)))
         for method, seq in (("pretrain", 8192), ("full", 4096), ("lora", 4096))]


@pytest.mark.parametrize("framework,fields,counts", SWEEP)
def test_no_setting_of_a_chain_ranks_above_the_one_before(framework, fields, counts):
    """What layouts.fastest relies on: along a chain (more recompute, the same structure and micro batch) the speed
    key does not fall here, so a chain's first setting bounds the rest (up to one rounding step, the test above).
    The step model's time grows with the share of layers run twice (parallel.py forward_twice); selective recompute
    runs no matrix multiply again, so it ties with none and ranks after it."""
    ctx = context(framework, **fields)
    for cards in counts:
        for chain in _chains(ctx, cards):
            keys = [_speed_key(ctx, _layout(ctx, shape, "search"), key) for key, shape in chain]
            assert keys == sorted(keys), (cards, keys)


def test_a_chain_with_upstreams_own_measured_layout_is_rated_whole(monkeypatch):
    """layouts.fastest: a published rate belongs to one layout, which need not be the first of its chain, so the
    chain is rated whole and its measured layout ranks by its own rate: here qwen3-32b's tp=8 pp=2 with full
    recompute on 16 cards, given a rate no other layout reaches, is the fastest, as the full search ranks it."""
    ctx = context(model="qwen3-32b", method="full")
    planning = ctx.planning
    published = Throughput(10_000.0, "published", is_estimate=False)

    def own(shape) -> bool:
        return (shape.tp, shape.pp, shape.recompute) == (8, 2, "full")

    class Published(type(planning)):
        def measured(self, at, shape):
            return "published run" if own(shape) else ""

        def rate(self, at, layout):
            return published if layout is not None and own(layout) else planning.rate(at, layout)

    ctx.__dict__["planning"] = Published()
    found = fastest(ctx, 16)
    assert (found.describe(), found.measured) == ("tp=8 pp=2 dp=1 mbs=1 recompute=full", "published run")
    assert found == search(ctx, 16)[0]


def test_deepspeed_states_set_no_card_floor_and_a_forward_role_holds_its_bf16_weights():
    """layouts.py _states_floor: DeepSpeed can offload every model state to the host (STATE_BYTES 0); a role that
    only runs forward holds its weights in bf16, 2 bytes a parameter (FORWARD_BYTES): llama3.1-70b's 70.6e9 x 2 over
    snt9b's 52.2 GiB budget is 2.5, 3 cards."""
    for method in ("full", "lora"):
        assert _states_floor(context("llama-factory", model="qwen3-32b", method=method, hardware="a800")) == 0
    rollout = replace(context(model="llama3.1-70b"), role=RoleKind.ROLLOUT)
    assert _states_floor(rollout) == math.ceil(rollout.model.params * 2 / (58 * 0.9 * GIB)) == 3


def test_the_raise_stops_at_four_times_the_table_count_on_die_pairs_too():
    """layouts.py MAX_RAISE: from 2 snt9b23 dies the memory model tries 4, 6 and 8, never 10."""
    with pytest.raises(SpecError) as refused:
        resolve(make_spec(model="qwen3-32b", hardware="snt9b23", frameworks=["mindspeed-llm"]),
                table_minimum(2, "snt9b23"))
    [problem] = refused.value.problems
    assert problem.message.startswith("no mindspeed-llm layout of qwen3-32b fits on 2 to 8 cards of snt9b23; ")


@pytest.mark.parametrize("pp,wanted,step,near", [(1, 13, 8, "8 or 16"), (2, 13, 4, "12 or 16"), (2, 3, 4, "8"),
                                                 (2, 9, 4, "8 or 12")])
def test_a_global_batch_the_fitting_layout_cannot_split_is_refused_with_the_nearest_that_work(pp, wanted, step, near):
    """layouts.py _untileable_batch: the batches micro batch x DP tiles on either side of the spec's, none below PP
    micro steps (a pipeline of PP stages needs PP micro batches a step): 3 on tp=1 pp=2 dp=4 is answered with 8."""
    spec = make_spec(frameworks=["mindspeed-llm"], method="lora", layout={"mindspeed-llm": {"tp": 1, "pp": pp}},
                     cards=8, global_batch_size=wanted)
    with pytest.raises(SpecError) as refused:
        resolve(spec, TABLES)
    assert [(p.path, p.message) for p in refused.value.problems] == [(
        "global_batch_size", f"{wanted} samples cannot be split over the layout that fits on 8 cards (tp=1 pp={pp} "
                             f"dp={8 // pp} mbs=1 recompute=none: micro batch x DP = {step} samples per micro step); "
                             f"nearest that work: {near}")]


@pytest.mark.parametrize("pins,preset", [({"tp": 4}, True), ({"cp": 1}, True), ({"ep": 1}, True),
                                         ({"micro_batch_size": 1}, True), ({"recompute": "full"}, True),
                                         ({"tp": 2}, False), ({"recompute": "none"}, False)])
def test_a_validated_preset_is_kept_under_the_pins_it_agrees_with_only(pins, preset):
    """layouts.py _pins_allow_preset: seed 003's qwen3-32b full 4096 MindFormers preset (tp 4, pp 4, cp 1, ep 1,
    micro batch 1, full recompute) stands where every pin matches it; a pin it breaks searches instead."""
    layout = resolve(make_spec(model="qwen3-32b", frameworks=["mindformers"], layout={"mindformers": pins}),
                     TABLES).frameworks["mindformers"].layout
    assert layout.source.startswith("preset: validated") is preset


@pytest.mark.parametrize("method,bits,refused", [("qlora", 4, True), ("lora", None, False)])
def test_zero3_offload_is_refused_for_a_quantized_base_only(method, bits, refused):
    """layouts.py _validate_pins: ZeRO-3 offload moves bf16 weights; a qlora base stays on the device."""
    spec = make_spec(model="qwen2.5-7b", method=method, quantization_bit=bits, hardware="a800",
                     frameworks=["llama-factory"], layout={"llama-factory": {"offload": True}})
    if refused:
        with pytest.raises(SpecError) as caught:
            resolve(spec, TABLES)
        assert [(p.path, p.message) for p in caught.value.problems] == [
            ("layout.llama-factory.offload", "ZeRO-3 offload is for bf16 weights; a quantized (qlora) base stays on "
                                             "the device")]
    else:
        assert resolve(spec, TABLES).frameworks["llama-factory"].layout.offload


def test_a_server_may_split_the_kv_heads_across_tp_and_nodes():
    """layouts.py _structure_problems: a server's TP may exceed a node and replicate KV heads where TP is a multiple
    of them (qwen3-8b: 8 KV heads, TP 16); a training role may not."""
    assert rules(replace(context(), role=RoleKind.SERVE), 16, tp=16) == []
    assert [k for k, _ in rules(context(), 16, tp=16)] == ["tp", "tp"]  # one node; the KV heads


def test_the_expert_rule_is_checked_from_ep_2_and_only_on_a_layout_that_divides_the_cards():
    mixtral = context(model="mixtral-8x7b")
    assert [w for k, w in rules(mixtral, 8, tp=8, ep=2) if k == "ep"] == \
        [f"EP (2) must divide DP 1 x CP 1 = 1 ({TABLES.frameworks['mindspeed-llm'].ep_rule})"]
    assert [k for k, _ in rules(mixtral, 12, tp=8, ep=2)] == ["tp"]  # 8 does not divide 12: the cards rule alone


def test_a_two_way_pipeline_or_context_split_that_does_not_divide_the_cards_names_its_key():
    assert rules(context(), 9, pp=2) == [("pp", "TP (1) x PP (2) x CP (1) = 2 must divide the 9 cards")]
    assert rules(context(model="qwen3-8b", seq_len=16384), 9, cp=2) == [
        ("cp", "TP (1) x PP (1) x CP (2) = 2 must divide the 9 cards")]


def test_cp_needs_the_sequence_divisible_by_twice_its_degree_even_at_256():
    """layouts.py _split_problems: each CP rank takes two load-balanced halves, 2 x CP chunks (33024 = 256 x 129)."""
    assert rules(context(model="qwen3-8b", seq_len=33024), 256, cp=256) == [
        ("cp", "CP (256) needs seq_len divisible by 2 x CP = 512; 33024 is not")]


def test_a_server_takes_its_whole_batch_as_one_micro_batch_unless_pinned():
    """layouts.py _micro_batches: a server runs its batch at once (the spec's, else the method's target, 128 here);
    a pinned micro batch stands; a training role tries the space's micro batches."""
    serve = replace(context(global_batch_size=32), role=RoleKind.SERVE)
    assert _micro_batches(serve, 8) == [32]
    target = replace(context(), role=RoleKind.SERVE)
    assert _micro_batches(target, 8) == [batch_target(target.defaults, target.spec)[0]] == [128]
    pinned = context(global_batch_size=32, layout={"mindspeed-llm": {"micro_batch_size": 2}})
    assert _micro_batches(replace(pinned, role=RoleKind.SERVE), 8) == [2]
    assert _micro_batches(context(global_batch_size=32), 8) == [1]


@pytest.mark.parametrize("pinned,structure,on", [(True, Structure(tp=1), True), (False, Structure(tp=4), False),
                                                 (None, Structure(tp=2), True), (None, Structure(tp=1), False),
                                                 (None, Structure(tp=4, sequence_parallel=False), False),
                                                 (None, Structure(tp=1, sequence_parallel=True), True)])
def test_sequence_parallel_is_the_pin_else_the_frameworks_default_else_on_with_tp(pinned, structure, on):
    """layouts.py _sequence_parallel: the spec's pin, else the structure's (the framework's) default, else on
    wherever TP splits the layers."""
    assert _sequence_parallel(pinned, structure) is on


def test_one_card_without_accumulation_takes_the_global_batch_as_its_micro_batch():
    """layouts.py _global_batch: MindFormers stand-alone resets gradient accumulation to 1 (frameworks.yaml
    one_card_rule), so on one card the global batch must be the micro batch; MindSpeed-LLM accumulates there."""
    rule = TABLES.frameworks["mindformers"].one_card_rule
    assert _global_batch(context("mindformers", global_batch_size=4), 1, 1, 1, 1) == (
        4, f"global_batch_size 4 needs micro batch 4 on one card ({rule})")
    assert _global_batch(context("mindformers", global_batch_size=4), 4, 1, 1, 1) == (4, None)
    assert _global_batch(context("mindformers"), 2, 1, 1, 1) == (2, None)  # no spec batch: the micro batch
    assert _global_batch(context(global_batch_size=4), 1, 1, 1, 1) == (4, None)


def test_a_pipeline_needs_as_many_micro_batches_as_stages_then_a_small_bubble():
    """layouts.py _global_batch: MindFormers' PP needs PP micro batches a step (its pipeline_micro_rule); at exactly
    PP the bubble rule (MAX_BUBBLE) speaks instead."""
    rule = TABLES.frameworks["mindformers"].pipeline_micro_rule
    assert _global_batch(context("mindformers", global_batch_size=2), 1, 2, 2, 4) == (
        2, f"PP (2) needs at least 2 micro batches per step; global batch 2 / (MBS 1 x DP 2) = 1 ({rule})")
    assert _global_batch(context("mindformers", global_batch_size=4), 1, 2, 2, 4) == (
        4, "pipeline bubble (PP-1)/micro batches = 1/2 = 50% > 25%")
    assert _global_batch(context("mindformers", global_batch_size=16), 1, 2, 2, 4) == (16, None)


def test_a_role_that_does_not_train_has_no_rate():
    """layouts.py rate: a rollout engine runs forward only; gen-launch has no generation-rate model, so its layouts
    rank by communication alone (0 tokens/s, an estimate)."""
    own = rate(replace(context(), role=RoleKind.ROLLOUT), None)
    assert (own.tokens_per_card_s, own.is_estimate) == (0.0, True)
    assert own.source == "not estimated: rollout does not train; gen-launch has no generation-rate model yet"


@pytest.mark.parametrize("model,method,fewest", [("qwen3-8b", "full", 4), ("qwen3-32b", "full", 16),
                                                 ("qwen3-8b", "lora", 1)])
def test_the_smallest_count_that_fits_and_a_fit_below_a_count(model, method, fewest):
    """layouts.py smallest_fit and fits_below on snt9b: the fewest cards with a layout that fits, and the fastest
    fitting layout on the fewest cards below a count (none below the smallest)."""
    ctx = context(model=model, method=method)
    assert smallest_fit(ctx) == fewest
    below = fits_below(ctx, 2 * fewest)
    assert below is not None and below.cards == fewest and below.fits
    assert fits_below(ctx, fewest) is None
    assert (below.source, below.pinned_at) == ("search", None)  # nothing pinned (the on-device pin is DeepSpeed's)


@pytest.mark.parametrize("seq_len,tried", [(1024, [4, 2, 1]), (2048, [2, 1]), (4096, [1]), (8192, [1])])
def test_the_micro_batches_tried_hold_at_most_4096_tokens(seq_len, tried):
    """layouts.py _micro_batches: a space without its own list tries 4, 2 and 1 sequences where a micro batch holds
    at most 4096 tokens, and 1 past that."""
    assert _micro_batches(context(seq_len=seq_len, global_batch_size=32), 8) == tried


def test_one_card_without_accumulation_tries_the_global_batch_alone_unless_pinned():
    """layouts.py _micro_batches: MindFormers stand-alone takes the whole step as one micro batch (one_card_rule); a
    pinned micro batch stands (and _global_batch then says why it breaks the rule)."""
    assert _micro_batches(context("mindformers", global_batch_size=8), 1) == [8]
    pinned = context("mindformers", global_batch_size=8, layout={"mindformers": {"micro_batch_size": 2}})
    assert _micro_batches(pinned, 1) == [2]


def test_a_spec_batch_on_cards_nothing_fits_is_refused_for_memory_not_the_batch():
    """layouts.py _untileable_batch: where no layout fits even with the batch free, the refusal is the memory one."""
    with pytest.raises(SpecError) as refused:
        resolve(make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"], cards=4, global_batch_size=13),
                table_minimum(4))
    [problem] = refused.value.problems
    assert problem.path == "cards"
    assert problem.message.startswith("no mindspeed-llm layout of qwen3-32b fits on 4 cards of snt9b; ")


def test_a_frameworks_own_rate_model_comes_first_then_a_measured_rate():
    """layouts.py rate: MindSpeed-RL rates its roles itself (a reference inside the actor's whole-step figure); the
    spec's tokens_per_card_s is a measurement, not an estimate."""
    own = rate(replace(context("mindspeed-rl", method="grpo"), role=RoleKind.REFERENCE), None)
    assert (own.tokens_per_card_s, own.is_estimate) == (0.0, True)
    assert own.source == "not estimated: reference runs inside the actor's whole-step figure"
    given = rate(context(tokens_per_card_s=1234.5), None)
    assert (given.tokens_per_card_s, given.source, given.is_estimate) == (
        1234.5, "measured (spec tokens_per_card_s)", False)


@pytest.mark.parametrize("tp,on", [(8, True), (2, True), (1, False)])
def test_a_presets_sequence_parallel_needs_tp(tp, on):
    """layouts.py _preset_layout: the preset's use_seq_parallel for the method (seed 003), on only where TP splits
    the layers; the global batch is micro batch x micro batches x DP."""
    ctx = context("mindformers")
    [preset] = [p for p in TABLES.presets if (p.framework, p.model, p.methods) == ("mindformers", "qwen3-8b",
                                                                                    ("full", "pretrain"))]
    assert preset.sequence_parallel["full"] is True
    layout = _preset_layout(ctx, replace(preset, tp=tp, dp=8 // tp, micro_batch_num=2), 8)
    assert layout.sequence_parallel is on
    assert (layout.tp, layout.dp, layout.global_batch_size) == (tp, 8 // tp, 2 * (8 // tp))


@pytest.mark.parametrize("pins,cards", [({"pp": 3}, 9), ({"tp": 1}, 9), ({"cp": 2}, 6), ({"ep": 1}, 9), ({"tp": 2}, 6)])
def test_a_dimension_not_pinned_counts_as_one_in_the_pins_rules(pins, cards):
    """layouts.py _validate_pins: the pinned degrees are checked with the others at 1 (the search picks those), so a
    pin that divides the cards with them at 1 is no problem, and one that does not is refused at its own key."""
    _validate_pins(context(seq_len=16384, layout={"mindspeed-llm": pins}), cards)
    with pytest.raises(SpecError) as refused:
        _validate_pins(context(layout={"mindspeed-llm": {"pp": 4}}), 6)
    assert [(p.path, p.message) for p in refused.value.problems] == [
        ("layout.mindspeed-llm.pp", "TP (1) x PP (4) x CP (1) = 4 must divide the 6 cards")]


@pytest.mark.parametrize("model,fewest", [("qwen3-8b", 1), ("qwen3-32b", 2)])
def test_a_server_takes_the_fewest_cards_that_serve_it(model, fewest):
    """layouts.py smallest_fit: MindFormers predict splits the model over all its cards; each count from one card up
    to one per attention head is tried, the fewest that fits kept."""
    assert smallest_fit(context("mindformers", method="predict", model=model)) == fewest


def test_a_model_no_count_serves_is_refused_at_the_model():
    """layouts.py smallest_fit: deepseek-v3 served by MindFormers fits on no count up to its 128 heads."""
    with pytest.raises(NoFit) as refused:
        smallest_fit(context("mindformers", method="predict", model="deepseek-v3"))
    assert [(p.path, p.message) for p in refused.value.problems] == [
        ("model", "no mindformers layout serves deepseek-v3 at seq_len 4096 on snt9b")]
    assert refused.value.cards == 128


def test_deepspeed_takes_the_fewest_cards_that_hold_the_states_on_the_device():
    """layouts.py smallest_fit and fits_below: CPU offload trades a large cost in speed for memory, so where a layout
    fits on the device the fewest cards are those without offload (qwen3-8b full on RTX 4090s: ZeRO-3 over 24), with
    the global batch free; none fits below that."""
    ctx = context("llama-factory", hardware="rtx4090")
    assert smallest_fit(ctx) == 24
    below = fits_below(ctx, 48)
    assert below is not None and (below.cards, below.dp, below.offload, below.zero_stage) == (24, 24, False, 3)
    assert fits_below(ctx, 24) is None


@pytest.mark.parametrize("seq_len,pins,batch,tiled", [
    (4096, {"tp": 1, "pp": 2}, 16, True),  # DP 4: 4 micro batches of 4
    (4096, {"tp": 2, "pp": 1}, 8, True),  # DP 4
    (16384, {"tp": 1, "pp": 1, "cp": 2}, 8, True),  # DP 4
    (4096, {"tp": 2, "pp": 1}, 12, True),  # DP 4: 3 micro batches
    (4096, {"tp": 1, "pp": 1}, 12, False),  # DP 8 does not divide 12
])
def test_a_batch_tiles_where_some_structure_takes_micro_batch_times_its_dp(seq_len, pins, batch, tiled):
    """layouts.py tiles: DP is the cards over TP x PP x CP; a structure tiles the global batch where micro batch x DP
    divides it (micro batch 1 pinned)."""
    ctx = context(seq_len=seq_len, global_batch_size=batch,
                  layout={"mindspeed-llm": {**pins, "micro_batch_size": 1}})
    assert tiles(ctx, 8) is tiled


def test_a_search_rejects_only_the_structures_where_no_setting_fits():
    """layouts.py candidates: qwen3-8b full on 8 snt9b cards fits with every structure but TP 1 x PP 1 (64.1 GiB per
    card), which alone is rejected, for its memory."""
    best, _, rejected = search(context(), 8)
    assert best is not None and best.describe() == "tp=1 pp=2 dp=4 mbs=1 recompute=selective"
    assert [(r.layout, r.reason.split(" GiB")[0]) for r in rejected] == [("tp=1 pp=1", "memory: 64.1")]


@pytest.mark.parametrize("model,cards,layout", [("qwen3-8b", 8, "tp=1 pp=2 dp=4 mbs=1 recompute=selective"),
                                                ("qwen3-8b", 6, "tp=1 pp=3 dp=2 mbs=1 recompute=selective"),
                                                ("qwen3-32b", 16, "tp=4 pp=4 dp=1 mbs=1 recompute=selective")])
def test_the_smallest_batch_is_taken_by_the_fastest_layout_that_fits(model, cards, layout):
    """layouts.py smallest_batch: with the batch free, the layouts at the least global batch (the method's target,
    128) that fit, the fastest of them (the search's best where it tiles the target)."""
    found = smallest_batch(context(model=model), cards)
    assert found is not None and (found.global_batch_size, found.describe(), found.fits) == (128, layout, True)


def test_the_smallest_batch_is_free_of_the_target_where_no_layout_tiles_it():
    """layouts.py smallest_batch: TP 1 x PP 1 pinned on 6 cards cannot tile the target 128; with the batch free the
    layout takes the smallest multiple of micro batch x DP = 6 above it, 132."""
    found = smallest_batch(context(method="lora", layout={"mindspeed-llm": {"tp": 1, "pp": 1}}), 6)
    assert found is not None and (found.global_batch_size, found.describe()) == (
        132, "tp=1 pp=1 dp=6 mbs=1 recompute=none")


def test_the_nearest_batches_come_from_the_layout_that_fits_with_the_batch_free():
    """layouts.py _untileable_batch: the layout named is searched with the batch free, not at the method's target
    (128, which DP 6 does not tile either)."""
    spec = make_spec(method="lora", cards=6, global_batch_size=13, frameworks=["mindspeed-llm"],
                     layout={"mindspeed-llm": {"tp": 1, "pp": 1}})
    with pytest.raises(SpecError) as refused:
        resolve(spec, TABLES, force=True)  # 6 is below the table's 8
    assert [(p.path, p.message) for p in refused.value.problems] == [(
        "global_batch_size", "13 samples cannot be split over the layout that fits on 6 cards (tp=1 pp=1 dp=6 mbs=1 "
        "recompute=none: micro batch x DP = 6 samples per micro step); nearest that work: 12 or 18")]


def test_a_pinned_refusal_lists_each_part_that_shows_at_one_decimal():
    """layouts.py _pinned_does_not_fit: the breakdown names every part of at least 0.05 GiB (what prints as 0.1 or
    more): qwen3-14b's LoRA adapters over TP 8 do (0.0507 GiB); qwen3-8b's (0.034 GiB) do not."""
    def refusal(model: str) -> str:
        spec = make_spec(model=model, method="lora", seq_len=32768, cards=8, frameworks=["mindspeed-llm"],
                         layout={"mindspeed-llm": {"tp": 8, "pp": 1, "recompute": "none", "micro_batch_size": 4}})
        with pytest.raises(SpecError) as refused:
            resolve(spec, TABLES)
        [problem] = refused.value.problems
        return problem.message.split(" > ")[0]

    assert refusal("qwen3-14b") == ("tp=8 pp=1 dp=1 mbs=4 recompute=none needs 119.5 GiB per card (weights 3.4, LoRA "
                                    "adapters (weights, grads, Adam) 0.1, activations 103.8, logits 9.3, runtime "
                                    "overhead 3.0)")
    assert refusal("qwen3-8b") == ("tp=8 pp=1 dp=1 mbs=4 recompute=none needs 84.0 GiB per card (weights 1.9, "
                                   "activations 69.8, logits 9.3, runtime overhead 3.0)")


def test_an_rl_batch_tiles_in_sequences_and_a_defaulted_target_must_tile_too():
    """layouts.py _global_batch: GRPO's 5 responses a prompt (verl) fill micro steps in sequences: 4 prompts are 20
    sequences, two micro steps of micro batch 1 x DP 10 (the fewest prompts that do: 10 / gcd(10, 5) = 2), but not
    of 1 x DP 8; without a spec batch and with the batch not free, the method's target (128) must tile."""
    rl = context("verl", method="grpo", global_batch_size=4)
    assert rl.planning.sequences_per_sample(rl) == 5
    assert _global_batch(rl, 1, 10, 1, 10) == (4, None)
    assert _global_batch(rl, 1, 8, 1, 8) == (
        4, "global_batch_size 4 x 5 sequences each is not divisible by micro batch 1 x DP 8 = 8")
    assert _global_batch(context(), 1, 6, 1, 6) == (
        128, "global batch 128 is not divisible by micro batch 1 x DP 6 = 6")
    pairs = context("verl", method="grpo", global_batch_size=3, rl={"samples_per_prompt": 2})  # rl.n 2: said too
    assert _global_batch(pairs, 1, 4, 1, 4) == (
        3, "global_batch_size 3 x 2 sequences each is not divisible by micro batch 1 x DP 4 = 4")


def test_a_model_that_fits_on_no_count_is_refused_at_the_model():
    """layouts.py smallest_fit: activations, logits and runtime do not shrink with more cards, so where the largest
    count fits nothing (qwen3-8b at seq_len 65536 on RTX 3090s) the model is refused, not counted up to."""
    with pytest.raises(NoFit) as refused:
        smallest_fit(context("llama-factory", hardware="rtx3090", seq_len=65536))
    assert [(p.path, p.message) for p in refused.value.problems] == [
        ("model", "no llama-factory layout fits qwen3-8b full at seq_len 65536 on rtx3090")]
