"""The memory model: DeepSpeed's own estimate, and the directions every knob must move the total."""

from __future__ import annotations

from dataclasses import replace

import pytest

from generator.memory import GIB, MemoryJob, estimate, layer_activation_bytes
from generator.parallel import Parallel
from generator.tables import load_tables

MODELS = load_tables().models
QWEN3 = load_tables().frameworks["llama-factory"].activations["qwen3"]  # measured (hf_activations.yaml)


def shape(**kw):
    base = dict(cards=8, cards_per_node=8, global_batch_size=kw.get("cards", 8) * 16, num_layer_list=(36,))
    base.update(kw)
    return Parallel(**base)


def test_zero3_model_states_match_deepspeed_worked_example():
    # Reference llamafactory_deepspeed.md s5: N = 8.19e9, L = 151936 x 4096, 2 x 8 devices, no offload:
    # DeepSpeed's estimate_zero3_model_states_mem_needs gives 10.90 GiB per device.
    qwen3_8b = MODELS["qwen3-8b"]
    mem = estimate(MemoryJob(qwen3_8b, "full", "deepspeed", 4096, 8, 0.0, activations=QWEN3),
                   shape(cards=16, zero_stage=3))
    states = mem.weights + mem.gradients + mem.optimizer
    assert states == pytest.approx(10.90, abs=0.15)


def test_recompute_and_sequence_parallel_shrink_activations():
    model = MODELS["qwen3-32b"]
    none, _ = layer_activation_bytes(model, 4096, 1, 4, False, "none")
    sel, _ = layer_activation_bytes(model, 4096, 1, 4, False, "selective")
    full, working = layer_activation_bytes(model, 4096, 1, 4, False, "full")
    sp, _ = layer_activation_bytes(model, 4096, 1, 4, True, "none")
    assert full < sel < none and sp < none
    assert full == 2 * 4096 * model.hidden  # only the layer input is kept
    assert working == none  # one layer is rebuilt in full during backward


def test_tensor_and_pipeline_parallel_shrink_weights():
    model = MODELS["qwen3-32b"]
    job = MemoryJob(model, "full", "megatron-distopt", 4096, 16, 3.0)
    one = estimate(job, shape(cards=16, num_layer_list=(64,)))
    tp4 = estimate(job, shape(cards=16, tp=4, num_layer_list=(64,)))
    pp4 = estimate(job, shape(cards=16, pp=4, num_layer_list=(16,) * 4))
    assert tp4.weights == pytest.approx(one.weights / 4, rel=0.01)
    assert pp4.weights < one.weights / 3


def test_distributed_optimizer_shards_over_dp():
    model = MODELS["qwen3-8b"]
    job = MemoryJob(model, "full", "megatron-distopt", 4096, 16, 3.0)
    dp1 = estimate(job, shape(cards=8, tp=8))
    dp8 = estimate(job, shape(cards=64, tp=8))
    assert dp8.optimizer == pytest.approx(dp1.optimizer / 8, rel=0.01)
    assert dp8.weights == pytest.approx(dp1.weights)


def test_distributed_optimizer_shards_over_dp_and_cp():
    # Megatron core_v0.12.1 builds the dense distributed optimizer over get_data_parallel_group(
    # with_context_parallel=True) (optimizer/__init__.py l. 550-552): CP ranks hold different shards too.
    model = MODELS["qwen2.5-14b"]
    layers = (model.layers,)
    job = MemoryJob(model, "full", "megatron-distopt", 32768, 16, 3.0)
    cp4 = estimate(job, shape(cards=16, tp=4, cp=4, num_layer_list=layers))
    dp4 = estimate(job, shape(cards=16, tp=4, num_layer_list=layers))
    assert cp4.optimizer == pytest.approx(dp4.optimizer)
    assert cp4.optimizer * GIB == pytest.approx(12.0 * model.params / 16, rel=0.01)


def test_lora_keeps_frozen_weights_only():
    model = MODELS["qwen3-32b"]
    layout = shape(cards=8, tp=8, num_layer_list=(64,))
    full = estimate(MemoryJob(model, "full", "megatron-fp32", 4096, 8, 3.0), layout)
    lora = estimate(MemoryJob(model, "lora", "megatron-fp32", 4096, 8, 3.0), layout)
    assert lora.gradients == 0 and lora.optimizer == 0 and 0 < lora.adapters < 1
    assert lora.weights == pytest.approx(full.weights)  # MindFormers keeps fp32 params (params_dtype float32)


