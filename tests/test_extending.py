"""README "Extending", done: each test makes one extension the way the README tells, in copies of the data, schema
and templates (or, for code, with the text the README says to add), runs the real CLI on it and checks that the new
thing is planned and rendered with its values. Each counts what it took (files edited, lines added as `git diff`
counts them) against FOOTPRINTS, and README states the same numbers (test_readme_states_the_footprints), so
neither can go stale."""

from __future__ import annotations

import difflib
import importlib
import json
import pkgutil
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import assert_meets_contract

import generator
from generator import memory as memory_module
from generator import resources
from generator.cli import main
from generator.frameworks import registry

REPO = Path(__file__).resolve().parent.parent

# test -> (files edited, lines added). README "Extending" states each as "N files, M lines".
FOOTPRINTS = {
    "test_add_a_model": (2, 5),
    "test_add_a_hardware_type": (2, 16),
    "test_add_a_memory_term": (1, 10),
    "test_add_a_framework": (6, 66),
    "test_add_an_rl_framework": (7, 118),
}


FOLDERS = {"generator/data": "data", "schemas": "schemas", "templates": "templates"}  # repository path -> copy's


class Copy:
    """Copies of generator/data/, schemas/ and templates/ that the generator reads instead of its own (every module
    holding DATA_DIR or resource_dir is pointed at them), and the edits made to them, by their repository paths."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch):
        self.root = root
        self.originals: dict[str, str] = {}  # repository path -> its text before the first edit
        self.edited: dict[str, str] = {}  # repository path -> its text now
        for path, folder in FOLDERS.items():
            shutil.copytree(REPO / path, root / folder)
        folders = {"schemas": root / "schemas", "templates": root / "templates"}
        data_dir, resource_dir = resources.DATA_DIR, resources.resource_dir
        for module in _generator_modules():
            if getattr(module, "DATA_DIR", None) == data_dir:
                monkeypatch.setattr(module, "DATA_DIR", root / "data")
            if getattr(module, "resource_dir", None) is resource_dir:
                monkeypatch.setattr(module, "resource_dir", folders.__getitem__)

    def local(self, path: str) -> Path:
        folder = next(f for f in FOLDERS if path.startswith(f + "/"))
        return self.root / FOLDERS[folder] / path.removeprefix(folder + "/")

    def edit(self, path: str, old: str, new: str) -> None:
        """Replace the one occurrence of `old` in the copy of `path` (a repository path) with `new`."""
        target = self.local(path)
        text = target.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
        self.originals.setdefault(path, text)
        target.write_text(text.replace(old, new), encoding="utf-8")
        self.edited[path] = text.replace(old, new)
        _clear_caches()

    def add(self, path: str, text: str) -> None:
        """Create the copy of `path` (a repository path) with `text`."""
        target = self.local(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        self.originals.setdefault(path, "")
        self.edited[path] = text

    def edit_code(self, path: str, old: str, new: str) -> None:
        """Record the edit of a source file (the test applies it to the loaded module itself)."""
        text = self.edited.get(path) or (REPO / path).read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
        self.originals.setdefault(path, text)
        self.edited[path] = text.replace(old, new)

    def footprint(self) -> tuple[int, int]:
        """(files edited, lines added or changed, as git diff --stat counts insertions)."""
        added = 0
        for path, before in self.originals.items():
            matcher = difflib.SequenceMatcher(None, before.splitlines(), self.edited[path].splitlines(),
                                              autojunk=False)
            added += sum(j2 - j1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert"))
        return len(self.originals), added


def _generator_modules():
    for info in pkgutil.walk_packages(generator.__path__, "generator."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    return [module for name, module in sys.modules.items() if name.split(".")[0] == "generator"]


def _clear_caches() -> None:
    """The tables, schema and registry are loaded once per process: forget them."""
    for module in _generator_modules():
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == module.__name__:
                value.cache_clear()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    copy = Copy(tmp_path / "repo", monkeypatch)
    _clear_caches()
    yield copy
    monkeypatch.undo()
    _clear_caches()


def cli(*args: str, code: int = 0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    return result


def write_spec(folder: Path, name: str, **fields) -> Path:
    spec = {"job": name, "method": "lora", "seq_len": 4096, "hardware": "snt9b",
            "data": {"samples": 20000, "tokens_per_sample": 1024, "epochs": 1},
            "paths": {"model_dir": "/data/models/m", "dataset": "/data/sft/alpaca.json", "dataset_format": "alpaca",
                      "output_dir": "/shared/out", "mindformers_dir": "/opt/mindformers",
                      "mindspeed_llm_dir": "/opt/MindSpeed-LLM"},
            **fields}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def plan_json(spec: Path) -> dict:
    return json.loads(cli("plan", str(spec), "--json").stdout)


# --- Add a model ------------------------------------------------------------------------------------------------

# Qwen2.5-3B-Instruct: its config.json (num_hidden_layers 36, hidden_size 2048, intermediate_size 11008,
# num_attention_heads 16, num_key_value_heads 2, vocab_size 151936, max_position_embeddings 32768,
# tie_word_embeddings true, rope_theta 1e6, rms_norm_eps 1e-6; Qwen2 has q/k/v biases).
MODEL_ROW = """\
  - {name: qwen2.5-3b, hf_id: Qwen/Qwen2.5-3B-Instruct, layers: 36, hidden: 2048, ffn: 11008, heads: 16, kv_heads: 2,
     vocab: 151936, max_positions: 32768, tied: true, qkv_bias: true,
     source: "https://huggingface.co/Qwen/Qwen2.5-3B-Instruct/blob/main/config.json"}
