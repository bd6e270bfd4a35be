"""Issues 13 and 24: frameworks are data plus one plugin each behind one typed contract. A fourth framework is a
frameworks.yaml row (and its name in the hardware rows and the schema's enums), one plugin module and its
templates: the spec, resolver, memory and step models, PLAN.md, plan.json and validate take it with no other change.
Built here in copies of the data, schema and templates, with a toy plugin on sys.path, through the real CLI. The
contract test runs over every registered plugin; no module of generator/ outside the plugins names a framework."""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import add_framework, assert_meets_contract, clear_table_caches, install_plugin, note_lines

import generator
from generator import tables as tables_module
from generator.cli import main
from generator.frameworks import registry

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


# The toy's plugin, a module of its own (generator/frameworks/contract.py): the planning side is the default, one
# train role; the output side renders train.yaml and checks that its global batch is the plan's.
TOY_PLUGIN = """
import yaml

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
            lr=plan.train.learning_rate, batch=fp.layout.global_batch_size, zero=fp.layout.zero_stage,
            chat=fp.info["chat"])}

    def plan_section(self, plan, env):
        return env.get_template("toy/plan_section.md.j2").render(plan=plan, cards=plan.frameworks["toy"].layout.cards)

    def check(self, job, path):
        if path != "toy/train.yaml":
            return None
        doc, error = yaml_mapping(job.folder / path)
        batch = job.layout_value("toy", "global_batch_size")
        if doc is None or doc.get("global_batch") != batch:
            return Result(path, "problem", error or f"global_batch {doc.get('global_batch')} is not the plan's {batch}")
        return Result(path, "ok", "toy's own check")


PLUGIN = Plugin("toy", planning=Planning(), output=Output())
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Copies of data, schema and templates with the toy framework added; its plugin module on sys.path."""
    add_framework(tmp_path, monkeypatch, "toy", TOY_ROW, "toy_plugin", TOY_PLUGIN,
                  {"train.yaml.j2": TOY_TRAIN, "plan_section.md.j2": TOY_SECTION})
    yield tmp_path
    clear_table_caches()


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


def test_the_toy_plugin_checks_its_own_files(toy):
    out = toy / "out"
    assert CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(out)]).exit_code == 0
    result = CliRunner().invoke(main, ["validate", str(out / "toyjob")])
    assert result.exit_code == 0 and re.search(r"ok  toy/train.yaml  toy's own check\n", result.output), result.output
    train = out / "toyjob" / "toy" / "train.yaml"
    train.write_text(train.read_text(encoding="utf-8").replace("global_batch: ", "global_batch: 1"), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(out / "toyjob")])
    assert result.exit_code == 1 and re.search(r"problem  toy/train.yaml  changed since .* is not the plan's",
                                               result.output), result.output


