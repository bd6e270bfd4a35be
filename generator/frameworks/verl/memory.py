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
- actor's log-prob pass (compute_log_prob, fsdp_workers.py l. 998-1040: the old log-probs, with the entropy,
  l. 1021): its fp32 parameters loaded (l. 1004-1005), AdamW's moments where not offloaded, one unit gathered in
  bf16 (twice, prefetch), one layer's forward working set and the fp32 logits of one log-prob micro batch, plus the
  entropy's working set (verl/utils/torch_functional.py l. 224-263): the softmax and its product with the logits,
  each the logits' size, or a 2,048-token chunk of both in fp32 with entropy_from_logits_with_chunking. The actor's
  figure is the larger of its training phase and this pass.
- rollout (rollout phase, fsdp_workers.py l. 676-720 rollout_mode): the actor's (and PPO's critic's) states that
  are not offloaded (fp32 parameters and AdamW moments; the gradients are freed by zero_grad), plus vLLM's bf16
  weights / TP, its runtime and its KV cache. vLLM runs inside the actor's worker process (verl's hybrid engine),
  and sizes its KV cache once, when it starts: verl builds it last, after the critic and the actor, whose fp32
  parameters are then on the card unless offloaded (fsdp_workers.py l. 826-844; ray_trainer.py l. 909-911), and
  AdamW's moments do not exist yet (torch creates them at the first step). The KV cache each accelerator's vLLM
  takes (kv_cache):
  * NVIDIA, vLLM 0.11 (vllm/v1/worker/gpu_worker.py determine_available_memory): gpu_memory_utilization x the card's
    memory less what vLLM itself allocated (weights, runtime): a share beside the actor's states, which must leave
    that much free (init_device refuses to start otherwise).
  * Ascend, vllm-ascend v0.11.0rc1 (vllm_ascend/worker/worker_v1.py l. 241-254 determine_available_memory):
    gpu_memory_utilization x the card's memory less the process's peak allocation and every other allocation on the
    device: the share caps the resident actor (and critic) and vLLM together.
  The KV cache must hold a useful number of full prompt + response sequences (min_kv_sequences), else the
  gpu_memory_utilization is raised, and where the card cannot hold that the layout does not fit (the search then
  offloads the actor's states or adds cards).
- reference (compute_ref_log_prob, fsdp_workers.py l. 1045): its parameters offloaded to the host (every NPU example
  sets ref.fsdp_config.param_offload=True: FSDP CPUOffload), one unit gathered in bf16 (twice, prefetch), one
  layer's forward working set and the fp32 logits of its log-prob micro batch, beside the actor's resident states.
- critic (PPO, update_critic, fsdp_workers.py l. 1560-1590): as the actor's training phase (a value head instead of
  the vocabulary logits), beside the actor's resident states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...frameworks.contract import RoleKind
from ...memory import GIB, MemoryBreakdown, hf_layer_bytes, hf_step_bytes
from ...parallel import Parallel
from ...plan import HEADROOM
from ...tables import Framework, Hardware, Model
from .rl import RL, VERL

TRAIN_STATE_BYTES = 16.0  # fp32 parameter + fp32 gradient + AdamW exp_avg + exp_avg_sq
RESIDENT_BYTES = 12.0  # what stays between phases without offload: fp32 parameter + the two AdamW moments
BF16 = 2.0
GMU_STEP = 0.05  # gpu_memory_utilization is lowered in these steps


def unit_bytes(model: Model) -> float:
    """One FSDP unit (a decoder layer) gathered in bf16, and the next one prefetched."""
    return 2 * BF16 * model.layer_params


def resident_gb(model: Model, cards: int, offload: bool) -> float:
    """The actor's (or PPO's critic's) states left on each card between its phases (0 with param + optimizer
    offload, which the plan sets for both together)."""
    return 0.0 if offload else RESIDENT_BYTES * model.params / cards / GIB


def _trained(method: str) -> int:
    """How many models of the policy's size train on the cards: the actor, and PPO's critic."""
    return 2 if method == "ppo" else 1


def kv_per_sequence_gb(model: Model, rl: RL, tp: int) -> float:
    """KV cache of one full prompt + response sequence on one rollout card: K and V, bf16, every layer, the KV heads
    TP splits (the rollout search keeps TP within the KV heads)."""
    return 2 * BF16 * model.layers * model.kv_dim / tp * rl.seq_len / GIB


MAX_NUM_SEQS = (1024, f"{VERL} verl/trainer/config/rollout/rollout.yaml l. 68: max_num_seqs 1024")
NPU_RULE = ("vllm-ascend v0.11.0rc1 vllm_ascend/worker/worker_v1.py l. 241-254: the share less everything on the "
            "card when vLLM starts, the resident actor's fp32 parameters included")
GPU_RULE = ("vLLM 0.11 vllm/v1/worker/gpu_worker.py determine_available_memory: the share less vLLM's own "
            "allocations, beside the actor's states")


