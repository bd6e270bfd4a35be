"""The execution tier: generated LLaMA-Factory files trained for real. Each job is rendered by gen-launch, then its
launch.sh runs unchanged with the real `llamafactory-cli train` (LLaMA-Factory 0.9.5, the versions it pins, a CPU
torch) on a tiny randomly initialised model of the row's family, for two optimizer steps, on data shaped as
upstream's demo files. CPU-only settings go after `--` on the command line (llamafactory_exec.CPU_OVERRIDES).

CI runs the few jobs that together have every feature of the runnable rows (llamafactory_exec.covering: every
model family and template, both data formats and the multimodal one, LoRA, QLoRA, full, pretraining, each DeepSpeed
file, recompute, several ranks); bench/llamafactory_exec_sweep.py runs every row x method.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import llamafactory_exec as X
import pytest
import yaml
from helpers import free_ports, require

JOBS = X.all_jobs()
CHOSEN = X.covering(JOBS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    require("llamafactory", "deepspeed", "bitsandbytes")
    root = tmp_path_factory.mktemp("exec")
    X.write_models(CHOSEN, root / "models")
    ports = free_ports(len(CHOSEN))  # torchrun's rendezvous of each job: free here, whoever else runs tests
    with ThreadPoolExecutor(2) as pool:  # two cores: two jobs side by side, one thread each
        runs = {job.name: pool.submit(X.run, job, root / job.name, port, root / "models")
                for job, port in zip(CHOSEN, ports)}
        return {name: run.result() for name, run in runs.items()}


def test_the_ports_a_run_takes_are_free_beside_another_run():
    # Issue 34 item 14: two test runs on one machine (two CI jobs, a developer and CI) each start torchrun on the
    # ports they take; fixed ones (29710 and up) failed with EADDRINUSE. Another run holds its ports (listening, as
    # torchrun's rendezvous does); this run's are distinct, none of those, and each can be listened on.
    others = []
    try:
        for port in free_ports(len(CHOSEN) + 1):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", port))
            sock.listen()
            others.append(sock)
        held = {sock.getsockname()[1] for sock in others}
        ours = free_ports(len(CHOSEN) + 1)
        assert len(set(ours)) == len(ours) and not held & set(ours)
        for port in ours:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("", port))
                sock.listen()
    finally:
        for sock in others:
            sock.close()
    for module in (Path(__file__), Path(X.__file__)):  # and no fixed port left in the execution tier
        assert not re.search(r"=\s*29[0-9]{3}\b|PORT \+", module.read_text(encoding="utf-8")), module


@pytest.mark.integration
@pytest.mark.parametrize("job", CHOSEN, ids=lambda job: job.name)
def test_generated_files_train_two_steps(results, job):
    result = results[job.name]
    assert result.returncode == 0, result.log[-6000:]
    state = result.trainer_state
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert state["global_step"] == 2 and len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    saved = {path.name for path in (result.output / X.NAME).iterdir()}
    assert ("adapter_model.safetensors" if job.method in ("lora", "qlora") else "model.safetensors") in saved
    # What was planned is what ran: the generated files, read by the launch, unchanged.
    train = yaml.safe_load((result.files / X.NAME / "train.yaml").read_text())
    plan = job.plan().frameworks[X.NAME]
    assert train["template"] == plan.info["template"]
    assert ("deepspeed" in train) == (plan.layout.zero_stage is not None)
    ranks = plan.layout.cards
    assert f"Initializing {ranks} distributed tasks at: 127.0.0.1:" in result.log  # LLaMA-Factory launcher.py
    if job.method == "qlora":
        assert "Quantizing model to 4 bit with bitsandbytes" in result.log
        # LLaMA-Factory's Ascend QLoRA example turns double quantization off (train_qlora/qwen3_lora_sft_bnb_npu.yaml)
        assert train.get("double_quantization", True) is (job.plan().accelerator != "npu")
    if ("columns", ("images",)) in X.features(job):
        # Each row's "<image>" met its image: LLaMA-Factory's mm_plugin raises when the counts differ, so two
        # steps trained on the images (defect 3: no images column made this fail).
        info = json.loads((result.files / X.NAME / "dataset_info.json").read_text())
        assert next(iter(info.values()))["columns"]["images"] == "images"


def test_ci_covers_what_the_issue_names():
    # Every family and template the runnable rows use, both data formats and the multimodal one, every method, each
    # DeepSpeed file, several ranks and both accelerators' renderings.
    runnable = [job for job in JOBS if not (job.refusal or job.runnable)]
    have = set().union(*map(X.features, CHOSEN))
    assert {("family", f) for f in ("llama3", "llama2", "qwen2", "qwen3", "glm4", "gemma3", "bloom")} <= have
    assert {f for f in have if f[0] == "template"} == {f for job in runnable for f in X.features(job)
                                                       if f[0] == "template"}
    assert {("format", f) for f in ("alpaca", "sharegpt", "openai", "text")} <= have
    assert {("method", m) for m in ("full", "lora", "qlora", "pretrain")} <= have
    assert {("deepspeed", d) for d in (None, "ds_z2_config.json", "ds_z3_config.json",
                                       "ds_z3_offload_config.json")} <= have
    assert {("ranks", True), ("accelerator", "npu"), ("accelerator", "gpu"), ("quantized deepspeed", True),
            ("columns", ("images",)), ("columns", ("system", "history")), ("columns", ("system", "tools"))} <= have


def test_every_row_and_method_is_run_or_refused_with_its_reason():
    # The rows this tier cannot train say why: refused by gen-launch (LLaMA-Factory 0.9.5 cannot train them) or
    # not runnable on this machine (code that is not a package, a package with no CPU build).
    refused = {job.name: job.refusal for job in JOBS if job.refusal}
    assert set(refused) == {f"baichuan2-7b-{method}" for method in ("full", "lora", "qlora", "pretrain")}
    assert all("no longer registers the baichuan2 template" in reason for reason in refused.values())
    elsewhere = {job.model for job in JOBS if job.runnable}
    assert elsewhere == {"chatglm3-6b", "qwen2vl-2b", "qwen2vl-7b", "qwen2vl-72b", "qwen2.5_vl-7b", "qwen2.5_vl-32b",
                         "qwen2.5_vl-72b"}


@pytest.mark.integration
@pytest.mark.parametrize("job", CHOSEN, ids=lambda job: job.name)
def test_the_run_left_the_files_as_rendered(results, job):
    # The CPU settings reached LLaMA-Factory on its command line only: every file still has the hash MANIFEST gave
    # it, and train.yaml still says bf16 and the cluster's schedule. (`gen-launch validate` on these folders, with
    # LLaMA-Factory's own checks, is in bench/llamafactory_exec_sweep.py and test_render_llama_factory.py.)
    result = results[job.name]
    listed = [line.split("  ", 1) for line in (result.files / "MANIFEST").read_text().splitlines()
              if line and not line.startswith("#")]
    assert listed and all(hashlib.sha256((result.files / path).read_bytes()).hexdigest() == digest
                          for digest, path in listed)
    train = yaml.safe_load((result.files / X.NAME / "train.yaml").read_text())
    assert train["bf16"] is True and "max_steps" not in train and result.trainer_state["max_steps"] == 2


RESUME_JOB = next(job for job in CHOSEN if job.method == "lora" and job.cards == 1)


@pytest.mark.integration
def test_a_relaunch_resumes_a_killed_run_and_refuses_a_finished_one(tmp_path):
    # Issue 13: the same launch command after a crash continues from the last checkpoint (optimizer and step
    # included); after the run has finished it refuses to train over it.
    require("llamafactory", "deepspeed", "bitsandbytes")
    run = X.run_resumed(RESUME_JOB, tmp_path / "job", free_ports(1)[0], tmp_path / "models")
    first, second, third = run.first, run.second, run.third
    assert first[0] == -9 and not run.finished_first, first[1][-3000:]  # killed mid-run
    resumed = re.search(r"Resuming training from (\S+)checkpoint-(\d+)", second[1])  # LLaMA-Factory hparams/parser.py
    assert second[0] == 0 and resumed, second[1][-6000:]
    start = int(resumed.group(2))
    assert 2 <= start < 60
    assert "Resuming training from checkpoint with epoch" in second[1] and f"global step {start}" in second[1]
    state = run.trainer_state
    losses = [entry["step"] for entry in state["log_history"] if "loss" in entry]
    assert state["global_step"] == 60 and losses == list(range(1, 61)), state["log_history"]
    # the second launch trained only the steps after the checkpoint (transformers logs each step's loss)
    assert second[1].count("'loss':") == 60 - start
    assert sorted(int(p.name.split("-")[1]) for p in (run.output / X.NAME).glob("checkpoint-*")) == [56, 58, 60]
    assert third[0] == 2 and "holds a finished run" in third[1]
