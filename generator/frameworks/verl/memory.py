"""Memory per card of each verl role's phase (contract.py Planning.memory). The roles are colocated (verl's hybrid
engine: one resource pool, the phases in turns), so each phase's figure is what the card holds while it runs,
including what the other roles leave resident. Every term with its source; GiB.

- actor (training phase, verl 0.7.0 verl/workers/fsdp_workers.py l. 907-943 update_actor): FSDP full shard over
  every card of fp32 parameters, fp32 gradients and AdamW's two fp32 moments (4 + 4 + 8 bytes a parameter / cards);
  update_actor loads offloaded parameters and optimizer states back first (l. 909-912), so offload does not lower
  this phase. Plus one FSDP unit (a decoder layer) gathered in bf16, twice for the next unit's prefetch; the
  activations of one micro batch with gradient checkpointing (every NPU example sets
  enable_gradient_checkpointing=True) at micro batch x seq_len / SP tokens per card (ulysses splits the sequence),
  from the decoder's measured coefficients (memory.hf_step_bytes); the log-prob logits in fp32; AdamW's step
  temporaries (a fp32 copy of the shard) where they exceed the activations the backward freed. PPO: the critic's
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
  AdamW's moments do not exist yet (torch creates them at the first step). Its KV cache and gpu_memory_utilization:
  the RL family's (generator/families/rl/rollout.py), where the search offloads the actor's states or adds cards
  when the card cannot hold a useful KV cache.
- reference (compute_ref_log_prob, fsdp_workers.py l. 1045): its parameters offloaded to the host (every NPU example
  sets ref.fsdp_config.param_offload=True: FSDP CPUOffload), one unit gathered in bf16 (twice, prefetch), one
  layer's forward working set and the fp32 logits of its log-prob micro batch, beside the actor's resident states.
- critic (PPO, update_critic, fsdp_workers.py l. 1560-1590): as the actor's training phase (a value head instead of
  the vocabulary logits), beside the actor's resident states.
"""

from __future__ import annotations

from ...api.roles import RoleKind
from ...families.rl.batching import CRITIC_SEQUENCES, SEQUENCES
from ...families.rl.rollout import BF16, resident_gb, rollout_memory
from ...memory import GIB, MemoryBreakdown, hf_layer_bytes, hf_step_bytes
from ...parallel import Parallel
from ...tables import Framework, Hardware, Model
from .rl import RL

TRAIN_STATE_BYTES = 16.0  # fp32 parameter + fp32 gradient + AdamW exp_avg + exp_avg_sq
# torch.optim.AdamW's step (foreach, its default on accelerators) allocates sqrt(exp_avg_sq) for the whole shard
# at once: one fp32 copy of the parameters (torch 2.13 torch/optim/adam.py l. 760-769, _multi_tensor_adam).
STEP_TEMPORARY_BYTES = 4.0


def unit_bytes(model: Model) -> float:
    """One FSDP unit (a decoder layer) gathered in bf16, and the next one prefetched."""
    return 2 * BF16 * model.layer_params


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
    log_prob_micro_batch_size_per_gpu sequences, or with dynamic batch size the sequences of
    log_prob_max_token_len_per_gpu, families/rl/batching.py), beside PPO's critic's resident states."""
    tokens = rl.log_prob_micro_batch_size * rl.seq_len // rl.sp
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
    cards), beside the other trained model's resident states (PPO). With dynamic batch size the critic's token
    limit holds twice the actor's sequences (families/rl/batching.py)."""
    resident = resident_gb(model, cards, offload)
    micro = rl.micro_batch_size * (CRITIC_SEQUENCES // SEQUENCES if role is RoleKind.CRITIC and rl.dynamic_bsz
                                   else 1)
    activations, logits = hf_step_bytes(decoder_activations(fw, model), model, "full", "full", rl.seq_len // rl.sp,
                                        micro, fp32_loss=True)
    if role is RoleKind.CRITIC:
        logits = 4.0 * micro * rl.seq_len // rl.sp  # a value head: one fp32 number a token
    other: tuple[tuple[str, float], ...] = (("critic states resident (not offloaded)", resident),) \
        if role is RoleKind.ACTOR and method == "ppo" else (("actor states resident (not offloaded)", resident),) \
        if role is RoleKind.CRITIC else ()
    # The optimizer step runs after the backward has freed the activations and logits: its temporaries count where
    # they exceed them.
    step = STEP_TEMPORARY_BYTES * model.params / cards - activations - logits - unit_bytes(model)
    other += (("AdamW step temporaries beyond the freed activations", step / GIB),) if step > 0 else ()
    return MemoryBreakdown(weights=4.0 * model.params / cards / GIB + unit_bytes(model) / GIB,
                           gradients=4.0 * model.params / cards / GIB, optimizer=8.0 * model.params / cards / GIB,
                           adapters=0.0, activations=activations / GIB, logits=logits / GIB,
                           overhead=fw.overhead_gb, extra=other)