def test_the_search_space_words_its_own_choice(toy):
    # Issue 24: the core printed the ZeRO-order note for every framework on the deepspeed memory scheme; the note is
    # the search space's, so a plugin on that scheme with a space of its own gets its own words, or none.
    plugin = toy / "plugins" / "toy_plugin.py"
    own_space = ("from generator.api.notes import Note\n\n\nclass OwnChoice(type(ZERO_STAGES)):\n"
                 "    def choice_note(self, best, rejected):\n"
                 "        return Note('toy.choice', f'toy chose {best.deepspeed_label}')\n\n\n"
                 "class Planning(DefaultPlanning):\n    def space(self, role):\n        return OwnChoice()\n")
    text = plugin.read_text(encoding="utf-8")
    plugin.write_text(text.replace("class Planning(DefaultPlanning):\n    def space(self, role):\n"
                                   "        return ZERO_STAGES\n", own_space), encoding="utf-8")
    result = CliRunner().invoke(main, ["plan", str(_spec(toy, frameworks=["toy"])), "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    notes = note_lines(json.loads(result.stdout)["notes"])
    assert "toy: toy chose ZeRO-0" in notes and not any("examples/deepspeed" in n for n in notes), notes


def test_the_plugin_states_its_memory_inputs(toy):
    # Issue 24: the core read one framework's facts by key (max_device_memory, parallel_optimizer, trains_mtp); a
    # plugin now states its memory inputs through Planning.memory_inputs, and the plan budgets with them.
    plugin = toy / "plugins" / "toy_plugin.py"
    hook = ("    def memory_inputs(self, ctx):\n"
            "        from generator.frameworks.contract import MemoryInputs\n"
            "        return MemoryInputs(usable_cap_gb=40.0, usable_cap_source='toy caps at 40GB')\n\n"
            "    def space(self, role):\n")
    text = plugin.read_text(encoding="utf-8")
    plugin.write_text(text.replace("    def space(self, role):\n", hook, 1), encoding="utf-8")
    result = CliRunner().invoke(main, ["plan", str(_spec(toy)), "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    frameworks = json.loads(result.stdout)["frameworks"]
    assert frameworks["toy"]["usable_gib"] == 40.0 and frameworks["toy"]["usable_cap"] == "toy caps at 40GB"
    assert frameworks["llama-factory"]["usable_gib"] == 58.0 and "usable_cap" not in frameworks["llama-factory"]


@pytest.mark.parametrize("plugin,message", [
    ("no_such_toy_plugin", "frameworks.yaml toy: plugin: no_such_toy_plugin does not import"),
    ("json", "frameworks.yaml toy: plugin: json has no PLUGIN = Plugin('toy', ...)"),
])
def test_a_framework_without_a_plugin_is_a_table_error(toy, plugin, message):
    frameworks = toy / "data" / "frameworks.yaml"
    frameworks.write_text(frameworks.read_text(encoding="utf-8").replace("plugin: toy_plugin", f"plugin: {plugin}"),
                          encoding="utf-8")
    clear_table_caches()
    result = CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(toy / "out")])
    assert result.exit_code == 5 and message in result.stderr, result.output + result.stderr
    assert not (toy / "out").exists()


@pytest.mark.parametrize("source,error", [
    ("raise RuntimeError('no NPU here')\n", "RuntimeError: no NPU here"),
    ("def broken(:\n", "SyntaxError: "),
])
@pytest.mark.parametrize("frameworks", [["toy", "llama-factory"], ["llama-factory"]], ids=["listed", "unlisted"])
def test_a_plugin_that_fails_to_import_is_a_table_error(toy, monkeypatch, source, error, frameworks):
    # Any error of the module (not only ImportError) is the row's, and every command loads every plugin: a broken
    # plugin fails a spec that does not list its framework too.
    install_plugin(toy / "plugins", monkeypatch, "toy_plugin", source)
    result = CliRunner().invoke(main, ["plan", str(_spec(toy, frameworks=frameworks))])
    assert result.exit_code == 5, result.output + result.stderr
    assert result.stderr.startswith(f"Error: frameworks.yaml toy: plugin: toy_plugin does not import ({error}"), \
        result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_an_output_side_that_fails_to_import_fails_when_first_used(toy, monkeypatch):
    # Issue 26: a plugin's output side may load when first asked for (contract.py Plugin, by module name), so that
    # `plan` imports no renderer or check; `plan` runs without it, and `render` names the row and the module.
    source = (toy / "plugins" / "toy_plugin.py").read_text(encoding="utf-8").replace(
        "output=Output())", "output='toy_output')")
    install_plugin(toy / "plugins", monkeypatch, "toy_plugin", source)
    install_plugin(toy / "plugins", monkeypatch, "toy_output", "raise RuntimeError('no renderer here')\n")
    message = "Error: frameworks.yaml toy: plugin: toy_output does not import (RuntimeError: no renderer here)\n"
    assert CliRunner().invoke(main, ["plan", str(_spec(toy))]).exit_code == 0
    result = CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(toy / "out")])
    assert result.exit_code == 5 and result.stderr == message, result.output + result.stderr
    assert not (toy / "out").exists()
    # validate checks any job folder with every plugin's output side: it loads them all before its first result
    other = _spec(toy, frameworks=["llama-factory"])
    assert CliRunner().invoke(main, ["render", str(other), "-o", str(toy / "out")]).exit_code == 0
    result = CliRunner().invoke(main, ["validate", str(toy / "out" / "toyjob")])
    assert result.exit_code == 5 and result.stderr == message and not result.stdout, result.output


