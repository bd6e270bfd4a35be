"""Issue 38, MindSpeed-RL v2.3.0 GRPO: the seed row (Qwen2.5-7B, 4096, 8 snt9b) planned and rendered with upstream's
grpo_qwen25_7b_A3 values and the plan's layout, batch and lengths; each run-time rule broken once and refused at its
spec key with nothing written; `validate` on the files as they are on disk; the launch on stand-in `ray` and
`python3` for 1, 2 and 3 nodes (head once, joins, the job started once)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import check_script, render_job
from test_verl_launch import RAY, RECORD

from generator.errors import SpecError
from generator.frameworks.mindspeed_rl.checks import key_problems
from generator.frameworks.mindspeed_rl.rules import broken
from generator.render import write
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"
ADDR = "10.0.0.1"


def rendered(tmp_path: Path, cards: int = 8, hardware: str = "snt9b", **fields):
    paths = {"model_dir": "/m/qwen25-7b", "dataset": "/d/math17k.parquet", "output_dir": str(tmp_path / "out"),
             "mindspeed_rl_dir": str(tmp_path / "msrl"), "mindspeed_llm_dir": "/llm"}
    fields.setdefault("model", "qwen2.5-7b")
    fields.setdefault("seq_len", 4096)
    return render_job(T, frameworks=[NAME], method="grpo", hardware=hardware, cards=cards,
                      data={"samples": 17000, "tokens_per_sample": 400}, paths=paths,
                      cluster={"master_addr": ADDR}, **fields)


def config_of(plan, files) -> dict:
    name = plan.frameworks[NAME].settings.config_name
    return yaml.safe_load(files[f"{NAME}/config/{name}.yaml"])


def test_seed_row_follows_upstream_with_the_plans_layout_batch_and_lengths(tmp_path):
    plan, files = rendered(tmp_path)
    config = config_of(plan, files)
    assert config["defaults"] == [{"model": ["qwen25_7b"]}]
    assert set(config) == {"defaults", "megatron_training", "actor_config", "rl_config", "generate_config"}
    actor, rl, gen = config["actor_config"], config["rl_config"], config["generate_config"]
    assert (actor["tensor_model_parallel_size"], actor["pipeline_model_parallel_size"]) == (2, 2)
    assert rl["actor_resource"] == {"num_npus": 8} and rl["use_integrated_worker"] is True
    assert (config["megatron_training"]["global_batch_size"], rl["n_samples_per_prompt"], rl["mini_batch_size"],
            rl["actor_forward_micro_batch_size"]) == (32, 8, 32, 4)
    assert (rl["max_prompt_length"], gen["sampling_config"]["max_tokens"], gen["max_model_len"],
            config["megatron_training"]["seq_length"]) == (2048, 2048, 4096, 2048)
    assert gen["infer_tensor_parallel_size"] == 1 and rl["verifier_function"] == ["math_17k_acc"]
    dataset = yaml.safe_load(files[f"{NAME}/dataset.yaml"])
    assert dataset["output_prefix"] == config["megatron_training"]["data_path"]
    assert dataset["prompt_type"] == "empty"
    # The converter writes what the actor loads, at the actor's exact TP/PP.
    convert = files[f"{NAME}/convert.sh"].splitlines()[-1].split()
    assert convert[convert.index("--target-tensor-parallel-size") + 1] == "2"
    assert convert[convert.index("--target-pipeline-parallel-size") + 1] == "2"
    assert convert[convert.index("--save-dir") + 1] == actor["load"]
    assert convert[convert.index("--tokenizer-model") + 1] == "/m/qwen25-7b/tokenizer.json"
    settings = plan.frameworks[NAME].settings
    resume = {item.key: item.value for item in settings.resume}
    assert resume["rl_config.integrated_mode_config.ref_model_load_path"] == actor["load"]
    # Upstream is feature-frozen; gen-launch's verl plans no Qwen2.5-7B, so PLAN.md says there is no alternative.
    assert "MindSpeed-RL is feature-frozen upstream" in files["PLAN.md"]
    assert "gen-launch plans no verl job for qwen2.5-7b" in files["PLAN.md"]
    _, qwen3 = rendered(tmp_path, model="qwen3-8b")
    assert "The alternative: the same spec with `frameworks: [verl]`" in qwen3["PLAN.md"]
    commands = [line for line in files[f"{NAME}/launch.sh"].splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if "pkill" in line]
    assert key_problems(config) == []
    # The actor's memory is counted at the layout's micro batch and recompute, which the config writes.
    layout = plan.frameworks[NAME].roles["actor"].layout
    assert layout.micro_batch_size == actor["micro_batch_size"]
    assert actor.get("recompute_activation_function", False) is (layout.recompute == "selective")
    assert "recompute_granularity" not in actor or layout.recompute == "full"


def test_a_broken_rule_is_refused_by_the_cli_with_nothing_written(tmp_path):
    from click.testing import CliRunner

    from generator.cli import main
    out = tmp_path / "out"
    spec = {"job": "t", "frameworks": [NAME], "model": "qwen2.5-7b", "method": "grpo", "hardware": "snt9b",
            "cards": 8, "seq_len": 4096, "rl": {"mini_batch_size": 24},
            "data": {"samples": 17000, "tokens_per_sample": 400},
            "paths": {"model_dir": "/m", "dataset": "/d.parquet", "output_dir": str(out)}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(main, ["render", str(spec_file), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "rl.mini_batch_size: 24 must divide the global batch 32" in result.stderr
    assert "values that work: 1, 2, 4, 8, 16, 32" in result.stderr and "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.parametrize(("fields", "key", "works"), [
    ({"layout": {NAME: {"actor": {"tp": 8, "pp": 1}}}}, "layout.mindspeed-rl.actor.tp", "28 attention heads"),
    ({"layout": {NAME: {"rollout": {"tp": 8}}}}, "layout.mindspeed-rl.rollout.tp", "28 attention heads"),
    ({"cards": 16, "global_batch_size": 20}, "global_batch_size", "values that work: 16, 32"),
    ({"layout": {NAME: {"actor": {"tp": 2, "pp": 4}, "rollout": {"tp": 4}}}}, "layout.mindspeed-rl.rollout.tp",
     "values that work: 1, 2"),
    ({"rl": {"mini_batch_size": 24}}, "rl.mini_batch_size", "values that work: 1, 2, 4, 8, 16, 32"),
    ({"rl": {"reward": "gsm8k"}}, "rl.reward", "values that work: math, math_dapo"),
    ({"model": "qwen3-8b", "rl": {"reward": "math"}}, "rl.reward",
     "math_17k_acc grades an answer format the dataset's prompt template does not ask for"),
    ({"rl": {"reward": "math_dapo", "mini_batch_size": 32}}, None, None),
])
def test_each_run_time_rule_is_refused_at_its_spec_key(tmp_path, fields, key, works):
    if key is None:  # a reward matching the data's template passes
        rendered(tmp_path, **fields)
        return
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, **fields)
    found = [p for p in refused.value.problems if p.path == key]
    assert found and works in found[0].message, refused.value.problems
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("cards", "batch", "works"), [(16, 8, "16"), (8, 4, "8"), (8, 1, "8")])
def test_a_batch_refusal_names_each_value_that_works_once(tmp_path, cards, batch, works):
    """The core's refusal of a batch the search's layouts do not tile: with one response a prompt (the batch tiles
    in samples) a batch of the free layout's step that the rollout's data-parallel ranks do not tile (8 prompts on
    16 cards: rollout DP 16) used to be offered back to the user as "nearest that work: 8 or 8"."""
    one = {"samples_per_prompt": 1}
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, cards=cards, global_batch_size=batch, rl=one)
    message = refused.value.problems[0].message
    assert message.endswith(f"nearest that work: {works}"), message
    rendered(tmp_path, cards=cards, global_batch_size=int(works), rl=one)  # the value offered plans


def test_rules_hold_the_golden_verdicts_upstream_misses():
    """Reference s6.3/s7.2 gaps: iTP 6 on 16 NPUs, iTP 8 with 28 heads, mini batch 24 of 32, an unknown verifier."""
    from generator.frameworks.mindspeed_rl.rules import Shape
    base = dict(cards=16, nodes=1, tp=2, pp=2, itp=1, heads=28, kv_heads=4, layers=28, num_layer_list=None, gbs=32,
                n=8, mbs=4, mini=32, forward_mbs=4, max_prompt=2048, max_tokens=2048, max_model_len=4096,
                max_num_batched_tokens=8192, scheduler=True, max_positions=32768, verifiers=("math_17k_acc",),
                known_verifiers=("math_17k_acc", "base_acc"), template_verifiers=("math_17k_acc",))
    assert broken(Shape(**base)) == []
    for change, key in (({"itp": 6}, "generate_config.infer_tensor_parallel_size"),
                        ({"itp": 8}, "generate_config.infer_tensor_parallel_size"),
                        ({"mini": 24}, "rl_config.mini_batch_size"),
                        ({"verifiers": ("math17k_acc",)}, "rl_config.verifier_function"),
                        ({"gbs": 36, "mini": 36}, "megatron_training.global_batch_size"),
                        ({"nodes": 3, "cards": 24, "gbs": 32}, "megatron_training.global_batch_size"),
                        ({"max_num_batched_tokens": 2048}, "generate_config.max_num_batched_tokens")):
        assert key in [b.config_key for b in broken(Shape(**{**base, **change}))], change


def test_validate_reads_the_files_on_disk(tmp_path):
    plan, files = rendered(tmp_path)
    write(files, tmp_path, plan.job, overwrite=False)
    from generator.checks.job import Job
    from generator.frameworks.mindspeed_rl.checks import check
    job = Job.read(tmp_path / plan.job, {})
    path = f"{NAME}/config/{plan.frameworks[NAME].settings.config_name}.yaml"
    assert check(job, path).status == "ok"
    config = config_of(plan, files)
    config["rl_config"]["mini_batch_size"] = 24
    config["generate_config"]["gpu_memory_utilisation"] = 0.4
    (tmp_path / plan.job / path).write_text(yaml.safe_dump(config))
    result = check(job, path)
    assert result.status == "problem" and "generate_config.gpu_memory_utilisation" in result.detail
    del config["generate_config"]["gpu_memory_utilisation"]
    (tmp_path / plan.job / path).write_text(yaml.safe_dump(config))
    assert "rl_config.mini_batch_size: 24 must divide" in check(job, path).detail


PYTHON3 = "#!/bin/bash\n" + RECORD + 'exit "${PYTHON_RC:-0}"\n'


@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_launch_head_once_joins_and_the_job_once(tmp_path, nodes):
    plan, files = rendered(tmp_path, cards=8 * nodes, **({"global_batch_size": 48} if nodes == 3 else {}))
    assert plan.frameworks[NAME].layout.nodes == nodes
    write(files, tmp_path, plan.job, overwrite=False)
    check_script(files[f"{NAME}/launch.sh"], tmp_path)
    (tmp_path / "msrl").mkdir()
    stub = tmp_path / "stub"
    (stub / "bin").mkdir(parents=True)
    (stub / "calls").mkdir()
    for name, text in (("ray", RAY), ("python3", PYTHON3), ("sleep", "#!/bin/bash\n" + RECORD)):
        (stub / "bin" / name).write_text(text)
        (stub / "bin" / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "RAY_ADDRESS")}
    env.update(PATH=f"{stub / 'bin'}:{os.environ['PATH']}", STUB=str(stub), STUB_DEVICES="8", STUB_RESOURCE="NPU")
    launch = tmp_path / plan.job / NAME / "launch.sh"

    def run(rank: int) -> list[tuple[str, str, list[str]]]:
        done = subprocess.run(["bash", str(launch), str(rank)], env=env, capture_output=True, text=True,
                              cwd=stub, check=False)
        assert done.returncode == 0, done.stderr
        calls = []
        for path in sorted((stub / "calls").iterdir()):
            program, cwd, *argv = path.read_bytes().decode().split("\0")[:-1]
            calls.append((program, cwd, argv))
            path.unlink()
        return calls

    for rank in range(1, nodes):
        assert [argv[:2] for _, _, argv in run(rank)] == [["start", f"--address={ADDR}:6379"]]
    calls = run(0)
    assert [c[2][0] if c[0] == "ray" else c[0] for c in calls] == ["start", "status", "python3", "stop"]
    assert calls[0][2][:2] == ["start", "--head"]
    _, cwd, argv = calls[2]
    name = plan.frameworks[NAME].settings.config_name
    assert cwd == str(tmp_path / "msrl")
    assert argv == ["cli/train_grpo.py", "--config-dir", str(launch.parent.resolve() / "config"), "--config-name",
                    name]


@pytest.mark.parametrize("hardware,node", [("snt9b", 8), ("snt9b23", 16)])
def test_cards_auto_takes_whole_nodes_as_upstream_runs_rl(tmp_path, hardware, node):
    """Qwen3-8B has no min_cards row: the memory model counts the integrated worker (the actor's states offloaded
    while vLLM generates, as upstream's config sets), which holds it on 4 cards (TP2 x PP2); the plan still takes a
    whole node, as every v2.3.0 config runs (grpo_qwen3_8b_A3.yaml l. 81: num_npus 16) and as verl's plans do."""
    plan, files = rendered(tmp_path, cards=None, hardware=hardware, model="qwen3-8b", seq_len=1536)
    fp = plan.frameworks[NAME]
    assert fp.layout.cards == node and (fp.layout.tp, fp.layout.pp) == (2, 2)
    assert dict(fp.roles["rollout"].layout.memory.items())["actor states resident (not offloaded)"] == 0.0
    assert config_of(plan, files)["rl_config"]["actor_resource"] == {"num_npus": node}


def test_an_uneven_pipeline_writes_the_layer_list_training_and_conversion_share(tmp_path):
    """28 layers on PP 8: MindSpeed-RL takes a num_layer_list (vllm_weight_container.py l. 268-283), and the
    converter must write the same stages."""
    plan, files = rendered(tmp_path, layout={NAME: {"actor": {"tp": 1, "pp": 8}}})
    actor = config_of(plan, files)["actor_config"]
    stages = actor["num_layer_list"]
    assert sum(map(int, stages.split(","))) == 28 and len(stages.split(",")) == 8
    convert = files[f"{NAME}/convert.sh"].splitlines()[-1].split()
    assert convert[convert.index("--num-layer-list") + 1] == f"'{stages}'"


def test_a_path_hydra_would_interpolate_is_refused_at_its_key(tmp_path):
    paths = {"model_dir": "/m/${oc.env:HOME}", "dataset": "/d.parquet", "output_dir": str(tmp_path / "out")}
    with pytest.raises(SpecError) as refused:
        render_job(T, frameworks=[NAME], model="qwen2.5-7b", method="grpo", hardware="snt9b", cards=8, seq_len=4096,
                   data={"samples": 17000, "tokens_per_sample": 400}, paths=paths)
    assert [p.path for p in refused.value.problems] == ["paths.model_dir"]
    assert "interpolation" in refused.value.problems[0].message


def test_a_spec_without_frameworks_leaves_mindspeed_rl_out_and_init_lists_it(tables, tmp_path):
    """MindSpeed-RL is feature-frozen upstream: a defaulted list plans verl where verl can (a reward MindSpeed-RL's
    verifiers grade otherwise does not stop the plan), and names MindSpeed-RL as left out; where only it plans the
    job, the refusal says how to ask for it and init's starter lists it."""
    from click.testing import CliRunner
    from helpers import make_spec

    from generator.cli import main
    from generator.resolve import resolve

    plan = resolve(make_spec(model="qwen3-8b", method="grpo", seq_len=1536), tables)
    assert list(plan.frameworks) == ["verl"]
    assert any(note.startswith("mindspeed-rl left out: mindspeed-rl is feature-frozen upstream") for note in plan.notes)
    with pytest.raises(SpecError, match=r"mindspeed-rl is feature-frozen .*list it in frameworks: to plan it"):
        resolve(make_spec(model="qwen2.5-7b", method="grpo"), tables)
    starter = CliRunner().invoke(main, ["init", "qwen2.5-7b", "--method", "grpo", "--hardware", "snt9b"])
    assert starter.exit_code == 0, starter.output
    assert "\nframeworks: [mindspeed-rl]  # planned only where listed" in starter.stdout
    assert "\n# frameworks:" in CliRunner().invoke(main, ["init", "qwen3-8b", "--method", "grpo", "--hardware",
                                                         "snt9b"]).stdout
