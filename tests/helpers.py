"""Helpers shared by the test modules (imported as `helpers`: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from generator.api.notes import Note
from generator.spec import parse_spec


def note_lines(notes) -> list[str]:
    """Notes as PLAN.md and `plan` show them, from Note values or from plan.json's note objects."""
    return [str(note if isinstance(note, Note) else Note.from_json(note)) for note in notes]


@functools.cache
def sweep_plans() -> dict:
    """{job: Plan} of bench/render_sweep.py's jobs: every bundled example and every bench/spec_sweep.py spec (--force
    where the spec says FORCE), planned in process."""
    from generator.resolve import resolve
    from generator.spec import load_spec
    from generator.tables import load_tables

    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "bench"))
    import spec_sweep

    tables = load_tables()
    plans = {}
    for example in sorted((repo / "examples").glob("*.yaml")):
        spec = load_spec(example)
        plans[spec.job] = resolve(spec, tables)
    for job in spec_sweep.SPECS:
        spec = make_spec(**{k: v for k, v in job.items() if k != "FORCE"})
        plans[spec.job] = resolve(spec, tables, force=bool(job.get("FORCE")))
    return plans


def make_spec(**fields):
    """A Spec from keyword fields on top of a minimal valid one, through the real parser."""
    data = {"job": "t", "model": "qwen3-8b", "method": "full", "seq_len": 4096, "hardware": "snt9b"}
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    # JSON is YAML 1.2 and quotes every string: PyYAML's YAML 1.1 dump leaves '0e0' bare, which 1.2 reads as 0.0.
    return parse_spec(json.dumps(data, ensure_ascii=False).encode())


def render_job(tables, **fields):
    """Plan and render a job in memory: (plan, {relative path: text})."""
    from generator.render import render_files
    from generator.resolve import resolve

    plan = resolve(make_spec(**fields), tables)
    return plan, render_files(plan)