def test_a_planning_side_that_fails_to_import_fails_when_first_used(toy, monkeypatch):
    # Issue 26: a plugin's planning side may load when a plan first asks it (contract.py Plugin, by module name): a
    # plan without the framework runs, and one with it names the row and the module.
    source = (toy / "plugins" / "toy_plugin.py").read_text(encoding="utf-8").replace(
        "planning=Planning()", "planning='toy_planning'")
    install_plugin(toy / "plugins", monkeypatch, "toy_plugin", source)
    install_plugin(toy / "plugins", monkeypatch, "toy_planning", "raise RuntimeError('no planner here')\n")
    assert CliRunner().invoke(main, ["plan", str(_spec(toy, frameworks=["llama-factory"]))]).exit_code == 0
    result = CliRunner().invoke(main, ["plan", str(_spec(toy))])
    assert result.exit_code == 5 and result.stderr == ("Error: frameworks.yaml toy: plugin: toy_planning does not "
                                                       "import (RuntimeError: no planner here)\n"), result.output


def test_a_side_that_is_not_one_is_a_table_error(toy, monkeypatch):
    # The review: `PLANNING = object()` in a module a plugin names gave an AttributeError traceback (exit 1).
    source = (toy / "plugins" / "toy_plugin.py").read_text(encoding="utf-8").replace(
        "planning=Planning()", "planning='toy_planning'")
    install_plugin(toy / "plugins", monkeypatch, "toy_plugin", source)
    install_plugin(toy / "plugins", monkeypatch, "toy_planning", "PLANNING = object()\n")
    result = CliRunner().invoke(main, ["plan", str(_spec(toy))])
    assert result.exit_code == 5 and result.stderr == (
        "Error: frameworks.yaml toy: plugin: toy_planning has no PLANNING meeting the contract's Planning "
        "(generator/frameworks/contract.py)\n"), result.output + result.stderr


def test_a_scheduler_needs_a_launch_sh_to_start(toy):
    """The toy writes no launch.sh: a scheduler has nothing to start on its nodes, and says so at the key."""
    spec = _spec(toy, cluster={"scheduler": "slurm"})
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(toy / "out")])
    assert result.exit_code == 2 and "cluster.scheduler: toy writes no launch.sh, so slurm has nothing to start" in \
        result.stderr, result.output + result.stderr
    assert not (toy / "out").exists()


def test_a_plugin_writes_only_into_its_own_folder(toy):
    plugin = toy / "plugins" / "toy_plugin.py"
    plugin.write_text(plugin.read_text(encoding="utf-8").replace('{"toy/train.yaml":', '{"train.yaml":'),
                      encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(_spec(toy)), "-o", str(toy / "out")])
    assert result.exit_code == 5 and "frameworks.yaml toy: its plugin wrote train.yaml, outside toy/" in \
        result.stderr, result.output + result.stderr
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


# ----------------------------------------------------------------------------------------------------------------
# The contract test: every registered plugin (a new one is tested the moment its frameworks.yaml row names it)


@pytest.mark.parametrize("name", list(registry()))
def test_every_plugin_meets_the_contract(name, tmp_path, monkeypatch):
    assert_meets_contract(name, registry()[name], tmp_path, monkeypatch)


def test_the_toy_plugin_meets_the_contract(toy, monkeypatch):
    assert_meets_contract("toy", registry()["toy"], toy / "out", monkeypatch)


def test_the_plugins_validate_options_are_distinct():
    # cli.py adds each plugin's options to `validate`: two with one flag or variable would take each other's value.
    options = [option for plugin in registry().values() for option in plugin.output.options]
    flags = [o.flag for o in options] + ["--json", "--help", "-h"]
    assert len(set(flags)) == len(flags) and len({o.envvar for o in options}) == len(options)


# ----------------------------------------------------------------------------------------------------------------
# Outside generator/frameworks/, no module names a framework in its code (comments and docstrings may)

# Names of frameworks that are no registry row's: a plugin not yet registered (verl), the libraries and launchers
# one framework stands on (MindSpore and its msrun, MindSpeed, Megatron-LM). The memory schemes' names (megatron-fp32,
# deepspeed) are the core's own vocabulary.
ALIASES = ("verl", "msrun", "mindspore", "mindspeed", "megatron[-_ ]?lm")


