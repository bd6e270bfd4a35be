"""The memory model against the only measured peaks we have: seed 002's HuggingFace Trainer runs on RTX 3090 / 4090,
A800 and H800 (tests/data/seed002_memory.csv), planned with two QLoRA stacks. Run with -s to print every row.

- The seed's: the QLoRA recipe of its time, PEFT's prepare_model_for_kbit_training, which upcasts the parameters
  left unquantized (embeddings, output head, norms), and so the loss, to fp32 (kbit_fp32). Every measured row within
  25% but the two the seed's own numbers contradict (flagged suspect: 26 of 28; issue 14 asks 25).
- The shipped: LLaMA-Factory 0.9.5's own k-bit load (bf16 unquantized parameters, no upcast; bitsandbytes' layout
  as tests/test_qlora_kbit.py measures it), what the plan estimates. The seed did not run it: its counts are stated
  (README, memory per card), not asked to meet the seed's.
Both count bitsandbytes 0.50's k-bit layout (memory.quant_bytes), the only one measured here.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import make_spec

from generator.resolve import resolve
from generator.tables import load_tables

# Seed 002 measured Baichuan2-7B with an older stack. LLaMA-Factory 0.9.5 refuses the model (its template is gone),
# but the measurement still checks the memory model, so these tables plan it again. Its full rows ran under
# DeepSpeed (ZeRO-3 offload), so Baichuan 2's own loss stays in bf16 there; its k-bit rows ran on one card without
# DeepSpeed, where the Trainer's autocast computes the loss in fp32 either way.
_LF = load_tables().frameworks["llama-factory"]


def _tables(kbit_fp32: bool):
    lf = replace(_LF, kbit_fp32=kbit_fp32, models={**_LF.models, "baichuan2-7b": {"decoder": "baichuan"}})
    return replace(load_tables(), frameworks={**load_tables().frameworks, "llama-factory": lf})


STACKS = {"seed": _tables(kbit_fp32=True), "shipped": _tables(kbit_fp32=_LF.kbit_fp32)}
# What each stack's estimates meet against the seed's peaks, as the README states it: measured rows within 15% and
# 25% (of 28), and the OOM runs estimated above the card. The 8-bit OOM run is above neither: the seed's int8 runs
# peaked 2-23% above the seed stack's estimate, counting bitsandbytes 0.50's int8 layer (the 1.5 B per weight the
# model counted before was fitted to these rows, with no layout behind it) and the bf16 inputs its int8 matmul keeps
# (memory.int8_input_bytes): under the seed's gradient checkpointing one recomputed layer's, which the logits
# outweigh but for bloom-2b6 (+0.07 GiB), so no count here moves.
MEETS = {"seed": {0.15: 19, 0.25: 26}, "shipped": {0.15: 13, 0.25: 18}}
OOM_ABOVE = {"seed": {"baichuan2-7b rtx4090 x1 4-bit qlora mbs 8"}, "shipped": set()}
ROWS = list(csv.DictReader(line for line in (Path(__file__).parent / "data" / "seed002_memory.csv").open()
                           if not line.startswith("#")))


def estimate_gib(row: dict, stack: str = "seed") -> float:
    """The plan's memory_per_card_gib for the row's exact setting (seq 1024, checkpointing, LoRA rank 64)."""
    cards, micro = int(row["cards"]), int(row["micro_batch_size"])
    pins = {"micro_batch_size": micro, "recompute": "full"}
    if row["method"] == "full":
        pins["offload"] = row["offload"] == "true"
    spec = make_spec(job="seed002", model=row["model"], method=row["method"], seq_len=1024, hardware=row["hardware"],
                     cards=cards, frameworks=["llama-factory"], global_batch_size=micro * cards,
                     quantization_bit=int(row["quantization_bit"]) if row["quantization_bit"] else None,
                     layout={"llama-factory": pins}, lora={} if row["method"] == "full" else {"rank": 64})
    plan = resolve(spec, STACKS[stack], force=True)
    return plan.to_json()["frameworks"]["llama-factory"]["memory_per_card_gib"]


def describe(row: dict) -> str:
    bits = f"{row['quantization_bit']}-bit " if row["quantization_bit"] else ""
    return (f"{row['model']} {row['hardware']} x{row['cards']} {bits}{row['method']}"
            f"{' offload' if row['offload'] == 'true' else ''} mbs {row['micro_batch_size']}")


def test_rows_cover_the_seed():
    assert len(ROWS) == 30 and sum(r["measured_mib"] == "OOM" for r in ROWS) == 2
    assert {r["model"] for r in ROWS} == {"baichuan2-7b", "chatglm3-6b", "bloom-2b6"}


MEASURED = [r for r in ROWS if r["measured_mib"] != "OOM"]


def errors(stack: str) -> list[float]:
    """(estimate - measured) / measured for every measured row."""
    return [(estimate_gib(row, stack) - gib) / gib for row, gib in
            ((row, float(row["measured_mib"]) / 1024) for row in MEASURED)]


def test_every_measured_row_but_the_suspect_ones_is_within_25_percent():
    seed, shipped = errors("seed"), errors("shipped")
    report = [f"{'':45s} {'measured':>8s}  {'seed stack':>16s}  {'shipped stack':>16s}"]
    for row, a, b in zip(MEASURED, seed, shipped):
        gib = float(row["measured_mib"]) / 1024
        flag = " (suspect)" if row["suspect"] else ""
        report.append(f"{describe(row):45s} {gib:8.2f}  {gib * (1 + a):8.2f} {a:+7.0%}  {gib * (1 + b):8.2f} "
                      f"{b:+7.0%}{flag}")
    for limit in (0.15, 0.25):
        report.append(f"within {limit:.0%}: seed stack {sum(abs(e) <= limit for e in seed)}/{len(MEASURED)}, "
                      f"shipped stack {sum(abs(e) <= limit for e in shipped)}/{len(MEASURED)}")
    for row in ROWS:
        if row["measured_mib"] == "OOM":
            card = STACKS["seed"].hardware[row["hardware"]].memory_gb
            report.append(f"OOM {describe(row)} on {card:g} GiB: seed stack {estimate_gib(row, 'seed'):.2f}, "
                          f"shipped stack {estimate_gib(row, 'shipped'):.2f} GiB")
    print("\n" + "\n".join(report))
    missed = [describe(row) for row, e in zip(MEASURED, seed) if abs(e) > 0.25 and not row["suspect"]]
    assert sum(abs(e) <= 0.25 for e in seed) >= 25 and not missed, "\n".join(report)


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_meets_what_the_readme_states(stack):
    within = errors(stack)
    assert {limit: sum(abs(e) <= limit for e in within) for limit in MEETS[stack]} == MEETS[stack]
    above = {describe(row) for row in ROWS if row["measured_mib"] == "OOM"
             and estimate_gib(row, stack) > STACKS[stack].hardware[row["hardware"]].memory_gb}
    assert above == OOM_ABOVE[stack]
