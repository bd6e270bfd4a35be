"""Issue 38 (d): MindSpeed-RL answers the RL family's batch hooks as verl does: the global batch is the upstream
config's algorithm batch (prompts), whatever the data's size or a time budget; it tiles in sequences (GBS x n
samples over micro batch x DP); a budget chooses the cards, never the batch, and one the batch cannot feed is
refused at its key; PLAN.md shows the batch's row with upstream's line."""

from __future__ import annotations

import json

import pytest

from generator.errors import SpecError
from generator.render import render_files
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"


def plan_of(model="qwen3-8b", seq_len=10240, samples=60000, **extra):
    spec = {"job": "rl", "model": model, "method": "grpo", "seq_len": seq_len, "hardware": "snt9b23",
            "frameworks": [NAME], "data": {"samples": samples, "tokens_per_sample": 1024}, **extra}
    return resolve(parse_spec(json.dumps(spec).encode()), T)


def test_the_batch_tiles_in_sequences():
    plan = plan_of(cards=16)
    lay = plan.frameworks[NAME].layout
    # 32 prompts x n 8 = 256 samples over DP 4 in micro batches of lay.micro_batch_size
    assert (plan.train.global_batch_size, lay.sequences_per_sample, lay.dp) == (32, 8, 4)
    assert lay.grad_accum == 32 * 8 // (lay.micro_batch_size * 4)
    assert f"{lay.grad_accum} micro batch(es) per step per DP rank" in render_files(plan)["PLAN.md"]


def test_the_algorithm_batch_stays_upstreams_whatever_the_datas_size_and_plan_md_shows_its_line():
    plan = plan_of(samples=200)  # 6 steps an epoch: a data-sized batch would shrink it
    assert plan.train.global_batch_size == 32
    row = next(line for line in render_files(plan)["PLAN.md"].splitlines()
               if line.startswith("| global batch (samples) |"))
    assert "configs/grpo_qwen3_8b_A3.yaml l. 20 (prompts)" in row


def test_a_budget_chooses_cards_never_the_batch_and_one_the_batch_cannot_feed_is_refused():
    plan = plan_of(time_budget_hours=200)
    fp = plan.frameworks[NAME]
    assert plan.train.global_batch_size == 32 and fp.estimate.time_hours <= 200 and fp.layout.cards == 32
    with pytest.raises(SpecError) as caught:
        plan_of(time_budget_hours=48)
    assert str(caught.value).startswith("time_budget_hours: 48 h needs at least")
    assert "more than the 32 the global batch can use (a global batch of 32 prompts, at least one a rollout " \
           "replica of TP 1" in str(caught.value)


def test_a_batch_the_cards_do_not_tile_is_refused_naming_batches_that_plan():
    # 24 A2 cards: the actor's DP 6 takes 30 or 33 prompts, but every rollout replica (24 of TP 1) and each of the
    # 3 nodes must take whole prompts too (validate_config.py l. 187-195, 277-285): the refusal named 30 or 33,
    # which MindSpeed-RL's own rule then refused.
    base = {"model": "qwen2.5-7b", "seq_len": 4096, "hardware": "snt9b", "cards": 24}
    with pytest.raises(SpecError) as refused:
        plan_of(**base)
    [problem] = refused.value.problems
    assert problem.path == "global_batch_size" and problem.message.endswith("nearest that work: 24 or 48")
    for batch in (24, 48):
        assert plan_of(**base, global_batch_size=batch).train.global_batch_size == batch
