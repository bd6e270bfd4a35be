"""Issue 38 (b): MindSpeed-RL v2.3.0's DAPO and PPO where it ships a config for the model (dapo_qwen25_32b_A3,
dapo_qwen3_32b_A3, dapo_qwen3_30b_a3b_A3, ppo_qwen25_32b_A3), each value upstream's or the plan's with its reason,
the other models refused naming those it has, DAPO's and PPO's own rules broken once each."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from helpers import render_job
from test_mindspeed_rl_models import MOE

from generator.checks.job import Job
from generator.errors import SpecError
from generator.frameworks.mindspeed_rl.checks import check, key_problems
from generator.frameworks.mindspeed_rl.rules import Shape, broken
from generator.render import write
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"


def rendered(tmp_path, model: str, method: str, cards: int = 16, hardware: str = "snt9b23", seq_len: int = 4096,
             **fields):
    paths = {"model_dir": "/m/hf", "dataset": "/d/train.parquet", "output_dir": str(tmp_path / "out")}
    return render_job(T, frameworks=[NAME], model=model, method=method, hardware=hardware, cards=cards,
                      seq_len=seq_len, data={"samples": 17000, "tokens_per_sample": 400}, paths=paths, **fields)


def config_of(plan, files) -> dict:
    return yaml.safe_load(files[f"{NAME}/config/{plan.frameworks[NAME].settings.config_name}.yaml"])


def test_dapo_follows_upstreams_config_with_its_penalty_and_sampling_on_the_plans_values(tmp_path):
    plan, files = rendered(tmp_path, "qwen3-32b", "dapo")
    config = config_of(plan, files)
    assert key_problems(config) == []
    actor, rl, gen = config["actor_config"], config["rl_config"], config["generate_config"]
    assert config["megatron_training"]["stage"] == "ray_dapo"
    assert (actor["tensor_model_parallel_size"], actor["pipeline_model_parallel_size"],
            gen["infer_tensor_parallel_size"]) == (8, 2, 8)
    assert (rl["clip_ratio_low"], rl["clip_ratio_high"], rl["overlong_buffer"]) == (0.2, 0.28, 512)
    assert rl["rollout_max_tokens"] == gen["sampling_config"]["max_tokens"] == 2048
    assert rl["filter_groups_train_batch_size"] == config["megatron_training"]["global_batch_size"] == 32
    assert rl["filter_groups_metric"] in rl["verifier_function"] == ["acc_for_dapo"]
    assert "python3 cli/train_dapo.py --config-dir" in files[f"{NAME}/launch.sh"]
    # A reward the data's template fits moves the dynamic-sampling metric with it.
    plan, files = rendered(tmp_path, "qwen3-32b", "dapo", rl={"reward": "math"})
    assert config_of(plan, files)["rl_config"]["filter_groups_metric"] == "math_17k_acc"


def test_dapo_on_the_moe_model_converts_its_experts_as_training_splits_them(tmp_path):
    plan, files = rendered(tmp_path, "qwen3_moe-30b_a3b", "dapo", cards=16, hardware="snt9b")
    actor = config_of(plan, files)["actor_config"]
    assert (actor["tensor_model_parallel_size"], actor["expert_model_parallel_size"], actor["moe_tp_extend_ep"]) == \
        (4, 2, True)
    assert plan.frameworks[NAME].settings.nnodes == 2
    command = files[f"{NAME}/convert.sh"].splitlines()[-1].split()
    assert command[command.index("--target-expert-parallel-size") + 1] == "2" and "--moe-tp-extend-ep" in command


def test_ppo_runs_its_critic_on_the_actors_cards_and_layout_from_its_own_conversion(tmp_path):
    plan, files = rendered(tmp_path, "qwen2.5-32b", "ppo", cards=32)
    fp = plan.frameworks[NAME]
    assert "critic" in fp.roles
    config = config_of(plan, files)
    assert key_problems(config) == []
    actor, critic, rl = config["actor_config"], config["critic_config"], config["rl_config"]
    assert (critic["tensor_model_parallel_size"], critic["pipeline_model_parallel_size"]) == \
        (actor["tensor_model_parallel_size"], actor["pipeline_model_parallel_size"]) == (8, 1)
    assert rl["critic_resource"] == rl["actor_resource"] == {"num_npus": 32}
    assert (rl["adv_estimator"], float(critic["lr"])) == ("gae", 5e-6)  # upstream writes 5e-6, as OmegaConf reads
    actor_line, critic_line = [line.split() for line in files[f"{NAME}/convert.sh"].splitlines()
                               if line.startswith("python3 ")]
    assert actor_line[actor_line.index("--save-dir") + 1] == actor["load"] and "--orm" not in actor_line
    assert critic_line[critic_line.index("--save-dir") + 1] == critic["load"] and "--orm" in critic_line
    assert "python3 cli/train_ppo.py --config-dir" in files[f"{NAME}/launch.sh"]
    write(files, tmp_path, plan.job, overwrite=False)
    path = f"{NAME}/config/{fp.settings.config_name}.yaml"
    assert check(Job.read(tmp_path / plan.job, {}), path).status == "ok"
    config["rl_config"]["critic_resource"]["num_npus"] = 16
    (tmp_path / plan.job / path).write_text(yaml.safe_dump(config))
    assert "rl_config.critic_resource.num_npus: 16 must equal" in check(Job.read(tmp_path / plan.job, {}), path).detail


@pytest.mark.parametrize(("model", "method", "offered"), [
    ("qwen2.5-7b", "dapo", "grpo"), ("qwen3-32b", "ppo", "dapo"), ("qwen3_moe-30b_a3b", "grpo", "dapo"),
    ("deepseek-v3", "ppo", "grpo"),
])
def test_a_method_without_an_upstream_config_for_the_model_names_those_it_has(tmp_path, model, method, offered):
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, model, method)
    assert [p.path for p in refused.value.problems] == ["frameworks.0"]
    assert f"no upstream mindspeed-rl {method} config for {model}" in refused.value.problems[0].message
    assert refused.value.problems[0].message.endswith(f"(offered: {offered})")
    assert not (tmp_path / "out").exists()


def test_a_response_shorter_than_dapos_overlong_window_is_refused_at_its_key(tmp_path):
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, "qwen3-32b", "dapo", seq_len=2560, rl={"response_length": 512})
    found = {p.path: p.message for p in refused.value.problems}
    assert "overlong penalty's 512 tokens must be fewer than the response's max_tokens 512" in \
        found["rl.response_length"]
    assert not (tmp_path / "out").exists()


def test_dapos_and_ppos_rules_catch_each_break():
    dapo = dataclasses.replace(Shape(**MOE), overlong_buffer=512, rollout_max_tokens=8192, filter_metric="acc_for_dapo",
                               filter_batch=256, critic_cards=128)
    assert broken(dapo) == []
    for change, key in (({"rollout_max_tokens": 4096}, "rl_config.rollout_max_tokens"),
                        ({"filter_metric": "base_acc"}, "rl_config.filter_groups_metric"),
                        ({"filter_batch": 6}, "rl_config.filter_groups_train_batch_size"),
                        ({"overlong_buffer": 8192}, "rl_config.overlong_buffer"),
                        ({"critic_cards": 64}, "rl_config.critic_resource.num_npus")):
        assert key in [b.config_key for b in broken(dataclasses.replace(dapo, **change))], change
