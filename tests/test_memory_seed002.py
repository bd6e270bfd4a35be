"""The memory model against the only measured peaks we have: seed 002's HuggingFace Trainer runs on RTX 3090 / 4090,
A800 and H800 (tests/data/seed002_memory.csv). Every measured row within 25% but the two the seed's own numbers
contradict (flagged suspect: 26 of 28; issue 14 asks 25), every OOM row estimated above the card's memory. Run
with -s to print the error per row."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import make_spec

from generator.resolve import resolve
from generator.tables import load_tables

# Seed 002 measured Baichuan2-7B with an older stack. LLaMA-Factory 0.9.5 refuses the model (its template is gone),
# but the measurement still checks the memory model, so these tables plan it again. The seed names no trainer; its
# k-bit rows are planned with the unquantized parameters (embeddings, output head) in fp32 (kbit_fp32), as PEFT's
# prepare_model_for_kbit_training, the QLoRA recipe of its time, leaves them, and as the memory model assumed
# before LLaMA-Factory 0.9.5's own loading was checked. Its full rows ran under DeepSpeed (ZeRO-3 offload), so
# Baichuan 2's own loss stays in bf16 there; its k-bit rows compute the loss in fp32 (the upcast head, or autocast
# on one card without DeepSpeed).
_LF = load_tables().frameworks["llama-factory"]
T = replace(load_tables(), frameworks={**load_tables().frameworks, "llama-factory": replace(
    _LF, kbit_fp32=True, models={**_LF.models, "baichuan2-7b": {"decoder": "baichuan"}})})
ROWS = list(csv.DictReader(line for line in (Path(__file__).parent / "data" / "seed002_memory.csv").open()
                           if not line.startswith("#")))


def estimate_gib(row: dict) -> float:
    """The plan's memory_per_card_gib for the row's exact setting (seq 1024, checkpointing, LoRA rank 64)."""
    cards, micro = int(row["cards"]), int(row["micro_batch_size"])
    pins = {"micro_batch_size": micro, "recompute": "full"}
    if row["method"] == "full":
        pins["offload"] = row["offload"] == "true"
    spec = make_spec(job="seed002", model=row["model"], method=row["method"], seq_len=1024, hardware=row["hardware"],
                     cards=cards, frameworks=["llama-factory"], global_batch_size=micro * cards,
                     quantization_bit=int(row["quantization_bit"]) if row["quantization_bit"] else None,
                     layout={"llama-factory": pins}, lora={} if row["method"] == "full" else {"rank": 64})
    plan = resolve(spec, T, force=True)
    return plan.to_json()["frameworks"]["llama-factory"]["memory_per_card_gib"]


def describe(row: dict) -> str:
    bits = f"{row['quantization_bit']}-bit " if row["quantization_bit"] else ""
    return (f"{row['model']} {row['hardware']} x{row['cards']} {bits}{row['method']}"
            f"{' offload' if row['offload'] == 'true' else ''} mbs {row['micro_batch_size']}")


def test_rows_cover_the_seed():
    assert len(ROWS) == 30 and sum(r["measured_mib"] == "OOM" for r in ROWS) == 2
    assert {r["model"] for r in ROWS} == {"baichuan2-7b", "chatglm3-6b", "bloom-2b6"}


def test_every_measured_row_but_the_suspect_ones_is_within_25_percent():
    measured = [r for r in ROWS if r["measured_mib"] != "OOM"]
    report, within, missed = [], 0, []
    for row in measured:
        gib = float(row["measured_mib"]) / 1024
        est = estimate_gib(row)
        error = (est - gib) / gib
        within += abs(error) <= 0.25
        if abs(error) > 0.25 and not row["suspect"]:
            missed.append(describe(row))
        flag = " (suspect)" if row["suspect"] else ""
        report.append(f"{describe(row):45s} measured {gib:6.2f} GiB  estimated {est:6.2f} GiB  {error:+5.0%}{flag}")
    print("\n" + "\n".join(report) + f"\nwithin 25%: {within}/{len(measured)}")
    assert within >= 25 and not missed, "\n".join(report)


@pytest.mark.parametrize("row", [r for r in ROWS if r["measured_mib"] == "OOM"], ids=describe)
def test_oom_rows_are_estimated_above_the_card(row):
    assert estimate_gib(row) > T.hardware[row["hardware"]].memory_gb
