"""Every data row is a test case: the invariants the resolver relies on."""

from __future__ import annotations

import pytest
import yaml

from generator.errors import SpecError
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


@pytest.mark.parametrize("row", TABLES.min_cards, ids=lambda r: f"line{r.line}-{r.model}-{r.framework}")
def test_every_min_cards_row_names_a_known_model_and_framework(row):
    assert row.model in TABLES.models, f"min_cards.csv line {row.line}: unknown model {row.model}"
    assert row.framework in TABLES.frameworks
    # The training rows give full and LoRA counts (pretrain: the seed's MindSpeed-MM Qwen2.5-VL-7B row); an RL
    # framework's rows the RL methods it offers.
    assert set(row.methods) <= {"full", "lora", "pretrain"} | set(TABLES.frameworks[row.framework].methods)
    assert all(v is None or v > 0 for v in row.cards.values())


def test_min_cards_table_has_every_row_of_the_shared_csv():
    # 97 data rows of the training frameworks, the 7 verl rows, the 3 MindSpeed-MM rows and the MindSpeed-RL row
    # in shared/spec/min_cards.csv (copied verbatim into generator/data/).
    assert len(TABLES.min_cards) == 97 + 7 + 3 + 1
    assert [(row.model, row.cards) for row in TABLES.min_cards if row.framework == "mindspeed-rl"] == [
        ("qwen2.5-7b", {"snt9b": 8, "snt9b23": None})]
    assert sum(row.framework == "verl" for row in TABLES.min_cards) == 7
    assert sum(row.framework == "mindspeed-mm" for row in TABLES.min_cards) == 3
    first = TABLES.min_cards[0]
    assert (first.model, first.methods, first.seq_lens, first.cards) == (
        "llama3.1-8b", ("full",), (4096, 8192), {"snt9b": 4, "snt9b23": 8})


@pytest.mark.parametrize("p", TABLES.presets, ids=lambda p: f"{p.framework}-{p.model}-{p.hardware}-{p.cards}")
def test_presets_refer_to_known_models_and_are_consistent(p):
    model = TABLES.models[p.model]
    assert p.dp * p.tp * p.pp == p.cards
    assert model.heads % p.tp == 0 and model.kv_heads % p.tp == 0
    assert p.micro_batch_num >= p.pp
    if p.num_layer_list:
        assert len(p.num_layer_list) == p.pp and sum(p.num_layer_list) == model.layers


def test_hardware_rows():
    assert TABLES.hardware["snt9b"].cards_per_node == 8 and TABLES.hardware["snt9b"].parallel_unit == 1
    assert TABLES.hardware["snt9b23"].cards_per_node == 16 and TABLES.hardware["snt9b23"].parallel_unit == 2


@pytest.mark.parametrize("hw", TABLES.hardware.values(), ids=lambda h: h.name)
def test_hardware_row_invariants(hw):
    assert hw.usable_gb <= hw.memory_gb and hw.peak_tflops_bf16 > 0 and hw.source
    assert hw.accelerator in ("npu", "gpu") and set(hw.frameworks) <= set(TABLES.frameworks)
    # Ascend NPUs keep headroom for the runtime (max_device_memory) (below).
    # On NVIDIA GPUs: LLaMA-Factory, and verl (its mainstream) where a card has the memory for RL (>= 40 GB).
    assert (hw.accelerator == "gpu") == (hw.frameworks in (("llama-factory",), ("llama-factory", "verl")))
    assert ("verl" in hw.frameworks) == (hw.accelerator == "npu" or hw.memory_gb >= 40)
    assert hw.accelerator == "gpu" or hw.usable_gb < hw.memory_gb
    # Whole parallel units fill a node; the step model's inputs come together or not at all.
    assert hw.cards_per_node % hw.parallel_unit == 0
    assert (hw.link_gb_s is None) == (hw.scaleout_gb_s is None) == (hw.attention_efficiency is None)


def test_lookup_by_hf_id_and_suggestion():
    assert TABLES.model("Qwen/Qwen3-32B").name == "qwen3-32b"
    assert TABLES.model("QWEN3-32B").name == "qwen3-32b"
    with pytest.raises(SpecError) as info:
        TABLES.model("llama3.1-8")
    assert "did you mean llama3.1-8b?" in info.value.problems[0].message


@pytest.mark.parametrize("name,meant", [("qwen3-7b", "qwen3-8b"), ("qwen2.5-8b", "qwen2.5-7b"),
                                        ("qwen3-13b", "qwen3-14b")])
def test_a_missing_size_suggests_the_nearest_size_of_the_family(name, meant):
    # Issue 37 item 7: qwen3-7b suggested qwen3-1.7b (closest spelling, 4x smaller); the likely intent is qwen3-8b.
    with pytest.raises(SpecError) as info:
        TABLES.model(name)
    assert f"did you mean {meant}?" in info.value.problems[0].message


