"""What the internal source numbers a plan cites stand for (the project's seed documents, /work/shared/seeds):
PLAN.md and `plan` end with the ones their text names, so a reader never meets an undefined "seed 003"."""

from __future__ import annotations

import re

CITED = {
    "seed 000": "the Huawei card table: minimum cards per model, sequence length and platform, and the time and "
                "card-count formula",
    "seed 001": "a write-up of fine-tuning Qwen 14B / 32B on 910B servers (DeepSpeed ZeRO-3 on 8 x 64 GB, data "
                "sizes per model size)",
    "seed 002": "the measured GPU table: fine-tuning throughput and memory peaks on RTX 4090 / 3090 / A800",
    "seed 003": "Huawei's Qwen3 guide: validated training configs, weights merging, inference",
    "seed 004": "the measured MFU table: Huawei's published training throughput per model on Atlas 900 A2 PODc",
}


def cited(text: str) -> list[tuple[str, str]]:
    """(name, what it is) for each source `text` names ("seed 003", "seed-003"), in number order."""
    named = {f"seed {number}" for number in re.findall(r"\bseed[ -](00[0-4])\b", text, re.IGNORECASE)}
    return [(name, what) for name, what in CITED.items() if name in named]
