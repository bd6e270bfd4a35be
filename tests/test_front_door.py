"""Issue 40, the front door: what a newcomer meets first (progress on slow commands, the support matrix, the plan's
answer first, starters per method)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from generator import progress
from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_slow_plan_says_what_it_is_doing_on_stderr(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # every step counts as slow
    result = run("plan", str(EXAMPLES / "llama3.1-70b-pretrain-budget.yaml"))
    assert result.exit_code == 0
    assert "planning llama3.1-70b pretrain: searching the layouts and the card count that meets the time budget" \
        in result.stderr
    assert "searching" not in result.stdout


def test_a_fast_plan_says_nothing_more():
    result = run("plan", str(EXAMPLES / "qwen3-8b-lora-snt9b23.yaml"))
    assert result.exit_code == 0 and "searching the layouts" not in result.stderr


def test_a_slow_validate_says_which_check_is_running(monkeypatch, tmp_path):
    assert run("render", str(EXAMPLES / "qwen3-8b-lora-snt9b23.yaml"), "--set", "frameworks=[mindspeed-llm]", "-o",
               str(tmp_path)).exit_code == 0
    job = next(tmp_path.iterdir())
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    result = run("validate", str(job))
    assert "validate: 0 file(s) checked, the next file's checks still running" in result.stderr
    assert "file(s) checked" not in result.stdout
