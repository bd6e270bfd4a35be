"""gen-launch init and schema as a team uses them (issue 22 item 16): a schema reference that works in every
checkout, the data format in the starter, and a base model told from its instruct row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import note_lines

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "schemas" / "job.schema.json"
MODELINE = "# yaml-language-server: $schema="


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def schema_line(spec: Path) -> str:
    first = spec.read_text().splitlines()[0]
    assert first.startswith(MODELINE)
    return first.removeprefix(MODELINE)


def test_the_schema_reference_works_in_another_checkout(tmp_path):
    (tmp_path / "jobs").mkdir()
    made = run("init", "qwen3-8b", "--method", "lora", "--hardware", "snt9b", "-o", tmp_path / "jobs" / "a.yaml")
    assert made.exit_code == 0, made.stderr
    ref = schema_line(tmp_path / "jobs" / "a.yaml")
    assert ref == "job.schema.json"  # relative to the spec, as yaml-language-server resolves it
    assert (tmp_path / "jobs" / ref).read_bytes() == SCHEMA.read_bytes()
    # A teammate's clone elsewhere: the same relative reference finds the committed copy.
    clone = tmp_path / "elsewhere" / "repo"
    shutil.copytree(tmp_path / "jobs", clone / "jobs")
    shutil.rmtree(tmp_path / "jobs")
    assert (clone / "jobs" / ref).is_file()
    # A second spec in the folder reuses the copy; a schema folder elsewhere is named relative to the spec.
    second = run("init", "qwen3-8b", "--method", "full", "--hardware", "snt9b", "-o", clone / "jobs" / "b.yaml")
    assert second.exit_code == 0 and "job.schema.json" not in second.stdout
    third = run("init", "qwen3-8b", "--method", "full", "--hardware", "snt9b", "--schema", clone / "schemas",
                "-o", clone / "jobs" / "c.yaml")
    assert third.exit_code == 0 and schema_line(clone / "jobs" / "c.yaml") == "../schemas/job.schema.json"
    assert (clone / "schemas" / "job.schema.json").read_bytes() == SCHEMA.read_bytes()


def test_schema_command_writes_the_file_editors_read(tmp_path):
    first = run("schema", "-o", tmp_path / "jobs")
    assert first.exit_code == 0 and first.stdout.split() == ["create", str(tmp_path / "jobs" / "job.schema.json")]
    assert run("schema", "-o", tmp_path / "jobs").stdout.split()[0] == "identical"
    (tmp_path / "jobs" / "job.schema.json").write_text("{}")  # an older copy
    assert run("schema", "-o", tmp_path / "jobs").stdout.split()[0] == "overwrite"
    assert (tmp_path / "jobs" / "job.schema.json").read_bytes() == SCHEMA.read_bytes() == run("schema").stdout.encode()
    # yaml-language-server takes a schema's $id as the base of its $refs: an unreachable one must not be there.
    assert "$id" not in json.loads(SCHEMA.read_text())


def test_the_starter_names_the_data_format(tmp_path):
    spec = tmp_path / "job.yaml"
    assert run("init", "qwen3-8b", "--method", "lora", "--hardware", "snt9b", "-o", spec).exit_code == 0
    text = spec.read_text()
    assert "#   dataset_format: alpaca  # the default for this model; one of:" in text
    assert "#     sharegpt conversations of from / value turns (read by mindspeed-llm, llama-factory)" in text
    # Uncommented with the user's format, it is planned in that format.
    switched = text.replace("# paths:", "paths:").replace("#   dataset_format: alpaca ", "  dataset_format: sharegpt ")
    spec.write_text(switched)
    plan = json.loads(run("plan", spec, "--json").stdout)
    assert plan["data"]["format"] == "sharegpt" and "mindformers" not in plan["frameworks"]


def test_a_base_model_is_planned_from_its_own_weights(tmp_path):
    spec = tmp_path / "base.yaml"
    made = run("init", "Qwen/Qwen2.5-14B", "--method", "lora", "--hardware", "snt9b", "-o", spec)
    assert made.exit_code == 0
    assert yaml.safe_load(spec.read_text())["model"] == "Qwen/Qwen2.5-14B"
    rendered = run("render", spec, "-o", tmp_path / "out")
    assert rendered.exit_code == 0, rendered.stderr
    # init names the job in the letters every scheduler takes (Volcano: DNS-1123 labels, no ".")
    job = tmp_path / "out" / "qwen2-5-14b-lora-snt9b"
    plan = json.loads((job / "plan.json").read_text())
    assert plan["model"] == "qwen2.5-14b" and plan["hf_id"] == "Qwen/Qwen2.5-14B"
    assert any(n.startswith("model: Qwen/Qwen2.5-14B is the base model") for n in note_lines(plan["notes"]))
    train = yaml.safe_load((job / "llama-factory" / "train.yaml").read_text())
    assert train["model_name_or_path"] == "/path/to/Qwen2.5-14B" and train["template"] == "qwen"
    assert "(Qwen/Qwen2.5-14B) lora" in rendered.stderr  # the plan's first line names the weights
    # The row's name is the instruct model, and says so.
    instruct = tmp_path / "instruct.yaml"
    assert run("init", "qwen2.5-14b", "--method", "lora", "--hardware", "snt9b", "-o", instruct).exit_code == 0
    assert 'model: "qwen2.5-14b"  # Qwen/Qwen2.5-14B-Instruct (instruct); for the base model\'s weights write ' \
           'Qwen/Qwen2.5-14B' in instruct.read_text()
    assert json.loads(run("plan", instruct, "--json").stdout)["hf_id"] == "Qwen/Qwen2.5-14B-Instruct"


@pytest.mark.parametrize("base, what", [
    ("Qwen/Qwen3-8B-Base", "the base model of qwen3-8b (Qwen/Qwen3-8B)"),
    ("Qwen/Qwen3-30B-A3B-Base", "the base model of qwen3_moe-30b_a3b (Qwen/Qwen3-30B-A3B)"),
    ("deepseek-ai/DeepSeek-V3-Base", "the base model of deepseek-v3 (deepseek-ai/DeepSeek-V3)"),
    ("Qwen/Qwen3-9B-Base", "a base model")])
def test_a_base_model_without_a_row_is_refused_not_sent_to_the_post_trained_one(tmp_path, base, what):
    # 'did you mean qwen3-8b?' pointed a base id at the post-trained row: following it trains other weights.
    made = run("init", base, "--method", "lora", "--hardware", "snt9b", "-o", tmp_path / "init.yaml")
    assert made.exit_code == 2 and not (tmp_path / "init.yaml").exists(), made.output
    assert f"model: '{base}' is {what}; gen-launch has no row for it" in made.stderr
    spec = tmp_path / "job.yaml"
    spec.write_text(f"job: t\nmodel: {base}\nmethod: lora\nseq_len: 4096\nhardware: snt9b\n")
    planned = run("plan", spec)
    assert planned.exit_code == 2 and f"Error: {spec}: model: '{base}' is {what};" in planned.stderr, planned.output
    assert "did you mean" not in made.stderr + planned.stderr


def test_a_base_suffix_on_a_base_planned_from_its_row_suggests_the_base_id(tmp_path):
    # Qwen publishes Qwen2.5's base as Qwen/Qwen2.5-14B: the suggestion keeps the base weights.
    made = run("init", "Qwen/Qwen2.5-14B-Base", "--method", "lora", "--hardware", "snt9b", "-o", tmp_path / "x.yaml")
    assert made.exit_code == 2 and "did you mean Qwen/Qwen2.5-14B (the base model's id)?" in made.stderr, made.output


def test_init_starts_the_folder_it_writes_into(tmp_path):
    # The README's example writes jobs/qwen3-8b-lora.yaml into a fresh clone, where jobs/ does not exist yet.
    out = tmp_path / "jobs" / "qwen3-8b-lora.yaml"
    made = run("init", "Qwen/Qwen3-8B", "--method", "lora", "--hardware", "snt9b", "-o", str(out))
    assert made.exit_code == 0, made.stderr
    assert out.is_file() and (out.parent / "job.schema.json").is_file()
    assert run("plan", str(out)).exit_code == 0
