"""Issue 40, the front door: what a newcomer meets first (progress on slow commands, the support matrix, the plan's
answer first, starters per method)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import progress
from generator.cli import main
from generator.scheduler import DNS_LABEL

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_slow_plan_says_what_it_is_doing_on_stderr(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # every step counts as slow
    monkeypatch.setattr(progress, "shown", lambda: True)  # as on a terminal
    result = run("plan", str(EXAMPLES / "llama3.1-70b-pretrain-budget.yaml"))
    assert result.exit_code == 0
    assert "planning llama3.1-70b pretrain: searching the layouts and the card count that meets the time budget" \
        in result.stderr
    assert "searching" not in result.stdout


def test_a_fast_plan_says_nothing_more():
    result = run("plan", str(EXAMPLES / "qwen3-8b-lora-snt9b23.yaml"))
    assert result.exit_code == 0 and "searching the layouts" not in result.stderr


def test_progress_is_for_a_terminal_only(monkeypatch):
    # Output a program reads (validate --json captured with its stderr, a CI log) stays the same on a loaded machine.
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    result = run("plan", str(EXAMPLES / "llama3.1-70b-pretrain-budget.yaml"))
    assert result.exit_code == 0 and "searching the layouts" not in result.stderr


def test_a_slow_validate_says_which_check_is_running(monkeypatch, tmp_path):
    assert run("render", str(EXAMPLES / "qwen3-8b-lora-snt9b23.yaml"), "--set", "frameworks=[mindspeed-llm]", "-o",
               str(tmp_path)).exit_code == 0
    job = next(tmp_path.iterdir())
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "shown", lambda: True)
    result = run("validate", str(job))
    assert "validate: 0 file(s) checked, the next file's checks still running" in result.stderr
    assert "file(s) checked" not in result.stdout


def test_the_support_matrix_answers_what_runs_where():
    matrix = run("models", "--matrix").stdout
    lines = [line.split() for line in matrix.splitlines()]
    header = next(words for words in lines if words[:2] == ["framework", "method"])
    rows = {tuple(words[:2]): dict(zip(header[2:], words[2:])) for words in lines
            if words[:1] and words[0] in ("verl", "mindformers", "mindspeed-mm", "llama-factory")
            and len(words) == len(header)}
    assert rows[("verl", "grpo")]["rtx3090"] == rows[("verl", "grpo")]["rtx4090"] == "-"
    assert rows[("verl", "grpo")]["snt9b"] != "-"
    assert rows[("verl", "grpo")]["a800"] != "-" and rows[("verl", "grpo")]["h200"] != "-"  # A800, H200 run verl
    assert {hw: n for hw, n in rows[("mindformers", "predict")].items() if n != "-"}.keys() == {"snt9b", "snt9b23"}
    assert rows[("mindspeed-mm", "full")]["snt9b"] != "-" and ("llama-factory", "qlora") in rows
    assert "predict is batch prediction" in matrix and "MindIE or vLLM-Ascend" in matrix


def test_models_narrows_by_framework_method_and_hardware():
    listing = run("models", "--method", "grpo", "--hardware", "910B").stdout
    lines = [line.split() for line in listing.splitlines()]
    models = [words[0] for words in lines if len(words) >= 5 and words[2] == "verl" and words[3] == "grpo"]
    assert "qwen3-8b" in models and "llama3.1-8b" not in models
    assert not any("llama-factory" in words for words in lines)
    data = json.loads(run("models", "--framework", "verl", "--json").stdout)
    assert {"model": "qwen3-8b", "framework": "verl", "method": "grpo", "hardware": "h800"} in data["support"]
    assert {r["framework"] for r in data["support"]} == {"verl"}
    bad = CliRunner().invoke(main, ["models", "--framework", "vllm"])
    assert bad.exit_code == 2 and "'vllm' is not a framework; one of: mindformers" in bad.stderr
    assert "Traceback" not in bad.output


def _plan_json(spec: Path) -> dict:
    result = run("plan", str(spec), "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("model,method,hardware", [("qwen3-8b", "grpo", "snt9b"), ("qwen3-8b", "dapo", "h800"),
                                                   ("qwen3-8b", "ppo", "snt9b23"), ("qwen3-8b", "predict", "snt9b"),
                                                   ("qwen2.5_vl-7b", "full", "A3"), ("qwen2.5-7b", "qlora", "a800")])
def test_each_method_gets_a_starter_with_its_own_keys(tmp_path, model, method, hardware):
    spec = tmp_path / "jobs" / "job.yaml"
    assert run("init", model, "--method", method, "--hardware", hardware, "-o", str(spec)).exit_code == 0
    text = spec.read_text()
    plain = _plan_json(spec)
    assert "#   scheduler: none" in text and "slurm, volcano, modelarts" in text
    # A job name every scheduler takes: Volcano's pods are named <job>-<framework>-worker-<index>, DNS-1123 labels.
    assert DNS_LABEL.fullmatch(f"{plain['job']}-mindspeed-llm-worker-99")
    if method in ("grpo", "dapo", "ppo"):
        assert "\nrl:\n  reward: " in text  # the reward is written, not silently defaulted
        text = text.replace("\n  # prompt_length", "\n  prompt_length").replace("\n  # samples_per_prompt",
                                                                                 "\n  samples_per_prompt")
        for key in ("response_length", "kl_coef", "clip_ratio_low", "clip_ratio_high", "mini_batch_size"):
            if key != "kl_coef" or "giving kl_coef turns one on" not in text:
                text = text.replace(f"\n  # {key}:", f"\n  {key}:")
        spec.write_text(text)
        def values(plan: dict) -> dict:
            return {o["key"]: o["value"] for o in plan["frameworks"]["verl"]["settings"]["overrides"]}
        assert values(_plan_json(spec)) == values(plain)  # the commented values are the plan's
    elif method == "predict":
        assert "# train:" not in text and "resume" not in text and "data:" not in text
        assert "dataset: /path/to/prompts.txt  # one prompt per line" in text and "batch prediction" in text
    else:
        assert "\nrl:" not in text and "# train:" in text


def test_inits_refusal_names_what_does_run():
    result = CliRunner().invoke(main, ["init", "llama3.1-8b", "--method", "grpo", "--hardware", "snt9b"])
    assert result.exit_code == 2
    # qwen2.5-7b through MindSpeed-RL, the others through verl
    assert "there llama3.1-8b plans full, lora, qlora, pretrain, and grpo plans qwen2.5-7b, qwen2.5-32b, qwen3-8b" \
        in result.stderr
    assert "gen-launch models --method grpo --hardware snt9b" in result.stderr


def test_a_predict_starter_offers_only_the_frameworks_that_predict_the_model(tmp_path):
    # llama3.1-8b has a MindFormers row but no upstream predict config: the starter offered mindformers anyway.
    result = CliRunner().invoke(main, ["init", "llama3.1-8b", "--method", "predict", "--hardware", "snt9b"])
    assert result.exit_code == 2 and "no framework plans llama3.1-8b predict on snt9b" in result.stderr


def test_the_answer_comes_first_in_the_terminal():
    lines = run("plan", str(EXAMPLES / "llama3.1-70b-pretrain-budget.yaml")).stdout.splitlines()
    assert lines[2] == "answer:"
    assert lines[3].split() == ["mindspeed-llm", "320", "card(s)", "on", "40", "node(s),", "67.4", "h", "(time",
                                "budget", "72", "h:", "met),", "49.9", "of", "58", "GiB", "per", "card"]
    assert lines.index("where the values come from:") > lines.index("notes:")
    missed = run("plan", str(EXAMPLES / "llama3.1-70b-pretrain-budget.yaml"), "--set", "cards=64").stdout
    assert "(time budget 72 h: MISSED)" in missed and missed.index("warnings:") < missed.index("framework ")


def test_a_framework_refused_for_the_model_names_only_frameworks_that_plan_the_job(tmp_path):
    # Issue 40: `--set frameworks=[verl]` on a model verl cannot run listed frameworks that cannot do GRPO either.
    spec = tmp_path / "rl.yaml"
    spec.write_text("job: t\nmodel: llama3.1-8b\nmethod: grpo\nseq_len: 4096\nhardware: snt9b\n")
    result = CliRunner().invoke(main, ["plan", str(spec), "--set", "frameworks=[verl]"])
    assert result.exit_code == 2
    assert result.stderr.endswith("frameworks that plan llama3.1-8b grpo on snt9b: none\n")
    result = CliRunner().invoke(main, ["plan", str(spec), "--set", "frameworks=[mindspeed-mm]", "--set",
                                       "method=full"])
    assert "frameworks that plan llama3.1-8b full on snt9b: mindformers, mindspeed-llm, llama-factory" \
        in result.stderr


def test_the_answer_says_why_there_is_no_time(tmp_path):
    grpo = run("plan", str(EXAMPLES / "qwen3-8b-grpo-verl-snt9b.yaml")).stdout
    assert "verl           8 card(s) on 1 node(s), no time estimate (no rate published for it)" in grpo
    spec = tmp_path / "predict.yaml"
    assert run("init", "qwen3-8b", "--method", "predict", "--hardware", "snt9b", "-o", str(spec)).exit_code == 0
    predict = run("plan", str(spec)).stdout
    assert "mindformers    1 card(s) on 1 node(s), no time estimate (does not train)" in predict
    assert predict.splitlines()[1].startswith("batch prediction") and "not a server" in predict
