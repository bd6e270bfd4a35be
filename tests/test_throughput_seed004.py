"""The throughput estimate against seed 004 (MindSpeed-LLM's measured figures on Atlas 900 A2 PODc, Ascend 910B).

The planner's step model (generator/throughput.py) has ONE fitted number: the share of peak that matrix multiplies
reach (frameworks.yaml gemm_efficiency). It is fitted here on one row, LLaMA2-13B pretraining on 1x8 (MFU 64.7%),
and every other row is predicted with it, each with the layout of the upstream recipe seed 004 links (MindSpeed-LLM
examples/mcore/...). Everything else in the model comes from sources outside seed 004: the attention kernel's
measured efficiency per length and the HCCS link rate (hardware.yaml), FlashAttention-2's backward/forward ratio.
Run with -s for the per-row report.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from generator.parallel import Parallel
from generator.tables import load_tables
from generator.throughput import flops_per_token, step_time

T = load_tables()
STORED = T.frameworks["mindspeed-llm"].throughput["gemm_efficiency"]
# Seed 004 states MFU, not the peak it divides by. Its two fine-tuning rows give both samples/s and MFU, so the
# peak follows: 1.14 samples/s x 16384 / 8 cards x 60.6 GFLOP/token / 37.4% = 378 TFLOPS, and 0.51 x 32768 / 8 x
# 86.4 / 48.4% = 373 (test below): one 376-TFLOPS part (1.14 and 0.51 are rounded to 3 and 2 digits).
PODC = replace(T.hardware["snt9b"], name="atlas900a2-podc", peak_tflops_bf16=376.0)
LLAMA2_7B_GQA8 = replace(T.models["llama2-7b"], kv_heads=8)  # the fine-tuning recipes pass --num-query-groups 8


def recipe(tp, pp, dp, gbs, cp=1, **kw) -> Parallel:
    return Parallel(cards=tp * pp * cp * dp, tp=tp, pp=pp, cp=cp, global_batch_size=gbs, cards_per_node=8, **kw)


# name: (model, method, seq_len, upstream layout, measured MFU, measured samples/s or None, upstream script)
ROWS = {
    "pretrain llama2-13b 1x8": (T.models["llama2-13b"], "pretrain", 4096,
                                recipe(1, 4, 2, 128, recompute="full", recompute_share=1 / 10), 0.647, None,
                                "pretrain_llama2_13b_pack_ptd.sh: TP1 PP4, block recompute of 1 layer of 10 per stage"),
    "pretrain llama2-7b 1x8": (T.models["llama2-7b"], "pretrain", 4096, recipe(1, 2, 4, 128), 0.690, None,
                               "pretrain_llama2_7b_pack_ptd.sh: TP1 PP2, GBS 128"),
    "pretrain llama2-70b 4x8": (T.models["llama2-70b"], "pretrain", 4096, recipe(8, 4, 1, 128, vpp=4), 0.441, None,
                                "pretrain_llama2_70b_pack_ptd.sh: TP8 PP4, 5 layers per virtual stage, MC2"),
    "pretrain mixtral-8x7b 8x8": (T.models["mixtral-8x7b"], "pretrain", 32768, recipe(8, 1, 2, 32, cp=4), 0.317,
                                  None, "mixtral/pretrain_mixtral_8x7b_ptd.sh (2.2.0): seq 32768, TP8 EP1, CP4 ring"),
    "fine-tune llama2-7b 1x8 16K": (LLAMA2_7B_GQA8, "full", 16384, recipe(1, 2, 2, 128, cp=2, causal=False), 0.374,
                                    1.14, "tune_llama2_7b_full_pack_16k.sh: TP1 PP2 CP2 ring, general mask"),
    "fine-tune llama2-7b 1x8 32K": (LLAMA2_7B_GQA8, "full", 32768, recipe(2, 1, 1, 64, cp=4, ring=2), 0.484, 0.51,
                                    "tune_llama2_7b_full_pack_32k.sh: TP2, CP4 = Ulysses 2 x ring 2, causal"),
}
FIT_ROW = "pretrain llama2-13b 1x8"
# The multi-node row hardware.yaml's scaling efficiency is fitted on (test_the_scaling_efficiency_is_the_mixtral_rows_
# ratio): its MFU is matched by construction, so it is no prediction and the within-15% tests leave it out.
SCALING_FIT_ROW = "pretrain mixtral-8x7b 8x8"
PREDICTED = [n for n in ROWS if n not in (FIT_ROW, SCALING_FIT_ROW)]


def predicted_mfu(name: str, efficiency: float) -> float:
    model, method, seq, par, *_ = ROWS[name]
    return step_time(model, method, seq, par, PODC, efficiency).mfu


def fit(name: str) -> float:
    """The matmul efficiency at which the step model reproduces `name`'s measured MFU (bisection)."""
    lo, hi = 0.1, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if predicted_mfu(name, mid) < ROWS[name][4] else (lo, mid)
    return (lo + hi) / 2


