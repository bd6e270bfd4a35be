"""Issue 24: facts typed by value when the tables load. Each edit below is one bad change to a copy of the data; the
CLI must stop with exit 5 and the whole message (file, row, key, what is allowed) before a plan, never a KeyError
at render. Every row of every table is also a test case for the invariants the resolver and renderers rely on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import tables as tables_module
from generator.cli import main
from generator.facts import MemoryScheme
from generator.layouts import STATE_BYTES
from generator.tables import load_tables

SPEC = Path(__file__).resolve().parent.parent / "examples" / "qwen3-8b-lora-snt9b23.yaml"
TABLES = load_tables()

# (file, old text, new text, the whole error message)
BAD_EDITS = {
    # Defect 1: planned cleanly, then `render` raised KeyError: 'glm4' (RESEARCH_COLUMNS).
    "research-family": (
        "frameworks.yaml", "model_name: qwen2_5_7b, prefix: qwen2, family: qwen2_5,",
        "model_name: qwen2_5_7b, prefix: qwen2, family: glm4,",
        "frameworks.yaml mindformers qwen2.5-7b: family 'glm4' is not one of llama3_1, qwen2_5"),
    # Defect 2: a scheme memory.py has no branch for (computed as Megatron, then KeyError in STATE_BYTES).
    "memory-scheme": (
        "frameworks.yaml", "memory: megatron-distopt", "memory: megatron-zero1",
        ("frameworks.yaml mindspeed-llm: memory 'megatron-zero1' is not a scheme the memory model knows "
        "(megatron-fp32, megatron-distopt, deepspeed)")),
    # Defect 3: closed vocabularies were free strings.
    "layout": (
        "frameworks.yaml", "qwen3-0.6b:  &qwen3 {layout: mcore,", "qwen3-0.6b:  &qwen3 {layout: legacy,",
        "frameworks.yaml mindformers qwen3-0.6b: layout 'legacy' is not one of mcore, research"),
    "throughput-model": (
        "frameworks.yaml", ("throughput: {model: step, gemm_efficiency: 0.826,\n                 source: \"matmul "
        "efficiency fitted"), ("throughput: {model: steps, gemm_efficiency: 0.826,\n                 source: \"matmul "
        "efficiency fitted"),
        "frameworks.yaml mindspeed-llm: throughput.model 'steps' is not one of step, mfu"),
    "support": (
        "frameworks.yaml", "support: listed ", "support: all ",
        "frameworks.yaml mindformers: support 'all' is not one of listed, table"),
    "min-cards-from": (
        "frameworks.yaml", "min_cards_from: mindspeed-llm       # after", "min_cards_from: presets  # after",
        ("frameworks.yaml mindformers: min_cards_from 'presets' is not one of llama-factory, mindspeed-llm, "
         "mindspeed-mm, mindspeed-rl, verl")),
    "ep-divides": (
        "frameworks.yaml", "ep_divides: [dp, cp]", "ep_divides: [dp, pp]",
        "frameworks.yaml mindspeed-llm: ep_divides 'pp' is not one of dp, tp, cp"),
    "converter": (
        "frameworks.yaml", "{<<: *qwen3moems, converter: v2}", "{<<: *qwen3moems, converter: v3}",
        "frameworks.yaml mindspeed-llm qwen3_moe-235b_a22b: converter 'v3' is not one of v2, deepseek3"),
    "accelerator": (
        "hardware.yaml", "    accelerator: npu\n", "    accelerator: tpu\n",
        "hardware.yaml snt9b: accelerator 'tpu' is not one of npu, gpu"),
    # Facts a renderer reads: present where it needs them, of the declared type.
    "research-row-without-family": (
        "frameworks.yaml", "model_name: qwen2_5_7b, prefix: qwen2, family: qwen2_5,",
        "model_name: qwen2_5_7b, prefix: qwen2,",
        "frameworks.yaml mindformers qwen2.5-7b: family is missing (research family)"),
    "converter-fact": (
        "frameworks.yaml", "qwen2-0.5b: &qwen2 {prompt_type: qwen, model_type_hf: llama2}",
        "qwen2-0.5b: &qwen2 {prompt_type: qwen}",
        "frameworks.yaml mindspeed-llm qwen2-0.5b: model_type_hf is missing (convert_ckpt.py --model-type-hf)"),
    "token-id-type": (
        "frameworks.yaml", "bos_token_id: 0, eos_token_id: 1, pad_token_id: 1}",
        "bos_token_id: 0, eos_token_id: one, pad_token_id: 1}",
        "frameworks.yaml mindformers deepseek-v3: eos_token_id 'one' is not of type int"),
    "undeclared-fact": (
        "frameworks.yaml", "glm4-9b: {template: glm4, decoder: glm}",
        "glm4-9b: {template: glm4, decoder: glm, prompt: glm4}",
        ("frameworks.yaml llama-factory glm4-9b: prompt is not a declared column (declared: template, decoder, "
        "attention_modules, refuse)")),
    "mfu-share": (
        "frameworks.yaml", "mfu: {pretrain: 0.25,", "mfu: {pretrain: 25,",
        "frameworks.yaml llama-factory: throughput.mfu.pretrain 25 must be a number in (0, 1]"),
    "family-facts": (
        "frameworks.yaml", "converter: research/qwen2_5/alpaca_converter.py,", "",
        ("frameworks.yaml mindformers model_columns.family: value 'qwen2_5' lacks converter (every value gives "
        "input_columns, converter, tokenizer)")),
    "layout-facts": (
        "frameworks.yaml", "research: {lora_targets:", "research: {targets:",
        ("frameworks.yaml mindformers model_columns.layout: value 'research' lacks lora_targets (every value gives "
        "lora_targets)")),
    "column-type": (
        "models.yaml", "  layers:          {type: int,", "  layers:          {type: integer,",
        "models.yaml columns.layers: needs a type, one of str, int, float, bool, list, dict"),
    "mfu-keys": (
        "frameworks.yaml", "qlora: 0.25, moe: 0.15}", "qlora: 0.25}",
        ("frameworks.yaml llama-factory: throughput.mfu needs a share for each of full, lora, qlora, pretrain, moe, "
         "and no other")),
    "gemm-efficiency": (
        "frameworks.yaml", ("throughput: {model: step, gemm_efficiency: 0.826,\n                 source: \"matmul "
        "efficiency fitted"), ("throughput: {model: step, gemm_efficiency: 79,\n                 source: \"matmul "
        "efficiency fitted"),
        "frameworks.yaml mindspeed-llm: throughput.gemm_efficiency 79 must be a number in (0, 1]"),
    "throughput-keys": (
        "frameworks.yaml", ("throughput: {model: step, gemm_efficiency: 0.826,\n                 source: \"matmul "
        "efficiency fitted"), ("throughput: {model: step, mfu: 0.79,\n                 source: \"matmul "
        "efficiency fitted"),
        ("frameworks.yaml mindspeed-llm: throughput model step takes model, gemm_efficiency, source, not model, mfu, "
        "source")),
    # min_cards.csv: counts, methods and confidence typed too (a bad cell was a ValueError traceback).
    "min-cards-count": (
        "min_cards.csv", "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\n",
        "mixtral-8x7b,full,4096/8192,mindspeed-llm,16x,-,medium\n",
        "min_cards.csv line 86: snt9b '16x' must be a positive integer or -"),
    "min-cards-confidence": (
        "min_cards.csv", "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\n",
        "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,likely\n",
        "min_cards.csv line 86: confidence 'likely' is not one of high, medium, low"),
    "min-cards-strategy": (
        "min_cards.csv", "mixtral-8x7b,full,4096/8192,mindspeed-llm,16,-,medium\n",
        "mixtral-8x7b,sft,4096/8192,mindspeed-llm,16,-,medium\n",
        "min_cards.csv line 86: strategy 'sft' is not one of full, lora, qlora, pretrain, full_vision, grpo, dapo, "
        "ppo, predict"),
    # A hardware column is the header's, and a hardware.yaml row (the loader named two, and a renamed one was a
    # KeyError traceback).
    "min-cards-hardware-column": (
        "min_cards.csv", "model,strategy,seq_len,framework,snt9b,snt9b23,confidence\n",
        "model,strategy,seq_len,framework,snt9bb,snt9b23,confidence\n",
        "min_cards.csv line 7: hardware column 'snt9bb' is not one of snt9b, snt9b23, rtx3090, rtx4090, a800, h800, "
        "a100-40gb, a100-80gb, h100, h200, l40s"),
    # A preset naming what the tables do not hold never matched a job, and was dropped without a word.
    "preset-framework": (
        "presets.yaml", "defaults: {framework: mindformers,", "defaults: {framework: mindformerz,",
        ("presets.yaml preset 1 (qwen3-32b full): framework 'mindformerz' is not one of mindformers, mindspeed-llm, "
         "mindspeed-mm, llama-factory, verl, mindspeed-rl")),
    "preset-model": (
        "presets.yaml", "  - {model: qwen3-32b,  methods: [full],", "  - {model: qwen3-23b,  methods: [full],",
        ("presets.yaml preset 1 (qwen3-23b full): model 'qwen3-23b' is not one of " + ", ".join(TABLES.models))),
    "preset-hardware": (
        "presets.yaml", "hardware: snt9b, seq_len: 4096", "hardware: 910b, seq_len: 4096",
        ("presets.yaml preset 1 (qwen3-32b full): hardware '910b' is not one of snt9b, snt9b23, rtx3090, rtx4090, "
         "a800, h800, a100-40gb, a100-80gb, h100, h200, l40s")),
    # A bool is no number (Python counts it as an int).
    "overhead-bool": (
        "frameworks.yaml", "    overhead_gb: 3.0\n", "    overhead_gb: true\n",
        "frameworks.yaml mindformers: overhead_gb True must be a number >= 0"),
    # The columns: blocks of models.yaml and hardware.yaml: declared keys, declared types, declared ranges.
    "model-undeclared-key": (
        "models.yaml", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36,",
        "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, rope_theta: 1000000, layers: 36,",
        ("models.yaml qwen3-8b: rope_theta is not a declared column (declared: name, hf_id, source, layers, hidden, "
        "ffn, heads, kv_heads, head_dim, vocab, max_positions, tied, qk_norm, qkv_bias, rope_base, norm_eps, experts, "
        "topk, moe_ffn, shared_experts, first_dense, params_b, vision_params_b, gated_mlp, mtp_layers)")),
    "model-type": (
        "models.yaml", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36,",
        "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36.5,",
        "models.yaml qwen3-8b: layers 36.5 is not of type int"),
    "model-range": (
        "models.yaml", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36,",
        "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 0,",
        "models.yaml qwen3-8b: layers 0 must be >= 1"),
    "model-missing": (
        "models.yaml", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, layers: 36, ", "{name: qwen3-8b, hf_id: Qwen/Qwen3-8B, ",
        "models.yaml qwen3-8b: layers is missing (transformer layers (num_hidden_layers))"),
    "model-gqa": (
        "models.yaml", "heads: 32, kv_heads: 8, head_dim: 128, vocab: 151936, max_positions: 40960, qk_norm: true,",
        "heads: 32, kv_heads: 12, head_dim: 128, vocab: 151936, max_positions: 40960, qk_norm: true,",
        "models.yaml qwen3-8b: heads 32 must be a multiple of kv_heads 12"),
    "model-moe-topk": (
        "models.yaml", "     experts: 128, topk: 8, moe_ffn: 768,", "     experts: 128, topk: 129, moe_ffn: 768,",
        "models.yaml qwen3_moe-30b_a3b: a MoE row (experts 128) needs 0 < topk <= experts and moe_ffn > 0"),
    "model-head-dim": (
        "models.yaml", "ffn: 18944, heads: 28, kv_heads: 4, vocab: 152064", ("ffn: 18944, heads: 27, kv_heads: 3, "
        "vocab: 152064"),
        "models.yaml qwen2-7b: hidden 3584 must be a multiple of heads 27, or give head_dim"),
    "hardware-type": (
        "hardware.yaml", "    cards_per_node: 8\n", "    cards_per_node: \"8\"\n",
        "hardware.yaml snt9b: cards_per_node '8' is not of type int"),
    "hardware-usable": (
        "hardware.yaml", "    usable_gb: 58.0\n", "    usable_gb: 70.0\n",
        "hardware.yaml snt9b: usable_gb 70.0 must be at most memory_gb 64.0"),
    "hardware-undeclared-key": (
        "hardware.yaml", "    usable_gb: 58.0\n", "    usable_gb: 58.0\n    hbm_gb_s: 1600\n",
        ("hardware.yaml snt9b: hbm_gb_s is not a declared column (declared: name, label, cards_per_node, "
        "parallel_unit, memory_gb, usable_gb, peak_tflops_bf16, accelerator, frameworks, quantization_bits, source, "
        "link_gb_s, scaleout_gb_s, attention_efficiency, scaling_efficiency, scaling_source, "
        "scaling_measured_cards, aliases, volcano_accelerator_type, volcano_super_pod)")),
    "hardware-share": (
        "hardware.yaml", "{1024: 0.0259,", "{1024: 2.59,",
        "hardware.yaml snt9b: attention_efficiency[1024] 2.59 must be a number in (0, 1]"),
    "quantization-bits": (
        "hardware.yaml", "quantization_bits: [4]\n", "quantization_bits: [3]\n",
        "hardware.yaml snt9b: quantization_bits 3 is not one of 4, 8"),
}


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A copy of generator/data/ the loader reads instead."""
    folder = tmp_path / "data"
    shutil.copytree(tables_module.DATA_DIR, folder)
    monkeypatch.setattr(tables_module, "DATA_DIR", folder)
    tables_module.load_tables.cache_clear()
    yield folder
    tables_module.load_tables.cache_clear()


