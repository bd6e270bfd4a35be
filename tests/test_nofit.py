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


# Issue 36b (a): an RL job (verl) whose prompt leaves a response only above some seq_len, and whose batch is the
# algorithm's (no card count moves it). Its way out searched shorter seq_lens down to 256 and answered verl's own
# refusal ("the prompt length ... leaves no response within seq_len ...") instead, and named card counts its batch
# does not tile.
QWEN3_PPO = {"job": "q", "model": "qwen3-32b", "method": "ppo", "seq_len": 40960, "hardware": "a100-40gb",
             "frameworks": ["verl"], "data": {"samples": 17000, "tokens_per_sample": 512},
             "rl": {"reward": "math_dapo"},
             "paths": {"model_dir": "/m", "dataset": "/d/train.jsonl", "dataset_format": "alpaca", "output_dir": "/o"}}


def _rl_way_out(spec):
    result = run("plan", spec)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "More cards do not help" in result.stderr and "leaves no response" not in result.stderr
    return result.stderr


def test_an_rl_way_out_names_seq_lens_that_leave_a_response_and_fit(spec_file):
    spec = spec_file({**QWEN3_PPO, "rl": {"reward": "math_dapo", "prompt_length": 16384}})
    shortest, longest, cards = map(int, re.search(r"Ways out: seq_len (\d+) to (\d+) \(verl fits on (\d+) card\(s\) "
                                                  r"at \2\)", _rl_way_out(spec)).groups())
    assert 16384 < shortest <= 16384 + 256 and shortest < longest < 40960
    assert run("plan", spec, "--set", f"seq_len={shortest}").exit_code == 0
    plan = json.loads(run("plan", spec, "--set", f"seq_len={longest}", "--json").stdout)
    assert plan["frameworks"]["verl"]["cards"] == cards
    # just below the range the prompt leaves no response
    assert run("plan", spec, "--set", f"seq_len={shortest - 256}").exit_code == 2


def test_an_rl_way_out_past_the_specs_prompt_length_says_to_leave_it_to_the_plan(spec_file):
    spec = spec_file({**QWEN3_PPO, "rl": {"reward": "math_dapo", "prompt_length": 36864}})
    longest = int(re.search(r"Ways out: seq_len \d+ to (\d+) without rl.prompt_length and rl.response_length",
                            _rl_way_out(spec)).group(1))
    without = spec_file({**QWEN3_PPO, "seq_len": longest}, "without.yaml")
    assert run("plan", without).exit_code == 0


def test_more_cards_for_rl_names_a_count_the_algorithm_batch_tiles(spec_file):
    # Qwen3-32B GRPO at 40960 fits on 24 snt9b cards by memory, but the example's 1024 prompts x 4 responses do not
    # tile 24: the way out named 24, which the plan then refused.
    spec = spec_file({**QWEN3_PPO, "method": "grpo", "hardware": "snt9b", "cards": 16})
    result = run("plan", spec)
    assert result.exit_code == 2
    cards = int(re.search(r"More cards help: .* fits on (\d+) cards .*; set cards: \1$",
                          result.stderr.strip()).group(1))
    assert cards % 8 == 0 and 1024 * 4 % cards == 0
    assert run("plan", spec, "--set", f"cards={cards}").exit_code == 0