def test_the_stored_efficiency_is_the_fit_on_one_row():
    fitted = fit(FIT_ROW)
    print(f"\nfitted on {FIT_ROW}: matmul efficiency {fitted:.4f} (frameworks.yaml: {STORED})")
    assert fitted == pytest.approx(STORED, abs=0.005)


@pytest.mark.parametrize("name", ["fine-tune llama2-7b 1x8 16K", "fine-tune llama2-7b 1x8 32K"])
def test_the_seeds_peak_follows_from_its_fine_tuning_rows(name):
    model, method, seq, par, mfu, samples, _ = ROWS[name]
    achieved = samples * seq / par.cards * flops_per_token(model, method, seq)
    assert achieved / mfu / 1e12 == pytest.approx(PODC.peak_tflops_bf16, rel=0.015)


@pytest.mark.parametrize("name", PREDICTED)
def test_prediction_within_15_percent(name):
    model, method, seq, par, mfu, samples, script = ROWS[name]
    step = step_time(model, method, seq, par, PODC, STORED)
    scaling = PODC.scaling_efficiency if par.nodes > 1 else 1.0  # as the plan states it (throughput.throughput)
    measured, predicted, unit = mfu, step.mfu * scaling, "MFU"
    if samples is not None:  # the seed's headline figure for fine-tuning is throughput
        measured, predicted, unit = samples, step.tokens_per_card_s * scaling * par.cards / seq, "samples/s"
    error = (predicted - measured) / measured
    causes = ", ".join(f"{k} {v:.0%}" for k, v in step.shares().items())
    print(f"\n{name:30s} {unit:9s} measured {measured:6.3f} predicted {predicted:6.3f} error {error:+.1%}"
          f"  [{causes}]  ({script})")
    assert abs(error) <= 0.15


def test_every_term_of_the_model_moves_a_row():
    # A term that no row depends on is not checked by the rows: each is switched off in turn and some row moves.
    base = {n: predicted_mfu(n, STORED) for n in ROWS}
    variants = {
        "tensor-parallel link": replace(PODC, link_gb_s=1e9),
        "attention kernel": replace(PODC, attention_efficiency={1024: 1.0, 32768: 1.0}),
    }
    for term, hardware in variants.items():
        moved = [n for n in ROWS if step_time(*ROWS[n][:4], hardware, STORED).mfu > base[n] * 1.05]
        assert moved, term
    without_bubble = {n: step_time(*ROWS[n][:3], replace(ROWS[n][3], pp=1),  # the same cards, all DP
                                   PODC, STORED).mfu for n in ROWS}
    assert without_bubble["pretrain llama2-7b 1x8"] > base["pretrain llama2-7b 1x8"]


def test_every_row_within_15_percent_of_its_measured_mfu():
    # The MFU each row states (the fine-tuning rows' too, besides their samples/s above), the two fit rows left out:
    # the matmul efficiency's and the scaling efficiency's (the MoE row, Mixtral 8x8, 32K: matched by construction,
    # so no MoE row is a prediction here); multi-node rows keep the hardware row's scaling efficiency.
    assert PREDICTED and SCALING_FIT_ROW in ROWS
    for name in PREDICTED:
        model, method, seq, par, mfu, *_ = ROWS[name]
        scaling = PODC.scaling_efficiency if par.nodes > 1 else 1.0
        predicted = step_time(model, method, seq, par, PODC, STORED).mfu * scaling
        assert abs(predicted - mfu) / mfu <= 0.15, (name, predicted, mfu)