def test_framework_support():
    assert TABLES.supports("mindformers", "qwen3-32b")
    assert not TABLES.supports("mindformers", "glm4-9b")
    assert TABLES.supports("llama-factory", "gemma3-27b") and not TABLES.supports("mindspeed-llm", "gemma3-27b")
    assert not TABLES.supports("llama-factory", "mixtral-8x7b")


# Issue 13: a row added to the data the way the README says, but lacking a fact, is a clear load-time error (exit 5),
# not a KeyError when the files are rendered.
REGISTRY_EDITS = [
    ("min_cards.csv", "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\n",
     "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\nmixtral-8x7b,full,4096/8192,llama-factory,16,-,low\n",
     ("frameworks.yaml llama-factory: mixtral-8x7b is supported (a min_cards.csv row or its own row) but its row "
     "lacks template")),
    ("hardware.yaml", "  - name: snt9b\n", ("  - name: snt9c\n    label: a new NPU\n    cards_per_node: 8\n"
     "    parallel_unit: 1\n    memory_gb: 64.0\n    usable_gb: 58.0\n    peak_tflops_bf16: 300.0\n"
     "    accelerator: npu\n    frameworks: [mindspeed-llm]\n    quantization_bits: [4]\n    source: a test\n"
     "  - name: snt9b\n"),
     ("hardware.yaml snt9c: mindspeed-llm times jobs with the step model, which needs link_gb_s, scaleout_gb_s and "
     "attention_efficiency")),
    ("models.yaml", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36, ", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, ",
     "models.yaml qwen3-8b: layers is missing"),
    ("min_cards.csv", "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\n",
     "mixtral-8x8b,full,4096/8192,mindspeed-llm,16,-,medium\n",
     "min_cards.csv line 86: model 'mixtral-8x8b' has no row in models.yaml"),
]


@pytest.mark.parametrize("name,old,new,message", REGISTRY_EDITS, ids=lambda v: str(v)[:24])
def test_a_row_that_lacks_a_fact_fails_when_the_tables_load(tmp_path, monkeypatch, name, old, new, message):
    import shutil

    from click.testing import CliRunner

    from generator import tables as tables_module
    from generator.cli import main
    data = tmp_path / "data"
    shutil.copytree(tables_module.DATA_DIR, data)
    text = (data / name).read_text(encoding="utf-8")
    assert old in text
    (data / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    monkeypatch.setattr(tables_module, "DATA_DIR", data)
    tables_module.load_tables.cache_clear()
    try:
        result = CliRunner().invoke(main, ["models"])
    finally:
        tables_module.load_tables.cache_clear()
    assert result.exit_code == 5, result.output + result.stderr
    assert message in result.stderr and "Traceback" not in result.output + result.stderr


def test_the_schema_offers_what_the_registry_holds():
    # Issue 13: framework names, methods and hardware names live in the data; the schema's enums must list exactly
    # those.
    import json

    from generator.resources import resource_dir
    schema = json.loads((resource_dir("schemas") / "job.schema.json").read_text(encoding="utf-8"))
    tables = load_tables()
    props = schema["properties"]
    assert set(props["frameworks"]["items"]["enum"]) == set(tables.frameworks)
    assert set(props["layout"]["properties"]) == set(tables.frameworks)
    assert set(props["method"]["enum"]) == set().union(*(fw.methods for fw in tables.frameworks.values()))
    assert set(props["hardware"]["examples"]) == set(tables.hardware)  # aliases are data: any text, checked there


@pytest.mark.parametrize("hf_id,name", [("Qwen/Qwen2.5-7B", "qwen2.5-7b"), ("meta-llama/Llama-3.1-70B", "llama3.1-70b"),
                                        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b")])
def test_base_model_ids_name_their_row(hf_id, name):
    # Issue 13: pretraining starts from base models; only the -Instruct ids were aliases.
    assert load_tables().model(hf_id).name == name


def test_a_vision_model_base_id_is_not_guessed():
    with pytest.raises(SpecError):
        load_tables().model("Qwen/Qwen2.5-VL-7B")


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
def test_every_table_reads_the_same_with_the_c_loader():
    # Issue 26 item 7: the tables load with PyYAML's C loader (a sixth of the parse time); it must read each one as
    # the pure-Python SafeLoader does.
    from generator.resources import DATA_DIR
    from generator.tables import TABLE_LOADER

    assert TABLE_LOADER is yaml.CSafeLoader
    for path in sorted(DATA_DIR.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=yaml.CSafeLoader) == yaml.safe_load(text), path
