"""A covering subset of bench/spec_sweep.py (issue 23, Done when): specs rendered with the CLI and checked with
`gen-launch validate` as a user runs them, every file accepted. The full sweep (51 specs) is bench's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import spec_sweep

# Each framework; dense and MoE; LoRA, QLoRA, full and pretraining; 1 to 16 cards (one with --force); snt9b, snt9b23
# and a GPU; the MindFormers Mcore (HFDataLoader, Megatron data) and research (MindDataset) layouts.
COVERING = ("mf-qwen3moe-30b-full-16", "mf-qwen3-0.6b-full-1", "mf-qwen3-14b-pretrain-16", "mf-qwen2.5-7b-lora-8",
            "ms-qwen3moe-30b-lora-16", "ms-qwen3-8b-pretrain-16-a3", "lf-qwen3-8b-lora-2-4090",
            "lf-qwen2.5-7b-qlora-1-snt9b", "ms-qwen3-1.7b-full-1")


def test_the_sweep_holds_what_issue_23_asks():
    specs = spec_sweep.SPECS
    assert len(specs) >= 40 and len({s["job"] for s in specs}) == len(specs)
    assert {f for s in specs for f in s["frameworks"]} == set(spec_sweep.FRAMEWORKS)
    assert {s["method"] for s in specs} == {"full", "lora", "qlora", "pretrain"}
    assert {1, 512} <= {s["cards"] for s in specs}
    assert {"snt9b", "snt9b23", "rtx4090", "a800"} <= {s["hardware"] for s in specs}
    assert any(s["model"].startswith(("qwen3_moe", "deepseek", "mixtral")) for s in specs)


def test_a_covering_subset_renders_and_validates():
    chosen = [s for s in spec_sweep.SPECS if s["job"] in COVERING]
    assert len(chosen) == len(COVERING)
    found = spec_sweep.sweep(chosen)
    assert not found["refused"] and not found["problems"], spec_sweep.report(found, chosen)
    assert all(found["counts"][f]["ok"] > 0 for f in spec_sweep.FRAMEWORKS), found["counts"]