@dataclass(frozen=True)
class KVCache:
    """The rollout's gpu_memory_utilization, why, and the KV cache it gives each vLLM replica."""

    gmu: float
    source: str
    kv_gb: float  # the KV cache per card at gmu (below `minimum`'s size where the card cannot hold that)
    per_sequence_gb: float
    minimum: int  # sequences the KV cache must hold (min_kv_sequences)
    minimum_why: str
    share: int  # the step's sequences each replica generates

    @property
    def sequences(self) -> int:
        """Full prompt + response sequences the KV cache holds at once."""
        return max(0, math.floor(round(self.kv_gb / self.per_sequence_gb, 6)))

    @property
    def fits(self) -> bool:
        return self.sequences >= self.minimum

    def capacity(self, seq_len: int) -> str:
        waves = -(-self.share // self.sequences) if self.sequences else 0
        return (f"KV cache {self.kv_gb:.1f} GiB per card: {self.sequences} sequences of {seq_len} tokens per "
                f"replica at once, at least {self.minimum} ({self.minimum_why}); a replica generates "
                f"{self.share} a step" + (f", in {waves} waves" if waves > 1 else ""))


def min_kv_sequences(model: Model, rl: RL, tp: int, share: int) -> tuple[int, str]:
    """The fewest full sequences the KV cache must hold, and why. Each decoding step reads the weights once and the
    KV cache of every running sequence: while the KV cache is smaller than the weights per card, a step spends
    most of its memory traffic on the weights, so the rollout runs weight-bound in many more waves (upstream's NPU
    examples all hold more). So: as many sequences as make the KV cache as large as vLLM's weights per card, but
    never more than the replica's share of the step's sequences (all it ever runs) or max_num_seqs (vLLM's limit
    on running sequences)."""
    weights = BF16 * model.params / tp / GIB
    bound = math.ceil(round(weights / kv_per_sequence_gb(model, rl, tp), 6))
    least = min(bound, share, MAX_NUM_SEQS[0])
    why = ("the replica's whole share" if least == share else f"max_num_seqs, {MAX_NUM_SEQS[1]}"
           if least == MAX_NUM_SEQS[0] else "a KV cache as large as vLLM's weights per card")
    return max(1, least), why


def kv_cache(model: Model, hw: Hardware, overhead_gb: float, rl: RL, tp: int, cards: int, offload: bool,
             method: str, batch: int) -> KVCache:
    """The rollout's gpu_memory_utilization and the KV cache it gives: the example's, lowered in steps of 0.05
    until the rollout phase fits the card's budget (usable memory less plan.HEADROOM, as the search judges every
    phase), raised where its KV cache would hold fewer than min_kv_sequences (the phase then may not fit, which the
    search sees)."""
    budget = hw.usable_gb * (1.0 - HEADROOM)
    resident = resident_gb(model, cards, offload) * _trained(method)
    weights = BF16 * model.params / tp / GIB
    per_sequence = kv_per_sequence_gb(model, rl, tp)
    share = -(-batch * rl.n // (cards // tp))
    minimum, minimum_why = min_kv_sequences(model, rl, tp, share)
    npu = hw.accelerator == "npu"
    # Inside the share on Ascend: what is on the card when vLLM starts (the fp32 parameters, no moments yet).
    inside = (0.0 if offload else 4.0 * model.params / cards / GIB * _trained(method)) if npu else 0.0
    # The phase holds the share, plus the resident states the share does not count.
    cap = math.floor(round((budget - resident + inside) / hw.memory_gb / GMU_STEP, 6)) * GMU_STEP
    need = inside + weights + overhead_gb + minimum * per_sequence
    floor = math.ceil(round(need / hw.memory_gb / GMU_STEP, 6)) * GMU_STEP
    example = rl.gpu_memory_utilization
    rule = NPU_RULE if npu else GPU_RULE
    if example > cap:
        chosen = max(cap, floor)
        why = (f"derived: the example's {example:g} ({rl.sources['gpu_memory_utilization']}) lowered in steps of "
               f"{GMU_STEP:g} so the actor's resident states and vLLM fit the card")
    elif example < floor:
        chosen = floor
        why = (f"derived: the example's {example:g} ({rl.sources['gpu_memory_utilization']}) raised so the KV cache "
               f"holds at least {minimum} sequences")
    else:
        chosen, why = example, rl.sources["gpu_memory_utilization"]
    gmu = round(chosen, 2)
    kv = gmu * hw.memory_gb - inside - weights - overhead_gb
    return KVCache(gmu, f"{why}; KV cache: {rule}", kv, per_sequence, minimum, minimum_why, share)


def rollout_memory(model: Model, hw: Hardware, overhead_gb: float, rl: RL, tp: int, cards: int, offload: bool,
                   method: str, batch: int) -> MemoryBreakdown:
    """The rollout phase per card: vLLM's weights / TP, runtime and KV cache (at least min_kv_sequences' worth, so a
    share too small for it does not fit), beside the actor's (and PPO's critic's) resident states."""
    kv = kv_cache(model, hw, overhead_gb, rl, tp, cards, offload, method, batch)
    resident = resident_gb(model, cards, offload)
    states = (("actor states resident (not offloaded)", resident),) + \
        ((("critic states resident (not offloaded)", resident),) if method == "ppo" else ())
    return MemoryBreakdown(weights=BF16 * model.params / tp / GIB, gradients=0.0, optimizer=0.0, adapters=0.0,
                           activations=0.0, logits=0.0, overhead=overhead_gb,
                           extra=(("KV cache (vLLM's gpu_memory_utilization share)",
                                   max(kv.kv_gb, kv.minimum * kv.per_sequence_gb)), *states))


def decoder_activations(fw: Framework, model: Model) -> dict:
    """The measured activations of the model's decoder (frameworks.yaml verl: its HuggingFace code)."""
    assert fw.activations is not None
    return fw.activations[fw.models[model.name]["decoder"]]


def role_memory(role: RoleKind, model: Model, hw: Hardware, fw: Framework, method: str, rl: RL,
                shape: Parallel) -> MemoryBreakdown:
    """Memory per card of `role`'s phase at `shape` (its `offload`: the actor's, and the critic's, parameter and
    optimizer offload between phases), with `rl`'s ulysses SP and per-GPU micro batches as the files write them."""
    cards = shape.cards
    resident = resident_gb(model, cards, shape.offload)
    if role is RoleKind.ROLLOUT:
        return rollout_memory(model, hw, fw.overhead_gb, rl, shape.tp, cards, shape.offload, method,
                              shape.global_batch_size)
    measured = decoder_activations(fw, model)
    if role is RoleKind.REFERENCE:
        micro_tokens = rl.log_prob_micro_batch_size * rl.seq_len // rl.sp
        working = hf_layer_bytes(measured["working"]["full"]["none"], model, rl.seq_len // rl.sp) * micro_tokens
        logits = 4.0 * micro_tokens * model.vocab
        return MemoryBreakdown(weights=unit_bytes(model) / GIB, gradients=0.0, optimizer=0.0, adapters=0.0,
                               activations=working / GIB, logits=logits / GIB, overhead=fw.overhead_gb,
                               extra=(("actor states resident (not offloaded)", resident),))
    trained = train_memory(role, model, fw, method, rl, cards, shape.offload)
    if role is RoleKind.CRITIC:
        return trained
    return max(trained, log_prob_memory(model, fw, method, rl, cards, shape.offload), key=lambda phase: phase.total)


ENTROPY_CHUNK = 2048  # verl/utils/torch_functional.py l. 241: entropy_from_logits_with_chunking's chunk_size


def log_prob_memory(model: Model, fw: Framework, method: str, rl: RL, cards: int, offload: bool) -> MemoryBreakdown:
    """The actor's old-log-prob pass with the entropy, on one log-prob micro batch (rollout
    log_prob_micro_batch_size_per_gpu sequences, or log_prob_max_token_len_per_gpu = seq_len / SP tokens with
    dynamic batch size), beside PPO's critic's resident states."""
    tokens = (rl.seq_len if rl.dynamic_bsz else rl.log_prob_micro_batch_size * rl.seq_len) // rl.sp
    working = hf_layer_bytes(decoder_activations(fw, model)["working"]["full"]["none"], model, rl.seq_len // rl.sp)
    chunked = rl.example.get("entropy_chunking")
    entropy = 3 * 4.0 * min(tokens, ENTROPY_CHUNK) * model.vocab if chunked and chunked[0] else \
        2 * 4.0 * tokens * model.vocab
    other = (("critic states resident (not offloaded)", resident_gb(model, cards, offload)),) if method == "ppo" \
        else ()
    return MemoryBreakdown(weights=4.0 * model.params / cards / GIB + unit_bytes(model) / GIB, gradients=0.0,
                           optimizer=0.0 if offload else 8.0 * model.params / cards / GIB, adapters=0.0,
                           activations=working * tokens / GIB, logits=(4.0 * tokens * model.vocab + entropy) / GIB,
                           overhead=fw.overhead_gb, extra=other)


def train_memory(role: RoleKind, model: Model, fw: Framework, method: str, rl: RL, cards: int,
                 offload: bool) -> MemoryBreakdown:
    """The actor's or critic's training phase: one per-GPU micro batch of sequences (ulysses splits each over SP
    cards), beside the other trained model's resident states (PPO)."""
    resident = resident_gb(model, cards, offload)
    activations, logits = hf_step_bytes(decoder_activations(fw, model), model, "full", "full", rl.seq_len // rl.sp,
                                        rl.micro_batch_size, fp32_loss=True)
    if role is RoleKind.CRITIC:
        logits = 4.0 * rl.micro_batch_size * rl.seq_len // rl.sp  # a value head: one fp32 number a token
    other = (("critic states resident (not offloaded)", resident),) if role is RoleKind.ACTOR and \
        method == "ppo" else (("actor states resident (not offloaded)", resident),) \
        if role is RoleKind.CRITIC else ()
    return MemoryBreakdown(weights=4.0 * model.params / cards / GIB + unit_bytes(model) / GIB,
                           gradients=4.0 * model.params / cards / GIB, optimizer=8.0 * model.params / cards / GIB,
                           adapters=0.0, activations=activations / GIB, logits=logits / GIB,
                           overhead=fw.overhead_gb, extra=other)
