"""Issue 38 (a): MindSpeed-RL v2.3.0's other GRPO configs (Qwen2.5-32B on A2 and A3, Qwen3-235B-A22B, DeepSeek-V3 on
A2 and A3) planned at upstream's layout (TP, PP, EP, layer list or noop layers, recompute, rollout TP and EP) with
the plan's node count, converted by MindSpeed-LLM's command at exactly that layout, and refused with the nodes they
need where the spec's cards cannot hold them. The expected values are upstream's (reference mindspeed_rl.md s2.2;
configs/grpo_*.yaml at tag v2.3.0, lines as the plan cites them)."""

from __future__ import annotations

import pytest
import yaml
from helpers import render_job

from generator.checks.job import Job
from generator.errors import SpecError
from generator.frameworks.mindspeed_rl.checks import check, key_problems
from generator.frameworks.mindspeed_rl.rules import Shape, broken
from generator.render import write
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"


def rendered(tmp_path, model: str, hardware: str, cards: int | None, seq_len: int, **fields):
    paths = {"model_dir": "/m/hf", "dataset": "/d/train.parquet", "output_dir": str(tmp_path / "out")}
    return render_job(T, frameworks=[NAME], model=model, method="grpo", hardware=hardware, cards=cards,
                      seq_len=seq_len, data={"samples": 17000, "tokens_per_sample": 400}, paths=paths, **fields)


def words_after(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1].strip("'") if flag in command else None


# model, hardware, cards, seq_len -> upstream config, nodes, actor (TP, PP, EP), layer list, noop layers,
# rollout (TP, EP), recompute granularity, global batch, n, converter script
JOBS = {
    ("qwen2.5-32b", "snt9b23", 16, 3072): ("grpo_qwen25_32b_A3", 1, (4, 4, None), "16,17,16,15", None, (2, 1), None,
                                           64, 16, "convert_ckpt.py"),
    ("qwen2.5-32b", "snt9b", 16, 2048): ("grpo_qwen25_32b_A2", 2, (4, 4, None), None, None, (2, 1), None, 64, 16,
                                         "convert_ckpt.py"),
    ("qwen3_moe-235b_a22b", "snt9b", 128, 16384): ("grpo_qwen3_235b_a22b_A2", 16, (2, 16, 4), None, "5,95", (4, 8),
                                                   "full", 256, 8, "convert_ckpt_v2.py"),
    ("deepseek-v3", "snt9b23", 256, 3072): ("grpo_deepseek_r1_671b_A3", 16, (4, 8, 8), "7,7,8,8,8,8,8,7", None,
                                            (4, 64), "full", 512, 16,
                                            "examples/mcore/deepseek3/convert_ckpt_deepseek3.py"),
}


@pytest.mark.parametrize("job", list(JOBS))
def test_each_upstream_config_plans_at_its_layout_with_the_plans_nodes(tmp_path, job):
    model, hardware, cards, seq_len = job
    upstream, nodes, (tp, pp, ep), layers, noop, (itp, iep), granularity, gbs, n, script = JOBS[job]
    plan, files = rendered(tmp_path, model, hardware, cards, seq_len)
    fp = plan.frameworks[NAME]
    settings = fp.settings
    assert settings.upstream.endswith(f"configs/{upstream}.yaml") and settings.nnodes == nodes
    config = yaml.safe_load(files[f"{NAME}/config/{settings.config_name}.yaml"])
    assert key_problems(config) == []
    actor, rl, gen = config["actor_config"], config["rl_config"], config["generate_config"]
    assert (actor["tensor_model_parallel_size"], actor["pipeline_model_parallel_size"],
            actor.get("expert_model_parallel_size")) == (tp, pp, ep)
    assert (actor.get("num_layer_list"), actor.get("noop_layers")) == (layers, noop)
    assert (gen["infer_tensor_parallel_size"], gen["infer_expert_parallel_size"]) == (itp, iep)
    assert actor.get("recompute_granularity") == granularity
    assert rl["actor_resource"] == {"num_npus": cards}
    assert (config["megatron_training"]["global_batch_size"], rl["n_samples_per_prompt"]) == (gbs, n)
    assert gen["max_model_len"] == seq_len == rl["max_prompt_length"] + gen["sampling_config"]["max_tokens"]
    # The memory model counts what the config runs: the roles at upstream's layout and recompute.
    assert (fp.layout.tp, fp.layout.pp, fp.layout.ep) == (tp, pp, ep or 1)
    assert fp.roles["actor"].layout.recompute == (granularity or fp.roles["actor"].layout.recompute)
    # MindSpeed-LLM's converter writes the layout the actor loads, with the settings that shape its weights.
    command = files[f"{NAME}/convert.sh"].splitlines()[-1].split()
    assert command[1] == script
    assert [words_after(command, flag) for flag in ("--target-tensor-parallel-size", "--target-pipeline-parallel-size",
                                                    "--num-layer-list", "--noop-layers")] == [str(tp), str(pp), layers,
                                                                                             noop]
    if ep:
        assert words_after(command, "--target-expert-parallel-size") == str(ep)
    assert ("--moe-tp-extend-ep" in command) is bool(actor.get("moe_tp_extend_ep"))
    assert words_after(command, "--save-dir") == actor["load"]
    # `validate` on the files as written: v2.3.0's keys and the rules at the plan's nodes
    write(files, tmp_path, plan.job, overwrite=False)
    found = check(Job.read(tmp_path / plan.job, {}), f"{NAME}/config/{settings.config_name}.yaml")
    assert found.status == "ok" and f"at {nodes} node(s)" in found.detail, found.detail