@pytest.mark.parametrize("name,old,new,message", list(BAD_EDITS.values()),
                         ids=list(BAD_EDITS))
def test_a_bad_fact_fails_when_the_tables_load(data, name, old, new, message):
    text = (data / name).read_text(encoding="utf-8")
    assert old in text
    (data / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    result = CliRunner().invoke(main, ["plan", str(SPEC)])
    assert result.exit_code == 5, result.output + result.stderr
    assert result.stderr == f"Error: {message}\n"


def test_the_unedited_copy_plans(data):
    # The edits above are the only difference: the copy itself loads and plans.
    result = CliRunner().invoke(main, ["plan", str(SPEC)])
    assert result.exit_code == 0, result.output + result.stderr


def test_every_memory_scheme_has_a_state_floor():
    # STATE_BYTES (layouts.py) must know every scheme the loader admits, for full and for adapter training.
    assert set(STATE_BYTES) == {(scheme.value, adapters) for scheme in MemoryScheme for adapters in (False, True)}


FRAMEWORK_MODELS = [(fw, model) for fw in TABLES.frameworks.values() for model in TABLES.models
                    if TABLES.supports(fw.name, model) and not fw.refusal(model)]


def test_every_layout_targets_what_a_spec_may_ask():
    # The spec's adapter targets (the schema's enum) are the keys of each MindFormers layout's lora_targets.
    import json

    from generator.resources import resource_dir
    schema = json.loads((resource_dir("schemas") / "job.schema.json").read_text(encoding="utf-8"))
    targets = set(schema["properties"]["lora"]["properties"]["targets"]["enum"])
    for layout in TABLES.frameworks["mindformers"].model_columns["layout"].values or ():
        assert set(TABLES.frameworks["mindformers"].value_facts("layout", layout)["lora_targets"]) == targets


@pytest.mark.parametrize("fw,model", FRAMEWORK_MODELS, ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_supported_model_has_the_facts_its_renderer_reads(fw, model):
    info = fw.models.get(model) or {}
    assert set(fw.model_facts) <= set(info)
    for key, column in fw.model_columns.items():
        if column.needed(info):
            assert key in info, f"{fw.name} {model}: {key}"
    if info.get("layout") == "research":
        assert set(fw.value_facts("family", info["family"])) == {"input_columns", "converter", "tokenizer"}
    if fw.activations is not None:
        assert info["decoder"] in fw.activations


@pytest.mark.parametrize("fw", TABLES.frameworks.values(), ids=lambda f: f.name)
def test_framework_row_invariants(fw):
    from generator.dataset import OPTIONAL_COLUMNS
    assert fw.methods and fw.dataset_formats and set(fw.dataset_formats) <= set(OPTIONAL_COLUMNS)
    assert fw.overhead_gb >= 0 and fw.label
    # The deepspeed scheme counts measured activations, and so does a plugin modelling HuggingFace training itself.
    assert (fw.activations is not None) == (fw.deepspeed or fw.name == "verl")


def test_every_accelerator_has_its_device_variable():
    # The hardware rows' accelerator vocabulary (facts.Accelerator) is what the launch scripts know how to restrict.
    from generator.facts import Accelerator
    from generator.render.common import DEVICE_ENV, DEVICE_RULE
    assert set(DEVICE_ENV) == set(DEVICE_RULE) == set(Accelerator)
