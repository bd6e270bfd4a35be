"""llama-factory: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning)."""

from __future__ import annotations

from ...context import Context
from ...memory import GIB, int8_input_bytes, quant_bytes
from ...plan import Layout, Rejected, deepspeed_words
from .. import contract
from ..base import DefaultPlanning
from ..contract import MemoryInputs, RoleKind, SearchSpace, Structure


def double_quantization(accelerator: str) -> bool:
    """bitsandbytes' double quantization of a 4-bit base, as train.yaml sets it: LLaMA-Factory's default on a GPU
    (hparams/model_args.py l. 291-294 at v0.9.5); its Ascend QLoRA example turns it off (examples/train_qlora/
    qwen3_lora_sft_bnb_npu.yaml; README: the NPU backend needs it off). The memory model counts the same."""
    return accelerator != "npu"


class ZeroStages:
    """LLaMA-Factory's DeepSpeed choices, lightest first, as upstream's examples/deepspeed files offer them
    (LLaMA-Factory 0.9.5 ds_z0/ds_z2/ds_z3/ds_z3_offload_config.json): one card runs without DeepSpeed (as seed
    002's single-card runs); more cards replicate the model (ZeRO-0: plain data parallel), shard the gradients and
    optimizer states (ZeRO-2), then the weights too (ZeRO-3; not for an 8-bit base, which LLaMA-Factory refuses
    under ZeRO-3), and move bf16 weights and states to CPU memory (ZeRO-3 offload). A pinned `offload` keeps only
    the matching choices. No tensor or pipeline parallelism: every card holds whole layers."""

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        bits, pinned = ctx.spec.quantization_bit, ctx.pins.offload
        stages: list[tuple[int | None, bool]] = [(None, False)] if cards == 1 else [(0, False), (2, False)]
        if cards > 1 and bits != 8:
            stages.append((3, False))
        if bits is None:
            stages.append((3, True))
        return [Structure(zero_stage=stage, offload=offload) for stage, offload in stages
                if pinned is None or offload == pinned]

    def recomputes(self, ctx: Context) -> list[str]:
        # Gradient checkpointing is on or off in the HuggingFace code: no selective setting.
        return [ctx.pins.recompute] if ctx.pins.recompute else ["none", "full"]

    def micro_batches(self, ctx: Context, cards: int) -> list[int] | None:
        return None

    def label(self, structure: Structure) -> str:
        return f"DeepSpeed {deepspeed_words(structure.zero_stage, structure.offload)}"

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> str:
        """Why the plan's DeepSpeed setting: the lightest that fits, and what the lighter ones would need."""
        lighter = [f"{r.layout} {r.reason}" for r in rejected if r.framework == best.framework]
        return (f"DeepSpeed {best.deepspeed_label}: the lightest setting that fits ({best.memory.total:.1f} GiB per "
                f"card), trying none (one card), ZeRO-0, ZeRO-2, ZeRO-3, then ZeRO-3 + offload as upstream's "
                f"examples/deepspeed offer them" + (f"; {'; '.join(lighter)}" if lighter else ""))


ZERO_STAGES = ZeroStages()


class Planning(DefaultPlanning):
    moved_pins = {"lora_rank": "has moved to lora.rank (one adapter shape for every framework)"}
    chat_template_fact = "template"
    thinking_template = "LLaMA-Factory's template qwen3"
    pretrain_weights = "LLaMA-Factory model_name_or_path"
    linear_decay_source = "transformers get_linear_schedule_with_warmup"
    fixed_steps = "LLaMA-Factory max_steps"
    unshared_storage_refusal = ("transformers saves checkpoints on the first node only (save_on_each_node false), "
                                "so the other nodes cannot resume")

    def space(self, role: RoleKind) -> SearchSpace:
        return ZERO_STAGES

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        return MemoryInputs(double_quant=double_quantization(ctx.hw.accelerator))

    def layout_notes(self, ctx: Context, layout: Layout) -> list[str]:
        notes = []
        if ctx.hw.accelerator == "npu":  # seed 001 ran LLaMA-Factory on 910B
            unsharded = ctx.model.params * 2 / GIB
            how = f"DeepSpeed {layout.deepspeed_label} on {layout.cards} card(s)"
            notes.append(f"seed 001 check: the bf16 weights alone need {unsharded:.1f} GiB on one card without "
                         f"sharding ({'over' if unsharded > ctx.usable_gb else 'within'} the "
                         f"{ctx.usable_gb:g} GiB usable); {how} needs {layout.memory.total:.1f} GiB per card, "
                         f"{layout.memory_share:.0%} of it")
        bits = ctx.spec.quantization_bit
        if bits:
            double = double_quantization(ctx.hw.accelerator)
            kind = "nf4" + (" with double quantization" if double else " without double quantization") \
                if bits == 4 else "LLM.int8"
            unquantized = "fp32 (upcast)" if ctx.fw.kbit_fp32 else "the checkpoint's bf16 (no upcast)"
            notes.append(f"memory of the {bits}-bit base: as LLaMA-Factory 0.9.5 loads it through bitsandbytes "
                         f"(measured with its own loader, tests/test_qlora_kbit.py): {kind}, "
                         f"{quant_bytes(bits, double):.4g} B per quantized weight; embeddings and output head in "
                         f"{unquantized}; LoRA adapters in fp32. Seed 002's QLoRA peaks were measured with the "
                         f"recipe of its time (PEFT's prepare_model_for_kbit_training, which upcasts to fp32), not "
                         f"this stack (README, memory per card)")
            if bits == 8:
                kept, recomputed = int8_input_bytes(ctx.model, layout.recompute,
                                                    ctx.spec.seq_len * layout.micro_batch_size)
                held = (f"{recomputed / GIB:.2f} GiB, one layer's while backward recomputes it (gradient "
                        f"checkpointing keeps none in forward), counted on that layer's working set, which the "
                        f"peak holds where it outweighs the logits" if layout.recompute == "full"
                        else f"{kept / GIB:.2f} GiB, every layer's over the step, counted in activations")
                notes.append(f"activations of the 8-bit base: bitsandbytes' int8 matmul keeps each quantized "
                             f"linear's bf16 input for backward (MatMul8bitLt, autograd/_functions.py l. 186-187), "
                             f"which LoRA on a bf16 base does not: {held}; derived from bitsandbytes 0.50.2's "
                             f"source, not measured on a GPU (README, memory per card)")
        if ctx.fw.flash_attn and ctx.hw.accelerator == "gpu":
            notes.append(f"flash_attn: {ctx.fw.flash_attn} needs the flash-attn package on the GPU nodes; without "
                         f"it LLaMA-Factory warns and falls back to PyTorch attention, and activations outgrow this "
                         f"plan")
        return notes


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name
