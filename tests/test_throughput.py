"""Seed 000's time and card formulas, with the efficiency as a divisor."""

from __future__ import annotations

import pytest

from generator.tables import load_tables
from generator.throughput import cards_for_budget, flops_per_token, hours, throughput

T = load_tables()


def test_time_formula_divides_by_efficiency():
    # 1e9 tokens at 1000 tokens/s/card on 10 cards: 1e5 s ideal; 90% efficiency makes it LONGER.
    assert hours(1e9, 1000, 10, 1.0) == pytest.approx(1e5 / 3600)
    assert hours(1e9, 1000, 10, 0.9) == pytest.approx(1e5 / 3600 / 0.9)


def test_card_formula_worse_efficiency_needs_more_cards():
    ideal = cards_for_budget(1e10, 24, 1000, 1.0)
    assert ideal == 116  # 1e10 / (86400 x 1000) = 115.7 -> 116
    assert cards_for_budget(1e10, 24, 1000, 0.8) > ideal


def test_flops_per_token():
    model = T.models["qwen3-8b"]
    assert flops_per_token(model, "full", 4096) == pytest.approx(
        6 * model.params + 12 * model.layers * model.q_dim * 4096)
    assert flops_per_token(model, "lora", 4096) < flops_per_token(model, "full", 4096)


def test_measured_throughput_wins_over_estimate():
    fw, hw, model = T.frameworks["mindspeed-llm"], T.hardware["snt9b"], T.models["qwen3-8b"]
    assert throughput(model, "full", 4096, fw, hw, 1800.0).tokens_per_card_s == 1800.0
    est = throughput(model, "full", 4096, fw, hw, None)
    assert est.is_estimate and "MFU 37.4%" in est.source
    # MoE uses active parameters and the MoE MFU.
    moe = throughput(T.models["mixtral-8x7b"], "pretrain", 4096, fw, hw, None)
    assert "MFU 31.7%" in moe.source
