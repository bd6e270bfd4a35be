"""The sweep behind issue 23's closing note (not a test): job specs the tests do not hold, as data, each rendered with
the CLI (`python -m generator render`) and checked with `python -m generator validate --json`, as a user runs them.

Run `python bench/spec_sweep.py [FILTER]` from the repository (FILTER: a substring of the spec names to run). It
prints, per framework, how many files were validated ok / problem / skipped / env, each problem (spec, file,
message), and the specs render refused with the reason. LLaMA-Factory's own parser runs in a child interpreter per
job, so a full run takes a while on 2 cores. tests/test_spec_sweep.py runs a covering subset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("mindformers", "mindspeed-llm", "llama-factory")
PATHS = {"model_dir": "/data/models/m", "dataset": "/data/sft/train.json", "output_dir": "/shared/exp",
         "mindformers_dir": "/opt/mindformers", "mindspeed_llm_dir": "/opt/MindSpeed-LLM"}
PT_PATHS = {**PATHS, "dataset": "/data/pt/corpus.jsonl"}


def spec(name: str, model: str, method: str, hardware: str, cards: int, frameworks: list[str], seq_len: int = 4096,
         **extra) -> dict:
    """A job spec: `name` is its job name; pretraining reads raw text, every multi-node job names its master.
    FORCE: True renders it with --force (below the table's minimum cards: the one-card launch paths)."""
    out = {"job": name, "model": model, "method": method, "seq_len": seq_len, "hardware": hardware, "cards": cards,
           "frameworks": frameworks, "data": {"samples": 50000, "tokens_per_sample": 1024},
           "paths": PT_PATHS if method == "pretrain" else PATHS, "cluster": {"master_addr": "10.0.0.1"}}
    if method == "qlora":
        out["quantization_bit"] = 4
    return {**out, **extra}


MF, MS, LF = ["mindformers"], ["mindspeed-llm"], ["llama-factory"]
# At least 40 specs: all three frameworks, dense and MoE, full / LoRA / QLoRA fine-tuning and pretraining,
# 1 to 512 cards, snt9b / snt9b23 / GPUs.
SPECS: list[dict] = [
    # MindFormers: Mcore Qwen3 / Qwen3-MoE / DeepSeek-V3, research Llama-3.1 / Qwen2.5
    spec("mf-qwen3-0.6b-full-1", "qwen3-0.6b", "full", "snt9b", 1, MF, FORCE=True),
    spec("mf-qwen3-8b-full-8", "qwen3-8b", "full", "snt9b", 8, MF),
    spec("mf-qwen3-8b-lora-8-a3", "qwen3-8b", "lora", "snt9b23", 8, MF),
    spec("mf-qwen3-32b-full-32", "qwen3-32b", "full", "snt9b", 32, MF, seq_len=8192),
    spec("mf-qwen3-14b-pretrain-16", "qwen3-14b", "pretrain", "snt9b", 16, MF),
    spec("mf-qwen3moe-30b-full-16", "qwen3_moe-30b_a3b", "full", "snt9b", 16, MF),
    spec("mf-qwen3moe-30b-pretrain-32", "qwen3_moe-30b_a3b", "pretrain", "snt9b23", 32, MF),
    spec("mf-qwen3moe-235b-full-256", "qwen3_moe-235b_a22b", "full", "snt9b", 256, MF),
    spec("mf-deepseek-v3-full-512", "deepseek-v3", "full", "snt9b", 512, MF),
    spec("mf-llama3.1-8b-full-8", "llama3.1-8b", "full", "snt9b", 8, MF),
    spec("mf-llama3.1-70b-lora-32", "llama3.1-70b", "lora", "snt9b", 32, MF),
    spec("mf-qwen2.5-32b-full-32", "qwen2.5-32b", "full", "snt9b23", 32, MF, seq_len=8192),
    spec("mf-qwen2.5-7b-lora-8", "qwen2.5-7b", "lora", "snt9b", 8, MF),
    # MindSpeed-LLM
    spec("ms-qwen3-1.7b-full-1", "qwen3-1.7b", "full", "snt9b", 1, MS, FORCE=True),
    spec("ms-qwen3-8b-lora-8", "qwen3-8b", "lora", "snt9b", 8, MS),
    spec("ms-qwen3-8b-pretrain-16-a3", "qwen3-8b", "pretrain", "snt9b23", 16, MS),
    spec("ms-qwen3-32b-full-64", "qwen3-32b", "full", "snt9b", 64, MS, seq_len=32768),
    spec("ms-qwen2.5-14b-full-16", "qwen2.5-14b", "full", "snt9b", 16, MS),
    spec("ms-qwen2.5-72b-lora-32", "qwen2.5-72b", "lora", "snt9b", 32, MS),
    spec("ms-llama3.1-70b-pretrain-128", "llama3.1-70b", "pretrain", "snt9b", 128, MS),
    spec("ms-llama2-13b-full-16", "llama2-13b", "full", "snt9b23", 16, MS),
    spec("ms-glm4-9b-lora-8", "glm4-9b", "lora", "snt9b", 8, MS),
    spec("ms-mixtral-8x7b-full-32", "mixtral-8x7b", "full", "snt9b", 32, MS),
    spec("ms-qwen3moe-30b-lora-16", "qwen3_moe-30b_a3b", "lora", "snt9b", 16, MS),
    spec("ms-qwen3moe-235b-pretrain-512", "qwen3_moe-235b_a22b", "pretrain", "snt9b23", 512, MS),
    spec("ms-deepseek-v3-full-512", "deepseek-v3", "full", "snt9b", 512, MS),
    # LLaMA-Factory: Ascend and GPUs
    spec("lf-qwen3-8b-lora-2-4090", "qwen3-8b", "lora", "rtx4090", 2, LF, seq_len=2048),
    spec("lf-qwen3-8b-qlora-1-3090", "qwen3-8b", "qlora", "rtx3090", 1, LF, seq_len=2048),
    spec("lf-qwen2.5-7b-qlora-1-snt9b", "qwen2.5-7b", "qlora", "snt9b", 1, LF),
    spec("lf-qwen2.5-7b-full-8-a800", "qwen2.5-7b", "full", "a800", 8, LF),
    spec("lf-qwen3-32b-full-16", "qwen3-32b", "full", "snt9b", 16, LF),
    spec("lf-qwen3-8b-pretrain-8-h800", "qwen3-8b", "pretrain", "h800", 8, LF),
    spec("lf-llama3.1-8b-lora-8-a3", "llama3.1-8b", "lora", "snt9b23", 8, LF, seq_len=8192),
    spec("lf-glm4-9b-lora-2", "glm4-9b", "lora", "snt9b", 2, LF),
    spec("lf-chatglm3-6b-lora-attn-1-a800", "chatglm3-6b", "lora", "a800", 1, LF, lora={"targets": "attention"}),
    spec("lf-bloom-2b6-full-4090x8", "bloom-2b6", "full", "rtx4090", 8, LF, seq_len=2048),
    spec("lf-qwen2vl-7b-lora-8", "qwen2vl-7b", "lora", "snt9b", 8, LF),
    spec("lf-gemma3-27b-lora-16-h800", "gemma3-27b", "lora", "h800", 16, LF),
    spec("lf-llama2-70b-qlora-8-a800", "llama2-70b", "qlora", "a800", 8, LF),
    spec("lf-qwen2.5-32b-lora-32", "qwen2.5-32b", "lora", "snt9b", 32, LF, seq_len=8192),
    # Several frameworks in one spec
    spec("all-qwen3-8b-full-16", "qwen3-8b", "full", "snt9b", 16, [*MF, *MS, *LF]),
    spec("all-qwen3-8b-lora-8-a3", "qwen3-8b", "lora", "snt9b23", 8, [*MF, *MS, *LF]),
    spec("all-qwen3-32b-pretrain-64", "qwen3-32b", "pretrain", "snt9b", 64, [*MF, *MS, *LF]),
    spec("all-qwen3moe-30b-full-32", "qwen3_moe-30b_a3b", "full", "snt9b", 32, [*MF, *MS]),
    spec("all-llama3.1-8b-lora-16", "llama3.1-8b", "lora", "snt9b", 16, [*MF, *MS, *LF]),
    # Long sequences (context parallel), the largest MoE jobs, the smallest GPU jobs
    spec("mf-qwen3-32b-lora-32-32k", "qwen3-32b", "lora", "snt9b", 32, MF, seq_len=32768),
    spec("mf-qwen3moe-235b-lora-256-a3", "qwen3_moe-235b_a22b", "lora", "snt9b23", 256, MF),
    spec("ms-deepseek-v3-lora-256-a3", "deepseek-v3", "lora", "snt9b23", 256, MS),
    spec("lf-qwen2.5-0.5b-full-1-3090", "qwen2.5-0.5b", "full", "rtx3090", 1, LF, seq_len=2048),
    # One RTX 4090 does not hold 1B full-parameter pretraining (the memory model asks for 2): two cards.
    spec("lf-llama3.2-1b-pretrain-2-4090", "llama3.2-1b", "pretrain", "rtx4090", 2, LF, seq_len=2048),
    spec("lf-qwen2vl-72b-lora-32-a3", "qwen2vl-72b", "lora", "snt9b23", 32, LF, seq_len=1024),
]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "generator", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900, check=False)


