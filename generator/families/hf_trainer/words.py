"""The HuggingFace-trainer family's DeepSpeed setting in words, one spelling everywhere (the plan's tables, a layout's
description, the ZeRO search's notes). Imports nothing: the plan's Layout names its setting through it."""

from __future__ import annotations


def deepspeed_words(zero_stage: int | None, offload: bool) -> str:
    """LLaMA-Factory's DeepSpeed setting in words: "none", "ZeRO-2", "ZeRO-3 + offload"."""
    return "none" if zero_stage is None else f"ZeRO-{zero_stage}{' + offload' if offload else ''}"
