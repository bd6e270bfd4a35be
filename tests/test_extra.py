"""Issue 37 item 5: `extra: {<framework>: {key: value}}`, the escape hatch for framework options the spec does not
model (LLaMA-Factory's report_to, ...): checked as validate checks the file (a misspelt key is refused at its key),
recorded on PLAN.md and plan.json as the spec's, never replacing what the plan decides."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.frameworks.verl.checks import verl_python

SPEC = {"job": "x", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
        "frameworks": ["llama-factory", "mindspeed-llm"], "data": {"samples": 20000, "tokens_per_sample": 1000}}


def render(tmp_path, extra):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "extra": extra}), encoding="utf-8")
    return spec, CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])


def test_extra_options_reach_train_yaml_and_the_plan_says_so(tmp_path):
    extra = {"llama-factory": {"report_to": "tensorboard", "logging_dir": "logs", "neftune_noise_alpha": 5.0}}
    _, result = render(tmp_path, extra)
    assert result.exit_code == 0, result.output
    job = tmp_path / "out" / "x"
    train = yaml.safe_load((job / "llama-factory" / "train.yaml").read_text())
    assert (train["report_to"], train["logging_dir"], train["neftune_noise_alpha"]) == ("tensorboard", "logs", 5.0)
    text = (job / "llama-factory" / "train.yaml").read_text()
    assert text.count("report_to:") == 1  # the template's default replaced, not written twice
    assert json.loads((job / "plan.json").read_text())["extra"] == extra
    plan_md = (job / "PLAN.md").read_text()
    assert "`report_to: \"tensorboard\"` (replaces the template's default)" in plan_md
    assert "`neftune_noise_alpha: 5.0`" in plan_md
    validated = CliRunner().invoke(main, ["validate", str(job), "--json"])
    results = {r["path"]: r for r in json.loads(validated.stdout)["results"]}
    assert results["llama-factory/train.yaml"]["status"] in ("ok", "skipped"), results["llama-factory/train.yaml"]


def test_a_misspelt_option_is_refused_at_its_key(tmp_path):
    spec, result = render(tmp_path, {"llama-factory": {"report_too": "wandb"}})
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith(f"Error: {spec}: extra.llama-factory.report_too: not a LLaMA-Factory 0.9.5 "
                                    f"training argument; did you mean report_to?"), result.stderr
    assert not (tmp_path / "out" / "x").exists()


def test_an_option_the_plan_decides_or_of_the_wrong_type_is_refused(tmp_path):
    spec, result = render(tmp_path, {"llama-factory": {"learning_rate": 1.0e-3, "logging_steps": "often"}})
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert f"Error: {spec}: extra.llama-factory.learning_rate: the plan writes it (PLAN.md says from what); give " \
           f"it through the spec key that decides it" in lines, lines
    assert f"Error: {spec}: extra.llama-factory.logging_steps: 'often' is not of LLaMA-Factory's type " \
           f"float" in lines, lines


def test_extra_for_a_framework_not_planned_or_that_takes_none(tmp_path):
    spec, result = render(tmp_path, {"verl": {"trainer.logger": "console"}})
    assert result.exit_code == 2
    assert f"Error: {spec}: extra.verl: verl is not planned for this job" in result.stderr
    spec = tmp_path / "mf.yaml"  # MindFormers' predict.yaml takes none (its training train.yaml does)
    spec.write_text(yaml.safe_dump({**SPEC, "method": "predict", "frameworks": ["mindformers"], "cards": 1,
                                    "extra": {"mindformers": {"profile": True}}}), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert f"Error: {spec}: extra.mindformers: mindformers's files take no extra options in this version" \
        in result.stderr
    assert not (tmp_path / "out" / "x").exists()


# MindFormers: dotted keys of its run config, merged into train.yaml through the serializer, checked against the
# keys MindFormers' config template declares (generator/data/mindformers_config_keys.tsv).
def render_mindformers(tmp_path, options, **fields):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "frameworks": ["mindformers"], "cards": 8, **fields,
                                    "extra": {"mindformers": options}}), encoding="utf-8")
    return spec, CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])


def test_mindformers_extra_keys_are_merged_into_train_yaml_and_the_plan_says_so(tmp_path):
    options = {"context.max_call_depth": 20000, "monitor_config.monitor_on": True, "profile": True,
               "context.jit_config.jit_level": "O1", "train_dataset.data_loader.num_proc": 4}
    _, result = render_mindformers(tmp_path, options)
    assert result.exit_code == 0, result.output
    job = tmp_path / "out" / "x"
    text = (job / "mindformers" / "train.yaml").read_text()
    train = yaml.safe_load(text)
    assert train["context"]["max_call_depth"] == 20000 and train["monitor_config"] == {"monitor_on": True}
    assert train["profile"] is True and train["context"]["jit_config"]["jit_level"] == "O1"
    # the anchored dataset is one mapping: the task's dataset_config sees the key too, as MindFormers would
    assert train["train_dataset_task"]["dataset_config"]["data_loader"]["num_proc"] == 4
    assert [line for line in text.splitlines() if line.startswith("profile:")] == ["profile: true"]
    assert text.startswith("# Generated by gen-launch")
    # the plan's own values are untouched
    assert train["parallel_config"]["data_parallel"] == json.loads((job / "plan.json").read_text())[
        "frameworks"]["mindformers"]["dp"]
    plan_md = (job / "PLAN.md").read_text()
    assert "`profile: True` (replaces the template's default)" in plan_md
    assert "`context.max_call_depth: 20000`," in plan_md
    assert json.loads((job / "plan.json").read_text())["extra"] == {"mindformers": options}
    # MindFormers' own rules, as validate runs them offline, accept the merged file
    validated = CliRunner().invoke(main, ["validate", str(job), "--json"])
    results = {r["path"]: r for r in json.loads(validated.stdout)["results"]}
    assert results["mindformers/train.yaml"]["status"] in ("ok", "skipped"), results["mindformers/train.yaml"]


def test_mindformers_a_misspelt_or_planned_key_is_refused_at_its_key(tmp_path):
    spec, result = render_mindformers(tmp_path, {
        "contxt.max_call_depth": 1, "parallel_config.data_parallell": 2, "seeed": 1,
        "parallel_config.data_parallel": 2, "runner_config.batch_size": 4, "model.model_config.seq_length": 8192,
        "output_dir": "/x", "context": {"max_call_depth": 1}, "context.ascend_config": {"a": 1}})
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    at = f"Error: {spec}: extra.mindformers."
    for line in [
            "contxt.max_call_depth: not a section of MindFormers' run config; did you mean context?",
            "parallel_config.data_parallell: not a key of MindFormers' parallel_config (it refuses keys it does not "
            "declare); did you mean data_parallel?",
            "seeed: not a key of MindFormers' run config; did you mean seed?",
            "parallel_config.data_parallel: the plan writes parallel_config.data_parallel (PLAN.md says from what); "
            "give it through the spec key that decides it",
            "runner_config.batch_size: the plan writes runner_config.batch_size (PLAN.md says from what); give it "
            "through the spec key that decides it",
            "model.model_config.seq_length: the plan writes model.model_config.seq_length (PLAN.md says from what); "
            "give it through the spec key that decides it",
            "output_dir: the plan writes output_dir (PLAN.md says from what); give it through the spec key that "
            "decides it",
            "context: a section of MindFormers' config; give its keys one by one (extra.mindformers.context.<key>)"]:
        assert at + line in lines, (line, lines)
    assert any(line.startswith(f"{at}context.ascend_config: the plan writes context.ascend_config.") for line in lines)
    assert not (tmp_path / "out" / "x").exists()


# MindSpeed-LLM and MindSpeed-MM: training flags in launch.sh's EXTRA_ARGS, checked against the pinned parser's
# declared flags (generator/data/mindspeed_{llm,mm}_flags_kinds.tsv), the parser validate reads launch.sh with.
MEGATRON = {
    "mindspeed-llm": ({"frameworks": ["mindspeed-llm"]}, {"log-throughput": True, "--tensorboard-log-interval": 500},
                      ["--log-throughput", "--tensorboard-log-interval"], "log-interval", "log-throughput"),
    "mindspeed-mm": ({"model": "qwen2.5_vl-7b", "method": "full", "frameworks": ["mindspeed-mm"]},
                     {"log-throughput": True, "tensorboard-log-interval": 5},
                     ["--log-throughput", "--tensorboard-log-interval"], "save-interval", "log-throughput"),
}


def render_with(tmp_path, framework, options):
    base, *_ = MEGATRON[framework]
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, **base, "extra": {framework: options}}), encoding="utf-8")
    return spec, CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])


def test_megatron_extra_flags_reach_launch_sh_and_validate_passes(tmp_path):
    for framework, (_, options, flags, _, _) in MEGATRON.items():
        folder = tmp_path / framework
        folder.mkdir()
        _, result = render_with(folder, framework, options)
        assert result.exit_code == 0, result.output
        job = folder / "out" / "x"
        launch = (job / framework / "launch.sh").read_text()
        block = launch.split("EXTRA_ARGS=(\n", 1)[1].split("\n)", 1)[0].split("\n")
        value = str(next(v for v in options.values() if v is not True))
        assert sorted(block) == sorted([f"  {flags[0]}", f"  {flags[1]} {value}"]), block
        assert f"# The spec's extra.{framework}" in launch and '"${EXTRA_ARGS[@]}" \\' in launch
        assert "source: the spec's extra" in (job / "PLAN.md").read_text()
        assert json.loads((job / "plan.json").read_text())["extra"] == {framework: options}
        validated = CliRunner().invoke(main, ["validate", str(job), "--json"])
        results = {r["path"]: r for r in json.loads(validated.stdout)["results"]}
        assert results[f"{framework}/launch.sh"]["status"] == "ok", results[f"{framework}/launch.sh"]


def test_megatron_a_misspelt_flag_or_a_bad_value_is_refused_at_its_key(tmp_path):
    for framework, (*_, near, _) in MEGATRON.items():
        misspelt = near.replace("interval", "intervall")
        spec, result = render_with(tmp_path, framework, {misspelt: 5, "log-throughput": "yes"})
        assert result.exit_code == 2 and "Traceback" not in result.output
        lines = result.stderr.splitlines()
        assert any(line.startswith(f"Error: {spec}: extra.{framework}.{misspelt}: not a flag of ") and
                   line.endswith(f"did you mean {near}?") for line in lines), lines
        assert f"Error: {spec}: extra.{framework}.log-throughput: 'yes': --log-throughput is a switch; give " \
               f"true or false" in lines, lines
        assert not (tmp_path / "out" / "x").exists()


def test_megatron_a_flag_the_plan_decides_is_refused(tmp_path):
    for framework in MEGATRON:
        # --lr is written; --load is the loading arrays'.
        spec, result = render_with(tmp_path, framework, {"lr": 1.0e-3, "load": "/elsewhere"})
        assert result.exit_code == 2
        lines = result.stderr.splitlines()
        for key in ("lr", "load"):
            assert f"Error: {spec}: extra.{framework}.{key}: the plan decides it (PLAN.md says from what); give " \
                   f"it through the spec key that decides it" in lines, lines
        assert not (tmp_path / "out" / "x").exists()
    # Flags the plan leaves out on purpose are its too: --lr-warmup-fraction where it gives warmup steps; the
    # LoRA and tuning flags, which the method decides, on a full run (adapters there would change the method); the
    # MoE flags, which the model decides, on a dense model.
    spec = tmp_path / "full.yaml"
    options = {"lr-warmup-fraction": 0.1, "lora-r": 16, "lora-alpha": 32, "stage": "dpo", "num-experts": 8}
    spec.write_text(yaml.safe_dump({**SPEC, "method": "full", "frameworks": ["mindspeed-llm"],
                                    "extra": {"mindspeed-llm": options}}), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    for key in options:
        assert f"Error: {spec}: extra.mindspeed-llm.{key}: the plan decides it" in result.stderr, result.stderr


# verl: Hydra overrides in overrides.txt, checked against the keys of the config the entry composes
# (generator/data/verl_0.7.0/config_keys.tsv); validate runs verl 0.7.0's own compose and validate_config on them.
VERL = Path(__file__).resolve().parent.parent / "examples" / "qwen3-8b-grpo-verl-snt9b.yaml"
needs_verl = pytest.mark.skipif(verl_python() is None and os.environ.get("CI", "").lower() != "true",
                                reason="verl 0.7.0's interpreter (.venv-verl) is not built here")


def render_verl(tmp_path, options):
    spec = tmp_path / "rl.yaml"
    spec.write_text(yaml.safe_dump({**yaml.safe_load(VERL.read_text()), "job": "x", "extra": {"verl": options}}),
                    encoding="utf-8")
    return spec, CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])


@needs_verl
def test_verl_overrides_reach_overrides_txt_and_verl_composes_them(tmp_path):
    options = {"trainer.log_val_generations": 10, "trainer.balance_batch": False,
               "actor_rollout_ref.rollout.val_kwargs.temperature": 0.6}
    _, result = render_verl(tmp_path, options)
    assert result.exit_code == 0, result.output
    job = tmp_path / "out" / "x"
    lines = (job / "verl" / "overrides.txt").read_text().splitlines()
    at = lines.index("# extra.verl: the spec's own overrides (PLAN.md lists them), passed as given")
    assert sorted(lines[at + 1:]) == ["actor_rollout_ref.rollout.val_kwargs.temperature=0.6",
                                      "trainer.balance_batch=False", "trainer.log_val_generations=10"]
    assert "| `trainer.log_val_generations` | `10` | the spec's extra (`extra.verl`, passed as given) |" \
        in (job / "PLAN.md").read_text()
    validated = CliRunner().invoke(main, ["validate", str(job), "--json"])
    results = {r["path"]: r for r in json.loads(validated.stdout)["results"]}
    assert results["verl/overrides.txt"]["status"] == "ok", results["verl/overrides.txt"]


def test_verl_a_misspelt_key_an_unknown_group_or_a_planned_key_is_refused(tmp_path):
    spec, result = render_verl(tmp_path, {"trainer.log_val_generation": 10, "trainr.logger": ["console"],
                                          "rollout.n": 8, "trainer.logger": ["console", "wandb"],
                                          "actor_rollout_ref.actor.optim": 1, "trainer.balance_batch": "no"})
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    at = f"Error: {spec}: extra.verl."
    assert f"{at}trainer.log_val_generation: not a key of verl 0.7.0's ppo_trainer config; did you mean " \
           f"trainer.log_val_generations?" in lines, lines
    assert f"{at}trainr.logger: not a key of verl 0.7.0's ppo_trainer config; did you mean trainer.logger?" \
        in lines, lines
    assert any(line.startswith(f"{at}rollout.n: not a key of verl 0.7.0's ppo_trainer config; its groups: "
                               f"actor_rollout_ref, algorithm,") for line in lines), lines
    assert f"{at}trainer.logger: the plan writes trainer.logger (PLAN.md says from what); give it through the " \
           f"spec key that decides it" in lines, lines
    # A group above keys the plan writes (optim.lr, ...) is refused as theirs.
    assert f"{at}actor_rollout_ref.actor.optim: the plan writes actor_rollout_ref.actor.optim.lr (PLAN.md says " \
           f"from what); give it through the spec key that decides it" in lines, lines
    assert f"{at}trainer.balance_batch: 'no' is not of the kind verl's default is (bool)" in lines, lines
    assert not (tmp_path / "out" / "x").exists()


def test_megatron_flags_that_break_a_start_up_rule_are_refused(tmp_path):
    # Each flag alone is a flag of the parser the plan does not decide; with the plan's words it breaks a rule
    # validate checks launch.sh with (mindspeed_llm_rules.tsv fp16_bf16_exclusive: the plan trains in --bf16;
    # MindSpeed-MM's vpp_needs_pp: qwen2.5_vl-3b is planned at PP 1).
    cases = {"mindspeed-llm": ({"method": "full"}, {"fp16": True}, "rule fp16_bf16_exclusive"),
             "mindspeed-mm": ({"model": "qwen2.5_vl-3b"}, {"virtual-pipeline-model-parallel-size": 2},
                              "rule vpp_needs_pp")}
    for framework, (changed, options, rule) in cases.items():
        base = {**SPEC, **MEGATRON[framework][0], **changed}
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump({**base, "extra": {framework: options}}), encoding="utf-8")
        result = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.stderr.startswith(f"Error: {spec}: extra.{framework}: with these flags the launch would not "
                                        f"start as planned: ") and rule in result.stderr, result.stderr
        assert not (tmp_path / "out" / "x").exists()