def test_first_pipeline_stage_holds_pp_micro_batches():
    model = MODELS["qwen3-32b"]
    mem = estimate(MemoryJob(model, "full", "megatron-fp32", 4096, 8, 3.0),
                   shape(cards=16, tp=4, pp=4, num_layer_list=(16,) * 4))
    kept, working = layer_activation_bytes(model, 4096, 1, 4, False, "none")
    assert mem.stage == 0
    assert mem.activations == pytest.approx((16 * kept * 4 + working) / GIB)


def test_offload_moves_states_off_the_card():
    model = MODELS["qwen3-32b"]
    job = MemoryJob(model, "full", "deepspeed", 4096, 8, 3.0, activations=QWEN3)
    on = estimate(job, shape(cards=8, zero_stage=3))
    off = estimate(job, shape(cards=8, zero_stage=3, offload=True))
    assert off.total < on.total - 50


def test_seed_001_lora_without_sharding_on_one_910b_card():
    # Seed 001 (910B, 64 GB): a 14B LoRA run without DeepSpeed fits one card; a 32B one does not (bf16 weights alone
    # exceed the card); 32B LoRA under ZeRO-3 fits one 8-card node.
    from helpers import make_spec

    from generator.resolve import resolve
    tables = load_tables()
    # force: the table's minimum for this row is 4 cards (low confidence); the memory question is one card's.
    fits = resolve(make_spec(model="qwen2.5-14b", method="lora", cards=1, frameworks=["llama-factory"],
                             global_batch_size=8), tables, force=True).frameworks["llama-factory"].layout
    assert fits.zero_stage is None and fits.fits
    big = resolve(make_spec(model="qwen2.5-32b", method="lora", cards=1, frameworks=["llama-factory"],
                            global_batch_size=8, layout={"llama-factory": {"micro_batch_size": 1}}),
                  tables, force=True).frameworks["llama-factory"].layout
    assert big.memory.total > big.usable_gb
    node = resolve(make_spec(model="qwen2.5-32b", method="lora", cards=8, frameworks=["llama-factory"]),
                   tables).frameworks["llama-factory"].layout
    assert node.zero_stage == 3 and node.fits


@pytest.mark.parametrize("zero_stage,quant,kbit_fp32,per_logit", [
    (None, None, False, 12.0),  # one card without DeepSpeed: the Trainer's autocast computes the loss in fp32
    (3, None, False, 6.0),      # DeepSpeed's bf16 engine: Baichuan 2's own loss stays in bf16
    (3, 4, False, 6.0),         # LLaMA-Factory 0.9.5 keeps a k-bit base's output head in bf16
    (3, 4, True, 12.0)])        # a stack that upcasts it (seed 002's) computes the loss in fp32
def test_the_loss_runs_in_fp32_under_autocast_or_an_upcast_head(zero_stage, quant, kbit_fp32, per_logit):
    baichuan = load_tables().frameworks["llama-factory"].activations["baichuan"]
    model = MODELS["baichuan2-7b"]
    mem = estimate(MemoryJob(model, "qlora" if quant else "lora", "deepspeed", 1024, 8, 0.0, quant, baichuan,
                             kbit_fp32),
                   shape(cards=1, num_layer_list=(32,), zero_stage=zero_stage, recompute="full"))
    assert mem.logits * GIB == pytest.approx(per_logit * 1024 * model.vocab)  # one sequence of 1024 tokens


def _deepseek_v3_layer_params(dense: bool) -> int:
    """One DeepSeek-V3 decoder layer's non-expert parameters from its HuggingFace config.json (hidden 7168,
    q_lora_rank 1536, kv_lora_rank 512, 128 heads, qk_nope 128 + qk_rope 64, v 128, intermediate 18432,
    moe_intermediate 2048, 256 routed + 1 shared experts) and modeling_deepseek.py's modules."""
    h, heads = 7168, 128
    attention = (h * 1536 + 1536 + 1536 * heads * 192 + h * (512 + 64) + 512 + 512 * heads * (128 + 128)
                 + heads * 128 * h)
    mlp = 3 * h * 18432 if dense else h * 256 + 256 + 3 * h * 2048  # dense MLP, or router (+ bias) and shared expert
    return attention + mlp + 2 * h  # input and post-attention norms


