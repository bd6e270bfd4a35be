"""Memory per card of each verl role's phase (contract.py Planning.memory). The roles are colocated (verl's hybrid
engine: one resource pool, the phases in turns), so each phase's figure is what the card holds while it runs,
including what the other roles leave resident. Every term with its source; GiB.

- actor (training phase, verl 0.7.0 verl/workers/fsdp_workers.py l. 907-943 update_actor): FSDP full shard over
  every card of fp32 parameters, fp32 gradients and AdamW's two fp32 moments (4 + 4 + 8 bytes a parameter / cards);
  update_actor loads offloaded parameters and optimizer states back first (l. 909-912), so offload does not lower
  this phase. Plus one FSDP unit (a decoder layer) gathered in bf16, twice for the next unit's prefetch; the
  activations of one micro batch with gradient checkpointing (every NPU example sets
  enable_gradient_checkpointing=True) at micro batch x seq_len / SP tokens per card (ulysses splits the sequence),
  from the decoder's measured coefficients (memory.hf_step_bytes); the log-prob logits in fp32. PPO: the critic's
  parameters and optimizer states stay on the card during the actor's update unless offloaded.
- rollout (rollout phase, fsdp_workers.py l. 676-720 rollout_mode): the actor's states that are not offloaded
  (fp32 parameters and AdamW moments; the gradients are freed by zero_grad), plus what vLLM takes whole:
  gpu_memory_utilization x the card's memory (vLLM 0.11 vllm/v1/worker/gpu_worker.py determine_available_memory:
  its budget is that share of the total). Inside it: the bf16 weights / TP, the runtime, and the KV cache, which
  must hold one full prompt + response sequence or vLLM refuses to start (vLLM 0.11
  vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory).
- reference (compute_ref_log_prob, fsdp_workers.py l. 1045): its parameters offloaded to the host (every NPU example
  sets ref.fsdp_config.param_offload=True: FSDP CPUOffload), one unit gathered in bf16 (twice, prefetch), one
  layer's forward working set and the fp32 logits of its log-prob micro batch, beside the actor's resident states.
- critic (PPO, update_critic, fsdp_workers.py l. 1560-1590): as the actor's training phase (a value head instead of
  the vocabulary logits), beside the actor's resident states.
"""

from __future__ import annotations

import math

from ...context import Context
from ...frameworks.contract import RoleKind
from ...memory import GIB, MemoryBreakdown, hf_layer_bytes, hf_step_bytes
from ...parallel import Parallel
from ...plan import HEADROOM
from ...tables import Hardware, Model
from .rl import RL

TRAIN_STATE_BYTES = 16.0  # fp32 parameter + fp32 gradient + AdamW exp_avg + exp_avg_sq
RESIDENT_BYTES = 12.0  # what stays between phases without offload: fp32 parameter + the two AdamW moments
BF16 = 2.0
GMU_STEP = 0.05  # gpu_memory_utilization is lowered in these steps


def unit_bytes(model: Model) -> float:
    """One FSDP unit (a decoder layer) gathered in bf16, and the next one prefetched."""
    return 2 * BF16 * model.layer_params


def resident_gb(model: Model, cards: int, offload: bool) -> float:
    """The actor's states left on each card between its phases (0 with param + optimizer offload)."""
    return 0.0 if offload else RESIDENT_BYTES * model.params / cards / GIB


def kv_per_sequence_gb(model: Model, rl: RL, tp: int) -> float:
    """KV cache of one full prompt + response sequence on one rollout card: K and V, bf16, every layer, the KV heads
    TP splits (the rollout search keeps TP within the KV heads)."""
    return 2 * BF16 * model.layers * model.kv_dim / tp * rl.seq_len / GIB


