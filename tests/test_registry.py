"""Issue 13: frameworks are data plus one typed registry. A fourth framework is a frameworks.yaml row (and its name
in the hardware rows and the schema's enums), one renderer module and its templates: the spec, resolver, memory
and step models, PLAN.md and plan.json take it with no other change. Built here in copies of the data, schema and
templates, with a toy renderer, through the real CLI."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from generator import render as render_module
from generator import resources
from generator import spec as spec_module
from generator import tables as tables_module
from generator.cli import main

TOY_ROW = """
  - name: toy
    plugin: toy_plugin
    label: "Toy 1.0 (a fourth framework, for the registry test)"
    memory: deepspeed
    methods: [full, lora]
    dataset_formats: [alpaca]
    overhead_gb: 3.0
    throughput: {model: mfu, mfu: {pretrain: 0.3, full: 0.3, lora: 0.3, qlora: 0.3, moe: 0.2}, source: "a test"}
    activations_file: hf_activations.yaml
    min_cards_from: llama-factory
    model_facts: [chat, decoder]
    support: listed
    models:
      qwen3-8b: {chat: qwen3, decoder: qwen3}
"""
TOY_TRAIN = "lr: {{ lr | yaml }}\nglobal_batch: {{ batch }}\nzero: {{ zero | yaml }}\nchat: {{ chat | yaml }}\n"
TOY_SECTION = "Toy trains {{ plan.model }} on {{ cards }} card(s).\n"


def toy_render(plan, env):
    fp = plan.frameworks["toy"]
    return {"toy/train.yaml": env.get_template("toy/train.yaml.j2").render(
        lr=plan.train.learning_rate, batch=fp.layout.global_batch_size, zero=fp.layout.zero_stage,
        chat=fp.info["chat"])}


def toy_section(plan, env):
    return env.get_template("toy/plan_section.md.j2").render(plan=plan, cards=plan.frameworks["toy"].layout.cards)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Copies of data, schema and templates with the toy framework added; its renderer registered."""
    data, schemas, templates = tmp_path / "data", tmp_path / "schemas", tmp_path / "templates"
    shutil.copytree(tables_module.DATA_DIR, data)
    shutil.copytree(resources.resource_dir("schemas"), schemas)
    shutil.copytree(resources.resource_dir("templates"), templates)
    frameworks = data / "frameworks.yaml"
    frameworks.write_text(frameworks.read_text(encoding="utf-8") + TOY_ROW, encoding="utf-8")
    hardware = data / "hardware.yaml"
    hardware.write_text(hardware.read_text(encoding="utf-8").replace(
        "frameworks: [mindformers, mindspeed-llm, llama-factory]",
        "frameworks: [mindformers, mindspeed-llm, llama-factory, toy]", 1),
        encoding="utf-8")
    schema_file = schemas / "job.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    schema["properties"]["frameworks"]["items"]["enum"].append("toy")
    schema["properties"]["layout"]["properties"]["toy"] = {"$ref": "#/$defs/pins"}
    schema_file.write_text(json.dumps(schema), encoding="utf-8")
    (templates / "toy").mkdir()
    (templates / "toy" / "train.yaml.j2").write_text(TOY_TRAIN, encoding="utf-8")
    (templates / "toy" / "plan_section.md.j2").write_text(TOY_SECTION, encoding="utf-8")
    folders = {"schemas": schemas, "templates": templates}
    monkeypatch.setattr(tables_module, "DATA_DIR", data)
    monkeypatch.setattr(spec_module, "resource_dir", folders.__getitem__)
    monkeypatch.setattr(render_module, "resource_dir", folders.__getitem__)
    monkeypatch.setitem(render_module.FRAMEWORK_RENDERERS, "toy", (toy_render, toy_section))
    tables_module.load_tables.cache_clear()
    spec_module._validator.cache_clear()
    yield tmp_path
    tables_module.load_tables.cache_clear()
    spec_module._validator.cache_clear()


def _spec(tmp_path, **extra):
    spec = {"job": "toyjob", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
            "frameworks": ["toy", "llama-factory"], "cards": 8, "train": {"learning_rate": 3.0e-4}, **extra}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def test_a_fourth_framework_is_a_data_row_a_module_and_templates(toy):
    out = toy / "out"
    result = CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(out)])
    assert result.exit_code == 0, result.output + result.stderr
    job = out / "toyjob"
    train = yaml.safe_load((job / "toy" / "train.yaml").read_text(encoding="utf-8"))
    plan = json.loads((job / "plan.json").read_text(encoding="utf-8"))
    # The resolver planned it (ZeRO search, the common global batch, the recipe) and every output shows it.
    assert train["lr"] == 3.0e-4 and train["chat"] == "qwen3" and train["zero"] in (None, 0, 1, 2, 3)
    assert train["global_batch"] == plan["train"]["global_batch_size"] == \
        plan["frameworks"]["llama-factory"]["global_batch_size"]
    assert plan["frameworks"]["toy"]["cards"] == 8
    assert "Toy trains qwen3-8b on 8 card(s)." in (job / "PLAN.md").read_text(encoding="utf-8")
    assert "toy/train.yaml" in (job / "MANIFEST").read_text(encoding="utf-8")


def test_the_spec_offers_only_what_the_registry_holds(toy):
    result = CliRunner().invoke(main, ["plan", str(_spec(toy, model="llama3.1-8b"))])
    assert result.exit_code == 2 and "toy does not support llama3.1-8b (its models: qwen3-8b)" in result.stderr


def test_a_framework_without_a_renderer_is_a_table_error(toy, monkeypatch):
    monkeypatch.delitem(render_module.FRAMEWORK_RENDERERS, "toy")
    result = CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(toy / "out")])
    assert result.exit_code == 5 and "toy has no renderer registered" in result.stderr
    assert not (toy / "out").exists()


@pytest.mark.parametrize("old,new,message", [
    ("memory: deepspeed\n    methods: [full, lora]\n", "memory: zero-9\n    methods: [full, lora]\n",
     "frameworks.yaml toy: memory 'zero-9' is not a scheme the memory model knows"),
    ("      qwen3-8b: {chat: qwen3, decoder: qwen3}\n", "      qwen3-8b: {decoder: qwen3}\n",
     "frameworks.yaml toy: qwen3-8b is supported"),
    ("{chat: qwen3, decoder: qwen3}\n", "{chat: qwen3, decoder: mamba}\n",
     "toy: qwen3-8b's decoder 'mamba' has no measured activations"),
])
def test_a_toy_row_missing_a_fact_fails_when_the_tables_load(toy, old, new, message):
    frameworks = toy / "data" / "frameworks.yaml"
    text = frameworks.read_text(encoding="utf-8")
    assert old in text
    frameworks.write_text(text.replace(old, new), encoding="utf-8")
    tables_module.load_tables.cache_clear()
    result = CliRunner().invoke(main, ["plan", str(_spec(toy))])
    assert result.exit_code == 5 and message in result.stderr and "Traceback" not in result.output
