"""verl 0.7.0's own config code (Hydra compose, validate_config, the rollout dataclass) on upstream's NPU example
overrides for the seed's models (tests/data/verl/, each with its source), on every seed row's rendered overrides
(snt9b, snt9b23, A800, H800), on each rule broken once (also through `gen-launch validate`), and on values of every
type read back as verl reads them. They run in .venv-verl/ (`bash scripts/install.sh verl`) or
GEN_LAUNCH_VERL_PYTHON; skipped without it, except under CI=true, where they fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import sweep_plans

from generator.checks.job import Job
from generator.frameworks.verl.checks import (
    ACTOR,
    ROLLOUT,
    RUNTIME_KEYS,
    check,
    runtime_problems,
    stand_in_model,
    verl_check,
    verl_checks,
    verl_compose,
    verl_python,
    with_model,
)
from generator.frameworks.verl.settings import hydra_value
from generator.render import render_files
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

DATA = Path(__file__).resolve().parent / "data" / "verl"
# CI installs it (the README's test command), so there a missing environment fails instead of skipping.
needs_verl = pytest.mark.skipif(verl_python() is None and os.environ.get("CI", "").lower() != "true",
                                reason="verl's environment is not installed: run `bash scripts/install.sh verl` (or "
                                       "set GEN_LAUNCH_VERL_PYTHON)")


def overrides(name: str) -> list[str]:
    return [line for line in (DATA / f"{name}.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


GRPO = overrides("grpo_qwen3_8b")  # 8 devices, train batch 256 x n 5, mini batch 64
# Each verl rule broken once on a rendered Qwen3-8B GRPO job (as upstream's example: 8 devices, train batch 256 x n 5,
# mini batch 64), and the words of verl's (or Hydra's) refusal.
BROKEN = {
    # verl/utils/config.py l.108-113
    "batch not divisible": (["data.train_batch_size=100"],
                            "real_train_batch_size (500) must be divisible by minimal possible batch size (8)"),
    # verl/workers/config/actor.py l.198-205
    "mini batch above batch": (["actor_rollout_ref.actor.ppo_mini_batch_size=512"],
                               "train_batch_size (256) must be >= actor.ppo_mini_batch_size (512)"),
    # verl/workers/config/actor.py l.296-303
    "SP without remove-padding": (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
                                   "actor_rollout_ref.model.use_remove_padding=False"],
                                  "you must enable `use_remove_padding`"),
    # Hydra's struct mode: only +key= adds a key
    "misspelt key": (["actor_rollout_ref.actor.ppo_mini_batchsize=64"], "Key 'ppo_mini_batchsize' is not in struct"),
    # verl/workers/config/rollout.py l.243-246
    "rollout pipeline parallel": (["actor_rollout_ref.rollout.pipeline_model_parallel_size=2"],
                                  "not implemented pipeline_model_parallel_size > 1"),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("verl")


# Strings that look like other types or carry Hydra's, OmegaConf's or a shell's syntax, and values of each type.
STRINGS = ["a b", "it's", 'say "hi"', "back\\slash", "end\\", "end\\'", "x\\\\'y", "a,b", "[x]", "{y}", "(z)",
           "${oc.env:HOME}", "$(id)", "`id`", "1e-6", "1e-06", "true", "False", "null", "~", "42", "3.5", "inf",
           "\\${x}", "a\\b${x}", "${", "$${a", "}", "a=b", "c:d", "é", "", " lead", "trail ", "'", '"', "\\",
           "\\\\", "/data/train.parquet", "--flag", "#hash"]
SCALARS = [1e-06, 0.1, 1e16, -2.5, 3, -3, 0, 2**40, True, False, None]
ROUND_TRIP = {"trainer.project_name": "it's ${oc.env:HOME} $(id)", "trainer.experiment_name": "a\\b, [c]",
              "data.train_files": tuple(STRINGS), "actor_rollout_ref.actor.optim.lr": 1e-06,
              "trainer.total_epochs": 3, "actor_rollout_ref.model.use_remove_padding": True,
              **{f"+roundtrip.s{i}": value for i, value in enumerate(STRINGS + SCALARS)}}


@pytest.fixture(scope="module")
def verdicts(scratch) -> dict[str, tuple[str, str]]:
    """Every case of this module in one verl child (its imports take ~15 s)."""
    model = stand_in_model(scratch / "qwen3", load_tables().model("qwen3-8b"))
    # Each rule is broken on the rendered Qwen3-8B GRPO job (8 cards, train batch 256 x n 5, mini batch 64).
    generated = read_as_launch(rendered("qwen3-8b", "grpo", "snt9b")[1])
    injected = f"""trainer.project_name='__import__("os").system("touch {scratch}/ran")'"""
    cases = {
        "grpo_qwen3_8b": ("ppo", GRPO),
        "grpo_qwen2_5_vl_7b": ("ppo", overrides("grpo_qwen2_5_vl_7b")),
        "ppo_qwen3_8b": ("ppo", with_model(overrides("ppo_qwen3_8b"), model)),
        "dapo_qwen3_14b_base": ("dapo", overrides("dapo_qwen3_14b_base")),
        "ppo_qwen3_8b as upstream": ("ppo", overrides("ppo_qwen3_8b")),
        "dapo keys under ppo": ("ppo", overrides("dapo_qwen3_14b_base")),
        **{name: ("ppo", generated + change) for name, (change, _) in BROKEN.items()},
        "python in a value": ("ppo", GRPO + [injected]),
    }
    found = verl_compose([(entry, items, ()) for entry, items in cases.values()]
                         + [("ppo", GRPO + [f"{key}={hydra_value(value)}" for key, value in ROUND_TRIP.items()],
                             [key.lstrip("+") for key in ROUND_TRIP])])
    return {**{name: (item.status, item.detail) for name, item in zip(cases, found, strict=False)},
            "round trip": found[-1]}


@needs_verl
def test_every_value_reads_back_as_written(verdicts):
    """hydra_value through Hydra's override parser and verl's config, read as verl's workers read it."""
    status, detail, values, _ = verdicts["round trip"]
    assert (status, detail) == ("ok", "")
    for key, value in ROUND_TRIP.items():
        read = values[key.lstrip("+")]
        expected = list(value) if isinstance(value, tuple) else value
        assert (read, type(read)) == (expected, type(expected)), key