def gpu_memory_utilization(model: Model, hw: Hardware, overhead_gb: float, rl: RL, tp: int, cards: int,
                           offload: bool) -> tuple[float, str]:
    """The rollout's gpu_memory_utilization and why: the example's, lowered in steps of 0.05 until the actor's
    resident states and vLLM's share fit the card's budget (usable memory less plan.HEADROOM, as the search judges
    every phase); raised where the example's share cannot hold vLLM's bf16 weights / TP, runtime and one full
    sequence's KV cache (the phase then may not fit, which the search sees)."""
    budget = hw.usable_gb * (1.0 - HEADROOM)
    room = budget - resident_gb(model, cards, offload)
    cap = math.floor(round(room / hw.memory_gb / GMU_STEP, 6)) * GMU_STEP
    need = BF16 * model.params / tp / GIB + overhead_gb + kv_per_sequence_gb(model, rl, tp)
    floor = math.ceil(round(need / hw.memory_gb / GMU_STEP, 6)) * GMU_STEP
    example = rl.gpu_memory_utilization
    if example > cap:
        chosen = max(cap, floor)
        why = (f"derived: the example's {example:g} ({rl.sources['gpu_memory_utilization']}) lowered in steps of "
               f"{GMU_STEP:g} so the actor's resident states and vLLM's share fit the card")
    elif example < floor:
        chosen = floor
        why = (f"derived: the example's {example:g} raised so vLLM's share holds its weights / TP, runtime and one "
               f"{rl.seq_len}-token sequence's KV cache")
    else:
        chosen, why = example, rl.sources["gpu_memory_utilization"]
    return round(chosen, 2), why


def role_memory(ctx: Context, rl: RL, shape: Parallel) -> MemoryBreakdown:
    """Memory per card of ctx.role_kind's phase at `shape` (its `offload`: the actor's, and the critic's, parameter
    and optimizer offload between phases)."""
    role, model, cards = ctx.role_kind, ctx.model, shape.cards
    resident = resident_gb(model, cards, shape.offload)
    tokens = rl.micro_batch_size * rl.seq_len // rl.sp  # per card: ulysses splits each sequence over SP cards
    if role is RoleKind.ROLLOUT:
        gmu, _ = gpu_memory_utilization(model, ctx.hw, ctx.fw.overhead_gb, rl, shape.tp, cards, shape.offload)
        share = gmu * ctx.hw.memory_gb
        weights = BF16 * model.params / shape.tp / GIB
        kv = share - weights - ctx.fw.overhead_gb
        need = kv_per_sequence_gb(model, rl, shape.tp)
        return MemoryBreakdown(weights=weights, gradients=0.0, optimizer=0.0, adapters=0.0, activations=0.0,
                               logits=0.0, overhead=ctx.fw.overhead_gb,
                               extra=(("KV cache (vLLM's gpu_memory_utilization share)", max(kv, need)),
                                      ("actor states resident (not offloaded)", resident)))
    if role is RoleKind.REFERENCE:
        micro_tokens = rl.log_prob_micro_batch_size * rl.seq_len // rl.sp
        assert ctx.activations is not None
        working = hf_layer_bytes(ctx.activations["working"]["full"]["none"], model, rl.seq_len // rl.sp) * micro_tokens
        logits = 4.0 * micro_tokens * model.vocab
        return MemoryBreakdown(weights=unit_bytes(model) / GIB, gradients=0.0, optimizer=0.0, adapters=0.0,
                               activations=working / GIB, logits=logits / GIB, overhead=ctx.fw.overhead_gb,
                               extra=(("actor states resident (not offloaded)", resident),))
    # actor or critic: the training phase
    assert ctx.activations is not None
    activations, logits = hf_step_bytes(ctx.activations, model, "full", "full", rl.seq_len // rl.sp,
                                        rl.micro_batch_size, fp32_loss=True)
    if role is RoleKind.CRITIC:
        logits = 4.0 * tokens  # a value head: one fp32 number a token
    other = (("critic states resident (not offloaded)", resident),) if role is RoleKind.ACTOR and \
        ctx.spec.method == "ppo" else (("actor states resident (not offloaded)", resident),) \
        if role is RoleKind.CRITIC else ()
    return MemoryBreakdown(weights=4.0 * model.params / cards / GIB + unit_bytes(model) / GIB,
                           gradients=4.0 * model.params / cards / GIB, optimizer=8.0 * model.params / cards / GIB,
                           adapters=0.0, activations=activations / GIB, logits=logits / GIB,
                           overhead=ctx.fw.overhead_gb, extra=other)
