"""Each memory term as bytes against its formula (generator/memory.py's docstring and the sources it cites), not
only the directions knobs move it: the mutation run of issue 42 (bench/mutants.py) changed these factors unseen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from generator import memory
from generator.memory import (
    GIB,
    MemoryBreakdown,
    MemoryJob,
    Term,
    _stage_layers,
    estimate,
    hf_layer_bytes,
    hf_step_bytes,
    int8_input_bytes,
    layer_activation_bytes,
    megatron_stages,
    quant_bytes,
    stage_params,
)
from generator.parallel import Parallel
from generator.tables import load_tables

TABLES = load_tables()
QWEN3_8B = TABLES.models["qwen3-8b"]  # h 4096, q 32 x 128, kv 8 x 128, F 12288, SwiGLU, 36 layers
DEEPSEEK = TABLES.models["deepseek-v3"]
QWEN3 = TABLES.frameworks["llama-factory"].activations["qwen3"]
S, H, Q, KV, F = 4096, 4096, 4096, 1024, 12288


def shape(**kw) -> Parallel:
    return Parallel(**{"cards": 8, "cards_per_node": 8, "global_batch_size": 64, "num_layer_list": (36,), **kw})


def test_the_model_is_the_one_the_numbers_below_are_for():
    m = QWEN3_8B
    assert (m.hidden, m.q_dim, m.kv_dim, m.ffn, m.mlp_matrices, m.layers) == (H, Q, KV, F, 3, 36)


@pytest.mark.parametrize("micro", [1, 2])
def test_one_layers_activations_are_korthikantis_table_2(micro):
    """8sbh outside the TP regions, 2sb(q + 2kv + q + 3F) inside (GQA + SwiGLU); TP divides the inside, SP the
    outside too; selective recompute drops the F-sized activation output; full keeps the layer input (2sbh)."""
    sbh = S * micro * H
    outside, inside = 8 * sbh, 2 * S * micro * (2 * Q + 2 * KV + 3 * F)
    assert layer_activation_bytes(QWEN3_8B, S, micro, 1, False, "none") == (outside + inside, 0.0)
    assert layer_activation_bytes(QWEN3_8B, S, micro, 4, False, "none") == (outside + inside / 4, 0.0)
    assert layer_activation_bytes(QWEN3_8B, S, micro, 4, True, "none") == (outside / 4 + inside / 4, 0.0)
    selective = inside - 2 * S * micro * F
    assert layer_activation_bytes(QWEN3_8B, S, micro, 4, False, "selective") == (outside + selective / 4, 0.0)
    assert layer_activation_bytes(QWEN3_8B, S, micro, 4, False, "full") == (2 * sbh, outside + inside / 4)
    assert layer_activation_bytes(QWEN3_8B, S, micro, 4, True, "full") == (2 * sbh / 4, (outside + inside) / 4)


def test_an_8_bit_base_keeps_its_linear_inputs():
    tokens = 2 * S
    per_layer = 2 * tokens * (2 * H + Q + F)  # attention input, attention output, MLP input, FFN input; bf16
    assert int8_input_bytes(QWEN3_8B, "none", tokens) == (36 * per_layer - 2 * tokens * H, 0.0)
    assert int8_input_bytes(QWEN3_8B, "full", tokens) == (0.0, per_layer)


def test_bytes_per_quantized_weight_are_bitsandbytes_layout():
    assert quant_bytes(4, False) == 0.5 + 4 / 64  # two weights a byte, an fp32 absmax per 64
    assert quant_bytes(4, True) == 0.5 + (1 + 4 / 256) / 64  # the absmax in uint8, an fp32 one per 256 of them
    assert quant_bytes(8, True) == quant_bytes(8, False) == 1.0


def test_the_hf_step_holds_the_larger_of_the_working_set_and_the_logits():
    tokens = S * 2
    kept = 36 * hf_layer_bytes(QWEN3["full"]["none"], QWEN3_8B, S) * tokens
    working = hf_layer_bytes(QWEN3["working"]["full"]["none"], QWEN3_8B, S) * tokens
    logits = QWEN3["logit_bytes"]["fp32"] * tokens * QWEN3_8B.vocab
    assert working < logits  # so the step's peak is the layers' activations alone
    assert hf_step_bytes(QWEN3, QWEN3_8B, "full", "none", S, 2, fp32_loss=True) == (kept, logits)
    bf16 = QWEN3["logit_bytes"]["bf16"] * tokens * QWEN3_8B.vocab
    assert hf_step_bytes(QWEN3, QWEN3_8B, "full", "none", S, 2)[1] == bf16


def deepspeed(method: str = "full", zero: int | None = None, cards: int = 8, **job) -> MemoryBreakdown:
    memory_job = MemoryJob(**{"model": QWEN3_8B, "method": method, "scheme": "deepspeed", "seq_len": S,
                              "lora_rank": 8 if method != "full" else 0, "overhead_gb": 2.5, "activations": QWEN3,
                              **job})
    return estimate(memory_job, shape(cards=cards, zero_stage=zero, global_batch_size=cards))


@pytest.mark.parametrize("zero,weights,grads,optimizer", [(None, 1, 1, 1), (0, 1, 1, 1), (1, 1, 1, 8), (2, 1, 8, 8),
                                                          (3, 8, 8, 8)])
def test_a_full_fine_tune_holds_18_bytes_a_parameter_sharded_by_zero_stage(zero, weights, grads, optimizer):
    n, world = QWEN3_8B.params, 8
    gathered = 4.0 * QWEN3_8B.largest_layer_params if zero == 3 else 0.0
    mem = deepspeed(zero=zero)
    assert mem.weights * GIB == pytest.approx(2.0 * n / weights + gathered, rel=1e-12)
    assert mem.gradients * GIB == pytest.approx(4.0 * n / grads, rel=1e-12)
    assert mem.optimizer * GIB == pytest.approx(12.0 * n / optimizer, rel=1e-12)
    assert mem.overhead == 2.5 and world == 8


@pytest.mark.parametrize("zero,weights_over,states_over", [(None, 1, 1), (2, 1, 8), (3, 8, 8)])
def test_lora_adapters_hold_fp32_weights_and_12_bytes_of_states(zero, weights_over, states_over):
    lora = 36 * QWEN3_8B.lora_params_per_layer(8)
    mem = deepspeed("lora", zero=zero)
    assert mem.adapters * GIB == pytest.approx(lora * (4.0 / weights_over + 12.0 / states_over), rel=1e-12)
    assert mem.gradients == mem.optimizer == 0.0


@pytest.mark.parametrize("bits,fp32", [(4, False), (4, True), (8, False)])
def test_a_quantized_base_keeps_both_untied_embeddings_unquantized(bits, fp32):
    embeddings = 2 * QWEN3_8B.embedding_params  # qwen3-8b does not tie its output head to its embeddings
    frozen = (QWEN3_8B.params - embeddings) * quant_bytes(bits, True) + embeddings * (4.0 if fp32 else 2.0)
    assert deepspeed("qlora", quant_bits=bits, kbit_fp32=fp32).weights * GIB == pytest.approx(frozen, rel=1e-12)


def test_a_tied_model_keeps_one_embedding_matrix_unquantized():
    model = TABLES.models["llama3.2-1b"]
    assert model.tied
    job = MemoryJob(model, "qlora", "deepspeed", S, 8, 2.5, quant_bits=4, activations=QWEN3)
    frozen = (model.params - model.embedding_params) * quant_bytes(4, True) + model.embedding_params * 2.0
    assert estimate(job, shape(num_layer_list=(model.layers,))).weights * GIB == pytest.approx(frozen, rel=1e-12)


def test_a_forward_only_role_holds_bf16_weights_one_layer_and_the_last_stages_logits():
    job = MemoryJob(QWEN3_8B, "full", "megatron-distopt", S, 0, 3.0, trains=False)
    tp2 = shape(tp=2, pp=2, micro_batch_size=2, num_layer_list=(18, 18))
    dense, experts, _, _ = stage_params(QWEN3_8B, tp2, 1, True)
    mem = estimate(job, tp2)
    assert mem.stage == 1  # the last stage holds the logits
    assert mem.weights * GIB == 2.0 * (dense + experts)
    assert mem.logits * GIB == S * 2 * QWEN3_8B.vocab * 4.0 / 2
    assert mem.activations * GIB == layer_activation_bytes(QWEN3_8B, S, 2, 2, False, "none")[0]
    assert (mem.gradients, mem.optimizer, mem.adapters, mem.overhead) == (0.0, 0.0, 0.0, 3.0)


def test_a_1f1b_stage_keeps_the_micro_batches_in_flight():
    job = MemoryJob(QWEN3_8B, "full", "megatron-distopt", S, 0, 3.0)
    kept, working = layer_activation_bytes(QWEN3_8B, S, 1, 2, False, "full")
    deep = shape(tp=2, pp=4, num_layer_list=(9,) * 4, global_batch_size=8)  # 8 micro batches: stage 0 holds 4
    shallow = shape(tp=2, pp=4, num_layer_list=(9,) * 4, global_batch_size=2)  # 2 micro batches: at most 2
    for layout, in_flight in ((deep, 4), (shallow, 2)):
        stages = megatron_stages(job, replace(layout, recompute="full"))
        assert stages[0].activations * GIB == 9 * kept * in_flight + working
        assert stages[3].activations * GIB == 9 * kept + working  # the last stage: one


def test_a_moe_stage_counts_its_moe_layers_and_the_mtp_layer():
    """DeepSeek-V3: 61 layers, the first 3 dense, one MTP layer (a MoE layer with a 2h x h projection) after the
    last."""
    assert (DEEPSEEK.layers, DEEPSEEK.first_dense) == (61, 3)
    own, embeddings, moe, layers, mtp = _stage_layers(DEEPSEEK, (31, 30), 1, 0)
    assert (embeddings, moe, layers, mtp) == (1, 28, 31, 0)
    assert own == sum(DEEPSEEK.layer_params_at(i) for i in range(31))
    own, embeddings, moe, layers, mtp = _stage_layers(DEEPSEEK, (31, 30), 1, 1)
    assert (embeddings, moe, layers, mtp) == (1, 31, 31, 1)
    h = DEEPSEEK.hidden
    assert own == sum(DEEPSEEK.layer_params_at(i) for i in range(31, 61)) + DEEPSEEK.layer_params_at(61) + 2 * h * h


def test_embeddings_split_over_tp_on_the_stages_that_hold_them():
    tp4 = shape(tp=4, pp=2, num_layer_list=(18, 18))
    dense, experts, layers, mtp = stage_params(QWEN3_8B, tp4, 0, True)
    own = sum(QWEN3_8B.layer_params_at(i) for i in range(18))
    assert (dense, experts, layers, mtp) == (own / 4 + QWEN3_8B.embedding_params / 4, 0.0, 18, 0)


def test_the_total_is_the_sum_of_the_items():
    mem = MemoryBreakdown(weights=1.0, gradients=2.0, optimizer=4.0, adapters=8.0, activations=16.0, logits=32.0,
                          overhead=64.0, extra=(("x", 128.0),))
    assert mem.total == 255.0
    assert [gib for _, gib in mem.items()] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]


def test_a_forward_only_moe_role_holds_its_experts_too():
    job = MemoryJob(DEEPSEEK, "full", "megatron-distopt", S, 0, 3.0, trains=False)
    layout = shape(cards=512, tp=8, pp=8, ep=8, num_layer_list=(8, 8, 8, 8, 8, 7, 7, 7))
    mem = estimate(job, layout)
    dense, experts, _, _ = stage_params(DEEPSEEK, layout, mem.stage, True)
    assert experts > 0
    assert mem.weights * GIB == 2.0 * (dense + experts)


def test_a_term_weighs_each_stage_and_the_heaviest_stage_is_the_estimate(monkeypatch):
    """memory.py TERMS (README "Extending": add a memory term): a term's bytes per card, in GiB, is an item of every
    estimate and counts in the total, so with a term the worst stage is found among all of them: here the term
    weighs 100 GiB on stage 2 of 4 only, which is then the estimate's stage."""
    job = MemoryJob(QWEN3_8B, "full", "megatron-distopt", S, 0, 3.0)
    layout = shape(tp=2, pp=4, num_layer_list=(9,) * 4, global_batch_size=8)
    plain = megatron_stages(job, layout)
    assert [m.extra for m in plain] == [()] * 4  # as shipped: no term
    monkeypatch.setattr(memory, "TERMS", (Term("buffer", lambda job, shape, stage: 100 * GIB * (stage == 2)),))
    mem = estimate(job, layout)
    assert (mem.stage, mem.extra) == (2, (("buffer", 100.0),))
    assert mem.total == plain[2].total + 100.0
    forward = estimate(replace(job, trains=False), layout)
    assert (forward.stage, forward.extra) == (2, (("buffer", 100.0),))
    # DeepSpeed has no pipeline: its one stage is stage 0, which the term is asked for
    monkeypatch.setattr(memory, "TERMS", (Term("buffer", lambda job, shape, stage: 100 * GIB * (stage == 0)),))
    assert deepspeed().extra == (("buffer", 100.0),)


