"""Memory per card for one layout: model states, adapters, activations, logits, itemised in GiB.

Conventions (bf16 compute everywhere, flash attention, so no s^2 attention scores are stored):
- Activations of one layer for one micro batch of b sequences of s tokens (s = seq_len / CP), in bytes:
  outside the tensor-parallel regions 4 hidden-sized tensors (the two norms' inputs and outputs): 8*s*b*h;
  inside them q, k, v, the attention output and the SwiGLU MLP (fc1 output 2F, activation output F):
  2*s*b*(q + 2kv + q + 3F). TP divides the inside part; sequence parallel divides the outside part too
  (Korthikanti et al. 2022, "Reducing Activation Recomputation", Table 2, adapted to GQA + SwiGLU).
- Full recompute keeps only each layer's input (2*s*b*h) plus one layer's activations while it is recomputed.
  Selective recompute (the activation function) drops the F-sized activation output.
- 1F1B pipeline: stage i holds (PP - i) micro batches in flight, at most the step's micro batches; the first
  stage holds PP.
- Logits: Megatron keeps s*b*V fp32 logits split over TP on the last stage.
- LLaMA-Factory runs the HuggingFace code, not Megatron's fused kernels: its activations are what that code keeps,
  measured per decoder (data/hf_activations.yaml, from bench/calibrate_activations.py): fp32 copies inside the
  norms, and with LoRA an fp32 copy of every adapted layer's input (the adapters are fp32). So are one layer's
  backward working set (with checkpointing, its recomputed forward too) and the peak bytes per logit while the loss
  runs forward and backward: 12 for transformers' own loss, which upcasts to fp32; 14 for ChatGLM3's; 6 for
  Baichuan 2's, which stays in bf16 unless autocast (a run without DeepSpeed) computes it in fp32. The logits are
  freed before backward reaches the last layer, so the step's peak holds the larger of the two, not both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cached_property, lru_cache

from .api.frozen import frozen
from .parallel import Parallel
from .tables import Model, trains_adapters

GIB = float(1 << 30)


@frozen
class MemoryBreakdown:
    """GiB per card on the most loaded pipeline stage."""

    weights: float
    gradients: float
    optimizer: float
    adapters: float
    activations: float
    logits: float
    overhead: float
    stage: int = 0  # the pipeline stage the numbers are for
    extra: tuple[tuple[str, float], ...] = ()  # the TERMS' items: (name, GiB)

    @cached_property  # read at every comparison of the layout search; the fields never change
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.adapters + self.activations + self.logits
                + self.overhead + sum(gib for _, gib in self.extra))

    def items(self) -> list[tuple[str, float]]:
        return [("weights", self.weights), ("gradients", self.gradients), ("optimizer states", self.optimizer),
                ("LoRA adapters (weights, grads, Adam)", self.adapters), ("activations", self.activations),
                ("logits", self.logits), ("runtime overhead", self.overhead), *self.extra]


def layer_activation_bytes(model: Model, seq: int, micro: int, tp: int, sp: bool,
                           recompute: str) -> tuple[float, float]:
    """(bytes kept per layer between forward and backward, bytes of one layer's working set) for one micro batch."""
    sbh = seq * micro * model.hidden
    ffn = model.ffn if not model.is_moe else model.moe_ffn * (model.topk + model.shared_experts)
    outside = 8.0 * sbh
    inside = 2.0 * seq * micro * (2 * model.q_dim + 2 * model.kv_dim + model.mlp_matrices * ffn)
    if recompute == "selective":
        inside -= 2.0 * seq * micro * ffn
    full_layer = (outside / tp if sp else outside) + inside / tp
    if recompute == "full":
        kept = 2.0 * sbh / (tp if sp else 1)
        return kept, full_layer
    return full_layer, 0.0


def hf_layer_bytes(coefficients: dict, model: Model, seq: int) -> float:
    """Bytes the HuggingFace code keeps per token per decoder layer at sequence length `seq`, from the measured
    coefficients of one decoder, method and recompute setting."""
    dims = {"hidden": model.hidden, "q": model.q_dim, "kv": model.kv_dim, "ffn": model.ffn, "heads": model.heads,
            "const": 1}
    return sum(coefficients[term] * size for term, size in dims.items()) + \
        coefficients["scores_per_head"] * model.heads * seq


def hf_step_bytes(activations: dict, model: Model, method: str, recompute: str, seq_len: int, micro: int,
                  fp32_loss: bool = False, int8_base: bool = False) -> tuple[float, float]:
    """(activations, logits) at the peak of a training step of the HuggingFace code, in bytes, from the decoder's
    measurements (`activations`: its hf_activations.yaml entry); `fp32_loss`: the loss runs in fp32 (autocast, or
    an output head upcast to fp32); `int8_base`: LoRA on a bitsandbytes 8-bit base, which keeps more
    (int8_input_bytes)."""
    trained = "lora" if trains_adapters(method) else "full"
    checkpointing = "full" if recompute == "full" else "none"
    tokens = seq_len * micro
    kept = model.layers * hf_layer_bytes(activations[trained][checkpointing], model, seq_len) * tokens
    working = hf_layer_bytes(activations["working"][trained][checkpointing], model, seq_len) * tokens
    if int8_base:
        kept_int8, working_int8 = int8_input_bytes(model, recompute, tokens)
        kept, working = kept + kept_int8, working + working_int8
    logits = activations["logit_bytes"]["fp32" if fp32_loss else "bf16"] * tokens * model.vocab
    # The loss's logits are freed before backward reaches the last layer (and, with checkpointing, recomputes it),
    # so the step's peak holds the larger of the two, not both.
    return kept + max(0.0, working - logits), logits


# What an 8-bit base keeps beyond LoRA's activations on a bf16 base (source-derived: bitsandbytes' CUDA int8 kernels
# do not run on a CPU, so no GPU step measured it). bitsandbytes 0.50.2's int8 matmul, MatMul8bitLt (autograd/
# _functions.py; Linear8bitLt.forward calls it through bnb.matmul, nn/modules.py l. 1189, on every device but a
# training CPU/XPU, _functions.py l. 400-404), stores its input A, in the dtype it came in (bf16), as
# ctx.tensors = (CAt, subA, A) whenever the input requires grad (l. 186-187), though backward never reads it
# (l. 208) and the frozen int8 weight takes no gradient. An nn.Linear with a frozen bf16 weight saves only the weight.
# Linears fed the same tensor share it: per decoder layer and token, one hidden-wide input for the attention's
# q, k, v, the attention output (q_dim) for its output projection, one hidden-wide input for the MLP's input
# matrices and the FFN-wide input of its down projection, 2 bytes each (tests/test_qlora_kbit.py counts them on the
# loaded model). ctx.tensors is a plain attribute, not save_for_backward, so it lives as long as the graph:
# - with LLaMA-Factory's gradient checkpointing, which is reentrant (model_utils/checkpointing.py l. 174-176;
#   use_reentrant_gc default True, hparams/model_args.py l. 149-152), torch runs each layer's forward under no_grad
#   (torch 2.13 utils/checkpoint.py l. 273-274), so nothing is kept, and recomputes one layer with grad in backward
#   (l. 313-314), its graph alive until that layer's backward ends (l. 331): one layer's inputs on its working set;
# - without, every layer keeps them but the first layer's attention input: LLaMA-Factory makes the layers' inputs
#   require grad only with checkpointing on (checkpointing.py l. 94-95, l. 131), so the embeddings' normalised output
#   needs none and MatMul8bitLt keeps nothing for q, k, v there (l. 190-192).
# Left out: the outlier columns LLM.int8 keeps beside A (subA, l. 162-170; threshold 6.0), as many as the data has,
# and the weight each layer dequantizes to bf16 in backward (l. 237). A 4-bit base keeps only its packed weight
# (l. 357-358): nothing more (tests/test_qlora_kbit.py).
def int8_input_bytes(model: Model, recompute: str, tokens: int) -> tuple[float, float]:
    """(bytes kept over the step, bytes kept while one recomputed layer runs backward) of the bf16 inputs an 8-bit
    base's linear layers keep for backward, for `tokens` tokens per card."""
    per_layer = 2.0 * tokens * (2 * model.hidden + model.q_dim + model.ffn)
    if recompute == "full":
        return 0.0, per_layer
    return model.layers * per_layer - 2.0 * tokens * model.hidden, 0.0


@frozen
class MemoryJob:
    """What the memory model needs about the job and its framework; the layout comes separately (a Parallel)."""

    model: Model
    method: str
    scheme: str  # the framework's memory scheme: deepspeed, megatron-distopt or megatron-fp32 (frameworks.yaml)
    seq_len: int
    lora_rank: int  # 0 when the method trains no adapters
    overhead_gb: float  # the framework's runtime overhead per card
    quant_bits: int | None = None  # QLoRA's base-weight bits
    activations: dict | None = None  # the decoder's measured coefficients (hf_activations.yaml): deepspeed counts them
    kbit_fp32: bool = False  # the HuggingFace code upcasts a k-bit model's unquantized parameters to fp32
    double_quant: bool = True  # bitsandbytes' double quantization of a 4-bit base (MemoryInputs.double_quant)
    # MindSpore's parallel optimizer is on with this optimizer_weight_shard_size (-1: each parameter's whole
    # data-parallel group); megatron-fp32 only
    optimizer_shard: int | None = None
    trains: bool = True  # False: the role only runs forward (contract.py RoleKind.trains), estimated by `_forward`
    # The routed experts split over TP as well as EP (expert TP = TP: Megatron core_v0.12.1 parallel_state.py
    # l. 694-695); False: over EP only, TP folded into their data parallel (MindFormers; frameworks.yaml expert_tp)
    expert_tp: bool = True


@frozen
class Term:
    """One more item of every estimate: its name (the key in plan.json's memory_breakdown_gib and the row in
    PLAN.md) and its bytes per card for a job, a layout and a pipeline stage. Counted in the total, so in every fit
    decision."""

    name: str
    bytes_per_card: Callable[[MemoryJob, Parallel, int], float]


# Items beyond the built-in ones, in the order the breakdown lists them (README "Extending": add a memory term).
TERMS: tuple[Term, ...] = ()


def _with_terms(breakdown: MemoryBreakdown, job: MemoryJob, shape: Parallel) -> MemoryBreakdown:
    if not TERMS:  # as shipped: the breakdown as it is
        return breakdown
    return replace(breakdown, extra=tuple((term.name, term.bytes_per_card(job, shape, breakdown.stage) / GIB)
                                          for term in TERMS))


def estimate(job: MemoryJob, shape: Parallel) -> MemoryBreakdown:
    """Memory per card for `shape`; the worst pipeline stage."""
    if not job.trains:
        return max((_with_terms(_forward_stage(job, shape, stage), job, shape) for stage in range(shape.pp)),
                   key=lambda m: m.total)
    if job.scheme == "deepspeed":
        if job.activations is None:
            raise ValueError("the deepspeed scheme counts measured activations: pass the decoder's coefficients")
        return _with_terms(_deepspeed(job, shape, job.activations), job, shape)
    if TERMS:  # a term may weigh any stage: each is estimated
        return max(megatron_stages(job, shape), key=lambda m: m.total)
    # Stages that hold alike differ only in the micro batches in flight, which fall from stage to stage, so the first
    # of them holds the most: the worst stage (the first of equals) is among those firsts.
    return max((_megatron_stage(job, shape, stage) for stage in distinct_stages(job.model, shape)),
               key=lambda m: m.total)


def distinct_stages(model: Model, shape: Parallel) -> tuple[int, ...]:
    """The first of each set of pipeline stages of `shape` that hold alike (the same layers, embeddings, MoE and MTP
    layers, and the last stage apart: it holds the logits), in stage order."""
    return _distinct_stages(model, shape.layers_per_stage, shape.mtp_layers)


@lru_cache(maxsize=1 << 12)
def _distinct_stages(model: Model, layers_per_stage: tuple[int, ...], mtp_layers: int) -> tuple[int, ...]:
    last = len(layers_per_stage) - 1
    firsts: dict[tuple, int] = {}
    for stage, held in enumerate(_stages_held(model, layers_per_stage, mtp_layers)):
        firsts.setdefault((held, stage == last), stage)
    return tuple(firsts.values())


def megatron_stages(job: MemoryJob, shape: Parallel) -> list[MemoryBreakdown]:
    """Memory per card of each pipeline stage of a Megatron-style layout (a plugin adds what its model holds on
    one stage beyond the decoder layers: a vision encoder on the first)."""
    return [_with_terms(_megatron_stage(job, shape, stage), job, shape) for stage in range(shape.pp)]


def expert_tp_size(shape: Parallel, expert_tp: bool) -> int:
    """How many ways tensor parallelism splits each routed expert: TP where expert TP = TP (MemoryJob.expert_tp),
    else 1."""
    return shape.tp if expert_tp else 1


def expert_data_parallel(shape: Parallel, expert_tp: bool) -> int:
    """The routed experts' data-parallel group: the cards of a pipeline stage that hold the same expert slice,
    world / (expert TP x EP x PP), CP included (Megatron core_v0.12.1 parallel_state.py l. 696-699; MindFormers'
    MoE device matrix (DP x TP / EP x CP, EP), training_graph/device_matrix.py l. 220-230)."""
    return max(1, shape.cards // (shape.pp * shape.ep * expert_tp_size(shape, expert_tp)))


def optimizer_shard_groups(shape: Parallel, shard_size: int, expert_tp: bool) -> tuple[int, int]:
    """(dense, expert): how many ways MindSpore's parallel optimizer splits the AdamW states of a non-expert and of
    an expert parameter. Each parameter is split over the cards of its stage that hold the same slice of it (its
    data-parallel group: TensorLayout::GenerateOptShardSliceShape multiplies the device dimensions its tensor map
    leaves out): DP x CP for the TP-split dense weights, `expert_data_parallel` for the experts (DP x CP x TP / EP
    where, as in MindFormers, TP does not split them). optimizer_weight_shard_size caps the group where it divides
    it, and does not take effect where it does not (MindSpore 2.10.0 context.py l. 1099-1105); -1 takes the whole
    group."""
    def capped(group: int) -> int:
        return shard_size if shard_size != -1 and group % shard_size == 0 else group
    return capped(shape.dp * shape.cp), capped(expert_data_parallel(shape, expert_tp))


def stage_params(model: Model, shape: Parallel, stage: int, expert_tp: bool) -> tuple[float, float, int, int]:
    """(dense, expert) parameters one card of pipeline stage `stage` holds after TP (expert TP x EP for the
    experts) split them, the layers it holds (MTP included) and its MTP layers."""
    held, embeddings, moe_here, layers, mtp = _stage_layers(model, shape.layers_per_stage, shape.mtp_layers, stage)
    dense = held / shape.tp + (model.embedding_params / shape.tp) * embeddings
    experts = moe_here * model.expert_params_per_layer / (shape.ep * expert_tp_size(shape, expert_tp))
    return dense, experts, layers, mtp


def _stage_layers(model: Model, layers_per_stage: tuple[int, ...], mtp_layers: int,
                  stage: int) -> tuple[float, int, int, int, int]:
    """What stage `stage` holds before any split (_stages_held)."""
    return _stages_held(model, layers_per_stage, mtp_layers)[stage]


@lru_cache(maxsize=1 << 12)
def _stages_held(model: Model, layers_per_stage: tuple[int, ...],
                 mtp_layers: int) -> tuple[tuple[float, int, int, int, int], ...]:
    """What each stage holds before any split, once per placement (the step model and the memory model ask for
    every stage of every layout they rate): its layers' own non-expert parameters, how many embedding matrices,
    its MoE layers, its layers (MTP included) and its MTP layers."""
    pp = len(layers_per_stage)
    out = []
    start = 0
    for stage, count in enumerate(layers_per_stage):
        first, last = stage == 0, stage == pp - 1
        # An MTP layer is a decoder layer (plus a 2h x h projection) with its own logits, after the last layer.
        mtp = mtp_layers if last else 0
        # MoE layers on this stage: the first `first_dense` layers of the model stay dense (DeepSeek-V3: 3), the MTP
        # layer is a MoE layer.
        held = range(start, start + count)
        moe_here = sum(1 for i in held if i >= model.first_dense) + mtp if model.is_moe else 0
        # Each held layer's own non-expert weights: the leading dense layers' MLPs sit on the stages that hold them
        # (a dense model's layers are all alike).
        layers = sum(map(model.layer_params_at, held)) if model.is_moe else count * model.layer_params_at(start)
        own = layers + mtp * (model.layer_params_at(model.layers) + 2 * model.hidden * model.hidden)
        embeddings = int(first) + int(last and (not model.tied or pp > 1))
        out.append((own, embeddings, moe_here, count + mtp, mtp))
        start += count
    return tuple(out)


def _forward_stage(job: MemoryJob, shape: Parallel, stage: int) -> MemoryBreakdown:
    """A role that only runs forward (a rollout engine, a reference model, a server) on pipeline stage `stage`:
    bf16 weights split by TP x PP (expert TP x EP for the experts), one layer's working activations at a time (nothing
    is kept for a backward), the last stage's fp32 logits split over TP, and the runtime overhead."""
    dense, experts, _, mtp = stage_params(job.model, shape, stage, job.expert_tp)
    seq = job.seq_len // shape.cp
    working = layer_activation_bytes(job.model, seq, shape.micro_batch_size, shape.tp, shape.sequence_parallel,
                                     "none")[0]
    last = stage == shape.pp - 1
    logits = (1 + mtp) * seq * shape.micro_batch_size * job.model.vocab * 4.0 / shape.tp if last else 0.0
    return MemoryBreakdown(weights=2.0 * (dense + experts) / GIB, gradients=0.0, optimizer=0.0, adapters=0.0,
                           activations=working / GIB, logits=logits / GIB, overhead=job.overhead_gb, stage=stage)


def _megatron_stage(job: MemoryJob, shape: Parallel, stage: int) -> MemoryBreakdown:
    model, method, scheme, lora_rank = job.model, job.method, job.scheme, job.lora_rank
    last = stage == shape.pp - 1
    dense, experts, layers, mtp = stage_params(model, shape, stage, job.expert_tp)
    params = dense + experts
    # Distributed optimizer: dense states over DP x CP (Megatron core_v0.12.1 optimizer/__init__.py l. 550-552:
    # get_data_parallel_group(with_context_parallel=True)); expert states over the expert data-parallel group
    # (l. 586: get_expert_data_parallel_group) of the expert weights that expert TP x EP split.
    expert_dp = expert_data_parallel(shape, job.expert_tp)
    if trains_adapters(method):
        weight_bytes = 4.0 if scheme == "megatron-fp32" else 2.0
        weights, grads, optimizer = params * weight_bytes, 0.0, 0.0
        adapters = layers * model.lora_params_per_layer(lora_rank) / shape.tp * 16.0
    elif scheme == "megatron-fp32":
        weights, grads, optimizer, adapters = params * 4.0, params * 4.0, params * 8.0, 0.0
        if job.optimizer_shard is not None:
            # MindSpore's parallel optimizer (optimizer_level level1, its default) stores each weight and its AdamW
            # states as 1/group slices, but keeps the weights all-gathered in forward until backward (only level3
            # frees them, context.py l. 1107-1116), and gradient_accumulation_shard False keeps whole accumulated
            # gradients (l. 1082-1091): only the states shrink. Parameters under parallel_optimizer_threshold (64 KB:
            # the norms) stay whole, a few MB this leaves out.
            dense_group, expert_group = optimizer_shard_groups(shape, job.optimizer_shard, job.expert_tp)
            optimizer = 8.0 * (dense / dense_group + experts / expert_group)
    else:  # megatron-distopt: bf16 weights, fp32 main grads, fp32 master + Adam sharded
        weights, grads = params * 2.0, params * 4.0
        optimizer = 12.0 * (dense / (shape.dp * shape.cp) + experts / expert_dp)
        adapters = 0.0
    seq = job.seq_len // shape.cp
    kept, working = layer_activation_bytes(model, seq, shape.micro_batch_size, shape.tp, shape.sequence_parallel,
                                           shape.recompute)
    # Megatron's 1F1B warms up min(PP - stage - 1, micro batches) (core_v0.12.1 schedules.py l. 1782-1787)
    in_flight = max(1, min(shape.pp - stage, shape.grad_accum))
    activations = layers * kept * in_flight + working
    logits = (1 + mtp) * seq * shape.micro_batch_size * model.vocab * 4.0 / shape.tp if last else 0.0
    return MemoryBreakdown(weights=weights / GIB, gradients=grads / GIB, optimizer=optimizer / GIB,
                           adapters=adapters / GIB, activations=activations / GIB, logits=logits / GIB,
                           overhead=job.overhead_gb, stage=stage)


# LLaMA-Factory (HuggingFace Trainer + DeepSpeed), checked against seed 002's measured peaks (tests/data/
# seed002_memory.csv; tests/test_memory_seed002.py reports the error per row).
# A k-bit base as LLaMA-Factory 0.9.5 loads it through bitsandbytes (0.50.2; measured with LLaMA-Factory's own
# loader by tests/test_qlora_kbit.py and bench/qlora_kbit.py), bytes per quantized weight: 4-bit packs two weights
# a byte with one fp32 absmax per 64-weight block (bitsandbytes nn/modules.py l. 230-231, Params4bit blocksize);
# 8-bit keeps the int8 weights (and an fp32 scale per output row, 4 / input width bytes: 0.1% at 4096, left out).
QUANT_BLOCK = 64
QUANT_BYTES = {4: 0.5 + 4 / QUANT_BLOCK, 8: 1.0}
# Double quantization (LLaMA-Factory model_args.py l. 291-294: on by default; model_utils/quantization.py l. 176
# passes it as bnb_4bit_use_double_quant) stores the 4-bit absmax in uint8 with one fp32 absmax per 256 of them
# (bitsandbytes functional.py l. 938-940, quantize_4bit).
DOUBLE_QUANT_BLOCK = 256


def quant_bytes(bits: int, double_quant: bool) -> float:
    """Bytes per weight of a base quantized to `bits` bits, as bitsandbytes lays it out."""
    if bits == 4 and double_quant:
        return 0.5 + (1 + 4 / DOUBLE_QUANT_BLOCK) / QUANT_BLOCK
    return QUANT_BYTES[bits]


ADAPTER_WEIGHT_BYTES, ADAPTER_STATE_BYTES = 4.0, 12.0  # trainable LoRA weights in fp32; grads 4 + Adam 8 (shardable)
# ZeRO-3 offload keeps on the device what upstream's ds_z3_offload_config.json lets it: up to
# stage3_max_live_parameters (1e9) live bf16 parameters, a sub_group_size (1e9) group of fp32 gradients and
# parameters on their way to and from the CPU optimizer, and the largest layer being gathered.
OFFLOAD_LIVE_PARAMS = 1_000_000_000
OFFLOAD_SUB_GROUP = 1_000_000_000


def _trained(model: Model) -> int:
    """Parameters a LLaMA-Factory full fine-tune trains: a vision tower stays frozen by default (freeze_vision_tower,
    hparams/finetuning_args.py l.527 at v0.9.5), so it has weights but no gradients or optimizer states."""
    return model.params - model.vision_params


def _deepspeed(job: MemoryJob, shape: Parallel, activations: dict) -> MemoryBreakdown:
    """LLaMA-Factory: no DeepSpeed (zero_stage None), ZeRO-2 (optimizer and gradients sharded) or ZeRO-3
    (everything sharded; DeepSpeed's estimate_zero3_model_states_mem_needs: 18 B/param over the world plus 4 x the
    largest layer being gathered), optionally with ZeRO-3 offload. `activations`: job.activations, known set."""
    model, method, quant_bits, kbit_fp32 = job.model, job.method, job.quant_bits, job.kbit_fp32
    world = shape.cards
    stage = shape.zero_stage or 0
    gathered = 4.0 * model.largest_layer_params if stage == 3 else 0.0
    weights = grads = optimizer = adapters = 0.0
    if trains_adapters(method):
        if quant_bits:  # the embeddings and output head stay unquantized, in bf16 or upcast to fp32
            embeddings = model.embedding_params * (1 if model.tied else 2)
            frozen = ((model.params - embeddings) * quant_bytes(quant_bits, job.double_quant)
                      + embeddings * (4.0 if kbit_fp32 else 2.0))
        else:
            frozen = 2.0 * model.params
        weights = (frozen / world if stage == 3 else frozen) + gathered
        lora = model.layers * model.lora_params_per_layer(job.lora_rank)
        adapters = lora * (ADAPTER_WEIGHT_BYTES / (world if stage == 3 else 1)
                           + ADAPTER_STATE_BYTES / (world if stage >= 2 else 1))
    elif shape.offload:
        weights = 2.0 * min(model.params, OFFLOAD_LIVE_PARAMS) + gathered
        grads = optimizer = 4.0 * min(_trained(model), OFFLOAD_SUB_GROUP)
    else:
        # 18 B/param: bf16 params 2 + fp32 grads 4 + fp32 master params 4 + Adam moments 8; ZeRO-2 keeps the params.
        weights = 2.0 * model.params / (world if stage == 3 else 1) + gathered
        grads = 4.0 * _trained(model) / (world if stage >= 2 else 1)
        optimizer = 12.0 * _trained(model) / (world if stage >= 1 else 1)
    # Without DeepSpeed the Trainer runs the model under autocast, which computes the loss in fp32.
    fp32_loss = shape.zero_stage is None or bool(quant_bits and kbit_fp32)
    kept_all, logits = hf_step_bytes(activations, model, method, shape.recompute, job.seq_len,
                                     shape.micro_batch_size, fp32_loss, int8_base=quant_bits == 8)
    return MemoryBreakdown(weights=weights / GIB, gradients=grads / GIB, optimizer=optimizer / GIB,
                           adapters=adapters / GIB, activations=kept_all / GIB, logits=logits / GIB,
                           overhead=job.overhead_gb)
