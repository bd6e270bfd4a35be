"""MindFormers' own MindFormerConfig and check_rules on the generated train.yaml (opt-in: they need mindformers
2.1.0 and a MindSpore CPU build, which do not install from PyPI beside gen-launch). Set GEN_LAUNCH_MINDFORMERS_PYTHON
to such an interpreter (README, Development) to run these; they are skipped otherwise."""

from __future__ import annotations

import os

import pytest
import yaml
from helpers import render_job

from generator.frameworks.mindformers.checks import loader_check
from generator.render import write
from generator.tables import load_tables

T = load_tables()
PYTHON = os.environ.get("GEN_LAUNCH_MINDFORMERS_PYTHON")
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not PYTHON, reason="GEN_LAUNCH_MINDFORMERS_PYTHON is not set")]
CASES = [
    {"model": "qwen3-32b", "method": "full", "cards": 16},
    {"model": "qwen3-32b", "method": "pretrain", "cards": 16},
    {"model": "qwen3-8b", "method": "lora", "hardware": "snt9b23"},
    {"model": "qwen3_moe-30b_a3b", "method": "full", "seq_len": 16384, "cards": 32,
     "layout": {"mindformers": {"cp": 2}}},
    {"model": "deepseek-v3", "method": "lora"},
    {"model": "qwen2.5-7b", "method": "full"},
    {"model": "llama3.1-70b", "method": "lora"},
    {"model": "debug-tiny", "method": "full", "cards": 1, "global_batch_size": 4},
    # the length as a TrainCallBack and each schedule, with its floor, built by MindFormers (issue 13)
    {"model": "qwen3-8b", "method": "lora", "cards": 8, "train": {"steps": 300, "lr_schedule": "linear"}},
    {"model": "qwen2.5-7b", "method": "lora", "train": {"steps": 300, "min_learning_rate": 1.0e-6}},
    {"model": "qwen3-8b", "method": "full", "cards": 8, "train": {"steps": 300, "lr_schedule": "constant"}},
]


def render(tmp_path, case):
    plan, files = render_job(T, frameworks=["mindformers"], cluster={"master_addr": "10.0.0.1"}, **case)
    write(files, tmp_path, plan.job, overwrite=False)
    return plan, tmp_path / plan.job / "mindformers" / "train.yaml"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['model']}-{c['method']}")
def test_mindformers_loads_and_checks_the_yaml(case, tmp_path):
    plan, path = render(tmp_path, case)
    assert loader_check(PYTHON, path, plan.frameworks["mindformers"].layout.cards) == ("ok", "")


def test_mindformers_refuses_a_broken_yaml(tmp_path):
    plan, path = render(tmp_path, CASES[0])
    doc = yaml.safe_load(path.read_text())
    doc["parallel_config"]["model_parallel"] = 2  # dp x mp x cp x pp = 8, not the 16 cards (check_rules l. 186-190)
    path.write_text(yaml.safe_dump(doc))
    status, detail = loader_check(PYTHON, path, 16)
    assert status == "problem" and "8 != device_num(16)" in detail, detail


@pytest.mark.parametrize("edit,message", [
    (lambda doc: next(c for c in doc["callbacks"] if c["type"] == "TrainCallBack").update(type="TrainCallback"),
     "TrainCallback"),
    (lambda doc: doc["lr_schedule"].update(learning_rate="x"), "learning_rate"),
])
def test_mindformers_refuses_a_broken_length_or_schedule(tmp_path, edit, message):
    plan, path = render(tmp_path, CASES[8])
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc))
    status, detail = loader_check(PYTHON, path, plan.frameworks["mindformers"].layout.cards)
    assert status == "problem" and message in detail, detail


# Predict (issue 28): MindFormerConfig in predict mode, check_rules, Mcore inference's world-size and GQA checks.
PREDICT_CASES = [{"model": "qwen3-8b", "cards": 1}, {"model": "qwen3-32b", "cards": 2},
                 {"model": "qwen3-8b", "cards": 4}, {"model": "qwen3-0.6b", "cards": 16},
                 {"model": "qwen3-4b", "hardware": "snt9b23", "cards": 32}]


@pytest.mark.parametrize("case", PREDICT_CASES, ids=lambda c: f"{c['model']}-{c['cards']}")
def test_mindformers_loads_and_checks_the_predict_yaml(case, tmp_path):
    plan, files = render_job(T, method="predict", frameworks=["mindformers"], **case)
    write(files, tmp_path, plan.job, overwrite=False)
    path = tmp_path / plan.job / "mindformers" / "predict.yaml"
    assert loader_check(PYTHON, path, case["cards"], "predict", plan.shape) == ("ok", "")


@pytest.mark.parametrize("model_parallel,message", [
    (4, "total_model_size(4)"),  # parallel_state.py l. 258-264: dp x tp x pp x cp != the 2 workers
    (3, "kv_num_heads must be divisible by tp_group_size"),  # attention.py l. 212-217
])
def test_mindformers_refuses_a_broken_predict_yaml(tmp_path, model_parallel, message):
    plan, files = render_job(T, method="predict", frameworks=["mindformers"], model="qwen3-32b", cards=2)
    write(files, tmp_path, plan.job, overwrite=False)
    path = tmp_path / plan.job / "mindformers" / "predict.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["parallel_config"]["model_parallel"] = model_parallel
    path.write_text(yaml.safe_dump(doc))
    world = 2 if model_parallel == 4 else 3
    status, detail = loader_check(PYTHON, path, world, "predict", plan.shape)
    assert status == "problem" and message in detail, detail
