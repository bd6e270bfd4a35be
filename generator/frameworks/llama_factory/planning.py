"""llama-factory: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning)."""

from __future__ import annotations

from ...api.notes import Note
from ...context import Context
from ...families.hf_trainer.zero import ZERO_STAGES
from ...memory import GIB, int8_input_bytes, quant_bytes
from ...plan import Layout
from .. import contract
from ..base import DefaultPlanning
from ..contract import MemoryInputs, RoleKind, SearchSpace


def double_quantization(accelerator: str) -> bool:
    """bitsandbytes' double quantization of a 4-bit base, as train.yaml sets it: LLaMA-Factory's default on a GPU
    (hparams/model_args.py l. 291-294 at v0.9.5); its Ascend QLoRA example turns it off (examples/train_qlora/
    qwen3_lora_sft_bnb_npu.yaml; README: the NPU backend needs it off). The memory model counts the same."""
    return accelerator != "npu"


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

    def layout_notes(self, ctx: Context, layout: Layout) -> list[Note]:
        notes = []
        if ctx.hw.accelerator == "npu":  # seed 001 ran LLaMA-Factory on 910B
            unsharded = ctx.model.params * 2 / GIB
            how = f"DeepSpeed {layout.deepspeed_label} on {layout.cards} card(s)"
            notes.append(Note("llama_factory.zero3_report_check",
                              f"the ZeRO-3 field report's check: the bf16 weights alone need {unsharded:.1f} GiB on "
                              f"one card without sharding ({'over' if unsharded > ctx.usable_gb else 'within'} the "
                              f"{ctx.usable_gb:g} GiB usable); {how} needs {layout.memory.total:.1f} GiB per card, "
                              f"{layout.memory_share:.0%} of it"))
        bits = ctx.spec.quantization_bit
        if bits:
            double = double_quantization(ctx.hw.accelerator)
            kind = "nf4" + (" with double quantization" if double else " without double quantization") \
                if bits == 4 else "LLM.int8"
            unquantized = "fp32 (upcast)" if ctx.fw.kbit_fp32 else "the checkpoint's bf16 (no upcast)"
            notes.append(Note("llama_factory.kbit_base_memory",
                              f"memory of the {bits}-bit base: as LLaMA-Factory 0.9.5 loads it through bitsandbytes "
                              f"(measured with its own loader, tests/test_qlora_kbit.py): {kind}, "
                              f"{quant_bytes(bits, double):.4g} B per quantized weight; embeddings and output head "
                              f"in {unquantized}; LoRA adapters in fp32. The measured GPU throughput table's QLoRA "
                              f"peaks were measured with the recipe of its time (PEFT's "
                              f"prepare_model_for_kbit_training, which upcasts to fp32), not this stack (README, "
                              f"memory per card)"))
            if bits == 8:
                kept, recomputed = int8_input_bytes(ctx.model, layout.recompute,
                                                    ctx.spec.seq_len * layout.micro_batch_size)
                held = (f"{recomputed / GIB:.2f} GiB, one layer's while backward recomputes it (gradient "
                        f"checkpointing keeps none in forward), counted on that layer's working set, which the "
                        f"peak holds where it outweighs the logits" if layout.recompute == "full"
                        else f"{kept / GIB:.2f} GiB, every layer's over the step, counted in activations")
                notes.append(Note("llama_factory.int8_activations",
                                  f"activations of the 8-bit base: bitsandbytes' int8 matmul keeps each quantized "
                                  f"linear's bf16 input for backward (MatMul8bitLt, autograd/_functions.py l. "
                                  f"186-187), which LoRA on a bf16 base does not: {held}; derived from bitsandbytes "
                                  f"0.50.2's source, not measured on a GPU (README, memory per card)"))
        if ctx.fw.flash_attn and ctx.hw.accelerator == "gpu":
            notes.append(Note("llama_factory.flash_attn_package",
                              f"flash_attn: {ctx.fw.flash_attn} needs the flash-attn package on the GPU nodes; "
                              f"without it LLaMA-Factory warns and falls back to PyTorch attention, and activations "
                              f"outgrow this plan"))
        return notes


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name
