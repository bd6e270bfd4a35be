"""One framework that no layout fits (issue 22 item 15): the plan names the way out, proven by planning it;
a framework the spec did not list is left out with a note and a warning; a listed one is refused (exit 2)."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner
from helpers import note_lines

from generator.cli import main

QWEN3_32K = {"job": "q", "model": "qwen3-32b", "method": "full", "seq_len": 32768, "hardware": "snt9b"}


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def test_a_defaulted_framework_that_cannot_fit_is_left_out_with_a_note_and_a_warning(spec_file):
    spec = spec_file(QWEN3_32K)
    result = run("plan", spec, "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert sorted(plan["frameworks"]) == ["mindformers", "mindspeed-llm"]
    note = next(n for n in note_lines(plan["notes"]) if n.startswith("llama-factory left out: "))
    assert "More cards do not help" in note and "does not shrink with more cards" in note
    assert "Warning: llama-factory left out: no layout fits in memory" in result.stderr
    assert run("plan", spec, "--strict").exit_code == 3


def test_a_listed_framework_that_cannot_fit_is_refused_with_the_way_out(spec_file):
    spec = spec_file({**QWEN3_32K, "frameworks": ["mindspeed-llm", "llama-factory"]})
    result = run("plan", spec)
    assert result.exit_code == 2 and "Traceback" not in result.output
    error = result.stderr
    assert error.startswith(f"Error: {spec}: model: no llama-factory layout of qwen3-32b fits on 16 to 64 cards")
    assert "More cards do not help: even on 65,536 cards" in error
    assert "or leave llama-factory out of frameworks: (mindspeed-llm plans without it)" in error
    # Each way out it names plans: the shorter sequence, and the spec without llama-factory.
    seq = int(re.search(r"seq_len (\d+) or less", error).group(1))
    assert run("plan", spec, "--set", f"seq_len={seq}").exit_code == 0
    assert run("plan", spec, "--set", "frameworks=[mindspeed-llm]").exit_code == 0
    # and more cards indeed do not help
    big = spec_file({**QWEN3_32K, "frameworks": ["llama-factory"], "cards": 4096}, "big.yaml")
    assert run("plan", big).exit_code == 2


def test_when_more_cards_help_the_count_that_fits_is_named(spec_file):
    spec = spec_file({**QWEN3_32K, "seq_len": 16384, "frameworks": ["llama-factory"]})
    result = run("plan", spec)
    assert result.exit_code == 2
    help_line = re.search(r"More cards help: .* fits on (\d+) cards .*; set cards: \1$", result.stderr.strip())
    cards = int(help_line.group(1))
    assert "leave llama-factory out" not in result.stderr  # nothing plans without the only framework listed
    assert run("plan", spec, "--set", f"cards={cards}").exit_code == 0
