"""The layout search's shortcuts (issue 26: every time-budget plan in under 2 s, bench/budget_sweep.py) against the
search they stand for, on a covering set: frameworks with their own spaces and memory models, dense and MoE models
(DeepSeek-V3's leading dense layers and MTP layer), counts of many factors and of few, pinned layouts. Each shortcut
must give what the full search gives, and must be taken somewhere in the set (else it is not tested)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import make_spec

from generator import memory
from generator.context import Context
from generator.layouts import candidates, search, smallest_batch, split_layers, tiles
from generator.memory import MemoryJob, estimate, megatron_stages
from generator.parallel import Parallel
from generator.recipe import adapter
from generator.resolve import _defaults
from generator.spaces import divisors
from generator.tables import load_tables

T = load_tables()

# (model, method, framework, hardware, pinned layout): each framework's own search space and memory model.
JOBS = [
    ("qwen3-8b", "full", "mindspeed-llm", "snt9b", {}),
    ("llama3.1-70b", "pretrain", "mindspeed-llm", "snt9b", {}),
    ("qwen3_moe-30b_a3b", "pretrain", "mindspeed-llm", "snt9b", {}),
    ("qwen3_moe-235b_a22b", "full", "mindspeed-llm", "snt9b23", {}),
    ("qwen3-32b", "full", "mindformers", "snt9b", {}),
    ("deepseek-v3", "full", "mindformers", "snt9b", {}),
    ("qwen3-8b", "lora", "llama-factory", "snt9b", {}),
    ("qwen3-32b", "full", "llama-factory", "a800", {}),
    ("qwen2.5-14b", "full", "mindspeed-llm", "snt9b", {"tp": 2, "recompute": "full"}),
]
COUNTS = (8, 24, 56, 64, 136, 504, 1024)


def context(model: str, method: str, framework: str, hardware: str, pins: dict, batch: int | None = None) -> Context:
    spec = make_spec(model=model, method=method, hardware=hardware, frameworks=[framework],
                     layout={framework: pins} if pins else None, global_batch_size=batch)
    row, hw = T.model(spec.model), T.hardware_row(spec.hardware)
    return Context(spec, row, hw, T.frameworks[framework], False, adapter(spec, T.recipes[method]),
                   _defaults(T, framework, method, row, hw))


@pytest.mark.parametrize("job", JOBS, ids=lambda job: f"{job[0]}-{job[1]}-{job[2]}-{job[3]}")
def test_the_smallest_batch_is_the_full_searchs(job):
    """smallest_batch lays out only the settings at the smallest batch that may fit: it must pick the first of the
    full free search's fitting layouts with the least batch."""
    ctx = context(*job)
    free = replace(ctx, free_batch=True)
    found = 0
    for cards in COUNTS:
        fitting = candidates(free, cards)[0]
        wanted = min(fitting, key=lambda layout: layout.global_batch_size) if fitting else None
        assert smallest_batch(ctx, cards) == wanted, cards
        found += wanted is not None
    assert found


@pytest.mark.parametrize("job", JOBS, ids=lambda job: f"{job[0]}-{job[1]}-{job[2]}-{job[3]}")
def test_a_count_that_tiles_no_batch_has_no_layout(job):
    """tiles answers without laying anything out: where it says no, the search finds nothing; it must say no
    somewhere in the set, and yes wherever the search finds a layout."""
    untiled = 0
    for batch in (None, 96, 684, 1024):
        ctx = context(*job, batch=batch)
        for cards in COUNTS:
            best = search(ctx, cards)[0]
            assert tiles(ctx, cards) or best is None, (batch, cards)
            untiled += not tiles(ctx, cards)
    assert untiled


def test_the_worst_stage_is_found_among_the_first_of_alike_stages():
    """estimate weighs only the first of each set of stages that hold alike (the others hold fewer micro batches in
    flight): the same stage as weighing every one, in uneven splits, leading dense layers, an MTP layer, and fewer
    micro batches than stages."""
    shapes = 0
    for name, scheme in (("llama3.1-70b", "megatron-distopt"), ("qwen3_moe-235b_a22b", "megatron-distopt"),
                         ("deepseek-v3", "megatron-fp32"), ("qwen3-8b", "megatron-fp32")):
        model = T.model(name)
        for method, mtp, shard in (("full", 0, None), ("lora", 0, None), ("full", 1, 8)):
            job = MemoryJob(model, method, scheme, 4096, 8 if method == "lora" else 0, 3.0,
                            optimizer_shard=shard if scheme == "megatron-fp32" else None)
            for pp in (1, 2, 3, 5, 7, 8, 16, 31):
                if pp > model.layers:
                    continue
                for micro in (1, 2, 4 * pp):
                    for recompute in ("none", "full"):
                        cards = 4 * pp * 8
                        shape = Parallel(cards=cards, cards_per_node=8, tp=4, pp=pp, ep=8 if model.is_moe else 1,
                                         global_batch_size=8 * micro, recompute=recompute, sequence_parallel=True,
                                         num_layer_list=split_layers(model.layers, pp, mtp), mtp_layers=mtp)
                        every = max(megatron_stages(job, shape), key=lambda m: m.total)
                        assert estimate(job, shape) == every, (name, method, pp, micro, recompute)
                        shapes += 1
    assert shapes > 300 and memory.TERMS == ()


def test_divisors_are_every_divisor_ascending():
    """The grid's PP choices come from divisors, found up to the square root."""
    assert all(divisors(n) == [d for d in range(1, n + 1) if n % d == 0] for n in range(1, 1500))
