"""The rollout phase of an RL job whose rollout engine is vLLM inside the actor's worker process (verl's hybrid engine;
MindSpeed-RL's integrated worker): memory per card, and the gpu_memory_utilization that sizes vLLM's KV cache. The
KV cache each accelerator's vLLM takes (kv_cache):

- NVIDIA, vLLM 0.11 (vllm/v1/worker/gpu_worker.py determine_available_memory): gpu_memory_utilization x the card's
  memory less what vLLM itself allocated (weights, runtime): a share beside the actor's states, which must leave
  that much free (init_device refuses to start otherwise).
- Ascend, vllm-ascend v0.11.0rc1 (vllm_ascend/worker/worker_v1.py l. 241-254 determine_available_memory):
  gpu_memory_utilization x the card's memory less the process's peak allocation and every other allocation on the
  device: the share caps the resident actor (and critic) and vLLM together.

The KV cache must hold a useful number of full prompt + response sequences (min_kv_sequences), else the
gpu_memory_utilization is raised, and where the card cannot hold that the layout does not fit. GiB.
"""

from __future__ import annotations

import math

from ...api.frozen import frozen
from ...memory import GIB, MemoryBreakdown
from ...plan import HEADROOM
from ...tables import Hardware, Model
from .recipe import Recipe

RESIDENT_BYTES = 12.0  # what stays between phases without offload: fp32 parameter + the two AdamW moments
BF16 = 2.0
GMU_STEP = 0.05  # gpu_memory_utilization is lowered in these steps


def resident_gb(model: Model, cards: int, offload: bool) -> float:
    """The actor's (or PPO's critic's) states left on each card between its phases (0 with param + optimizer
    offload, which the plan sets for both together)."""
    return 0.0 if offload else RESIDENT_BYTES * model.params / cards / GIB


def trained(method: str) -> int:
    """How many models of the policy's size train on the cards: the actor, and PPO's critic."""
    return 2 if method == "ppo" else 1


def weights_gb(model: Model, tp: int, ep: int = 1) -> float:
    """vLLM's bf16 weights on one rollout card: TP splits them, and with expert parallel the routed experts split
    over TP x EP (vLLM's expert-parallel group spans the TP ranks of every EP replica: MindSpeed-RL sets
    VLLM_DP_SIZE to the rollout EP, cli/train_grpo.py l. 582-584)."""
    if ep == 1:
        return BF16 * model.params / tp / GIB
    return BF16 * ((model.params - model.expert_params) / tp + model.expert_params / (tp * ep)) / GIB


def kv_per_sequence_gb(model: Model, rl: Recipe, tp: int) -> float:
    """KV cache of one full prompt + response sequence on one rollout card: K and V, bf16, every layer, the KV heads
    TP splits (the rollout search keeps TP within the KV heads)."""
    return 2 * BF16 * model.layers * model.kv_dim / tp * rl.seq_len / GIB


NPU_RULE = ("vllm-ascend v0.11.0rc1 vllm_ascend/worker/worker_v1.py l. 241-254: the share less everything on the "
            "card when vLLM starts, the resident actor's fp32 parameters included")
GPU_RULE = ("vLLM 0.11 vllm/v1/worker/gpu_worker.py determine_available_memory: the share less vLLM's own "
            "allocations, beside the actor's states")


@frozen
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


def min_kv_sequences(model: Model, rl: Recipe, tp: int, share: int, ep: int = 1) -> tuple[int, str]:
    """The fewest full sequences the KV cache must hold, and why. Each decoding step reads the weights once and the
    KV cache of every running sequence: while the KV cache is smaller than the weights per card, a step spends
    most of its memory traffic on the weights, so the rollout runs weight-bound in many more waves (upstream's NPU
    examples all hold more). So: as many sequences as make the KV cache as large as vLLM's weights per card, but
    never more than the replica's share of the step's sequences (all it ever runs) or max_num_seqs (vLLM's limit
    on running sequences)."""
    weights = weights_gb(model, tp, ep)
    bound = math.ceil(round(weights / kv_per_sequence_gb(model, rl, tp), 6))
    limit, limit_source = rl.max_num_seqs
    least = min(bound, share, limit)
    why = ("the replica's whole share" if least == share else f"max_num_seqs, {limit_source}"
           if least == limit else "a KV cache as large as vLLM's weights per card")
    return max(1, least), why


def kv_cache(model: Model, hw: Hardware, overhead_gb: float, rl: Recipe, tp: int, cards: int, offload: bool,
             method: str, batch: int, ep: int = 1) -> KVCache:
    """The rollout's gpu_memory_utilization and the KV cache it gives: the example's, lowered in steps of 0.05
    until the rollout phase fits the card's budget (usable memory less plan.HEADROOM, as the search judges every
    phase), raised where its KV cache would hold fewer than min_kv_sequences (the phase then may not fit, which the
    search sees)."""
    budget = hw.usable_gb * (1.0 - HEADROOM)
    resident = resident_gb(model, cards, offload) * trained(method)
    weights = weights_gb(model, tp, ep)
    per_sequence = kv_per_sequence_gb(model, rl, tp)
    share = -(-batch * rl.n // (cards // tp))
    minimum, minimum_why = min_kv_sequences(model, rl, tp, share, ep)
    npu = hw.accelerator == "npu"
    # Inside the share on Ascend: what is on the card when vLLM starts (the fp32 parameters, no moments yet).
    inside = (0.0 if offload else 4.0 * model.params / cards / GIB * trained(method)) if npu else 0.0
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


def rollout_memory(model: Model, hw: Hardware, overhead_gb: float, rl: Recipe, tp: int, cards: int, offload: bool,
                   method: str, batch: int, ep: int = 1) -> MemoryBreakdown:
    """The rollout phase per card: vLLM's weights / TP, runtime and KV cache (at least min_kv_sequences' worth, so a
    share too small for it does not fit), beside the actor's (and PPO's critic's) resident states."""
    kv = kv_cache(model, hw, overhead_gb, rl, tp, cards, offload, method, batch, ep)
    resident = resident_gb(model, cards, offload)
    states = (("actor states resident (not offloaded)", resident),) + \
        ((("critic states resident (not offloaded)", resident),) if method == "ppo" else ())
    return MemoryBreakdown(weights=weights_gb(model, tp, ep), gradients=0.0, optimizer=0.0, adapters=0.0,
                           activations=0.0, logits=0.0, overhead=overhead_gb,
                           extra=(("KV cache (vLLM's gpu_memory_utilization share)",
                                   max(kv.kv_gb, kv.minimum * kv.per_sequence_gb)), *states))