@pytest.mark.parametrize(("model", "hardware", "cards", "seq_len", "needs"), [
    ("qwen3_moe-235b_a22b", "snt9b", 64, 16384, "minimum of 128 (16 snt9b nodes of 8)"),
    ("deepseek-v3", "snt9b23", 128, 3072, "minimum of 256 (16 snt9b23 nodes of 16)"),
])
def test_cards_that_cannot_hold_the_model_are_refused_with_the_nodes_it_needs(tmp_path, model, hardware, cards,
                                                                               seq_len, needs):
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, model, hardware, cards, seq_len)
    assert [p.path for p in refused.value.problems] == ["cards"]
    assert needs in refused.value.problems[0].message
    assert not (tmp_path / "out").exists()


def test_a_pinned_expert_parallel_size_the_ranks_do_not_tile_is_refused_at_its_key(tmp_path):
    with pytest.raises(SpecError) as refused:
        rendered(tmp_path, "deepseek-v3", "snt9b23", 256, 3072,
                 layout={NAME: {"actor": {"tp": 4, "pp": 8, "ep": 16}}})
    assert [p.path for p in refused.value.problems] == ["layout.mindspeed-rl.actor.ep"]


MOE = dict(cards=128, nodes=16, tp=2, pp=16, itp=4, heads=64, kv_heads=4, layers=96, num_layer_list=None, gbs=256,
           n=8, mbs=1, mini=256, forward_mbs=2, max_prompt=8192, max_tokens=8192, max_model_len=16384,
           max_num_batched_tokens=16384, scheduler=True, max_positions=40960, verifiers=("acc_for_dapo",),
           known_verifiers=("acc_for_dapo",), template_verifiers=("acc_for_dapo",), ep=4, iep=8, tp_extend_ep=True,
           noop=2, model_layers=94)


def test_the_expert_and_noop_layer_rules_hold_upstreams_config_and_catch_each_break():
    """grpo_qwen3_235b_a22b_A2 as the rules read it passes; each change breaks the rule named (the resharding's
    TP x EP, Megatron's expert ranks, the noop layers padding the model's 94 to 96)."""
    assert broken(Shape(**MOE)) == []
    for change, key in (({"tp_extend_ep": False}, "actor_config.moe_tp_extend_ep"),
                        ({"iep": 1, "itp": 2}, "generate_config.infer_expert_parallel_size"),
                        ({"ep": 8}, "actor_config.expert_model_parallel_size"),
                        ({"noop": 1}, "actor_config.num_layers"),
                        ({"noop": 0, "layers": 94}, "actor_config.pipeline_model_parallel_size")):
        assert key in [b.config_key for b in broken(Shape(**{**MOE, **change}))], change


def test_the_rollout_share_written_is_the_one_the_memory_model_counts(tmp_path):
    """Upstream's 0.85 for Qwen3-235B-A22B leaves no headroom on a 64 GB card: the plan lowers it, writes what it
    counts and says why; where upstream's fits (DeepSeek-V3's 0.7) it is kept with its line."""
    plan, files = rendered(tmp_path, "qwen3_moe-235b_a22b", "snt9b", 128, 16384)
    settings = plan.frameworks[NAME].settings
    config = yaml.safe_load(files[f"{NAME}/config/{settings.config_name}.yaml"])
    assert config["generate_config"]["gpu_memory_utilization"] == 0.8
    source = next(item.source for item in settings.config if item.key == "generate_config.gpu_memory_utilization")
    assert source.startswith("derived: the example's 0.85 (upstream") and "lowered" in source
    plan, files = rendered(tmp_path / "ds", "deepseek-v3", "snt9b23", 256, 3072)
    settings = plan.frameworks[NAME].settings
    assert yaml.safe_load(files[f"{NAME}/config/{settings.config_name}.yaml"])["generate_config"][
        "gpu_memory_utilization"] == 0.7