@needs_verl
@pytest.mark.parametrize("example", ["grpo_qwen3_8b", "grpo_qwen2_5_vl_7b", "ppo_qwen3_8b", "dapo_qwen3_14b_base"])
def test_upstream_examples_pass(verdicts, example):
    assert verdicts[example] == ("ok", "")


@needs_verl
@pytest.mark.parametrize("rule", BROKEN)
def test_each_rule_broken_once_is_refused(verdicts, rule):
    status, detail = verdicts[rule]
    assert status == "problem"
    assert BROKEN[rule][1] in detail
    assert "Traceback" not in detail and "\n" not in detail


@needs_verl
def test_a_critic_needs_its_model_folder_here(verdicts):
    # The PPO example names its models by hub name: verl's HFModelConfig looks them up, and this check is offline.
    status, detail = verdicts["ppo_qwen3_8b as upstream"]
    assert status == "problem"
    assert "outgoing traffic has been disabled" in detail


@needs_verl
def test_dapo_keys_need_the_dapo_config(verdicts):
    status, detail = verdicts["dapo keys under ppo"]
    assert status == "problem"
    assert "Key 'gen_batch_size' is not in struct" in detail


@needs_verl
def test_overrides_are_data(verdicts, scratch):
    assert verdicts["python in a value"] == ("ok", "")  # a quoted string to Hydra's override grammar
    assert not (scratch / "ran").exists()


def test_without_verl_the_verdict_is_the_environment(tmp_path):
    status, detail = verl_check(GRPO, python=str(tmp_path / "no-python"))
    assert status == "env"
    assert "cannot run" in detail