def check_script(text: str, tmp_path, name: str = "launch.sh") -> None:
    """bash -n and shellcheck (warning level) on a generated script; raises AssertionError with their output."""
    import subprocess

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    lint = subprocess.run(["shellcheck", "-S", "warning", str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def flat_keys(node, prefix: str = "") -> set[str]:
    """Every key path of a YAML document; list items of mappings share one `[]` path."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            keys.add(path)
            keys |= flat_keys(value, path)
    elif isinstance(node, list):
        for item in node:
            keys |= flat_keys(item, f"{prefix}[]")
    return keys


def table_cells(tables, framework: str) -> set[tuple]:
    """(model, method, seq_len, hardware) for every non-'-' cell of `framework`'s minimum-card column, each method
    and seq_len a row lists; MindSpeed-LLM also pretrains on its full rows; MindSpeed-MM's pretrain row is
    full_vision's (generator/cards.py ROWS_LIKE)."""
    cells = set()
    for row in tables.min_cards:
        if row.framework != framework:
            continue
        for hw, value in row.cards.items():
            if value is None:
                continue
            for method in row.methods:
                for seq in row.seq_lens:
                    cells.add((row.model, "full_vision" if (framework, method) == ("mindspeed-mm", "pretrain")
                               else method, seq, hw))
                    if method == "full" and framework == "mindspeed-llm":
                        cells.add((row.model, "pretrain", seq, hw))
    return cells


def check_layout_rules(plan, framework, force=False):
    """Every rule a framework's layout must satisfy (the resolver's own rules, checked independently); `force`: the
    plan was resolved with --force, which keeps the closest layout when none fits, with a warning naming it."""
    from generator.tables import load_tables

    tables = load_tables()
    fp = plan.frameworks[framework]
    lay, model, hw = fp.layout, tables.models[plan.model], tables.hardware[plan.hardware]
    assert lay.tp * lay.pp * lay.cp * lay.dp == lay.cards
    # A server replicates a KV head where TP exceeds them (MindFormers' inference attention.py l. 206-224)
    serving = fp.primary.kind.value == "serve"
    assert model.heads % lay.tp == 0 and (model.kv_heads % lay.tp == 0 or (serving and lay.tp % model.kv_heads == 0))
    assert lay.tp <= hw.cards_per_node or serving  # a server splits over every card, across nodes too
    assert len(lay.num_layer_list) == lay.pp and sum(lay.num_layer_list) == model.layers
    # MindSpeed-MM's first stage may hold the vision encoder alone (its README l. 404 at 4c75a551: text [0, 11, 10, 7])
    assert all(n >= 1 for n in (lay.num_layer_list[1:] if framework == "mindspeed-mm" else lay.num_layer_list))
    assert lay.global_batch_size % (lay.micro_batch_size * lay.dp) == 0
    # Fewer micro batches than stages: Megatron's 1F1B schedule runs them (core_v0.12.1 schedules.py l. 1782-1787:
    # warm-up min(pp - rank - 1, micro batches)); MindSpore's pipeline refuses them (the pipeline_micro_rule). Kept
    # only as pinned, with a note.
    assert lay.grad_accum >= lay.pp or (
        lay.source == "pinned" and not tables.frameworks[framework].pipeline_micro_rule
        and any(n.startswith(f"{framework}: the pinned layout's pipeline bubble") for n in plan.notes))
    if lay.source == "search":  # the 1F1B bubble rule at the plan's global batch
        assert (lay.pp - 1) / lay.grad_accum <= 0.25
    assert lay.recompute in ("none", "selective", "full")
    assert not lay.sequence_parallel or lay.tp > 1
    assert lay.cards % hw.parallel_unit == 0
    assert lay.cards <= hw.cards_per_node or lay.cards % hw.cards_per_node == 0
    if model.is_moe:
        assert model.experts % lay.ep == 0 and (lay.cards // lay.pp) % lay.ep == 0
    else:
        assert lay.ep == 1
    if lay.cp > 1:
        assert plan.seq_len % (2 * lay.cp) == 0
    if framework == "llama-factory":
        assert (lay.tp, lay.pp, lay.cp) == (1, 1, 1)
        # No DeepSpeed only on one card; several cards use one of upstream's examples/deepspeed stages (0, 2, 3);
        # never an 8-bit base under ZeRO-3 (LLaMA-Factory refuses it); offload only for bf16 ZeRO-3.
        if lay.zero_stage is None:
            assert lay.cards == 1
        else:
            assert lay.zero_stage in (0, 2, 3) and (lay.cards > 1 or lay.offload)
            assert lay.zero_stage != 3 or plan.quantization_bit != 8
        assert not lay.offload or (lay.zero_stage == 3 and plan.quantization_bit is None)
    else:
        assert lay.zero_stage is None
    if not lay.fits:  # only a validated preset, or a pinned / forced layout with a warning, may exceed the budget
        warned = any(w.startswith(f"{framework}: layout {lay.describe()} may not fit") for w in plan.warnings)
        assert lay.source.startswith("preset") or ((lay.source == "pinned" or fp.forced or force) and warned), \
            f"{lay.describe()}: {lay.memory.total:.1f} GiB > budget {lay.budget_gb:.1f}"
    assert lay.cards >= fp.min_cards.value or fp.forced


RECORDER = """#!/usr/bin/env bash
# Stand-in for {name}: records the words it was started with (NUL-separated), one file per call.
n=$(ls "{log}" | wc -l)
{{ printf '%s\\0' "{name}" "$PWD" "${{CUDA_DEVICE_MAX_CONNECTIONS:-}}" "$@"; }} > "{log}/$n"
"""


def run_recording(script, args, tmp_path, programs=("torchrun", "python")):
    """Run a generated script for real with `programs` replaced by recorders on PATH; returns its CompletedProcess
    and every recorded call as {"program", "cwd", "cuda_max_conn", "argv"} in call order."""
    import os
    import subprocess

    bindir, log = tmp_path / "recorder-bin", tmp_path / "recorder-log"
    bindir.mkdir(exist_ok=True)
    log.mkdir(exist_ok=True)
    for old in log.iterdir():
        old.unlink()
    for name in programs:
        stub = bindir / name
        stub.write_text(RECORDER.format(name=name, log=log))
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    env.pop("MASTER_ADDR", None)
    result = subprocess.run(["bash", str(script), *map(str, args)], env=env, capture_output=True, text=True)
    calls = []
    for entry in sorted(log.iterdir(), key=lambda p: int(p.name)):
        words = entry.read_bytes().decode().split("\0")[:-1]
        calls.append({"program": words[0], "cwd": words[1], "cuda_max_conn": words[2], "argv": words[3:]})
    return result, calls


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports no process holds now, as the kernel picks them for a bind to port 0 on every
    interface: a test that starts a server (torchrun's rendezvous) takes these, never a fixed port another test run
    on the same machine may hold."""
    import socket

    held = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            held.append(sock)
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def require(*modules: str) -> None:
    """Skip a test that needs the framework packages when they are not installed, except in CI (CI=true), where
    the README's test command installs them and a missing one is a failure, not a reason to skip."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must install {missing} (README's test command: bash scripts/install.sh test)")
    if missing:
        pytest.skip(f"{missing} not installed (bash scripts/install.sh test)")


def hf_deepspeed(ds: dict, train: dict, world: int, hidden: int) -> dict:
    """The DeepSpeed config as transformers fills it for `world` ranks training with `train` (TrainingArguments'
    own defaults for keys the YAML does not set), on a model of `hidden` size; raises as the job would."""
    require("transformers")
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    defaults = TrainingArguments.__dataclass_fields__
    known = {k: v for k, v in train.items() if k in defaults and k not in ("deepspeed", "bf16", "fp16")}

    class Args:  # TrainingArguments as one of the planned world's ranks sees them, without a device check
        world_size = world
        bf16, fp16 = bool(train.get("bf16")), bool(train.get("fp16"))

        def __getattr__(self, name):
            if name in known:
                return known[name]
            field = defaults[name]
            return field.default_factory() if callable(field.default_factory) else field.default

        def get_warmup_steps(self, steps):
            return 0

    class Model:
        class config:
            hidden_size = hidden

    config = HfTrainerDeepSpeedConfig(json.loads(json.dumps(ds)))
    config.trainer_config_process(Args())
    config.trainer_config_finalize(Args(), Model(), 1000)
    return config.config


# run_mindformer.py's own options among the words a MindFormers launch.sh passes (2.1.0 l. 89-222).
RUN_MINDFORMER_OPTIONS = {"--config", "--run_mode", "--use_parallel", "--auto_trans_ckpt", "--resume_training",
                          "--load_checkpoint"}


def mindformers_run_config(words: list[str]) -> dict:
    """The config run_mindformer.py trains with, from the words after it: --config's YAML with every word it does
    not know set over it as 2.1.0 does (l. 224-229: split on each "="; l. 341-352: a dotted key whose parents
    exist; tools/utils.py parse_value: int, float, True/False, JSON, else the text)."""
    import yaml

    words = words[words.index("run_mindformer.py") + 1:] if "run_mindformer.py" in words else list(words)
    with open(words[words.index("--config") + 1], encoding="utf-8") as config:
        doc = yaml.safe_load(config)
    rest, i = [], 0
    while i < len(words):
        if words[i] in RUN_MINDFORMER_OPTIONS:
            i += 2
            continue
        rest.extend(words[i].split("="))
        i += 1
    assert len(rest) % 2 == 0, f"run_mindformer.py refuses words not in pairs: {rest}"
    for key, value in zip(rest[::2], rest[1::2]):
        assert key.startswith("--"), key
        *parents, leaf = key[2:].split(".")
        node = doc
        for name in parents:
            node = node[name]
        node[leaf] = value == "True" if value in ("True", "False") else _json_or_text(value)
    return doc


def _json_or_text(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def install_plugin(folder, monkeypatch, module: str, source: str) -> None:
    """A framework plugin module `module` (its text `source`) importable for this test only: written to `folder`,
    which goes on sys.path; a frameworks.yaml row names it in `plugin:`."""
    import sys
    import textwrap

    (folder / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, module, raising=False)


def clear_table_caches() -> None:
    """Forget the tables, schema validator and plugins loaded from the folders a test replaced."""
    from generator import frameworks, spec, tables

    tables.load_tables.cache_clear()
    spec._schema.cache_clear()
    spec._validator.cache_clear()
    frameworks._load.cache_clear()


def add_framework(folder, monkeypatch, name: str, row: str, module: str, source: str,
                  templates: dict[str, str]) -> None:
    """A framework added as a user adds one, for this test only: copies of data, schema and templates under
    `folder` with its frameworks.yaml `row` (listed on every hardware that lists the bundled three), its name in
    the schema, its `templates` ({file name under templates/<name>/: text}) and its plugin `module` (its text
    `source`) on sys.path."""
    import shutil

    from generator import resources, spec, tables, templating

    data, schemas, copied = folder / "data", folder / "schemas", folder / "templates"
    shutil.copytree(tables.DATA_DIR, data)
    shutil.copytree(resources.resource_dir("schemas"), schemas)
    shutil.copytree(resources.resource_dir("templates"), copied)
    frameworks = data / "frameworks.yaml"
    frameworks.write_text(frameworks.read_text(encoding="utf-8") + row, encoding="utf-8")
    hardware = data / "hardware.yaml"
    listed = "frameworks: [mindformers, mindspeed-llm, mindspeed-mm, llama-factory, verl, mindspeed-rl]"
    hardware.write_text(hardware.read_text(encoding="utf-8").replace(listed, f"{listed[:-1]}, {name}]", 1),
                        encoding="utf-8")
    schema_file = schemas / "job.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    schema["properties"]["frameworks"]["items"]["enum"].append(name)
    schema["properties"]["layout"]["properties"][name] = {"$ref": "#/$defs/pins"}
    schema_file.write_text(json.dumps(schema), encoding="utf-8")
    (copied / name).mkdir()
    for file, text in templates.items():
        (copied / name / file).write_text(text, encoding="utf-8")
    plugins = folder / "plugins"
    plugins.mkdir()
    install_plugin(plugins, monkeypatch, module, source)
    folders = {"schemas": schemas, "templates": copied}
    monkeypatch.setattr(tables, "DATA_DIR", data)
    monkeypatch.setattr(spec, "resource_dir", folders.__getitem__)
    monkeypatch.setattr(templating, "resource_dir", folders.__getitem__)
    clear_table_caches()


# The contract test (tests/test_registry.py runs it for every plugin and the toy; tests/test_roles.py for the
# two-role duo).

def assert_meets_contract(name: str, plugin, tmp_path, monkeypatch) -> None:
    """`plugin` is the registered plugin of frameworks.yaml's `name` row; it plans, renders files under <name>/
    and a PLAN.md section for its smallest plan, and validate hands each of its files to its check, which passes."""
    import sys

    from generator import tables
    from generator.frameworks import registry
    from generator.frameworks.contract import Plugin
    from generator.render import render_files, write
    from generator.templating import environment
    from generator.validate import validate

    row = tables.load_tables().frameworks[name]
    assert plugin.name == name and sys.modules[row.plugin].PLUGIN is plugin
    assert plugin.planning.roles(row.methods[0])
    plan = _own_plan(name)
    own = plan.for_framework(name)
    files = plugin.output.render(own, environment())
    assert files and all(path.startswith(f"{name}/") for path in files), sorted(files)
    assert plugin.output.plan_section(own, environment()).strip()
    write(render_files(plan), tmp_path, plan.job, overwrite=False)
    recording = Recording(plugin.output)
    monkeypatch.setitem(registry(), name, Plugin(name, plugin.planning, recording))
    results = {r.path: r for r in validate(tmp_path / plan.job)}
    assert sorted(recording.checked) == sorted(files)
    bad = [r for path, r in results.items() if path in files and r.status not in ("ok", "skipped")]
    assert not bad, bad


def _own_plan(name: str):
    """A small plan for the framework `name` alone: its smallest supported model that plans (LoRA where it offers
    it) on the first hardware that runs it."""
    from generator import tables as tables_module
    from generator.errors import UserError
    from generator.resolve import resolve

    tables = tables_module.load_tables()
    framework = tables.frameworks[name]
    models = sorted((m for m in tables.models if tables.supports(name, m)), key=lambda m: tables.model(m).layers
                    * tables.model(m).hidden ** 2)
    methods = sorted(framework.methods, key=lambda m: m != "lora")
    hardware = [hw.name for hw in tables.hardware.values() if name in hw.frameworks]
    for model in models[:5]:
        for method in methods:
            spec = {"job": f"contract-{name}", "model": model, "method": method, "seq_len": 4096,
                    "hardware": hardware[0], "frameworks": [name]}
            try:
                return resolve(parse_spec(json.dumps(spec).encode()), tables)
            except UserError:
                continue
    raise AssertionError(f"{name}: none of its smallest models plans")


class Recording:
    """The plugin's real Output, noting the paths validate hands to its check."""

    def __init__(self, output):
        self.output, self.checked = output, []

    def __getattr__(self, name):
        return getattr(self.output, name)

    def check(self, job, path):
        self.checked.append(path)
        return self.output.check(job, path)