def test_deepseek_dense_layers_weigh_on_the_stage_that_holds_them():
    # Issue 23 item 15: the non-expert parameters were averaged over all 61 layers (251 M each), though the 3
    # leading dense layers hold about 583 M each, so the first stage was under-estimated.
    from generator.memory import _megatron_stage
    model = MODELS["deepseek-v3"]
    for index, dense in ((0, True), (2, True), (3, False), (60, False)):
        assert model.layer_params_at(index) == pytest.approx(_deepseek_v3_layer_params(dense), rel=0.005)
    shape = Parallel(cards=64, cards_per_node=8, tp=1, pp=8, ep=8, micro_batch_size=1, global_batch_size=64,
                     recompute="full", num_layer_list=(7, 8, 8, 8, 8, 8, 7, 7), mtp_layers=1)
    first = _megatron_stage(MemoryJob(model, "lora", "megatron-distopt", 4096, 8, 3.0), shape, 0)
    held = 3 * _deepseek_v3_layer_params(True) + 4 * _deepseek_v3_layer_params(False)
    experts = 4 * model.expert_params_per_layer / 8
    # LoRA keeps the bf16 base: 2 bytes per parameter held (layers, the stage's share of experts, the embedding).
    want = 2.0 * (held + experts + model.embedding_params) / GIB
    assert first.weights == pytest.approx(want, rel=0.005)


@pytest.mark.parametrize("dp,ep,shard,want", [
    (32, 128, 256, (32, 2)),    # 256 divides neither group: it does not take effect (context.py l. 1099-1105)
    (32, 128, -1, (32, 2)),     # -1: each parameter's whole data-parallel group
    (32, 128, 8, (8, 2)),       # 8 divides DP 32: groups of 8; not the experts' 2
    (4, 32, 256, (4, 1)),       # upstream's 256-card layout: dp 4, ep 32 = dp x tp, experts not repeated
])
def test_parallel_optimizer_groups(dp, ep, shard, want):
    from generator.memory import optimizer_shard_groups
    tp, pp = 8, 2
    layout = Parallel(cards=dp * tp * pp, cards_per_node=8, tp=tp, pp=pp, ep=ep, global_batch_size=dp * 4,
                      num_layer_list=(31, 30))
    assert optimizer_shard_groups(layout, shard, expert_tp=False) == want  # MindFormers: TP does not split experts


def test_mindspore_parallel_optimizer_splits_only_the_states():
    # Issue 23 item 13: upstream's DeepSeek-V3 671B recipe turns MindSpore's parallel optimizer on; the fp32 AdamW
    # states (8 B per parameter) of the stage's dense weights split over DP, the experts' over DP x TP / EP.
    from generator.memory import _megatron_stage
    model = MODELS["deepseek-v3"]
    layout = Parallel(cards=512, cards_per_node=8, tp=8, pp=2, ep=128, micro_batch_size=1, global_batch_size=128,
                      num_layer_list=(31, 30), mtp_layers=1)
    job = MemoryJob(model, "full", "megatron-fp32", 4096, 8, 3.0, expert_tp=False)  # MindFormers' expert layout
    on = _megatron_stage(replace(job, optimizer_shard=256), layout, 0)
    off = _megatron_stage(job, layout, 0)
    # Stage 0 holds layers 0-30 (3 dense, 28 MoE) and the embedding, TP-split; 28 layers of experts over EP 128.
    dense = (3 * _deepseek_v3_layer_params(True) + 28 * _deepseek_v3_layer_params(False)
             + model.embedding_params) / 8
    experts = 28 * model.expert_params_per_layer / 128
    assert on.optimizer * GIB == pytest.approx(8.0 * (dense / 32 + experts / 2), rel=0.005)
    assert off.optimizer * GIB == pytest.approx(8.0 * (dense + experts), rel=0.005)
    # Weights stay gathered from forward to backward (optimizer_level level1), gradients whole.
    assert (on.weights, on.gradients) == (off.weights, off.gradients)