def framework_names(names) -> re.Pattern:
    """Every registry name, spelled with -, _, a space or no separator, and the ALIASES; not the end of a longer word
    (typing's `overload` holds "verl")."""
    spelled = ["[-_ ]?".join(map(re.escape, re.split(r"[-_ ]", name))) for name in names]
    return re.compile("(?<![a-z])(?:" + "|".join([*spelled, *ALIASES]) + ")", re.I)


FRAMEWORK_NAMES = framework_names(registry())
PACKAGE = Path(generator.__file__).parent
CORE = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "frameworks" not in p.parts)
# The core templates (a framework's own are in templates/<framework>/)
CORE_TEMPLATES = sorted(p.name for p in (PACKAGE.parent / "templates").glob("*.j2"))


def code_words(source: str) -> list[tuple[int, str]]:
    """(line, token) of the code: comments and docstrings (a string that is a statement of its own) left out."""
    out: list[tuple[int, str]] = []
    starts = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
    previous = tokenize.NEWLINE
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for i, token in enumerate(tokens):
        if token.type in (tokenize.COMMENT, tokenize.NL):
            continue
        statement = token.type == tokenize.STRING and previous in starts and \
            tokens[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER)
        previous = token.type
        if not statement:
            out.append((token.start[0], token.string))
    return out


def test_code_words_leave_out_comments_and_docstrings_only():
    source = '"""MindFormers."""\nx = "mindspeed-llm"  # LLaMA-Factory\ndef f():\n    """llama_factory"""\n'
    assert [word for _, word in code_words(source) if FRAMEWORK_NAMES.search(word)] == ['"mindspeed-llm"']


def test_the_names_grep_every_spelling():
    words = ["LLaMA-Factory", "llamafactory-cli", "llama_factory", "MindSpeed-LLM", "mindspeed_llm", "MindFormers",
             "verl", "msrun", "MindSpore", "Megatron-LM", "toy"]
    assert [w for w in words if not framework_names(["llama-factory", "mindspeed-llm", "mindformers", "toy"])
            .search(w)] == []
    assert not FRAMEWORK_NAMES.search("megatron-fp32 megatron_distopt deepspeed torch overload")
    assert [w for w in ["run_verl", "VERL_HOME", "ppo.verl", "2verl"] if not FRAMEWORK_NAMES.search(w)] == []


def data_file(module: str, word: str) -> bool:
    """A family's name for a data file it reads (generator/data/), which its framework's name may spell: a family
    (generator/families/) shares the reader, the files stay each framework's."""
    name = word.strip("'\"")
    return module.startswith("families/") and name != word and "/" not in name and (PACKAGE / "data" / name).is_file()


@pytest.mark.parametrize("module", CORE)
def test_the_core_names_no_framework(module):
    source = (PACKAGE / module).read_text(encoding="utf-8")
    named = [f"l. {line}: {word}" for line, word in code_words(source)
             if FRAMEWORK_NAMES.search(word) and not data_file(module, word)]
    assert not named, f"generator/{module} names a framework: {named}"


def test_a_family_names_no_framework_beyond_its_data_files():
    assert data_file("families/megatron/flags.py", '"mindspeed_mm_flags_kinds.tsv"')
    assert not data_file("families/megatron/flags.py", '"mindspeed-mm"')
    assert not data_file("families/megatron/flags.py", '"no_such_file.tsv"')
    assert not data_file("plan.py", '"mindspeed_mm_flags_kinds.tsv"')  # the core proper names none


def template_text(source: str) -> str:
    """A template without its Jinja comments (a rule's upstream source may name its framework there)."""
    return re.sub(r"\{#.*?#\}", lambda m: "\n" * m.group().count("\n"), source, flags=re.S)


@pytest.mark.parametrize("template", CORE_TEMPLATES)
def test_the_core_templates_name_no_framework(template):
    lines = template_text((PACKAGE.parent / "templates" / template).read_text(encoding="utf-8")).splitlines()
    named = [f"l. {n}: {line.strip()}" for n, line in enumerate(lines, start=1) if FRAMEWORK_NAMES.search(line)]
    assert not named, f"templates/{template} names a framework: {named}"