def test_the_scaling_efficiency_is_the_mixtral_rows_ratio():
    # hardware.yaml snt9b scaling_efficiency: measured / step model on the one multi-node row whose communication
    # the model costs in full (the 70B row's MC2 overlap is not modelled; its ratio is above 1).
    ratio = ROWS[SCALING_FIT_ROW][4] / predicted_mfu(SCALING_FIT_ROW, STORED)
    assert ratio == pytest.approx(T.hardware["snt9b"].scaling_efficiency, abs=0.005)
    assert ROWS["pretrain llama2-70b 4x8"][4] / predicted_mfu("pretrain llama2-70b 4x8", STORED) > 1


# Rows where the search picks a layout the step model rates above upstream's recipe, and why. The fine-tuning rows
# are not searched: llama2-7b's table row holds 4096 positions, below their 16K and 32K.
PICKS_ABOVE_RECIPE = {
    "pretrain mixtral-8x7b 8x8": "the recipe (2.2.0, TP8 EP1 CP4) spends 37% of its step on TP collectives; the "
                                 "search keeps expert parallelism inside a node (EP8) at a smaller TP, which no seed "
                                 "row measures",
}


@pytest.mark.parametrize("name", [n for n in ROWS if ROWS[n][0].max_positions >= ROWS[n][2]])
def test_the_recipe_ranks_at_least_as_high_as_the_search_pick(name):
    from helpers import make_spec

    from generator.resolve import resolve

    model, method, seq, par, *_ = ROWS[name]
    plan = resolve(make_spec(model=model.name, method=method, seq_len=seq, cards=par.cards,
                             global_batch_size=par.global_batch_size, frameworks=["mindspeed-llm"]), T)
    pick = plan.frameworks["mindspeed-llm"].layout
    hardware = T.hardware["snt9b"]
    recipe_rate, pick_rate = (step_time(model, method, seq, lay, hardware, STORED).tokens_per_card_s
                              for lay in (par, pick))
    print(f"\n{name}: recipe {recipe_rate:.0f} tokens/s per card, search pick {pick.describe()} {pick_rate:.0f}")
    if name in PICKS_ABOVE_RECIPE:
        assert pick_rate > recipe_rate, f"{name} is listed as a pick above the recipe: remove it"
        if model.is_moe:
            assert pick.ep > 1  # an expert keeps experts apart on MoE
    else:
        assert recipe_rate >= pick_rate * 0.999


# Beyond seed 004: MindSpeed-LLM's own published pretraining throughput (docs/zh/pytorch/features/README.md, table
# "分布式预训练", master of 2026: Qwen3 30B on Atlas 900 A2 PODc 2x8, 2318.373 tokens/s per NPU) with its linked recipe
# examples/mcore/qwen3_moe/pretrain_qwen3_30b_a3b_4K_ptd.sh (l. 9-29: 8 NPUs x 2 nodes, TP1 PP2 EP8 CP1, MBS 1,
# GBS 256, seq 4096; l. 65-67 full recompute of every layer).
QWEN3_30B = (T.models["qwen3_moe-30b_a3b"], "pretrain", 4096,
             recipe(1, 2, 8, 256, ep=8, recompute="full"), 2318.373)


def test_the_search_picks_upstreams_structure_for_qwen3_30b_a3b():
    from helpers import make_spec

    from generator.resolve import resolve

    model, method, seq, par, _ = QWEN3_30B
    plan = resolve(make_spec(model=model.name, method=method, seq_len=seq, cards=par.cards,
                             global_batch_size=par.global_batch_size, frameworks=["mindspeed-llm"]), T)
    pick = plan.frameworks["mindspeed-llm"].layout
    assert (pick.tp, pick.pp, pick.ep) == (par.tp, par.pp, par.ep), pick.describe()


@pytest.mark.xfail(strict=True, reason="fine-grained MoE (128 experts of 2048 x 768, top-8) runs below the step "
                                       "model: small grouped matmuls, token permutation and routing are not costed; "
                                       "predicted 3387 tokens/s per card against 2318 measured (+46%)")
def test_qwen3_30b_a3b_within_15_percent():
    model, method, seq, par, measured = QWEN3_30B
    predicted = step_time(model, method, seq, par, PODC, STORED).tokens_per_card_s * PODC.scaling_efficiency
    assert abs(predicted - measured) / measured <= 0.15