COEFFICIENTS = {"hidden": 1.0, "q": 2.0, "kv": 3.0, "ffn": 4.0, "heads": 5.0, "const": 6.0, "scores_per_head": 7.0}


def test_the_hf_layer_bytes_are_each_coefficient_times_its_dimension():
    """memory.py hf_layer_bytes: bytes per token per layer = sum of coefficient x dimension (h, q, kv, F, heads, 1)
    + scores_per_head x heads x seq (the eager attention's scores); distinct coefficients, so each term shows."""
    assert hf_layer_bytes(COEFFICIENTS, QWEN3_8B, S) == 1 * H + 2 * Q + 3 * KV + 4 * F + 5 * 32 + 6 + 7 * 32 * S


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_hf_step_adds_what_the_working_set_holds_beyond_the_logits_and_an_8_bit_bases_inputs(recompute):
    """memory.py hf_step_bytes: kept = layers x per-layer bytes x tokens (+ an 8-bit base's kept inputs), working =
    one layer's x tokens (+ its inputs while recomputed); the peak adds the working set beyond the bf16 logits (the
    default loss), which a large working coefficient exceeds here."""
    small = dict(COEFFICIENTS, scores_per_head=0.0)
    large = dict(COEFFICIENTS, scores_per_head=3000.0)
    activations = {"full": {"none": small, "full": small}, "working": {"full": {"none": large, "full": large}},
                   "logit_bytes": {"bf16": 2.0, "fp32": 4.0}}
    tokens = 2 * S
    kept8, working8 = int8_input_bytes(QWEN3_8B, recompute, tokens)
    assert (kept8 > 0) is (recompute == "none") and (working8 > 0) is (recompute == "full")
    kept = 36 * hf_layer_bytes(small, QWEN3_8B, S) * tokens + kept8
    working = hf_layer_bytes(large, QWEN3_8B, S) * tokens + working8
    logits = 2.0 * tokens * QWEN3_8B.vocab
    assert working > logits
    assert hf_step_bytes(activations, QWEN3_8B, "full", recompute, S, 2, int8_base=True) == (
        kept + working - logits, logits)


