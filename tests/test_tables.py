"""Every data row is a test case: the invariants the resolver relies on."""

from __future__ import annotations

import pytest

from generator.errors import SpecError
from generator.spec import FRAMEWORKS
from generator.tables import load_tables

TABLES = load_tables()
MODELS = list(TABLES.models.values())


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_model_row_invariants(model):
    assert model.layers > 0 and model.hidden > 0 and model.ffn > 0 and model.vocab > 0
    assert model.heads % model.kv_heads == 0, "GQA: heads must be a multiple of KV heads"
    assert model.head_dim is not None or model.hidden % model.heads == 0
    assert model.max_positions >= 2048
    assert model.source
    if model.is_moe:
        assert 0 < model.topk <= model.experts and model.moe_ffn > 0
        assert model.active_params < model.params
    else:
        assert model.topk == 0 and model.moe_ffn == 0 and model.active_params == model.params


# Published totals (model cards) the shape formula must reproduce within 2%.
PUBLISHED_B = {"qwen3-8b": 8.2, "qwen3-32b": 32.8, "llama3.1-8b": 8.03, "llama3.1-70b": 70.6, "qwen2.5-7b": 7.61,
               "qwen3_moe-30b_a3b": 30.5, "qwen3_moe-235b_a22b": 235.0, "mixtral-8x7b": 46.7, "glm4-9b": 9.4}


@pytest.mark.parametrize("name,billions", sorted(PUBLISHED_B.items()))
def test_parameter_counts_match_published(name, billions):
    assert TABLES.models[name].params / 1e9 == pytest.approx(billions, rel=0.02)


def test_moe_active_parameters():
    assert TABLES.models["qwen3_moe-30b_a3b"].active_params / 1e9 == pytest.approx(3.3, rel=0.05)
    assert TABLES.models["deepseek-v3"].active_params / 1e9 == pytest.approx(37, rel=0.05)


def test_every_min_cards_row_names_a_known_model_and_framework():
    for row in TABLES.min_cards:
        assert row.model in TABLES.models, f"min_cards.csv line {row.line}: unknown model {row.model}"
        assert row.framework in FRAMEWORKS
        assert set(row.methods) <= {"full", "lora"}
        assert all(v is None or v > 0 for v in row.cards.values())


def test_min_cards_table_has_every_row_of_the_shared_csv():
    # 97 data rows in shared/spec/min_cards.csv (copied verbatim into generator/data/).
    assert len(TABLES.min_cards) == 97
    first = TABLES.min_cards[0]
    assert (first.model, first.methods, first.seq_lens, first.cards) == (
        "llama3.1-8b", ("full",), (4096, 8192), {"snt9b": 4, "snt9b23": 8})


def test_presets_refer_to_known_models_and_are_consistent():
    for p in TABLES.presets:
        model = TABLES.models[p.model]
        assert p.dp * p.tp * p.pp == p.cards
        assert model.heads % p.tp == 0 and model.kv_heads % p.tp == 0
        assert p.micro_batch_num >= p.pp
        if p.num_layer_list:
            assert len(p.num_layer_list) == p.pp and sum(p.num_layer_list) == model.layers


def test_hardware_rows():
    assert TABLES.hardware["snt9b"].cards_per_node == 8 and TABLES.hardware["snt9b"].parallel_unit == 1
    assert TABLES.hardware["snt9b23"].cards_per_node == 16 and TABLES.hardware["snt9b23"].parallel_unit == 2
    for hw in TABLES.hardware.values():
        assert hw.usable_gb <= hw.memory_gb and hw.peak_tflops_bf16 > 0 and hw.source
        assert hw.accelerator in ("npu", "gpu") and set(hw.frameworks) <= set(FRAMEWORKS)
        # NVIDIA GPUs serve LLaMA-Factory only; Ascend NPUs keep headroom for the runtime (max_device_memory).
        assert (hw.accelerator == "gpu") == (hw.frameworks == ("llama-factory",))
        assert hw.accelerator == "gpu" or hw.usable_gb < hw.memory_gb


def test_lookup_by_hf_id_and_suggestion():
    assert TABLES.model("Qwen/Qwen3-32B").name == "qwen3-32b"
    assert TABLES.model("QWEN3-32B").name == "qwen3-32b"
    with pytest.raises(SpecError) as info:
        TABLES.model("llama3.1-8")
    assert "did you mean llama3.1-8b?" in info.value.problems[0].message


def test_framework_support():
    assert TABLES.supports("mindformers", "qwen3-32b")
    assert not TABLES.supports("mindformers", "glm4-9b")
    assert TABLES.supports("llama-factory", "gemma3-27b") and not TABLES.supports("mindspeed-llm", "gemma3-27b")
    assert not TABLES.supports("llama-factory", "mixtral-8x7b")