def test_hydra_values_as_written():
    # A backslash is literal in Hydra's quoted value unless a quote follows it (overrides_visitor.py
    # _unescape_quoted_string); `${` is escaped for both OmegaConf reads (the compose, and after verl's resolve).
    assert hydra_value("back\\slash") == "'back\\slash'"
    assert hydra_value("end\\") == "'end\\\\'"
    assert hydra_value("it's") == "'it\\'s'"
    assert hydra_value("${oc.env:HOME}") == "'\\\\\\${oc.env:HOME}'"
    assert [hydra_value(v) for v in (1e-06, True, None, 3, ("a", 1))] == ["1e-06", "True", "null", "3", "['a',1]"]
    for broken in ("two\nlines", "a\tb", "a\x85b", "a\rb"):
        with pytest.raises(ValueError, match="one line without control characters"):
            hydra_value(broken)


def test_an_unknown_entry_is_refused():
    with pytest.raises(ValueError, match="entry"):
        verl_checks([("sft", GRPO)])


def job(folder: Path, lines: list[str], model: str, cards: int, config: str = "ppo", **options: str) -> Job:
    """A job folder holding verl/overrides.txt and the bundled verl example's plan.json, with the model, cards and
    config its check reads set."""
    (folder / "verl").mkdir(parents=True)
    (folder / "verl" / "overrides.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plan = sweep_plans()["qwen3-8b-grpo-verl-snt9b"].to_json()
    plan["model"], plan["frameworks"]["verl"]["cards"] = model, cards
    plan["frameworks"]["verl"]["settings"]["config"] = config
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return Job.read(folder, options)


def test_validate_without_verl_says_so(tmp_path):
    result = check(job(tmp_path, GRPO, "qwen3-8b", 8, verl_python=str(tmp_path / "none")), "verl/overrides.txt")
    assert result.status == "env"
    assert "bash scripts/install.sh verl" in result.detail


def test_validate_needs_the_plan(tmp_path):
    folder = job(tmp_path, GRPO, "qwen3-8b", 8).folder
    (folder / "plan.json").unlink()
    assert check(Job.read(folder, {}), "verl/overrides.txt").status == "problem"
    assert check(Job.read(folder, {}), "verl/launch.sh") is None


# The Qwen3-8B GRPO example's values as verl composes them (8 devices, train batch 256 x n 5, mini batch 64,
# micro batch 1 a device).
VALUES = {key: None for key in RUNTIME_KEYS} | {
    "trainer.nnodes": 1, "trainer.n_gpus_per_node": 8, f"{ROLLOUT}n": 5, f"{ROLLOUT}tensor_model_parallel_size": 2,
    f"{ROLLOUT}data_parallel_size": 1, f"{ROLLOUT}pipeline_model_parallel_size": 1,
    f"{ACTOR}ppo_mini_batch_size": 64, f"{ACTOR}ppo_micro_batch_size_per_gpu": 1,
    f"{ACTOR}ulysses_sequence_parallel_size": 1, "critic.ppo_mini_batch_size": 64, "critic.rollout_n": 5,
    "critic.ppo_micro_batch_size_per_gpu": 1, "critic.ulysses_sequence_parallel_size": 1}


@pytest.mark.parametrize(("change", "critic", "words"), [
    ({"trainer.nnodes": 2}, False, "trainer.nnodes x n_gpus_per_node = 16 devices, but the plan has 8"),
    ({f"{ROLLOUT}tensor_model_parallel_size": 3}, False, "rollout TP 3 x DP 1 x PP 1 does not divide the world of 8"),
    ({f"{ROLLOUT}data_parallel_size": 16}, False, "rollout TP 2 x DP 16 x PP 1 does not divide"),
    ({f"{ACTOR}ulysses_sequence_parallel_size": 3}, False, "actor ulysses SP 3 does not divide the world of 8"),
    ({f"{ACTOR}ulysses_sequence_parallel_size": 8}, False,
     "actor ulysses SP 8 must divide the model's 28 attention heads"),
    ({f"{ACTOR}ppo_micro_batch_size_per_gpu": 3}, False, "actor mini batch 64 x n 5 / (world 8 / SP 1) = 40 per "
                                                         "device is not a positive multiple of the micro batch 3"),
    ({f"{ACTOR}ppo_micro_batch_size": 24}, False, "= 40 per device is not a positive multiple of the micro batch 3"),
    ({f"{ACTOR}ppo_mini_batch_size": 1, f"{ROLLOUT}n": 1}, False, "= 0 per device"),
    ({"critic.ppo_micro_batch_size_per_gpu": 3}, True, "critic mini batch 64 x n 5"),
])
def test_rules_verl_checks_in_its_workers(change, critic, words):
    assert runtime_problems(VALUES, critic, heads=28, kv_heads=4, cards=8) == []
    problems = runtime_problems(VALUES | change, critic, heads=28, kv_heads=4, cards=8)
    assert len(problems) == 1 and words in problems[0]


# PPO on a vision-language model is refused (tests/test_rl_semantics.py): verl starts its critic only through trl.
SEED_ROWS = sorted({(row.model, method) for row in load_tables().min_cards if row.framework == "verl"
                    for method in row.methods
                    if not (method == "ppo" and load_tables().model(row.model).vision_params_b > 0)})
HARDWARE = ("snt9b", "snt9b23", "a800", "h800")


def rendered(model: str, method: str, hardware: str, **extra) -> tuple[object, str]:
    """(the plan, its rendered verl/overrides.txt) of a seed row."""
    spec = {"job": "rl", "model": model, "method": method, "seq_len": 4096, "hardware": hardware,
            "frameworks": ["verl"], "data": {"samples": 60000, "tokens_per_sample": 1024}, **extra}
    plan = resolve(parse_spec(json.dumps(spec).encode()), load_tables())
    return plan, render_files(plan)["verl/overrides.txt"]


def read_as_launch(text: str) -> list[str]:
    return [line for line in text.split("\n") if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def seed_verdicts(tmp_path_factory) -> dict:
    """Every seed verl row on two NPU and two GPU types, rendered, through verl's own config code in one child (the
    models' folders stood in as `gen-launch validate` does), then the rules verl checks in its workers."""
    scratch = tmp_path_factory.mktemp("seed")
    tables = load_tables()
    models = {name: stand_in_model(scratch / name, tables.model(name)) for name in {m for m, _ in SEED_ROWS}}
    plans = {(model, method, hw): rendered(model, method, hw) for hw in HARDWARE for model, method in SEED_ROWS}
    found = verl_compose([(plan.frameworks["verl"].settings.config, with_model(read_as_launch(text), models[key[0]]),
                           RUNTIME_KEYS) for key, (plan, text) in plans.items()])
    out = {}
    for (key, (plan, _)), item in zip(plans.items(), found, strict=True):
        model = tables.model(key[0])
        rules = runtime_problems(item.values, item.critic, model.heads, model.kv_heads,
                                 plan.frameworks["verl"].cards) if item.values else []
        out[key] = (item.status, item.detail, rules, item.critic)
    return out


@needs_verl
@pytest.mark.parametrize("hardware", HARDWARE)
def test_every_seed_row_is_accepted_by_verl(seed_verdicts, hardware):
    for model, method in SEED_ROWS:
        status, detail, rules, critic = seed_verdicts[(model, method, hardware)]
        assert (status, detail, rules) == ("ok", "", []), (model, method)
        assert critic == (method == "ppo"), (model, method)


def validate_job(folder: Path) -> dict[str, tuple[str, str]]:
    """`gen-launch validate --json` on a job folder: {path: (status, detail)}."""
    from click.testing import CliRunner

    from generator.cli import main

    result = CliRunner().invoke(main, ["validate", str(folder), "--json"])
    return {item["path"]: (item["status"], item["detail"]) for item in json.loads(result.stdout)["results"]}


def render_job(folder: Path, model: str, method: str) -> Path:
    """A seed row on one Snt9b node, written by `gen-launch render`."""
    from click.testing import CliRunner

    from generator.cli import main

    spec = folder / "rl.yaml"
    spec.write_text(json.dumps({"job": "rl", "model": model, "method": method, "seq_len": 4096, "hardware": "snt9b",
                                "frameworks": ["verl"], "data": {"samples": 60000, "tokens_per_sample": 1024}}),
                    encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(folder / "out")])
    assert result.exit_code == 0, result.output
    return folder / "out" / "rl"


@pytest.fixture(scope="module")
def rendered_job(tmp_path_factory) -> Path:
    """Qwen3-8B GRPO: 8 cards, train batch 256 x n 5, mini batch 64, micro batch 2, no dynamic batch (with one,
    verl does not compare the mini batch with the batch: workers/config/actor.py l.198-204)."""
    return render_job(tmp_path_factory.mktemp("job"), "qwen3-8b", "grpo")


def edited(job: Path, tmp_path: Path, change: list[str]) -> Path:
    """A copy of the job folder whose overrides.txt has `change`'s keys set to its values."""
    import shutil

    copy = tmp_path / "job"
    shutil.copytree(job, copy)
    file = copy / "verl" / "overrides.txt"
    lines = file.read_text(encoding="utf-8").splitlines()
    for item in change:
        key = item.split("=", 1)[0] + "="
        lines = [item if line.startswith(key) else line for line in lines]
        lines += [] if item in lines else [item]
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return copy


@needs_verl
def test_validate_accepts_the_rendered_overrides(tmp_path):
    # Qwen3-8B PPO (PPO on a VL model is refused: tests/test_rl_semantics.py): the plan names its model by a path
    # not on this machine, so the critic is built on a stand-in of its shape.
    results = validate_job(render_job(tmp_path, "qwen3-8b", "ppo"))
    status, detail = results["verl/overrides.txt"]
    assert status == "ok" and "verl 0.7.0's compose, validate_config and rollout config accept it" in detail
    assert "the critic's model folder is a stand-in here (qwen3-8b's config.json" in detail
    assert {status for status, _ in results.values()} == {"ok"}


# Each verl rule broken once on the rendered file, refused through `gen-launch validate` (one verl child each; the
# other rules are broken on upstream's example in the module's one child above).
@needs_verl
@pytest.mark.parametrize(("change", "words"), [
    # verl/workers/config/actor.py l.198-205: verl's own validate_config
    (["actor_rollout_ref.actor.ppo_mini_batch_size=512"],
     "verl 0.7.0 refuses it: ValueError: train_batch_size (256) must be >= actor.ppo_mini_batch_size (512)"),
    # fsdp_workers.py l.614-620: verl checks it only once its workers start
    (["actor_rollout_ref.rollout.tensor_model_parallel_size=3"], "rollout TP 3 x DP 1 x PP 1 does not divide"),
])
def test_validate_refuses_a_broken_rule(rendered_job, tmp_path, change, words):
    status, detail = validate_job(edited(rendered_job, tmp_path, change))["verl/overrides.txt"]
    assert status == "problem" and "changed since gen-launch render wrote it" in detail and words in detail


def test_validate_compares_prepare_data_with_the_plan(rendered_job, tmp_path):
    # Offline: the script compiles and holds plan.json's data-preparation settings (nothing in it is run).
    job = edited(rendered_job, tmp_path, [])
    script = job / "verl" / "prepare_data.py"
    assert check(Job.read(job, {}), "verl/prepare_data.py").status == "ok"
    script.write_text(script.read_text(encoding="utf-8").replace('"val_share": 0.05', '"val_share": 0.5'),
                      encoding="utf-8")
    result = check(Job.read(job, {}), "verl/prepare_data.py")
    assert (result.status, result.detail) == ("problem", "its settings differ from plan.json's "
                                                         "frameworks.verl.settings.prepare: val_share")
    script.write_text("def (", encoding="utf-8")
    assert check(Job.read(job, {}), "verl/prepare_data.py").detail.startswith("not Python")