def test_a_moe_layers_activations_count_the_routed_and_shared_experts_ffn():
    """memory.py layer_activation_bytes: a MoE layer's F is the expert MLP size x (top-k + shared experts) (DeepSeek-V3:
    2048 x (8 + 1)), the rest as Korthikanti's table 2."""
    m = DEEPSEEK
    ffn = 2048 * (8 + 1)
    assert (m.moe_ffn, m.topk, m.shared_experts, m.mlp_matrices) == (2048, 8, 1, 3)
    outside = 8.0 * S * m.hidden
    inside = 2.0 * S * (2 * m.q_dim + 2 * m.kv_dim + 3 * ffn)
    assert layer_activation_bytes(m, S, 1, 1, False, "none") == (outside + inside, 0.0)


def test_the_last_stage_holds_the_logits_of_its_cp_share_and_the_mtp_layer():
    """memory.py _megatron_stage and _forward_stage: the last stage holds fp32 logits, (1 + MTP layers) x seq / CP x
    micro batch x vocab x 4 bytes over TP; the others none; CP splits the sequence the activations see too."""
    layout = shape(tp=2, pp=2, cp=2, micro_batch_size=2, num_layer_list=(31, 30), mtp_layers=1, global_batch_size=8)
    logits = (1 + 1) * (S // 2) * 2 * DEEPSEEK.vocab * 4.0 / 2
    for trains in (True, False):
        first, last = megatron_stages(MemoryJob(DEEPSEEK, "full", "megatron-distopt", S, 0, 3.0), layout) if trains \
            else [memory._forward_stage(MemoryJob(DEEPSEEK, "full", "megatron-distopt", S, 0, 3.0, trains=False),
                                        layout, stage) for stage in (0, 1)]
        assert (first.logits, last.logits * GIB) == (0.0, logits)
    forward = memory._forward_stage(MemoryJob(DEEPSEEK, "full", "megatron-distopt", S, 0, 3.0, trains=False), layout, 0)
    assert forward.activations * GIB == layer_activation_bytes(DEEPSEEK, S // 2, 2, 2, False, "none")[0]


@pytest.mark.parametrize("scheme,weight_bytes", [("megatron-distopt", 2.0), ("megatron-fp32", 4.0)])
def test_lora_on_megatron_holds_the_frozen_weights_and_16_bytes_an_adapter_parameter(scheme, weight_bytes):
    """memory.py _megatron_stage: LoRA keeps the base in bf16 (fp32 on MindFormers' megatron-fp32) without grads or
    states; each adapter parameter, split over TP, holds fp32 weight, grad and Adam's two moments (16 bytes)."""
    layout = shape(tp=2)
    [mem] = megatron_stages(MemoryJob(QWEN3_8B, "lora", scheme, S, 8, 3.0), layout)
    dense, experts, layers, _ = stage_params(QWEN3_8B, layout, 0, True)
    assert (mem.weights * GIB, mem.gradients, mem.optimizer) == ((dense + experts) * weight_bytes, 0.0, 0.0)
    assert mem.adapters * GIB == 36 * QWEN3_8B.lora_params_per_layer(8) / 2 * 16.0
    [full] = megatron_stages(MemoryJob(QWEN3_8B, "full", scheme, S, 0, 3.0), layout)
    assert full.adapters == 0.0


def test_the_parallel_optimizer_splits_dense_states_over_dp_times_cp():
    """memory.py optimizer_shard_groups: a TP-split dense weight is the same slice on DP x CP cards (-1: the whole
    group); a shard size caps it where it divides it."""
    layout = shape(cp=2)  # DP 4
    assert memory.optimizer_shard_groups(layout, -1, True)[0] == 8
    assert memory.optimizer_shard_groups(layout, 2, True)[0] == 2


def test_zero3_offload_keeps_the_live_parameters_and_a_sub_group_on_the_device():
    """memory.py _deepspeed with offload (upstream's ds_z3_offload_config.json): bf16 live parameters up to
    stage3_max_live_parameters (1e9) plus the largest layer gathered (4 bytes a parameter), fp32 gradients and
    parameters of one sub_group_size (1e9) group on their way to the CPU optimizer."""
    job = MemoryJob(QWEN3_8B, "full", "deepspeed", S, 0, 2.5, activations=QWEN3)
    mem = estimate(job, shape(zero_stage=3, offload=True, global_batch_size=8))
    assert QWEN3_8B.params > 1_000_000_000
    assert mem.weights * GIB == 2.0 * 1_000_000_000 + 4.0 * QWEN3_8B.largest_layer_params
    assert mem.gradients * GIB == mem.optimizer * GIB == 4.0 * 1_000_000_000


def test_lora_under_zero3_shards_the_frozen_base_and_gathers_the_largest_layer():
    """memory.py _deepspeed: ZeRO-3 shards the bf16 base over the world and gathers one layer in full (4 bytes a
    parameter of the largest layer, as DeepSpeed's estimate_zero3_model_states_mem_needs)."""
    assert deepspeed("lora", zero=3).weights * GIB == 2.0 * QWEN3_8B.params / 8 + 4.0 * QWEN3_8B.largest_layer_params


def test_a_full_fine_tune_of_a_vision_model_trains_all_but_the_frozen_vision_tower():
    """memory.py _trained: LLaMA-Factory freezes the vision tower by default (freeze_vision_tower): its weights, no
    gradients or optimizer states (ZeRO-2 here: 4 + 12 bytes a trained parameter over 8 cards)."""
    model = TABLES.models["qwen2vl-7b"]
    job = MemoryJob(model, "full", "deepspeed", S, 0, 2.5, activations=TABLES.frameworks["llama-factory"]
                    .activations["qwen2"])
    mem = estimate(job, shape(zero_stage=2, global_batch_size=8, num_layer_list=(model.layers,)))
    trained = model.params - 675_000_000
    assert (mem.gradients * GIB, mem.optimizer * GIB) == (4.0 * trained / 8, 12.0 * trained / 8)


@pytest.mark.parametrize("bits,int8", [(8, True), (4, False)])
def test_only_an_8_bit_base_keeps_its_linear_inputs_in_the_step(bits, int8):
    """memory.py _deepspeed: bitsandbytes' int8 matmul keeps its bf16 input (int8_input_bytes); the 4-bit one does
    not."""
    job = MemoryJob(QWEN3_8B, "qlora", "deepspeed", S, 8, 2.5, activations=QWEN3, quant_bits=bits)
    mem = estimate(job, shape(zero_stage=2, global_batch_size=8))
    assert mem.activations * GIB == hf_step_bytes(QWEN3, QWEN3_8B, "qlora", "none", S, 1, int8_base=int8)[0]
    assert int8_input_bytes(QWEN3_8B, "none", S)[0] > 0


def test_the_last_stage_stands_apart_even_where_it_holds_what_the_first_does():
    """memory.py distinct_stages: qwen3-8b's 4 stages of 9 layers: the first and the last hold alike (the same
    layers' parameters, one embedding matrix each), but the last holds the logits: stages 0, 1 and 3 are estimated."""
    layout = shape(pp=4, num_layer_list=(9,) * 4)
    assert _stage_layers(QWEN3_8B, (9,) * 4, 0, 0) == _stage_layers(QWEN3_8B, (9,) * 4, 0, 3)
    assert memory.distinct_stages(QWEN3_8B, layout) == (0, 1, 3)


def test_a_tied_model_holds_its_one_embedding_matrix_on_each_end_of_a_pipeline():
    """memory.py _stage_layers: a tied model (llama3.2-1b) on one stage holds the shared matrix once; split over
    stages, the first holds the input embedding and the last its own copy for the output layer."""
    model = TABLES.models["llama3.2-1b"]
    assert model.tied
    assert _stage_layers(model, (model.layers,), 0, 0)[1] == 1
    half = model.layers // 2
    stages = (half, model.layers - half)
    assert (_stage_layers(model, stages, 0, 0)[1], _stage_layers(model, stages, 0, 1)[1]) == (1, 1)


def test_the_deepspeed_scheme_refuses_a_job_without_measured_activations():
    job = MemoryJob(QWEN3_8B, "full", "deepspeed", S, 0, 2.5)
    with pytest.raises(ValueError, match="the deepspeed scheme counts measured activations"):
        estimate(job, shape(zero_stage=2))


def test_a_full_fine_tune_in_fp32_holds_16_bytes_a_parameter():
    """memory.py _megatron_stage, megatron-fp32 (MindFormers without the parallel optimizer): fp32 weights (4) and
    gradients (4) and Adam's two fp32 moments (8), none sharded."""
    layout = shape(tp=2)
    [mem] = megatron_stages(MemoryJob(QWEN3_8B, "full", "megatron-fp32", S, 0, 3.0), layout)
    dense, experts, _, _ = stage_params(QWEN3_8B, layout, 0, True)
    params = dense + experts
    assert (mem.weights * GIB, mem.gradients * GIB, mem.optimizer * GIB) == (params * 4.0, params * 4.0, params * 8.0)
