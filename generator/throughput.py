"""Throughput per card, training time, and the card count a time budget needs.

Seed 000 writes Time = Tok / (TPS * N) * eff and N = Tok / (Time * TPS) * eff, which makes a worse scaling
efficiency need FEWER cards. We use the physically right forms, efficiency as a divisor:
    Time = Tok / (TPS * N * eff)        N = Tok / (Time * TPS * eff)
(shared/spec/min_cards_notes.md records the same correction).

TPS, unless the spec measured it, comes from one of two models; the framework row names which:
- "step" (Megatron-style frameworks on Ascend): the time of one optimizer step of the chosen layout, from the
  work each card does and the rates it does it at: matrix multiplies at one efficiency fitted on ONE seed-004
  row, fused attention at the measured efficiency of the attention kernel for the length each call sees, the
  tensor-parallel collectives of sequence parallelism at the node's link rate, expert all-to-alls at the planned
  EP, pipeline sends between stages, the 1F1B pipeline bubble at the planned micro-batch count, and the part of the
  distributed optimizer's gradient reduce-scatter and parameter all-gather that upstream's overlap flags do not
  hide (see `_data_parallel_sync`). Context-parallel KV exchange runs overlapped with attention in the upstream
  recipes (--use-cp-send-recv-overlap) and is left, with what else the model does not cost, to the scaling
  efficiency (hardware.yaml scaling_efficiency, or the spec's).
- "mfu" (LLaMA-Factory, GPUs): an assumed model-FLOPs utilisation x peak / FLOPs per token.
Model FLOPs follow Megatron's count (the one MindSpeed-LLM logs and seed 004's MFU uses): 6 x the parameters a
token multiplies through (input embedding lookup excluded, output projection included; 4x for adapters, which
compute no weight gradients of the frozen base) + 12 L q s for attention, whatever the mask skips.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from .api.frozen import frozen
from .memory import distinct_stages, expert_data_parallel, stage_params
from .parallel import Parallel, split_layers
from .tables import VARIANT_OF, Framework, Hardware, Model, trains_adapters

T = TypeVar("T")

BF16_BYTES = 2
# FlashAttention-2 (Dao 2023, arXiv:2307.08691, abstract and s4.1): the backward pass reaches 63% of A100 peak where
# the forward reaches 73%. No measurement of Ascend's backward kernel is public, so its forward rate scales the same.
FA_BACKWARD_RATIO = 0.63 / 0.73


def flops_per_token(model: Model, method: str, seq_len: int) -> float:
    """Model FLOPs per trained token (Megatron's count): 6 x matmul parameters (4 x for adapters) + 12 L q s."""
    return weight_factor(method) * model.matmul_params + attention_flops_per_token(model, seq_len)


def weight_factor(method: str) -> float:
    """Forward + backward FLOPs per weight per token: 6 (2 forward, 2 input grads, 2 weight grads), 4 for adapters."""
    return 4.0 if trains_adapters(method) else 6.0


def attention_flops_per_token(model: Model, seq_len: int) -> float:
    """QK^T and PV, forward and backward, for every position (Megatron counts the full square)."""
    return 12.0 * model.layers * model.q_dim * seq_len


@frozen
class StepTime:
    """Seconds per optimizer step on one card, by cause."""

    gemm: float
    attention: float
    tp_comm: float
    ep_comm: float
    pp_comm: float
    dp_comm: float
    bubble: float
    tokens_per_card_s: float
    mfu: float  # model FLOPs / (seconds x peak)

    @property
    def total(self) -> float:
        return self.gemm + self.attention + self.tp_comm + self.ep_comm + self.pp_comm + self.dp_comm + self.bubble

    def shares(self) -> dict[str, float]:
        parts = {"matmul": self.gemm, "attention": self.attention, "tensor-parallel communication": self.tp_comm,
                 "expert all-to-all": self.ep_comm, "pipeline sends": self.pp_comm,
                 "data-parallel gradient sync": self.dp_comm, "pipeline bubble": self.bubble}
        return {k: v / self.total for k, v in parts.items() if v > 0}


def _step_input(hardware: Hardware, key: str, value: T | None) -> T:
    """A hardware fact only the step-time model reads (optional in hardware.yaml; the tables check that every row a
    step-model framework runs on has it)."""
    if value is None:
        raise ValueError(f"hardware.yaml {hardware.name}: the step-time model needs {key}")
    return value


def attention_efficiency(hardware: Hardware, length: int) -> float:
    """The fused attention kernel's forward efficiency at `length`, interpolated in log2(length) between the
    measured lengths (clamped at both ends), then blended with the backward pass (twice the forward's work)."""
    measured = _step_input(hardware, "attention_efficiency", hardware.attention_efficiency)
    return _attention_efficiency(tuple(measured.items()), length)


@lru_cache(maxsize=1 << 10)
def _attention_efficiency(measured: tuple[tuple[Any, Any], ...], length: int) -> float:
    """attention_efficiency over the curve's (length, efficiency) items, once per curve and length: the step model
    asks at every layout it rates (a budget search rates hundreds at a few lengths)."""
    curve = sorted((int(k), float(v)) for k, v in measured)
    x = math.log2(max(length, 1))
    forward = curve[0][1] if x <= math.log2(curve[0][0]) else curve[-1][1]
    for (l0, e0), (l1, e1) in zip(curve, curve[1:]):
        if math.log2(l0) <= x <= math.log2(l1):
            forward = e0 + (e1 - e0) * (x - math.log2(l0)) / (math.log2(l1) - math.log2(l0))
            break
    return 3.0 * forward / (1.0 + 2.0 / FA_BACKWARD_RATIO)


# Megatron core_v0.12.1 facts the step model reads (NVIDIA/Megatron-LM at tag core_v0.12.1):
# - rank order "tp-cp-ep-dp-pp" (megatron/core/parallel_state.py l. 445): a TP group is the closest ranks, then CP,
#   then DP; the stages of one pipeline are TP x CP x DP ranks apart, so a pipeline leaves the node once the job
#   does, and a DP (x CP) group stays inside a node while TP x CP x DP fits one. Experts use the same order with
#   expert TP = TP (l. 694-695) and expert DP = the rest (l. 699), so an expert group spans TP x EP ranks.
# - bf16 training reduces gradients in fp32 (megatron/training/arguments.py l. 588-596) and the distributed optimizer
#   all-gathers bf16 parameters: 4 + 2 bytes per parameter through each ring.
GRAD_BYTES = 4
# - Gradient buckets of max(40 M, 1 M x DP) parameters (megatron/core/distributed/distributed_data_parallel.py
#   l. 56-59): with --overlap-grad-reduce each bucket is reduced as the backward fills it.
BUCKET_PARAMS = 40_000_000
BUCKET_PARAMS_PER_DP = 1_000_000


def step_time(model: Model, method: str, seq_len: int, par: Parallel, hardware: Hardware,
              gemm_efficiency: float, expert_tp: bool = True) -> StepTime:
    """One optimizer step of `par` on `hardware`, per card; `expert_tp`: whether TP splits the routed experts too
    (the framework's rule, frameworks.yaml expert_tp; memory.py lays the experts out by the same rule)."""
    peak = hardware.peak_tflops_bf16 * 1e12
    link = _step_input(hardware, "link_gb_s", hardware.link_gb_s) * 1e9
    scaleout = _step_input(hardware, "scaleout_gb_s", hardware.scaleout_gb_s) * 1e9
    tokens = par.micro_batch_size * seq_len  # one micro batch
    activation = tokens / par.cp * model.hidden * BF16_BYTES  # one full activation tensor of the micro batch
    # The slowest pipeline stage sets the pace: the one with the most layers, or the last, which also runs the
    # output layer (Megatron builds it on the post-process stage: megatron/core/models/gpt/gpt_model.py l. 180-197);
    # a large vocabulary on a small model weighs several layers there (Qwen3-30B-A3B: about 5 of its layers).
    counts = par.num_layer_list or (model.layers / par.pp,) * par.pp
    shapes = [(counts[-1], True)] + ([(max(counts[:-1]), False)] if par.pp > 1 else [])
    stage = max(_stage(model, method, seq_len, activation, n, output, par, hardware, gemm_efficiency, link, scaleout)
                for n, output in shapes)
    gemm, attention, tp_comm, ep_comm = stage.gemm, stage.attention, stage.tp_comm, stage.ep_comm
    pp_comm = 0.0
    if par.pp > 1 and par.vpp == 1:
        # 1F1B: each micro batch a stage sends its output forward and the input's gradient back, blocking (Megatron
        # overlaps pipeline sends with compute only in the interleaved schedule: arguments.py l. 468-470 turn
        # overlap_p2p_comm off without virtual stages). The tensor is split by CP, and by TP under sequence
        # parallelism (megatron/core/pipeline_parallel/schedules.py get_tensor_shapes, l. 1619-1624).
        rate = link if par.cards <= par.cards_per_node else scaleout
        pp_comm = 2 * activation / (par.tp if par.sequence_parallel else 1) / rate
    micro = par.grad_accum
    bubble_share = (par.pp - 1) / (micro * par.vpp)  # 1F1B: (pp - 1) idle slots per step, fewer with VPP
    per_micro = gemm + attention + tp_comm + ep_comm + pp_comm
    dp_comm = 0.0 if trains_adapters(method) else _data_parallel_sync(
        model, par, expert_tp, link, scaleout, forward=stage.forward, backward=gemm + attention - stage.forward)
    step_tokens_per_card = par.global_batch_size * seq_len / par.cards
    total = per_micro * micro * (1 + bubble_share) + dp_comm
    tps = step_tokens_per_card / total
    return StepTime(gemm=gemm * micro, attention=attention * micro, tp_comm=tp_comm * micro, ep_comm=ep_comm * micro,
                    pp_comm=pp_comm * micro, dp_comm=dp_comm, bubble=per_micro * micro * bubble_share,
                    tokens_per_card_s=tps, mfu=tps * flops_per_token(model, method, seq_len) / peak)


class _StageTime(NamedTuple):
    """One pipeline stage's seconds per micro batch (ordered by their sum: the slowest stage compares highest). A
    tuple: the step model makes two for each of the hundreds of layouts a search rates."""

    total: float
    gemm: float
    attention: float
    tp_comm: float
    ep_comm: float
    forward: float  # the compute of its forward pass alone


def _stage(model: Model, method: str, seq_len: int, activation: float, layers: float, output: bool, par: Parallel,
           hardware: Hardware, gemm_efficiency: float, link: float, scaleout: float) -> _StageTime:
    """A stage of `layers` decoder layers (and the output layer when `output`), per micro batch, on one card."""
    peak = hardware.peak_tflops_bf16 * 1e12
    factor = weight_factor(method)
    share = layers / model.layers
    per_card = par.micro_batch_size * seq_len / (par.tp * par.cp)  # tokens a card of the stage works on per micro batch
    matmul = share * (model.matmul_params - model.embedding_params) + (model.embedding_params if output else 0)
    gemm_forward = per_card * 2.0 * matmul / (gemm_efficiency * peak)
    gemm = gemm_forward * factor / 2.0 * (1 + par.forward_twice * 2.0 / factor)
    attention_work = share * attention_flops_per_token(model, seq_len) * (0.5 if par.causal else 1.0)
    # A third of attention's work is its forward (4 of 12 L q s).
    attention_forward = per_card * attention_work / 3 / (attention_efficiency(hardware, par.attention_call_len(seq_len))
                                                         * peak)
    attention = attention_forward * (3 + par.forward_twice)
    moe_layers = model.moe_layers * share
    tp_comm = 0.0
    if par.tp > 1:
        # Sequence parallelism: all-gather before and reduce-scatter after attention and the MLP, mirrored in the
        # backward; recompute runs the forward ones again. Expert MLPs sharded by TP move top-k copies of each token.
        pairs = layers + (layers - moe_layers) + moe_layers * max(model.topk, 1)
        collectives = 2 * pairs * (2 + par.forward_twice)
        tp_comm = collectives * activation * (par.tp - 1) / par.tp / link
    ep_comm = 0.0
    if par.ep > 1 and model.is_moe:
        # Dispatch and combine, forward and backward, each moving top-k copies of this card's tokens; full
        # recompute runs the forward pair again: Megatron core_v0.12.1 re-runs each layer's whole forward in the
        # backward (megatron/core/transformer/transformer_block.py l. 315-345, _checkpointed_forward), and a MoE
        # layer's forward holds the dispatch and combine (moe/moe_layer.py l. 141-159: token_permutation,
        # token_unpermutation).
        rate = link if par.tp * par.ep <= par.cards_per_node else scaleout
        ep_comm = moe_layers * (4 + 2 * par.forward_twice) * activation / par.tp * model.topk * (par.ep - 1) / par.ep \
            / rate
    return _StageTime(gemm + attention + tp_comm + ep_comm, gemm, attention, tp_comm, ep_comm,
                      gemm_forward + attention_forward)


def _data_parallel_sync(model: Model, par: Parallel, expert_tp: bool, link: float, scaleout: float, forward: float,
                        backward: float) -> float:
    """Seconds per step of the distributed optimizer's gradient reduce-scatter and parameter all-gather that compute
    does not hide, on the slowest stage (the MindSpeed-LLM recipes run --use-distributed-optimizer
    --overlap-grad-reduce --overlap-param-gather).

    What overlap hides, from Megatron core_v0.12.1: gradients are reduced only in the step's last micro batch (the
    schedules run the others under no_sync and enable grad sync for the last backward: schedules.py l. 1759-1772,
    1926-1930, 1946-1955), so the reduce-scatter overlaps ONE micro batch's backward, and the bucket holding the
    first layers starts only when that backward ends (l. 1968-1970 launch the rest). With --overlap-param-gather the
    next step's all-gather runs bucket by bucket ahead of ONE micro batch's forward (distributed_data_parallel.py
    l. 359-390, its forward pre-hooks), and the first bucket is waited for before that forward starts. So the exposed
    part is what exceeds one micro batch's backward (forward) compute, and at least one bucket of each. Each stage
    syncs what it holds (memory.stage_params: the embedding on the first stage, the output layer on the last, the
    experts split by the framework's expert TP x EP); the step waits for the slowest."""
    group = par.dp * par.cp  # gradients of dense weights are reduced over DP x CP
    if group == 1:
        return 0.0
    expert_group = expert_data_parallel(par, expert_tp)  # the ranks holding the same expert slice
    rate = link if par.tp * group <= par.cards_per_node else scaleout

    def exposed(dense: float, experts: float) -> float:
        moved = dense * (group - 1) / group + experts * (expert_group - 1) / expert_group
        bucket = min(max(BUCKET_PARAMS, BUCKET_PARAMS_PER_DP * par.dp), dense + experts) * (group - 1) / group
        reduce, gather = moved * GRAD_BYTES / rate, moved * BF16_BYTES / rate
        last_reduce, first_gather = bucket * GRAD_BYTES / rate, bucket * BF16_BYTES / rate
        return max(last_reduce, reduce - backward) + max(first_gather, gather - forward)
    return max(exposed(dense, experts) for dense, experts in _held(model, par, expert_tp))


# _held's answers by what they depend on (not DP, the batch or the card count, which a budget search varies): a
# search rates the same structure at every count it tries. Cleared when full.
_HELD: dict[tuple, frozenset[tuple[float, float]]] = {}
MAX_HELD = 1 << 12


def _held(model: Model, par: Parallel, expert_tp: bool) -> frozenset[tuple[float, float]]:
    """The (dense, expert) parameters a card of each of `par`'s stages holds (stages that hold alike: once)."""
    layers = par.num_layer_list or split_layers(model.layers, par.pp, par.mtp_layers)
    key = (model, layers, par.mtp_layers, par.tp, par.ep, expert_tp)
    found = _HELD.get(key)
    if found is None:
        if len(_HELD) >= MAX_HELD:
            _HELD.clear()
        if par.num_layer_list is None:  # not placed (a layout under search): the search's own split
            par = replace(par, num_layer_list=layers)
        found = _HELD[key] = frozenset(stage_params(model, par, stage, expert_tp)[:2]
                                       for stage in distinct_stages(model, par))
    return found


# Where the rate is estimated, the time is a range (seed 000: the formula's time "is a range, for reference only");
# its upper end assumes the slowest rate the estimate's own evidence allows, as a share of the estimate:
# - the step model predicts every seed-004 row within 15% of its measured MFU (tests/test_throughput_seed004.py);
STEP_MODEL_SLOW = 0.85
# - an assumed MFU is one figure for every model and size, where seed 004's measured MFUs of one framework
#   (MindSpeed-LLM pretraining) run from 69.0% (LLaMA2-7B, 1x8) down to 31.7% (Mixtral-8x7B, 8x8).
ASSUMED_MFU_SLOW = 0.317 / 0.690


@frozen
class Throughput:
    """A rate in tokens/s per card, where it comes from, and how far the truth may be from it."""

    tokens_per_card_s: float
    source: str
    is_estimate: bool
    mfu: float | None = None
    shares: dict | None = None  # step model: share of the step time by cause
    spread: float = 1.0  # how many times faster or slower the truth may be (a calibration's spread; 1: measured)
    slow_share: float = 1.0  # the share of the rate the time range's upper end assumes (1: no range)


def uses_step_model(framework: Framework, hardware: Hardware) -> bool:
    return framework.throughput["model"] == "step" and hardware.attention_efficiency is not None


def multi_node_efficiency(hardware: Hardware, nodes: int) -> float:
    """The share of the estimated rate a job on `nodes` nodes keeps. Up to the node count it was measured at, the
    hardware row's measured factor; beyond it, the same loss again per doubling of nodes (the measured factor to the
    power log2(nodes) / log2(measured nodes)), so that the per-card rate never rises with scale (a constant factor
    let a 256-card plan claim more MFU per card than seed 004 measured on 32)."""
    if nodes <= 1:
        return 1.0
    measured_at = hardware.scaling_measured_cards
    measured_nodes = measured_at // hardware.cards_per_node if measured_at is not None else 0
    if measured_nodes <= 1 or nodes <= measured_nodes:
        return hardware.scaling_efficiency
    return float(hardware.scaling_efficiency ** (math.log2(nodes) / math.log2(measured_nodes)))


def throughput(model: Model, method: str, seq_len: int, framework: Framework, hardware: Hardware,
               measured: float | None, par: Parallel | None = None, scaling_given: bool = False,
               described: bool = True) -> Throughput:
    """The spec's measured tokens/s per card; else the step model for `par` (Megatron-style frameworks on
    Ascend); else MFU x peak / FLOPs per token. Without `par` the step model assumes one card's worth of work
    with no communication or bubble: the rate a time budget is first sized with. An estimate for more than one
    node keeps the hardware row's measured scaling efficiency of it, unless the spec gives its own
    (`scaling_given`: the time formula divides by the spec's). `described` False: the step model's rate alone,
    with no source, MFU or shares (the layout search ranks hundreds of layouts by it, and their text was a fifth
    of a budget search)."""
    if measured is not None:
        return Throughput(measured, "measured (spec tokens_per_card_s)", False)
    info = framework.throughput
    scaling = multi_node_efficiency(hardware, par.nodes) if par is not None and not scaling_given else 1.0
    if uses_step_model(framework, hardware):
        par = par or Parallel(cards=1, cards_per_node=hardware.cards_per_node, global_batch_size=1)
        step = step_time(model, method, seq_len, par, hardware, info["gemm_efficiency"], framework.expert_tp)
        if not described:
            return Throughput(step.tokens_per_card_s * scaling, "", True)
        shares = step.shares()
        causes = ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
        mfu = step.mfu * scaling
        return Throughput(step.tokens_per_card_s * scaling,
                          f"estimate: step model, MFU {mfu:.1%} of {hardware.peak_tflops_bf16:g} TFLOPS at "
                          f"{flops_per_token(model, method, seq_len) / 1e9:.1f} GFLOP per token; step time: {causes} "
                          f"({info['source']}){_scaled(hardware, par, scaling)}",
                          True, mfu, shares, slow_share=STEP_MODEL_SLOW)
    flops = flops_per_token(model, method, seq_len)
    key = "moe" if model.is_moe and not trains_adapters(method) else VARIANT_OF.get(method, method)
    mfu = info["mfu"][key] * scaling
    tps = mfu * hardware.peak_tflops_bf16 * 1e12 / flops
    source = f"estimate: MFU {mfu:.1%} x {hardware.peak_tflops_bf16:g} TFLOPS / {flops / 1e9:.1f} GFLOP per token " \
             f"({info['source']}){_scaled(hardware, par, scaling)}"
    if par is not None and par.offload:
        slowed, source = _with_offload(model, method, seq_len, par, tps, source)
        tps, mfu = slowed, mfu * slowed / tps
    return Throughput(tps, source, True, mfu, slow_share=ASSUMED_MFU_SLOW)


def _scaled(hardware: Hardware, par: Parallel | None, scaling: float) -> str:
    """The multi-node efficiency a rate keeps, in words for its source ("": none)."""
    if scaling == 1.0:
        return ""
    measured_at = hardware.scaling_measured_cards
    beyond = (f"; measured at {measured_at} cards, on {par.cards:,} compounded per doubling of nodes, an assumption"
              if par is not None and measured_at is not None and par.cards > measured_at else "")
    return f"; x {scaling:g} multi-node scaling efficiency ({hardware.scaling_source}{beyond})"


# What ZeRO-3 CPU offload (LLaMA-Factory 0.9.5 examples/deepspeed/ds_z3_offload_config.json: offload_optimizer and
# offload_param on cpu) moves between a card and its host per step, the card's shard of the parameters: the bf16
# gradients out and the bf16 parameters back after the host's optimizer step (Ren et al. 2021, "ZeRO-Offload",
# arXiv:2101.06840 s4: 2M + 2M bytes; none for frozen weights), and, with the parameters on the host, the bf16 shard
# fetched for each micro batch's forward and again for its backward (DeepSpeed ZeRO-Infinity's parameter offload,
# arXiv:2104.07857 s5). The host's Adam step comes on top: a lower bound on the cost.
UPDATE_BYTES, FETCH_BYTES = 4, 2 * 2
# PCIe 4.0 x16, one direction: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s (PCI-SIG PCI Express Base Specification 4.0).
HOST_LINK_GB_S = 31.5


def _with_offload(model: Model, method: str, seq_len: int, par: Parallel, tps: float,
                  source: str) -> tuple[float, str]:
    """The rate with ZeRO-3 CPU offload's transfers added to the step (a lower bound on their cost)."""
    step_tokens = par.global_batch_size * seq_len / par.cards
    per_param = (0 if trains_adapters(method) else UPDATE_BYTES) + FETCH_BYTES * par.grad_accum
    moved = per_param * model.params / par.cards
    transfer = moved / (HOST_LINK_GB_S * 1e9)
    slowed = step_tokens / (step_tokens / tps + transfer)
    return slowed, (f"{source}; ZeRO-3 offload: at least {transfer:.1f} s a step moving {moved / 2**30:.1f} GiB "
                    f"per card over PCIe 4.0 x16 ({HOST_LINK_GB_S:g} GB/s): the updated shard and its fetch for "
                    f"each of {par.grad_accum} micro batches, forward and backward (arXiv:2101.06840 s4, "
                    f"2104.07857 s5); the host's optimizer step not counted")


def hours(tokens: float, tps: float, cards: int, efficiency: float) -> float:
    """Time = Tok / (TPS * N * eff), in hours."""
    return tokens / (tps * cards * efficiency) / 3600.0


def per_card(tokens_per_card_s: float) -> str:
    """A rate in tokens/s per card as the plan prints it: whole tokens, or three significant digits below 10 (an RL
    rate per data token is a fraction of one: never "0 tokens/s")."""
    return f"{tokens_per_card_s:.0f}" if tokens_per_card_s >= 10 else f"{tokens_per_card_s:.3g}"


def seconds_per_step(global_batch: int, sample_tokens: float, tps: float, cards: int, efficiency: float) -> float:
    """One optimizer step by the run time's formula: its samples' tokens / (TPS * N * eff). The checkpoint interval
    and the run time both use it, so "a checkpoint about every 2 h" and the total agree."""
    return hours(global_batch * sample_tokens, tps, cards, efficiency) * 3600.0


def cards_for_budget(tokens: float, budget_hours: float, tps: float, efficiency: float) -> int:
    """N = Tok / (Time * TPS * eff), rounded up to whole cards (the seed's multiple-of-8 rounding is the caller's)."""
    return max(1, math.ceil(tokens / (budget_hours * 3600.0 * tps * efficiency)))
