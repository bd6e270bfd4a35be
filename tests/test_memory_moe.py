"""MoE model states against Megatron's own formula, with expert tensor parallelism (issue 26 item 1).

`megatron_states_gib` re-derives, term by term, Megatron core_v0.12.1's megatron/training/theoretical_memory_usage.py
(compute_weight_and_optimizer_memory; each term names its line), which sizes the most loaded pipeline stage but
shards every parameter alike: it divides experts by TP only and the optimizer states by DP. It is extended with how
core_v0.12.1 lays experts out: each routed expert split by expert TP (= TP, parallel_state.py l. 694-695) x EP, and
their distributed-optimizer states over the expert data-parallel group, world / (expert TP x EP x PP)
(parallel_state.py l. 696-699; optimizer/__init__.py l. 586), the dense states over DP x CP (l. 550-552).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import make_spec

from generator.memory import GIB, MemoryJob, estimate
from generator.parallel import Parallel
from generator.resolve import resolve
from generator.tables import load_tables

TABLES = load_tables()
MOE = sorted(name for name, model in TABLES.models.items() if model.is_moe)
MINDSPEED = TABLES.frameworks["mindspeed-llm"]

# DeepSeek-V3's multi-latent attention (https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json:
# q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim), which the model table does not carry.
MLA = {"deepseek-v3": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64,
                       "v_head_dim": 128}}


def megatron_states_gib(name: str, tp: int, pp: int, ep: int, cards: int, cp: int = 1) -> float:
    """Weights, gradients and distributed-optimizer states on the most loaded card (bf16, --use-distributed-optimizer),
    in GiB."""
    m = TABLES.models[name]
    h, heads = m.hidden, m.heads
    gated = 3 / 2  # l. 20: gated_linear_multiplier, --swiglu
    if name in MLA:  # l. 58-77: q lora + rope + q norm, kv lora + rope + kv norm, o proj
        a = MLA[name]
        q_term = a["q_lora_rank"] * (h + heads * (a["qk_head_dim"] + a["qk_pos_emb_head_dim"]) + 1)
        self_attn = (q_term + a["kv_lora_rank"] * (h + heads * (a["qk_head_dim"] + a["v_head_dim"]) + 1)
                     + h * a["qk_pos_emb_head_dim"] + heads * a["v_head_dim"] * h)
    else:  # l. 78-89, with l. 13-14: query_projection_size = kv_channels x heads
        ratio = (m.head_dim or h // heads) * heads / h  # kv_channels: hidden / heads unless given
        self_attn = 2 * h * h * ((1 + m.kv_heads / heads) * ratio)
    dense_layer = 2 * h * (m.ffn * gated + 2) + self_attn  # l. 91-101
    # l. 102-114, the routed experts' part (2 h x moe_ffn x experts x 3/2) set apart: expert TP x EP split it.
    experts_layer = 2 * h * m.moe_ffn * m.experts * gated
    moe_rest = 2 * h * (m.moe_ffn * m.shared_experts * gated + 2) + self_attn
    moe_layers = m.layers - m.first_dense  # l. 28-47: moe_layer_freq (first_k_dense_replace leaves dense layers)
    embedding = h * m.vocab  # l. 115
    final_layernorm = 2 * h  # l. 116
    block_dense = dense_layer * m.first_dense + moe_rest * moe_layers + final_layernorm  # l. 121-125
    block_experts = experts_layer * moe_layers
    # l. 151-160: the most loaded shard holds 1/PP of the block and an embedding, over TP (and the output layer too
    # with untied embeddings on one stage); MindSpeed-LLM's fine-tuning trains no MTP block (l. 126-129: 0).
    dense = (block_dense / pp + embedding) / tp
    if not m.tied and pp == 1:
        dense += embedding / tp
    experts = block_experts / pp / (tp * ep)  # expert TP = TP
    dp = cards // (tp * pp * cp)
    expert_dp = cards // (tp * ep * pp)
    # l. 178-180: 6 + 12 / DP bytes per parameter with the distributed optimizer (bf16 weight, fp32 grad; fp32
    # master weight and two Adam moments sharded), here over each parameter's own data-parallel group.
    return (dense * (6 + 12 / (dp * cp)) + experts * (6 + 12 / expert_dp)) / GIB


def _even(layers: int, pp: int) -> tuple[int, ...]:
    base, extra = divmod(layers, pp)
    return tuple(base + (1 if i < extra else 0) for i in range(pp))


def plan_states_gib(name: str, tp: int, pp: int, ep: int, cards: int, cp: int = 1) -> float:
    """The memory model's weights, gradients and optimizer states on the card it rates most loaded, as MindSpeed-LLM
    plans it."""
    model = TABLES.models[name]
    shape = Parallel(cards=cards, cards_per_node=8, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch_size=1,
                     global_batch_size=cards // (tp * pp * cp) * pp, recompute="full", sequence_parallel=tp > 1,
                     num_layer_list=_even(model.layers, pp))
    job = MemoryJob(model, "full", MINDSPEED.memory, 4096, 0, MINDSPEED.overhead_gb, expert_tp=MINDSPEED.expert_tp)
    mem = estimate(job, shape)
    return mem.weights + mem.gradients + mem.optimizer


# Per model: (PP, EP, DP): PP splits its layers about evenly (DeepSeek-V3's 61 in 31 + 30, Qwen3-235B's 94 in
# 24 + 24 + 23 + 23), EP divides its experts and DP x CP (parallel_state.py l. 696-703).
SHAPES = {"mixtral-8x7b": (4, 8, 8), "qwen3_moe-30b_a3b": (2, 8, 8), "qwen3_moe-235b_a22b": (4, 32, 32),
          "deepseek-v3": (2, 64, 64)}


# The same with DP a multiple of EP: the expert data-parallel group, DP x CP / EP with expert TP = TP, is 4, so the
# experts' optimizer states are sharded (above, expert DP is 1 and the experts' states are whole on each card).
SHARDED = {"mixtral-8x7b": (4, 2, 8), "qwen3_moe-30b_a3b": (2, 4, 16), "qwen3_moe-235b_a22b": (4, 8, 32),
           "deepseek-v3": (2, 16, 64)}


def test_every_moe_model_has_a_shape():
    assert set(SHAPES) == set(SHARDED) == set(MOE)
    assert all(dp == ep for _, ep, dp in SHAPES.values()) and all(dp == 4 * ep for _, ep, dp in SHARDED.values())


@pytest.mark.parametrize("shapes", ["expert TP", "expert data parallel"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("name", MOE)
def test_moe_states_follow_megatrons_formula(name, tp, shapes):
    pp, ep, dp = (SHAPES if shapes == "expert TP" else SHARDED)[name]
    cards = tp * pp * dp
    want = megatron_states_gib(name, tp, pp, ep, cards)
    assert plan_states_gib(name, tp, pp, ep, cards) == pytest.approx(want, rel=0.15)


def test_context_parallel_counts_in_both_data_parallel_groups():
    # CP 2 halves DP at the same cards: the dense states shard over DP x CP, the experts' over the same group.
    want = megatron_states_gib("mixtral-8x7b", 2, 4, 8, 128, cp=2)
    assert plan_states_gib("mixtral-8x7b", 2, 4, 8, 128, cp=2) == pytest.approx(want, rel=0.15)


def test_qwen3_235b_at_tp4_ep8_before_and_after():
    # Issue 26: 256 cards at TP 4, PP 8, EP 8 were estimated at 36.8 GiB per card with the experts split by EP
    # alone (33.0 GiB of states); Megatron's formula gives 17.4 GiB of states (the 18.3: about).
    name, tp, pp, ep, cards = "qwen3_moe-235b_a22b", 4, 8, 8, 256
    want = megatron_states_gib(name, tp, pp, ep, cards)
    assert want == pytest.approx(17.4, abs=0.1)
    assert plan_states_gib(name, tp, pp, ep, cards) == pytest.approx(want, rel=0.05)


def test_mindformers_splits_experts_by_ep_alone():
    # MindFormers' MoE device matrix is (DP x TP / EP x CP, EP): w1 and w2 split over EP only (frameworks.yaml
    # expert_tp: false), so TP leaves the experts' share of a card as it is and the states' group grows with TP.
    mindformers = TABLES.frameworks["mindformers"]
    assert not mindformers.expert_tp
    model = TABLES.models["qwen3_moe-30b_a3b"]
    job = MemoryJob(model, "full", mindformers.memory, 4096, 0, 0.0, expert_tp=mindformers.expert_tp)

    def weights_gib(tp: int) -> float:
        shape = Parallel(cards=16, cards_per_node=8, tp=tp, pp=1, ep=8, global_batch_size=16 // tp,
                         recompute="full", num_layer_list=(48,))
        return estimate(job, shape).weights

    experts = model.moe_layers * model.expert_params_per_layer / 8 * 4.0 / GIB  # fp32 weights (params_dtype)
    dense_share = (model.params - model.expert_params) * 4.0 / GIB
    assert weights_gib(1) == pytest.approx(experts + dense_share, rel=0.01)
    assert weights_gib(4) == pytest.approx(experts + dense_share / 4, rel=0.01)
    # Megatron's layout for the same job splits them by TP too.
    megatron = replace(job, expert_tp=True)
    shape = Parallel(cards=16, cards_per_node=8, tp=4, pp=1, ep=4, global_batch_size=4, recompute="full",
                     num_layer_list=(48,))
    assert estimate(megatron, shape).weights == pytest.approx(
        (model.moe_layers * model.expert_params_per_layer / 16 + (model.params - model.expert_params) / 4)
        * 4.0 / GIB, rel=0.01)


# Upstream's own layouts (MindSpeed-LLM 2.2.0, 337813b0, examples/mcore/): pinned in a spec, each must fit. Two run
# on fewer cards than the seed's minimum-card table gives (Qwen3-235B on 256 A3 dies, the table 512; Qwen3-30B LoRA
# on 8, the table 16), so they plan with --force, which waives the table's count, not the memory check. Line
# numbers are the script's.
UPSTREAM = {
    # pretrain_mixtral_8x7b_ptd.sh: 8 nodes x 8 (l. 5, 8), TP 8 PP 1 EP 1 CP 4 (l. 27-30), --seq-length 32768
    # (l. 52), --micro-batch-size 1, --global-batch-size 32 (l. 88-89), no recompute.
    "pretrain_mixtral_8x7b_ptd.sh": dict(
        model="mixtral-8x7b", method="pretrain", hardware="snt9b", cards=64, seq_len=32768, global_batch_size=32,
        pins=dict(tp=8, pp=1, ep=1, cp=4, micro_batch_size=1, recompute="none")),
    # pretrain_qwen3_30b_a3b_4K_ptd.sh: 2 x 8 (l. 8, 11), TP 1 PP 2 EP 8 (l. 21-23), MBS 1 GBS 256 seq 4096
    # (l. 26-28), full recompute, uniform (l. 64-66).
    "pretrain_qwen3_30b_a3b_4K_ptd.sh": dict(
        model="qwen3_moe-30b_a3b", method="pretrain", hardware="snt9b", cards=16, seq_len=4096,
        global_batch_size=256, pins=dict(tp=1, pp=2, ep=8, micro_batch_size=1, recompute="full")),
    # tune_qwen3_30b_a3b_4K_full_ptd.sh: 2 x 8 (l. 8, 11), TP 4 PP 2 EP 2 (l. 21-23), seq 4096 (l. 24), MBS 4
    # GBS 64 (l. 60-61), no recompute.
    "tune_qwen3_30b_a3b_4K_full_ptd.sh": dict(
        model="qwen3_moe-30b_a3b", method="full", hardware="snt9b", cards=16, seq_len=4096, global_batch_size=64,
        pins=dict(tp=4, pp=2, ep=2, micro_batch_size=4, recompute="none")),
    # tune_qwen3_30b_a3b_4K_lora_ptd.sh: 1 x 8 (l. 8, 11), TP 4 PP 1 EP 1 (l. 21-23), seq 4096 (l. 24), MBS 8
    # GBS 64 (l. 60-61), --lora-r 16 (l. 135).
    "tune_qwen3_30b_a3b_4K_lora_ptd.sh": dict(
        model="qwen3_moe-30b_a3b", method="lora", hardware="snt9b", cards=8, seq_len=4096, global_batch_size=64,
        lora={"rank": 16, "alpha": 32}, pins=dict(tp=4, pp=1, ep=1, micro_batch_size=8, recompute="none")),
    # pretrain_qwen3_235b_a22b_4k_A3_ptd.sh: 16 x 16 (l. 10, 13), TP 1 PP 4 EP 32 (l. 23-25), MBS 1 GBS 1024
    # seq 4096 (l. 28-31), full recompute of 8 layers per block (l. 44-46): pinned as full.
    "pretrain_qwen3_235b_a22b_4k_A3_ptd.sh": dict(
        model="qwen3_moe-235b_a22b", method="pretrain", hardware="snt9b23", cards=256, seq_len=4096,
        global_batch_size=1024, pins=dict(tp=1, pp=4, ep=32, micro_batch_size=1, recompute="full")),
    # tune_qwen3_235b_a22b_4K_full_pack_A3_ptd.sh: 16 x 16 (l. 10, 13), TP 2 PP 4 EP 32 (l. 23-25), MBS 1
    # GBS 1024 seq 4096 (l. 28-31), full recompute of 12 layers per block (l. 44-46): pinned as full.
    "tune_qwen3_235b_a22b_4K_full_pack_A3_ptd.sh": dict(
        model="qwen3_moe-235b_a22b", method="full", hardware="snt9b23", cards=256, seq_len=4096,
        global_batch_size=1024, pins=dict(tp=2, pp=4, ep=32, micro_batch_size=1, recompute="full")),
}


@pytest.mark.parametrize("script", sorted(UPSTREAM))
def test_upstreams_moe_layouts_fit_on_their_cards(script):
    job = dict(UPSTREAM[script])
    pins = job.pop("pins")
    spec = make_spec(**job, frameworks=["mindspeed-llm"], layout={"mindspeed-llm": pins})
    layout = resolve(spec, TABLES, force=True).frameworks["mindspeed-llm"].layout
    assert (layout.tp, layout.pp, layout.ep, layout.cp, layout.micro_batch_size) == (
        pins["tp"], pins["pp"], pins["ep"], pins.get("cp", 1), pins["micro_batch_size"])
    assert layout.fits, f"{script}: {layout.memory.total:.1f} GiB > {layout.budget_gb:.1f} GiB"


def test_upstreams_mixtral_fine_tuning_does_not_fit_by_the_model():
    # tune_mixtral_8x7B_full_ptd.sh (2.2.0): 2 x 8 (l. 6, 9), TP 8 PP 2 EP 1 (l. 28-30): DP 1, so the distributed
    # optimizer shards nothing and every card of the first stage holds 18 B per parameter of its 16th of the model,
    # 48.9 GiB by Megatron's formula; the script sets no flag that saves state memory (no --reuse-fp32-param, no
    # optimizer swap). With the 3.0 GiB runtime overhead that is 51.9 GiB of the planner's 52.2 GiB budget (58 GiB
    # usable less 10% headroom), 0.3 GiB for activations: its --seq-length 32768 with --micro-batch-size 4 and no
    # recompute (l. 50, 91) keeps about 110 GiB, and even 512-token samples under --variable-seq-lengths (l. 61: a
    # batch is padded to its longest sample) need 1.7 GiB. So by this model the layout does not fit at any length
    # without recompute (README, "Memory"); the planner refuses it unless forced, and says so here.
    want = megatron_states_gib("mixtral-8x7b", 8, 2, 1, 16)
    assert want == pytest.approx(48.9, abs=0.2)
    assert plan_states_gib("mixtral-8x7b", 8, 2, 1, 16) == pytest.approx(want, rel=0.02)
    for seq in (32768, 4096, 512):
        spec = make_spec(model="mixtral-8x7b", method="full", hardware="snt9b", cards=16, seq_len=seq,
                         frameworks=["mindspeed-llm"], layout={"mindspeed-llm": dict(
                             tp=8, pp=2, ep=1, micro_batch_size=4, recompute="none")})
        layout = resolve(spec, TABLES, force=True).frameworks["mindspeed-llm"].layout
        assert layout.budget_gb == pytest.approx(TABLES.hardware["snt9b"].usable_gb * 0.9, abs=0.05)
        assert not layout.fits, (seq, layout.memory.total)
        assert layout.memory.total - layout.memory.activations == pytest.approx(want + MINDSPEED.overhead_gb, abs=0.2)
