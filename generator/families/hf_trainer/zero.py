"""The DeepSpeed ZeRO search of a framework that trains the HuggingFace code through transformers' Trainer."""

from __future__ import annotations

from ...api.contract import Structure
from ...api.notes import Note
from ...context import Context
from ...plan import Layout, Rejected
from .words import deepspeed_words


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

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> Note:
        """Why the plan's DeepSpeed setting: the lightest that fits, and what the lighter ones would need."""
        lighter = [f"{r.layout} {r.reason}" for r in rejected if r.framework == best.framework]
        return Note("hf_trainer.zero_stage_choice",
                    f"DeepSpeed {best.deepspeed_label}: the lightest setting that fits ({best.memory.total:.1f} GiB "
                    f"per card), trying none (one card), ZeRO-0, ZeRO-2, ZeRO-3, then ZeRO-3 + offload as upstream's "
                    f"examples/deepspeed offer them" + (f"; {'; '.join(lighter)}" if lighter else ""))


ZERO_STAGES = ZeroStages()