def run_spec(job: dict, folder: Path) -> tuple[str | None, list[dict]]:
    """(render's refusal or None, validate's results) of one spec, rendered under `folder`."""
    path = folder / f"{job['job']}.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in job.items() if k != "FORCE"}, sort_keys=False))
    rendered = cli("render", str(path), "-o", str(folder / "out"), *(["--force"] if job.get("FORCE") else []))
    if rendered.returncode != 0:
        lines = [line for line in rendered.stderr.splitlines() if line.strip()]
        return (lines[-1] if lines else f"exit {rendered.returncode}"), []
    checked = cli("validate", "--json", str(folder / "out" / job["job"]))
    try:
        return None, json.loads(checked.stdout)["results"]
    except (ValueError, KeyError):
        return f"validate exited {checked.returncode} without its JSON: {checked.stderr.strip()[-300:]}", []


def sweep(specs: list[dict]) -> dict:
    """Counts per framework ('' for the job's own files), problems and refusals."""
    counts: dict[str, Counter] = defaultdict(Counter)
    problems: list[tuple[str, str, str]] = []
    refused: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for job in specs:
            refusal, results = run_spec(job, Path(tmp))
            if refusal:
                refused.append((job["job"], refusal))
                continue
            for result in results:
                framework = result["path"].split("/", 1)[0] if "/" in result["path"] else ""
                counts[framework][result["status"]] += 1
                if result["status"] != "ok" and result["status"] != "skipped":
                    problems.append((job["job"], result["path"], result["detail"]))
    return {"counts": counts, "problems": problems, "refused": refused}


def report(found: dict, specs: list[dict]) -> str:
    lines = [f"{len(specs)} specs, {len(found['refused'])} refused"]
    for framework in (*FRAMEWORKS, ""):
        c = found["counts"].get(framework, Counter())
        lines.append(f"  {framework or 'job files'}: " + ", ".join(f"{s} {c[s]}" for s in
                                                                     ("ok", "problem", "skipped", "env")))
    lines += [f"  problem: {job}: {path}: {detail}" for job, path, detail in found["problems"]]
    lines += [f"  refused: {job}: {reason}" for job, reason in found["refused"]]
    return "\n".join(lines)


if __name__ == "__main__":
    chosen = [s for s in SPECS if not sys.argv[1:] or any(f in s["job"] for f in sys.argv[1:])]
    print(report(sweep(chosen), chosen), flush=True)