"""
QWEN25_15B_ROW = "Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json\"}\n"


def add_qwen25_3b(repo: Copy) -> None:
    """The models.yaml row, and the facts each framework reads about it: LLaMA-Factory's chat template and decoder
    (whose measured activations and LoRA modules it shares with Qwen2.5-1.5B), MindSpeed-LLM's prompt type and
    converter model type (upstream's Qwen2.5 scripts: the same as the other sizes, the `*qwen2` anchor)."""
    repo.edit("generator/data/models.yaml", QWEN25_15B_ROW, QWEN25_15B_ROW + MODEL_ROW)
    frameworks = "generator/data/frameworks.yaml"
    repo.edit(frameworks, "      qwen2.5-1.5b: *qwen2\n", "      qwen2.5-1.5b: *qwen2\n      qwen2.5-3b: *qwen2\n")
    lf = "      qwen2.5-1.5b: {template: qwen, decoder: qwen2}\n"
    repo.edit(frameworks, lf, lf + "      qwen2.5-3b: {template: qwen, decoder: qwen2}\n")


def test_add_a_model(repo, tmp_path):
    add_qwen25_3b(repo)
    assert repo.footprint() == FOOTPRINTS["test_add_a_model"]
    listing = cli("models").output
    assert re.search(r"qwen2\.5-3b\s+3\.09B\s+mindspeed-llm", listing)
    assert re.search(r"qwen2\.5-3b\s+3\.09B\s+llama-factory", listing)
    spec = write_spec(tmp_path, "q3b", model="Qwen/Qwen2.5-3B-Instruct", cards=8,
                      frameworks=["mindspeed-llm", "llama-factory"])
    plan = plan_json(spec)
    assert plan["model"] == "qwen2.5-3b" and set(plan["frameworks"]) == {"mindspeed-llm", "llama-factory"}
    out = tmp_path / "out"
    cli("render", str(spec), "-o", str(out))
    job = out / "q3b"
    launch = (job / "mindspeed-llm" / "launch.sh").read_text(encoding="utf-8")
    for flag in ("--num-layers 36", "--hidden-size 2048", "--ffn-hidden-size 11008", "--num-attention-heads 16",
                 "--num-query-groups 2", "--prompt-type qwen", "--add-qkv-bias"):
        assert flag in launch, flag
    assert "--untie-embeddings-and-output-weights" not in launch  # tied
    train = yaml.safe_load((job / "llama-factory" / "train.yaml").read_text(encoding="utf-8"))
    assert train["template"] == "qwen" and train["model_name_or_path"] == "/data/models/m"
    # Without a min_cards.csv row the memory model decides the cards; MindFormers has no upstream config for it.
    assert "mindformers" not in cli("plan", str(spec)).output
    result = cli("validate", str(job)).output
    assert "problem" not in result and "ok  mindspeed-llm/launch.sh" in result and \
        "ok  llama-factory/train.yaml" in result, result


def test_a_model_row_missing_a_fact_is_a_table_error(repo, tmp_path):
    repo.edit("generator/data/models.yaml", QWEN25_15B_ROW, QWEN25_15B_ROW + MODEL_ROW.replace(" ffn: 11008,", ""))
    result = cli("models", code=5)
    assert "models.yaml qwen2.5-3b" in result.stderr and "ffn" in result.stderr
    # A framework that supports it without the facts it reads: refused when the tables load, not at render.
    add_qwen25_3b_rows_only = "      qwen2.5-1.5b: *qwen2\n"
    repo.edit("generator/data/models.yaml", MODEL_ROW.replace(" ffn: 11008,", ""), MODEL_ROW)
    repo.edit("generator/data/frameworks.yaml", add_qwen25_3b_rows_only,
              add_qwen25_3b_rows_only + "      qwen2.5-3b: {model_type_hf: llama2}\n")
    result = cli("models", code=5)
    assert "frameworks.yaml mindspeed-llm qwen2.5-3b: prompt_type is missing" in result.stderr


# --- Add a hardware type ----------------------------------------------------------------------------------------

HARDWARE_ROW = """\
  - name: l4
    label: "NVIDIA L4 (24 GB)"
    cards_per_node: 8
    parallel_unit: 1
    memory_gb: 24.0
    usable_gb: 24.0
    # NVIDIA L4 datasheet: BF16 tensor 121 TFLOPS dense (242 with sparsity), 24 GB GDDR6.
    peak_tflops_bf16: 121.0
    accelerator: gpu
    frameworks: [llama-factory]
    quantization_bits: [4, 8]
    source: "NVIDIA L4 datasheet"
    aliases:
      - {name: "NVIDIA L4", source: "the product name (label)"}
"""
LAST_GPU_ROW = '- {name: "NVIDIA L40S", source: "the product name (label)"}\n'


def test_add_a_hardware_type(repo, tmp_path):
    repo.edit("generator/data/hardware.yaml", LAST_GPU_ROW, LAST_GPU_ROW + HARDWARE_ROW)
    repo.edit("schemas/job.schema.json", '"l40s"\n', '"l40s",\n        "l4"\n')
    assert repo.footprint() == FOOTPRINTS["test_add_a_hardware_type"]
    by_name = write_spec(tmp_path, "on-l4", model="qwen3-8b", hardware="l4")
    by_alias = write_spec(tmp_path, "on-l4-alias", model="qwen3-8b", hardware="nvidia-l4")
    plan = plan_json(by_name)
    assert plan["frameworks"].keys() == {"llama-factory"}  # the row's frameworks
    assert plan_json(by_alias)["frameworks"] == plan["frameworks"]
    lf = plan["frameworks"]["llama-factory"]
    assert lf["usable_gib"] == 24.0 and lf["budget_gib"] < 24.0 and lf["memory_per_card_gib"] <= lf["budget_gib"]
    assert "121 TFLOPS" in lf["estimate"]["tps_source"]  # the time model's peak
    assert lf["estimate"]["tokens_per_card_s"] == pytest.approx(
        plan_json(write_spec(tmp_path, "on-a800", model="qwen3-8b", hardware="a800", cards=lf["cards"]))
        ["frameworks"]["llama-factory"]["estimate"]["tokens_per_card_s"] * 121.0 / 312.0, rel=1e-3)
    out = tmp_path / "out"
    cli("render", str(by_name), "-o", str(out))
    assert "CUDA_VISIBLE_DEVICES" in (out / "on-l4" / "llama-factory" / "launch.sh").read_text(encoding="utf-8")
    assert "l4" in (out / "on-l4" / "PLAN.md").read_text(encoding="utf-8")


def test_a_hardware_row_missing_a_fact_is_a_table_error(repo):
    repo.edit("generator/data/hardware.yaml", LAST_GPU_ROW, LAST_GPU_ROW + HARDWARE_ROW.replace(
        "frameworks: [llama-factory]", "frameworks: [llama-factory, mindspeed-llm]"))
    result = cli("models", code=5)
    assert "hardware.yaml l4: mindspeed-llm times jobs with the step model" in result.stderr
    assert "link_gb_s" in result.stderr


# --- Add a memory term ------------------------------------------------------------------------------------------

# What README tells to add to generator/memory.py, in place of its empty TERMS. An illustrative term (the buffer
# size is made up for the test): a fixed buffer per communication group of more than one card that the card joins.
TERM_SOURCE = '''\
BUFFER_BYTES = 1 << 30


def _group_buffers(job: MemoryJob, shape: Parallel, stage: int) -> float:
    """A buffer per communication group (of more than one card) the card joins."""
    groups = sum(1 for size in (shape.tp, shape.pp, shape.dp, shape.cp, shape.ep) if size > 1)
    return groups * BUFFER_BYTES


TERMS: tuple[Term, ...] = (Term("group buffers", _group_buffers),)
'''


def add_term(repo: Copy, monkeypatch, buffer_gib: float) -> None:
    if "generator/memory.py" not in repo.edited:
        repo.edit_code("generator/memory.py", "TERMS: tuple[Term, ...] = ()\n", TERM_SOURCE)
    namespace = dict(vars(memory_module))
    exec(TERM_SOURCE, namespace)  # noqa: S102 - the text README says to add to memory.py, run as memory.py would
    namespace["BUFFER_BYTES"] = buffer_gib * (1 << 30)
    monkeypatch.setattr(memory_module, "TERMS", namespace["TERMS"])


def test_add_a_memory_term(repo, tmp_path, monkeypatch):
    spec = write_spec(tmp_path, "term", model="qwen3-8b", method="full", frameworks=["mindspeed-llm"], cards=8)
    before = plan_json(spec)["frameworks"]["mindspeed-llm"]
    assert "group buffers" not in before["memory_breakdown_gib"]
    add_term(repo, monkeypatch, 1.0)
    assert repo.footprint() == FOOTPRINTS["test_add_a_memory_term"]
    after = plan_json(spec)["frameworks"]["mindspeed-llm"]
    groups = sum(1 for key in ("tp", "pp", "dp", "cp", "ep") if after[key] > 1)
    assert after["memory_breakdown_gib"]["group buffers"] == groups
    assert after["memory_per_card_gib"] == pytest.approx(sum(after["memory_breakdown_gib"].values()), abs=0.05)
    out = tmp_path / "out"
    cli("render", str(spec), "-o", str(out))
    assert re.search(r"\| group buffers \| [0-9.]+ \|", (out / "term" / "PLAN.md").read_text(encoding="utf-8"))


def test_a_memory_term_moves_the_fit_decision(repo, tmp_path, monkeypatch):
    spec = write_spec(tmp_path, "term", model="qwen3-8b", method="full", frameworks=["mindspeed-llm"], cards=8)
    before = plan_json(spec)["frameworks"]["mindspeed-llm"]
    # Sized so that the layout chosen without it no longer fits: the search picks another one, which does.
    room = before["budget_gib"] - before["memory_per_card_gib"]
    add_term(repo, monkeypatch, room + 0.5)
    after = plan_json(spec)["frameworks"]["mindspeed-llm"]
    shape = ("tp", "pp", "dp", "cp", "micro_batch_size", "recompute")
    assert [after[k] for k in shape] != [before[k] for k in shape]
    assert after["memory_per_card_gib"] <= after["budget_gib"]
    # No layout on 8 cards holds a term larger than the budget: refused (exit 2) with the term named.
    add_term(repo, monkeypatch, before["budget_gib"])
    result = cli("plan", str(spec), code=2)
    assert "group buffers" in result.stderr


# --- Add a framework --------------------------------------------------------------------------------------------

# A fourth framework: one train role on the generic planning side with LLaMA-Factory's memory scheme and ZeRO
# search; its output side writes one YAML of the plan's values and checks its global batch.
FRAMEWORK_ROW = """\
  - name: toy
    plugin: toy_plugin
    label: "Toy 1.0 (a framework added by tests/test_extending.py)"
    memory: deepspeed
    methods: [full, lora]
    dataset_formats: [alpaca]
    overhead_gb: 3.0
    throughput: {model: mfu, mfu: {pretrain: 0.3, full: 0.3, lora: 0.3, qlora: 0.3, moe: 0.2}, source: "assumed"}
    activations_file: hf_activations.yaml
    min_cards_from: llama-factory
    support: listed
    model_columns:
      chat: {type: str, meaning: "its chat template"}
      decoder: {type: str, meaning: "the decoder whose measured activations the memory model reads"}
    models:
      qwen3-8b: {chat: qwen3, decoder: qwen3}
"""
PLUGIN_MODULE = '''"""Toy: the generic planning side (one train role) on ZeRO stages; its files are one YAML."""

from generator.checks.job import Result, yaml_mapping
from generator.frameworks.base import DefaultPlanning
from generator.frameworks.contract import Plugin
from generator.frameworks.llama_factory.planning import ZERO_STAGES


class Planning(DefaultPlanning):
    def space(self, role):
        return ZERO_STAGES


class Output:
    options = ()
    launchers = ()

    def render(self, plan, env):
        fp = plan.frameworks["toy"]
        return {"toy/train.yaml": env.get_template("toy/train.yaml.j2").render(
            lr=plan.train.learning_rate, batch=fp.layout.global_batch_size, cards=fp.layout.cards,
            chat=fp.info["chat"])}

    def plan_section(self, plan, env):
        return env.get_template("toy/plan_section.md.j2").render(plan=plan, fp=plan.frameworks["toy"])

    def check(self, job, path):
        if path != "toy/train.yaml":
            return None
        doc, error = yaml_mapping(job.folder / path)
        batch = job.layout_value("toy", "global_batch_size")
        if doc is None or doc.get("global_batch") != batch:
            return Result(path, "problem", error or "global_batch is not the plan's")
        return Result(path, "ok", "toy's own check")


PLUGIN = Plugin("toy", planning=Planning(), output=Output())
'''
TRAIN_TEMPLATE = "lr: {{ lr | yaml }}\nglobal_batch: {{ batch }}\ncards: {{ cards }}\nchat: {{ chat | yaml }}\n"
SECTION_TEMPLATE = "## toy\n\nToy trains {{ plan.model }} on {{ fp.layout.cards }} card(s): `toy/train.yaml`.\n"
HW_ROW_END = """    accelerator: npu
    frameworks: [mindformers, mindspeed-llm, mindspeed-mm, llama-factory, verl, mindspeed-rl]
    # LLaMA-Factory's Ascend QLoRA example"""


def test_add_a_framework(repo, tmp_path, monkeypatch):
    frameworks = "generator/data/frameworks.yaml"
    last = "qwen2.5-32b: {decoder: qwen2, grpo: examples/grpo_trainer/run_qwen2_5_32b_grpo_npu.sh, dapo: " \
        "recipe/dapo/run_dapo_qwen2.5_32b_npu.sh, ppo: examples/ppo_trainer/run_qwen3-8b_npu.sh, ppo_gpu: " \
        "examples/ppo_trainer/run_qwen2.5-32b.sh, dapo_gpu: recipe/dapo/run_dapo_qwen2.5_32b.sh}\n"  # the last row
    repo.edit(frameworks, last, last + FRAMEWORK_ROW)
    repo.edit("generator/data/hardware.yaml", HW_ROW_END, HW_ROW_END.replace("mindspeed-rl]", "mindspeed-rl, toy]"))
    schema = "schemas/job.schema.json"
    repo.edit(schema, '"mindspeed-rl"\n        ]', '"mindspeed-rl",\n          "toy"\n        ]')
    repo.edit(schema, '"mindspeed-rl": {\n          "$ref": "#/$defs/pins"\n        }\n',
              '"mindspeed-rl": {\n          "$ref": "#/$defs/pins"\n        },\n'
              '        "toy": {\n          "$ref": "#/$defs/pins"\n        }\n')
    repo.add("templates/toy/train.yaml.j2", TRAIN_TEMPLATE)
    repo.add("templates/toy/plan_section.md.j2", SECTION_TEMPLATE)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "toy_plugin.py").write_text(PLUGIN_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.delitem(sys.modules, "toy_plugin", raising=False)
    # The package the README names, generator/frameworks/toy/: counted as written, imported from tmp here.
    repo.originals["generator/frameworks/toy/__init__.py"] = ""
    repo.edited["generator/frameworks/toy/__init__.py"] = PLUGIN_MODULE
    _clear_caches()
    assert repo.footprint() == FOOTPRINTS["test_add_a_framework"]
    spec = write_spec(tmp_path, "toyjob", model="qwen3-8b", cards=8, frameworks=["toy", "llama-factory"])
    plan = plan_json(spec)
    toy = plan["frameworks"]["toy"]
    assert toy["cards"] == 8 and toy["roles"]["train"]["cards"] == 8 and toy["zero_stage"] in (None, 0, 2, 3)
    out = tmp_path / "out"
    cli("render", str(spec), "-o", str(out))
    train = yaml.safe_load((out / "toyjob" / "toy" / "train.yaml").read_text(encoding="utf-8"))
    assert train == {"lr": plan["train"]["learning_rate"], "global_batch": plan["train"]["global_batch_size"],
                     "cards": 8, "chat": "qwen3"}
    assert "Toy trains qwen3-8b on 8 card(s)" in (out / "toyjob" / "PLAN.md").read_text(encoding="utf-8")
    checked = json.loads(cli("validate", "--json", str(out / "toyjob")).output)["results"]
    assert {"path": "toy/train.yaml", "status": "ok", "detail": "toy's own check"} in checked



# --- Add an RL framework -----------------------------------------------------------------------------------------

# A second RL framework built from the RL family (generator/families/rl/): an actor on the model-parallel grid, a
# rollout engine of its own TP whose memory is the family's vLLM model, a reference that takes the actor's layout,
# the family's published rate, and a constraint between its roles; its own keys (config.yaml) and a launch on the
# family's Ray cluster partial.
RL_ROW = """\
  - name: toyrl
    plugin: toyrl_plugin
    label: "ToyRL 1.0 (an RL framework added by tests/test_extending.py)"
    memory: megatron-fp32
    methods: [grpo]
    dataset_formats: [alpaca]
    overhead_gb: 3.0
    throughput: {model: mfu, mfu: {pretrain: 0.25, full: 0.25, lora: 0.25, qlora: 0.25, moe: 0.15},
                 source: "unused: the plugin gives the family's published rate, or none"}
    min_cards_from: verl
    support: listed
    models:
      qwen3-8b: {}
"""
RL_PLUGIN = '''"""ToyRL: the RL family's roles, rollout memory, rate and Ray launch, with its own config keys."""

from dataclasses import dataclass, field

from generator.errors import Problem
from generator.families.rl.rates import published
from generator.families.rl.ray import ray_context
from generator.families.rl.rollout import rollout_memory
from generator.frameworks.base import DefaultPlanning
from generator.frameworks.contract import Plugin, RoleDef, RoleKind
from generator.spaces import GridSpace
from generator.throughput import Throughput

ACTOR, ROLLOUT = GridSpace(), GridSpace(tp_choices=(1, 2, 4, 8), pp_choices=(1,))
TPS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Recipe:
    n: int
    seq_len: int
    gpu_memory_utilization: float = 0.6
    sources: dict = field(default_factory=lambda: {"gpu_memory_utilization": "toyrl: 0.6"})
    max_num_seqs: tuple = (256, "toyrl: 256")


class Planning(DefaultPlanning):
    def roles(self, method):
        return (RoleDef(RoleKind.ACTOR), RoleDef(RoleKind.ROLLOUT),
                RoleDef(RoleKind.REFERENCE, takes=RoleKind.ACTOR))

    def space(self, role):
        return ROLLOUT if role is RoleKind.ROLLOUT else ACTOR

    def role_problems(self, ctx):
        pins = dict(ctx.spec.layout["toyrl"].roles) if "toyrl" in ctx.spec.layout else {}
        actor, rollout = pins.get("actor"), pins.get("rollout")
        if actor is None or rollout is None or not actor.tp or not rollout.tp or rollout.tp % actor.tp == 0:
            return []
        works = ", ".join(str(tp) for tp in TPS if tp % actor.tp == 0)
        return [Problem("layout.toyrl.rollout.tp", f"{rollout.tp}: the rollout takes the actor's TP {actor.tp} "
                                                   f"shards whole, so its TP is a multiple of it; values that "
                                                   f"work: {works}")]

    def memory(self, ctx, shape):
        if ctx.role_kind is not RoleKind.ROLLOUT:
            return None
        recipe = Recipe(ctx.spec.rl.get("samples_per_prompt", 8), ctx.spec.seq_len)
        return rollout_memory(ctx.model, ctx.hw, ctx.fw.overhead_gb, recipe, shape.tp, shape.cards, shape.offload,
                              ctx.spec.method, shape.global_batch_size)

    def rate(self, ctx, layout):
        found = next((row for row in published() if (row.method, row.model, row.hardware)
                      == (ctx.spec.method, ctx.model.name, ctx.hw.name)), None)
        if ctx.role_kind is not RoleKind.ACTOR or found is None:
            return Throughput(0.0, "none published", is_estimate=True)
        return Throughput(found.tokens_per_card_s, found.source, is_estimate=True)


class Output:
    options = ()
    launchers = ()

    def render(self, plan, env):
        fp = plan.frameworks["toyrl"]
        tps = {kind: role.layout.tp for kind, role in fp.roles.items()}
        return {"toyrl/config.yaml": env.get_template("toyrl/config.yaml.j2").render(tps=tps, cards=fp.cards),
                "toyrl/launch.sh": env.get_template("toyrl/launch.sh.j2").render(
                    **ray_context(plan, fp), per_node=fp.layout.local_cards, nodes=fp.layout.nodes,
                    scheduled=False, node_ifname=None)}

    def plan_section(self, plan, env):
        return env.get_template("toyrl/plan_section.md.j2").render(fp=plan.frameworks["toyrl"])

    def check(self, job, path):
        return None


PLUGIN = Plugin("toyrl", planning=Planning(), output=Output())
'''
RL_CONFIG = "{% for kind, tp in tps.items() %}{{ kind }}_tp: {{ tp }}\n{% endfor %}cards: {{ cards }}\n"
RL_LAUNCH = """\
#!/bin/bash
# ToyRL on the RL family's Ray cluster: launch.sh NODE_RANK MASTER_ADDR
set -euo pipefail
matches() { [[ $1 =~ $2 ]]; }
is_count() { [[ $1 =~ ^[0-9]+$ ]]; }
NODE_RANK=$1
MASTER_ADDR=$2
NNODES={{ nodes }}
{% with part = "setup" %}{% include "rl/_ray_cluster.sh.j2" %}{% endwith %}
if [ "$NODE_RANK" = 0 ]; then
{% with part = "head" %}{% include "rl/_ray_cluster.sh.j2" %}{% endwith %}
  python3 -m toyrl.train "$(dirname -- "$0")/config.yaml"
else
{% with part = "join" %}{% include "rl/_ray_cluster.sh.j2" %}{% endwith %}
fi
"""
RL_SECTION = "## toyrl\n\nToyRL runs {{ fp.roles | join(', ') }} on {{ fp.cards }} card(s).\n"


def add_toyrl(repo: Copy, tmp_path: Path, monkeypatch) -> None:
    last = "qwen2.5-32b: {decoder: qwen2, grpo: examples/grpo_trainer/run_qwen2_5_32b_grpo_npu.sh, dapo: " \
        "recipe/dapo/run_dapo_qwen2.5_32b_npu.sh, ppo: examples/ppo_trainer/run_qwen3-8b_npu.sh, ppo_gpu: " \
        "examples/ppo_trainer/run_qwen2.5-32b.sh, dapo_gpu: recipe/dapo/run_dapo_qwen2.5_32b.sh}\n"
    repo.edit("generator/data/frameworks.yaml", last, last + RL_ROW)
    repo.edit("generator/data/hardware.yaml", HW_ROW_END, HW_ROW_END.replace("mindspeed-rl]", "mindspeed-rl, toyrl]"))
    schema = "schemas/job.schema.json"
    repo.edit(schema, '"mindspeed-rl"\n        ]', '"mindspeed-rl",\n          "toyrl"\n        ]')
    repo.edit(schema, '"mindspeed-rl": {\n          "$ref": "#/$defs/pins"\n        }\n',
              '"mindspeed-rl": {\n          "$ref": "#/$defs/pins"\n        },\n'
              '        "toyrl": {\n          "$ref": "#/$defs/pins"\n        }\n')
    repo.add("templates/toyrl/config.yaml.j2", RL_CONFIG)
    repo.add("templates/toyrl/launch.sh.j2", RL_LAUNCH)
    repo.add("templates/toyrl/plan_section.md.j2", RL_SECTION)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "toyrl_plugin.py").write_text(RL_PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.delitem(sys.modules, "toyrl_plugin", raising=False)
    repo.originals["generator/frameworks/toyrl/__init__.py"] = ""
    repo.edited["generator/frameworks/toyrl/__init__.py"] = RL_PLUGIN
    _clear_caches()


def rl_spec(folder: Path, name: str, **fields) -> Path:
    return write_spec(folder, name, model="qwen3-8b", method="grpo", frameworks=["toyrl"],
                      rl={"samples_per_prompt": 8}, **fields)


def test_add_an_rl_framework(repo, tmp_path, monkeypatch):
    add_toyrl(repo, tmp_path, monkeypatch)
    assert repo.footprint() == FOOTPRINTS["test_add_an_rl_framework"]
    spec = rl_spec(tmp_path, "toyrl-job", cards=8)
    fw = plan_json(spec)["frameworks"]["toyrl"]
    roles = fw["roles"]
    assert list(roles) == ["actor", "rollout", "reference"]
    shape = ("tp", "pp", "cp", "cards")
    # The reference takes the actor's layout, with its own (forward-only) memory.
    assert [roles["reference"][k] for k in shape] == [roles["actor"][k] for k in shape]
    assert roles["reference"]["memory_per_card_gib"] < roles["actor"]["memory_per_card_gib"]
    assert roles["reference"]["memory_breakdown_gib"]["optimizer states"] == 0
    # The rollout's memory is the family's vLLM model: its KV cache is a term of its own.
    assert roles["rollout"]["memory_breakdown_gib"]["KV cache (vLLM's gpu_memory_utilization share)"] > 0
    out = tmp_path / "out"
    cli("render", str(spec), "-o", str(out))
    config = yaml.safe_load((out / "toyrl-job" / "toyrl" / "config.yaml").read_text(encoding="utf-8"))
    assert config == {"actor_tp": roles["actor"]["tp"], "rollout_tp": roles["rollout"]["tp"],
                      "reference_tp": roles["actor"]["tp"], "cards": 8}
    launch = (out / "toyrl-job" / "toyrl" / "launch.sh").read_text(encoding="utf-8")
    assert 'ray start --head --port="$RAY_PORT"' in launch and 'ray start --address="$RAY_HEAD"' in launch
    checked = json.loads(cli("validate", "--json", str(out / "toyrl-job")).output)["results"]
    assert [r["status"] for r in checked if r["path"] == "toyrl/launch.sh"] == ["ok"]
    contract = tmp_path / "contract"
    contract.mkdir()
    assert_meets_contract("toyrl", registry()["toyrl"], contract, monkeypatch)


def test_a_role_pin_is_honoured_and_a_broken_one_refused_at_its_key(repo, tmp_path, monkeypatch):
    add_toyrl(repo, tmp_path, monkeypatch)
    pinned = rl_spec(tmp_path, "pinned", cards=8, layout={"toyrl": {"actor": {"tp": 2}, "rollout": {"tp": 4}}})
    roles = plan_json(pinned)["frameworks"]["toyrl"]["roles"]
    assert (roles["actor"]["tp"], roles["rollout"]["tp"], roles["reference"]["tp"]) == (2, 4, 2)
    # The constraint between the roles, checked before any search, at the rollout's key with the values that work.
    broken = rl_spec(tmp_path, "broken", cards=8, layout={"toyrl": {"actor": {"tp": 2}, "rollout": {"tp": 1}}})
    refused = cli("plan", str(broken), code=2)
    assert "layout.toyrl.rollout.tp: 1: the rollout takes the actor's TP 2 shards whole" in refused.stderr
    assert "values that work: 2, 4, 8" in refused.stderr
    # A role's own pin breaking a layout rule is refused at the role's key; one for a role not run, at that key.
    odd = rl_spec(tmp_path, "odd", cards=8, layout={"toyrl": {"rollout": {"tp": 3}}})
    assert "layout.toyrl.rollout.tp: TP (3) must divide" in cli("plan", str(odd), code=2).stderr
    critic = rl_spec(tmp_path, "critic", cards=8, layout={"toyrl": {"critic": {"tp": 2}}})
    assert "layout.toyrl.critic: toyrl runs no critic role for grpo; its roles: actor, rollout, reference" in \
        cli("plan", str(critic), code=2).stderr
    taken = rl_spec(tmp_path, "taken", cards=8, layout={"toyrl": {"reference": {"tp": 2}}})
    assert "layout.toyrl.reference: toyrl's reference takes the actor's layout; pin that one" in \
        cli("plan", str(taken), code=2).stderr


# --- README ------------------------------------------------------------------------------------------------------

def test_readme_states_the_footprints():
    section = " ".join((REPO / "docs" / "extending.md").read_text(encoding="utf-8").split())
    for test, (files, lines) in FOOTPRINTS.items():
        assert callable(globals().get(test)), test
        stated = f"{files} file{'s' if files > 1 else ''}, {lines} lines, tested by `tests/test_extending.py::{test}`"
        assert stated in section, stated
