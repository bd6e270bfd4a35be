"""Issue 38 (a): a MindSpeed-RL job's steps are the train_iters its trainer runs over the data (v2.3.0 builds
train_iters x global batch prompts from whole passes over the rows and runs one global batch an iteration), so
PLAN.md's steps, plan.json, the run estimate, save_interval and train_iters are one number at one step time; no data
size keeps upstream's train_iters with its source; data holding no whole batch is refused at data.samples."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import render_job

from generator.errors import SpecError
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"


def rendered(tmp_path, data: dict | None, model: str = "qwen3-8b", method: str = "grpo", seq_len: int = 10240,
             **fields):
    paths = {"model_dir": "/m/hf", "dataset": "/d/train.parquet", "output_dir": str(tmp_path / "out")}
    extra = {"data": data} if data is not None else {}
    return render_job(T, frameworks=[NAME], model=model, method=method, hardware="snt9b23", cards=16, seq_len=seq_len,
                      paths=paths, **extra, **fields)


def config_of(plan, files) -> dict:
    return yaml.safe_load(files[f"{NAME}/config/{plan.frameworks[NAME].settings.config_name}.yaml"])


def test_the_steps_are_the_iterations_its_trainer_runs_over_whole_passes_of_the_rows(tmp_path):
    # 17010 rows x 2 epochs = 34020 prompts: 1063 whole batches of 32 (the core counted ceil(34020 / 32) = 1064,
    # one batch more than the data holds; per-epoch whole batches would give 531 x 2 = 1062).
    plan, files = rendered(tmp_path, {"samples": 17010, "tokens_per_sample": 1024, "epochs": 2})
    training = config_of(plan, files)["megatron_training"]
    assert training["global_batch_size"] == 32
    assert training["train_iters"] == plan.train.steps == 17010 * 2 // 32 == 1063
    assert json.loads(files["plan.json"])["train"]["steps"] == 1063
    assert "| steps | `1063` |" in files["PLAN.md"]
    assert "cli/train_grpo.py l. 142-151" in plan.train.origin["steps"]
    # One step time for the estimate and the checkpoint interval: a global batch of 32 prompts x n 8 sequences of
    # seq_len tokens at MindSpeed-RL's published 252 tokens/s per card (grpo.md l. 201-206) on 16 cards.
    est = plan.frameworks[NAME].estimate
    step = 32 * 8 * 10240 / (252 * plan.frameworks[NAME].cards)
    assert est.time_hours == pytest.approx(1063 * step / 3600, rel=1e-6)
    assert f"the estimated {step:.1f} s per step" in plan.train.origin["save_every_steps"]
    assert training["save_interval"] == plan.train.save_every_steps <= 1063


def test_dapo_counts_one_global_batch_an_iteration_and_says_its_filter_draws_more(tmp_path):
    plan, files = rendered(tmp_path, {"samples": 17000, "tokens_per_sample": 400}, model="qwen3-32b", method="dapo",
                           seq_len=4096)
    assert config_of(plan, files)["megatron_training"]["train_iters"] == plan.train.steps == 17000 // 32
    assert "dapo_trainer_hybrid.py l. 240-247" in plan.train.origin["steps"]


def test_no_data_size_keeps_upstreams_train_iters_with_its_source(tmp_path):
    plan, files = rendered(tmp_path, None)
    assert plan.train.steps is None
    assert config_of(plan, files)["megatron_training"]["train_iters"] == 1000  # grpo_qwen3_8b_A3.yaml
    row = next(line for line in files["PLAN.md"].splitlines() if "`megatron_training.train_iters`" in line)
    assert "grpo_qwen3_8b_A3.yaml" in row and "the spec gives no data size" in row


def test_data_without_one_whole_batch_is_refused_at_data_samples(tmp_path):
    with pytest.raises(SpecError) as caught:
        rendered(tmp_path, {"samples": 20, "tokens_per_sample": 400})
    text = str(caught.value)
    assert text.startswith("data.samples:") and "give at least 32 rows" in text
    # More passes over the same rows fill a batch: the data set repeats them (datasets/utils.py l. 128-139).
    plan, _ = rendered(tmp_path, {"samples": 20, "tokens_per_sample": 400, "epochs": 8})
    assert plan.train.steps == 20 * 8 // 32 == 5
