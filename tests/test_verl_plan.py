"""Issue 25, the planning side: verl 0.7.0's GRPO, DAPO and PPO planned by role (actor, vLLM rollout, reference,
PPO's critic), colocated on the peak cards, with memory per phase, the upstream NPU example's values with their
sources, the time from a published Ascend RL figure or none, and verl's rules refused at the spec key with the
nearest values that work."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.errors import SpecError
from generator.frameworks.contract import RoleKind
from generator.frameworks.verl.memory import log_prob_memory, train_memory
from generator.frameworks.verl.rl import rl_config
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

# PPO on a vision-language model is refused (tests/test_rl_semantics.py): verl starts its critic only through trl.
SEED_ROWS = sorted({(row.model, method) for row in load_tables().min_cards if row.framework == "verl"
                    for method in row.methods
                    if not (method == "ppo" and load_tables().model(row.model).vision_params_b > 0)})
EXAMPLE = "examples/grpo_trainer/run_qwen3-8b_npu.sh"


def _plan(model="qwen3-8b", method="grpo", hardware="snt9b", seq_len=4096, **extra):
    spec = {"job": "rl", "model": model, "method": method, "seq_len": seq_len, "hardware": hardware,
            "frameworks": ["verl"], "data": {"samples": 60000, "tokens_per_sample": 1024}, **extra}
    return resolve(parse_spec(json.dumps(spec).encode()), load_tables())


def _error(**spec) -> SpecError:
    with pytest.raises(SpecError) as caught:
        _plan(**spec)
    return caught.value


def test_the_seed_rows_are_the_six_models():
    assert {model for model, _ in SEED_ROWS} == {"qwen2.5_vl-7b", "qwen2.5_vl-32b", "qwen3-8b", "qwen3-14b",
                                                 "qwen3-32b", "qwen2.5-32b"}


@pytest.mark.parametrize("hardware", ["snt9b", "snt9b23", "a800", "h800"])
def test_every_seed_row_plans_by_role_within_verls_rules(hardware):
    tables = load_tables()
    rows = SEED_ROWS if hardware.startswith("snt") else [("qwen3-8b", "grpo"), ("qwen3-14b", "dapo"),
                                                           ("qwen2.5_vl-7b", "grpo"), ("qwen3-8b", "ppo")]
    for model_name, method in rows:
        plan = _plan(model_name, method, hardware)
        fp = plan.frameworks["verl"]
        model = tables.model(model_name)
        # verl builds a reference only with a KL term: GRPO's examples use a KL loss, DAPO's and PPO's none.
        expected = ["actor", "rollout"] + (["reference"] if method == "grpo" else []) + \
            (["critic"] if method == "ppo" else [])
        assert list(fp.roles) == expected, (model_name, method)
        # Colocated: every role on the framework's cards, the peak over the phases; each phase fits.
        assert all(role.colocated and role.layout.cards == fp.cards for role in fp.roles.values())
        assert all(role.layout.fits for role in fp.roles.values()), (model_name, method, hardware)
        s = fp.settings
        assert s.entry == ("recipe.dapo.main_dapo" if method == "dapo" else "verl.trainer.main_ppo")
        keys = [item.key for item in s.overrides]
        assert len(keys) == len(set(keys)) and all(item.source for item in s.overrides)
        assert s.value("trainer.device") == ("npu" if hardware.startswith("snt") else "cuda")
        assert s.value("trainer.nnodes") * s.value("trainer.n_gpus_per_node") == fp.cards
        # verl's rules at the planned values.
        batch, n = s.value("data.train_batch_size"), s.value("actor_rollout_ref.rollout.n")
        mini = s.value("actor_rollout_ref.actor.ppo_mini_batch_size")
        sp = s.value("actor_rollout_ref.actor.ulysses_sequence_parallel_size") \
            if "actor_rollout_ref.actor.ulysses_sequence_parallel_size" in keys else 1
        assert batch == plan.train.global_batch_size and batch % mini == 0 and mini <= batch
        # verl splits each rank's share of a mini batch evenly only where mini x n divides by the ranks (review 6).
        assert (mini * n) % (fp.cards // sp) == 0, (model_name, method, hardware, mini, n, fp.cards, sp)
        if "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in keys:  # without dynamic batch size
            assert (batch * n) % fp.cards == 0
            assert (mini * n // (fp.cards // sp)) % s.value("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == 0
        tp = s.value("actor_rollout_ref.rollout.tensor_model_parallel_size")
        assert tp == fp.roles["rollout"].layout.tp and model.kv_heads % tp == 0 and fp.cards % tp == 0
        assert model.heads % sp == 0 and (sp == 1 or s.value("actor_rollout_ref.model.use_remove_padding"))
        assert s.value("data.max_prompt_length") + s.value("data.max_response_length") == 4096
        offload = any(role.layout.offload for role in fp.roles.values())
        assert s.value("actor_rollout_ref.actor.fsdp_config.param_offload") is offload
        assert s.value("actor_rollout_ref.ref.fsdp_config.param_offload") is True
        if method == "ppo":
            assert s.value("algorithm.adv_estimator") == "gae" and s.value("critic.model.path")


def test_qwen3_8b_grpo_on_one_snt9b_node_is_upstreams_example():
    fp = _plan(seq_len=1536).frameworks["verl"]
    s = fp.settings
    assert fp.cards == 8 and s.upstream.startswith(EXAMPLE)
    expected = {"data.max_prompt_length": (512, 17), "actor_rollout_ref.rollout.tensor_model_parallel_size": (2, 5),
                "actor_rollout_ref.rollout.gpu_memory_utilization": (0.6, 38), "actor_rollout_ref.rollout.n": (5, 39),
                "actor_rollout_ref.actor.ppo_mini_batch_size": (64, 24),
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": (10, 25),
                "actor_rollout_ref.actor.kl_loss_coef": (0.001, 27),
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": (32, 35)}
    for key, (value, line) in expected.items():
        item = next(item for item in s.overrides if item.key == key)
        source = f"upstream {EXAMPLE} l. {line} (v0.7.0 (f9c855f7))"
        # The KV cache's rule and capacity follow the gpu_memory_utilization's source.
        assert item.value == value and item.source.split("; ")[0] == source, key
    assert s.value("data.max_response_length") == 1024 and s.value("data.train_batch_size") == 256
    assert s.value("actor_rollout_ref.actor.optim.lr") == 1e-6
    assert s.value("actor_rollout_ref.actor.fsdp_config.param_offload") is False
    # Rollout phase: the actor's resident fp32 parameters and AdamW moments, plus vLLM's share, which on Ascend
    # already counts the fp32 parameters on the card when vLLM starts (vllm-ascend's worker_v1.py l. 241-254).
    rollout = fp.roles["rollout"].layout.memory
    extra = dict(rollout.extra)
    model = load_tables().model("qwen3-8b")
    assert extra["actor states resident (not offloaded)"] == pytest.approx(12 * model.params / 8 / 2**30)
    assert rollout.total == pytest.approx(8 * model.params / 8 / 2**30 + 0.6 * 64)
    # As upstream runs it: 0.6 x 64 GiB less the actor's fp32 shard, vLLM's weights / TP 2 and the runtime.
    assert "227 sequences of 1536 tokens per replica at once" in \
        next(item.source for item in s.overrides if item.key == "actor_rollout_ref.rollout.gpu_memory_utilization")


def test_the_memory_model_sizes_the_micro_batch_the_files_write_and_lowers_it_before_adding_cards():
    # Review 8: the actor was sized at the example's micro batch 8 while the files wrote 4, so 16 cards were refused
    # (54.2 > 52.2 GiB) and the plan took 24. One value now: the largest that divides the per-card mini batch and
    # fits, on the seed's 16 cards.
    plan = _plan("qwen3-32b", "grpo")
    fp = plan.frameworks["verl"]
    s = fp.settings
    assert fp.min_cards.value == 16 and fp.cards == 16
    micro = next(item for item in s.overrides if item.key == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert micro.value == 4 and "leaves the actor's training phase above the card's budget" in micro.source
    tables = load_tables()
    model, fw, hw = tables.model("qwen3-32b"), tables.frameworks["verl"], tables.hardware_row("snt9b")
    actor = fp.roles["actor"].layout
    rl = replace(rl_config({}, "grpo", 4096, model, fw),
                 sp=s.value("actor_rollout_ref.actor.ulysses_sequence_parallel_size"),
                 mini_batch_size=s.value("actor_rollout_ref.actor.ppo_mini_batch_size"))

    def phase(micro_batch: int) -> float:
        return train_memory(RoleKind.ACTOR, model, fw, "grpo", replace(rl, micro_batch_size=micro_batch), 16,
                            actor.offload).total

    assert actor.memory.total == pytest.approx(phase(4))
    assert phase(8) > actor.budget_gb >= phase(4) and actor.budget_gb == pytest.approx(hw.usable_gb * 0.9)


def test_ppo_counts_the_critic_beside_the_actor_and_offloads_both_together():
    fp = _plan("qwen3-8b", "ppo").frameworks["verl"]
    actor, critic = dict(fp.roles["actor"].layout.memory.extra), dict(fp.roles["critic"].layout.memory.extra)
    assert "critic states resident (not offloaded)" in actor and "actor states resident (not offloaded)" in critic
    s = fp.settings
    offload = s.value("actor_rollout_ref.actor.fsdp_config.param_offload")
    assert s.value("critic.model.fsdp_config.param_offload") is offload
    assert s.value("critic.optim.lr") == 1e-5
    # At the example's length (2000 + 12000) the critic takes the actor's SP 2 (SP scales down below it).
    long = _plan("qwen3-8b", "ppo", seq_len=14336, rl={"prompt_length": 2000}).frameworks["verl"].settings
    assert long.value("critic.ulysses_sequence_parallel_size") == 2 == \
        long.value("actor_rollout_ref.actor.ulysses_sequence_parallel_size")


def test_a_longer_sequence_keeps_the_examples_tokens_per_micro_batch_and_lowers_the_kv_share():
    s = _plan().frameworks["verl"].settings  # seq_len 4096: the example's 1536-token sequences, 10 per micro batch
    micro = next(item for item in s.overrides if item.key == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert micro.value <= 10 * 1536 // 4096 and micro.source.startswith("derived")
    assert s.value("data.max_prompt_length") == 512 and s.value("data.max_response_length") == 3584


def test_the_time_is_a_published_figure_labelled_as_such_or_none():
    timed = _plan(hardware="snt9b23").frameworks["verl"]
    assert timed.estimate.time_hours > 0 and "MindSpeed-RL's measurement, not verl's: 252" in timed.estimate.tps_source
    # Review 11: the label and the figure agree. A step makes global batch x n (5) sequences of prompt + response =
    # 4096 tokens, as the published figure counts them; the core times the data's 1024 tokens a sample.
    assert timed.estimate.tokens_per_card_s == pytest.approx(252 * 1024 / (5 * 4096))
    assert "makes n (5) sequences of prompt + response (4096) tokens" in timed.estimate.tps_source
    # Issue 36 (b): the estimate is the steps the files run (15 epochs of the example, 57000 train rows // 256) at
    # one step's time.
    steps = timed.settings.value("trainer.total_training_steps")
    assert steps == 57000 // 256 * 15
    step_s = timed.settings.value("data.train_batch_size") * 5 * 4096 / (252 * timed.cards)
    assert timed.estimate.time_hours == pytest.approx(steps * step_s / 3600, rel=1e-6)
    # DAPO draws 3 x its train batch a step (gen_batch_size): its step counts those prompts once, not the rate
    # three times (which made the run 3x too long).
    dapo = _plan("qwen3-32b", "dapo", "snt9b23").frameworks["verl"]
    assert dapo.estimate.tokens_per_card_s == pytest.approx(140 * 1024 / (16 * 4096))
    gen = dapo.settings.value("data.gen_batch_size")
    assert dapo.estimate.time_hours == pytest.approx(
        dapo.settings.value("trainer.total_training_steps") * gen * 16 * 4096 / (140 * dapo.cards) / 3600, rel=1e-6)
    # Issue 37 item 4 / issue 41: the spec's own measurement wins, read as verl's perf/throughput (prompt + response
    # tokens of every sequence) and converted as the published figure is, not as a rate per data token (40x off).
    measured = _plan(tokens_per_card_s=100.0).frameworks["verl"]
    assert measured.estimate.tokens_per_card_s == pytest.approx(100 * 1024 / (5 * 4096))
    assert measured.estimate.time_hours == pytest.approx(
        steps * timed.settings.value("data.train_batch_size") * 5 * 4096 / (100 * measured.cards) / 3600, rel=1e-6)
    assert not measured.estimate.is_estimate
    assert "as verl's perf/throughput: 100 tokens/s" in measured.estimate.tps_source
    untimed = _plan().frameworks["verl"]
    assert untimed.estimate.time_hours is None and untimed.estimate.tokens_per_card_s == 0
    assert untimed.estimate.tps_source.startswith("none published")
    # PPO's critic trains but its time is inside the actor's whole-step figure: the framework's time is the actor's.
    ppo = _plan("qwen2.5-32b", "ppo", "snt9b23").frameworks["verl"]
    assert ppo.roles["critic"].estimate.tokens_per_card_s == 0
    assert ppo.estimate.time_hours == pytest.approx(ppo.roles["actor"].estimate.time_hours)


def test_dapo_follows_the_recipe_and_a_model_without_an_example_follows_the_nearest():
    plan = _plan("qwen3-14b", "dapo", "snt9b23")
    s = plan.frameworks["verl"].settings
    assert (s.entry, s.config) == ("recipe.dapo.main_dapo", "dapo")
    assert s.value("actor_rollout_ref.actor.clip_ratio_high") == 0.28
    assert s.value("data.gen_batch_size") == 2 * s.value("data.train_batch_size")
    assert s.value("reward_model.reward_manager") == "dapo"
    assert s.value("actor_rollout_ref.actor.use_dynamic_bsz") is True
    nearest = _plan("qwen3-14b", "grpo")
    # Issue 36 item 5: the plan says upstream has never run the job.
    assert any("no grpo NPU example for qwen3-14b: upstream has never run this job on Ascend; the plan follows the "
               "same method's example for the nearest model, Qwen/Qwen3-8B" in note for note in nearest.notes)


def test_the_spec_rl_section_sets_the_values():
    s = _plan(seq_len=2048, rl={"prompt_length": 1024, "response_length": 1024, "samples_per_prompt": 8,
                                "kl_coef": 0.0, "reward": "gsm8k", "mini_batch_size": 32}).frameworks["verl"].settings
    assert s.value("actor_rollout_ref.rollout.n") == 8 and s.value("actor_rollout_ref.actor.use_kl_loss") is False
    assert s.value("actor_rollout_ref.actor.ppo_mini_batch_size") == 32
    assert dict((item.key, item.value) for item in s.prepare)["data_source"] == "openai/gsm8k"


@pytest.mark.parametrize(("spec", "path", "words"), [
    ({"method": "full", "rl": {"samples_per_prompt": 4}}, "rl", "only used with a reinforcement-learning method"),
    ({"method": "full"}, "frameworks.0", "verl does not offer method full (it offers: grpo, dapo, ppo)"),
    ({"rl": {"prompt_length": 1024, "response_length": 1024}}, "rl.response_length",
     "= 2048 must equal seq_len 4096; response_length 3072 does"),
    ({"seq_len": 512}, "seq_len", "the prompt length 512"),
    ({"global_batch_size": 100}, "global_batch_size", "nearest that work: 96 or 104"),
    ({"rl": {"mini_batch_size": 48}}, "rl.mini_batch_size", "nearest that works: 32 or 64"),
    ({"rl": {"mini_batch_size": 7}}, "rl.mini_batch_size", "nearest that works: 8"),
    ({"rl": {"samples_per_prompt": 1}}, "rl.samples_per_prompt", "a group of one has none"),
    ({"method": "dapo", "rl": {"samples_per_prompt": 1}}, "rl.samples_per_prompt", "at least 2"),
    ({"rl": {"prompt_length": 1}}, "rl.prompt_length", "1 tokens hold no prompt"),
    ({"rl": {"mini_batch_size": 1, "samples_per_prompt": 2}, "cards": 16}, "rl.mini_batch_size", "at least 8"),
])
def test_a_broken_rule_is_refused_at_its_key_with_values_that_work(spec, path, words):
    error = _error(**spec)
    found = [problem for problem in error.problems if problem.path == path]
    assert found and words in found[0].message, error.problems


def test_an_rl_method_for_a_model_without_a_verl_row_names_those_that_have_one():
    spec = {"job": "rl", "model": "llama3.1-8b", "method": "grpo", "seq_len": 4096, "hardware": "snt9b"}
    with pytest.raises(SpecError) as caught:
        resolve(parse_spec(json.dumps(spec).encode()), load_tables())
    message = caught.value.problems[0].message
    assert caught.value.problems[0].path == "model" and "verl plans it for" in message and "qwen3-8b" in message


def test_rollout_tp_divides_the_cards_and_chunked_prefill_off_takes_the_whole_sequence():
    s = _plan("qwen3-8b", "grpo", "a800").frameworks["verl"].settings  # 3 cards: the example's TP 2 does not divide
    tp = next(item for item in s.overrides if item.key == "actor_rollout_ref.rollout.tensor_model_parallel_size")
    assert s.value("trainer.n_gpus_per_node") % tp.value == 0
    vl = _plan("qwen2.5_vl-7b", "grpo", seq_len=16384).frameworks["verl"].settings
    batched = next(item for item in vl.overrides if item.key == "actor_rollout_ref.rollout.max_num_batched_tokens")
    assert vl.value("actor_rollout_ref.rollout.enable_chunked_prefill") is False
    assert batched.value == 16384 and batched.source.startswith("derived")
    assert vl.value("data.image_key") == "images"


def test_plan_json_plan_md_and_plan_show_the_roles(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"job": "rl", "model": "qwen3-8b", "method": "grpo", "seq_len": 1536,
                                    "hardware": "snt9b", "data": {"samples": 60000, "tokens_per_sample": 1024}}),
                    encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output + result.stderr
    job = tmp_path / "out" / "rl"
    plan = json.loads((job / "plan.json").read_text(encoding="utf-8"))
    fw = plan["frameworks"]["verl"]
    assert list(fw["roles"]) == ["actor", "rollout", "reference"] and plan["cards"] == fw["cards"] == 8
    assert "KV cache (vLLM's gpu_memory_utilization share)" in fw["roles"]["rollout"]["memory_breakdown_gib"]
    assert fw["roles"]["actor"]["memory_breakdown_gib"]["optimizer states"] > 0
    assert fw["settings"]["entry"] == "verl.trainer.main_ppo"
    assert {"key": "actor_rollout_ref.rollout.n", "value": 5,
            "source": f"upstream {EXAMPLE} l. 39 (v0.7.0 (f9c855f7))"} in fw["settings"]["overrides"]
    text = (job / "PLAN.md").read_text(encoding="utf-8")
    assert all(f"| verl | {kind} | 8 | yes |" in text for kind in ("actor", "rollout", "reference"))
    shown = CliRunner().invoke(main, ["plan", str(spec)])
    assert [line.split()[1] for line in shown.stdout.split("roles (", 1)[1].splitlines()
            if line.startswith("verl ")] == ["actor", "rollout", "reference"]




def _kv_sequences(plan, hardware: str) -> tuple[float, float]:
    """(sequences the rollout's KV cache holds, sequences as large as vLLM's weights per card), from the written
    overrides by each accelerator's rule: vllm-ascend v0.11.0rc1 worker_v1.py l. 241-254 takes the share less
    everything on the card when vLLM starts (the actor's, and PPO's critic's, fp32 parameters unless offloaded);
    vLLM 0.11 on a GPU takes it less its own allocations."""
    tables = load_tables()
    model, hw = tables.model(plan.model), tables.hardware_row(hardware)
    fp = plan.frameworks["verl"]
    s = fp.settings
    tp, gmu = s.value("actor_rollout_ref.rollout.tensor_model_parallel_size"), \
        s.value("actor_rollout_ref.rollout.gpu_memory_utilization")
    offloaded = s.value("actor_rollout_ref.actor.fsdp_config.param_offload")
    models = 2 if plan.method == "ppo" else 1
    inside = 0 if offloaded or hw.accelerator == "gpu" else 4 * model.params / fp.cards * models
    weights = 2 * model.params / tp
    kv = gmu * hw.memory_gb * 2**30 - inside - weights - 3.0 * 2**30
    per_sequence = 2 * 2 * model.layers * model.kv_dim / tp * plan.seq_len
    return kv / per_sequence, weights / per_sequence


@pytest.mark.parametrize("hardware", ["snt9b", "snt9b23", "a800"])
def test_the_kv_cache_holds_useful_sequences_by_each_accelerators_rule(hardware):
    for model_name, method in SEED_ROWS:
        plan = _plan(model_name, method, hardware)
        s = plan.frameworks["verl"].settings
        held, weight_sized = _kv_sequences(plan, hardware)
        share = s.value("data.train_batch_size") * s.value("actor_rollout_ref.rollout.n") // (
            plan.frameworks["verl"].cards // s.value("actor_rollout_ref.rollout.tensor_model_parallel_size"))
        assert held >= min(weight_sized, share) - 1e-6, (model_name, method, held, weight_sized, share)
        source = next(item.source for item in s.overrides
                      if item.key == "actor_rollout_ref.rollout.gpu_memory_utilization")
        assert f"{int(held + 1e-6)} sequences of 4096 tokens per replica at once" in source, (model_name, source)
        assert ("vllm-ascend v0.11.0rc1" in source) is hardware.startswith("snt")


def test_on_ascend_the_share_caps_the_resident_actor_and_vllm_together():
    # Review 7: gmu 0.3 of a 64 GiB die is 19.2 GiB, less than vLLM's 15.3 GiB of weights / TP 4 and the actor's
    # 10.2 GiB fp32 shard on 12 dies: no KV cache. Offloading the actor leaves vLLM the share.
    plan = _plan("qwen3-32b", "dapo", "snt9b23")
    s = plan.frameworks["verl"].settings
    assert s.value("actor_rollout_ref.actor.fsdp_config.param_offload") is True
    assert s.value("actor_rollout_ref.rollout.gpu_memory_utilization") >= 0.5
    assert _kv_sequences(plan, "snt9b23")[0] >= 62


@pytest.mark.parametrize(("method", "rl", "reference"), [
    ("grpo", {}, True), ("grpo", {"kl_coef": 0.0}, False), ("dapo", {}, False), ("ppo", {}, False),
    ("ppo", {"kl_coef": 0.001}, True)])
def test_a_reference_role_is_planned_only_where_verl_builds_one(method, rl, reference):
    # main_ppo.py l. 138 / l. 252, recipe/dapo/main_dapo.py l. 148: the reference worker exists with a KL term.
    fp = _plan("qwen3-8b", method, rl=rl).frameworks["verl"]
    assert ("reference" in fp.roles) is reference
    assert fp.settings.value("actor_rollout_ref.actor.use_kl_loss") is reference


def test_the_kl_loss_coefficient_is_written_as_the_float_verl_declares():
    s = _plan(rl={"kl_coef": 0}).frameworks["verl"].settings  # the spec's integer 0
    assert "actor_rollout_ref.actor.kl_loss_coef=0.0" in s.override_lines()


@pytest.mark.parametrize(("model", "method", "hardware", "nodes"), [
    ("qwen3-8b", "grpo", "snt9b", 1), ("qwen2.5_vl-7b", "dapo", "snt9b23", 1), ("qwen3-32b", "ppo", "snt9b", 4),
    ("qwen3-8b", "grpo", "h800", 1)])
def test_npu_jobs_turn_vllm_ascends_nz_format_off(model, method, hardware, nodes):
    # vllm-ascend v0.11.0rc1's wake_up refuses its default NZ weight format, and verl wakes the rollout engine on
    # every switch to rollout: verl's NPU CI exports VLLM_ASCEND_ENABLE_NZ=0 (tests/special_npu/*.sh l.2).
    plan = _plan(model, method, hardware, cards=nodes * load_tables().hardware_row(hardware).cards_per_node)
    env = {item.key: item for item in plan.frameworks["verl"].settings.environment}
    if hardware == "h800":
        assert env == {}
        return
    nz = env["VLLM_ASCEND_ENABLE_NZ"]
    assert nz.value == "0" and "worker_v1.py l. 183-186" in nz.source
    assert "tests/special_npu/run_qwen2_5_05b_grpo.sh l. 2" in nz.source
    assert env["VLLM_USE_V1"].value == "1"
    assert ("USE_OPTIMIZED_MODEL" in env) == model.startswith("qwen2.5_vl")
    assert ("HCCL_CONNECT_TIMEOUT" in env) == (nodes > 1)


@pytest.mark.parametrize("model", sorted({model for model, method in SEED_ROWS if method == "dapo"}))
def test_dapo_writes_every_key_its_recipe_sets(model):
    # Group filtering without a metric dies after the first rollout (recipe/dapo/dapo_ray_trainer.py l. 233-247:
    # KeyError on None): upstream's DAPO scripts set metric acc and max_num_gen_batches 10, and the rest below.
    s = _plan(model, "dapo", "snt9b23").frameworks["verl"].settings
    source = {item.key: item.source for item in s.overrides}
    script = s.upstream.split(" at ")[0]
    for key, value in (("algorithm.filter_groups.metric", "acc"),
                       ("algorithm.filter_groups.max_num_gen_batches", 10),
                       ("actor_rollout_ref.actor.clip_ratio_c", 10.0),
                       ("actor_rollout_ref.actor.optim.lr_warmup_steps", 10),
                       ("actor_rollout_ref.actor.loss_agg_mode", "token-mean"),
                       ("actor_rollout_ref.rollout.val_kwargs.do_sample", True),
                       ("actor_rollout_ref.rollout.val_kwargs.n", 1), ("actor_rollout_ref.rollout.top_k", -1),
                       ("actor_rollout_ref.model.use_remove_padding", True)):
        assert s.value(key) == value, (model, key)
        assert source[key].startswith(f"upstream {script} l. "), (model, key, source[key])
    assert s.value("actor_rollout_ref.rollout.val_kwargs.top_p") == (0.7 if "32b" in script else 1.0)
    assert source["reward_model.reward_manager"].endswith("dapo_trainer.yaml l. 13")
    # A spec's warmup is the spec's.
    assert _plan(model, "dapo", "snt9b23", train={"warmup_steps": 3}).frameworks["verl"].settings.value(
        "actor_rollout_ref.actor.optim.lr_warmup_steps") == 3


def test_ppo_caps_vllms_sequences_as_its_example():
    s = _plan("qwen3-8b", "ppo").frameworks["verl"].settings
    assert s.value("actor_rollout_ref.rollout.max_num_seqs") == 64
    assert "run_qwen3-8b_npu.sh l. 30" in next(i.source for i in s.overrides if i.key.endswith("max_num_seqs"))


@pytest.mark.parametrize(("method", "model", "extra", "loader", "epochs", "cap"), [
    ("grpo", "qwen3-8b", {}, 256, 15, None),  # run_qwen3-8b_npu.sh l. 58: total_epochs 15
    ("grpo", "qwen3-8b", {"data": {"samples": 60000, "tokens_per_sample": 1024, "epochs": 2}}, 256, 2, None),
    ("dapo", "qwen2.5-32b", {}, 384, 1, None),  # run_dapo_qwen2.5_32b_npu.sh l. 136
    ("ppo", "qwen3-8b", {}, 256, 30, 100)])  # verl's total_epochs 30; run_qwen3-8b_npu.sh l. 54 caps at 100 steps
def test_the_steps_are_the_batches_verls_loader_draws_and_the_last_is_saved(method, model, extra, loader, epochs,
                                                                             cap):
    # prepare_data.py holds out round(5%) of the 60000 rows; verl's loader draws whole batches of
    # train_batch_size (DAPO: gen_batch_size) prompts and drops the rest (ray_trainer.py l. 392-399); it saves at
    # the last step only where it reaches total_training_steps (l. 1356, 1585-1590). Issue 36 (a): the epochs are
    # the example's (verl's own where it sets none), and its step cap holds.
    plan = _plan(model, method, **extra)
    s = plan.frameworks["verl"].settings
    assert s.value("data.gen_batch_size" if method == "dapo" else "data.train_batch_size") == loader
    per_epoch = (60000 - 3000) // loader
    steps = min(per_epoch * epochs, cap or per_epoch * epochs)
    assert s.value("trainer.total_training_steps") == plan.train.steps == steps
    assert s.value("trainer.total_epochs") == epochs
    assert 0 < s.value("trainer.save_freq") <= steps
    # Checkpoints kept: the recipe's keep_checkpoints (ppo_trainer.yaml l. 199-202), the critic's too for PPO.
    assert s.value("trainer.max_actor_ckpt_to_keep") == 3
    assert ("trainer.max_critic_ckpt_to_keep" in [item.key for item in s.overrides]) == (method == "ppo")


def test_given_steps_get_the_epochs_that_reach_them_and_too_few_rows_are_refused():
    s = _plan(train={"steps": 500, "keep_checkpoints": 1}).frameworks["verl"].settings
    assert s.value("trainer.total_training_steps") == 500 and s.value("trainer.total_epochs") == 3  # 222 an epoch
    assert s.value("trainer.max_actor_ckpt_to_keep") == 1
    error = _error(data={"samples": 260, "tokens_per_sample": 1024}, global_batch_size=256)
    assert error.problems[0].path == "data.samples" and "less than one batch" in error.problems[0].message
    assert "give at least 269 rows" in error.problems[0].message


def test_the_old_log_prob_pass_keeps_upstreams_entropy_chunking_and_counts_on_the_actor():
    # Review 9: upstream's qwen3-8b GRPO chunks the entropy (l. 53-54) and prefetches FSDP units (l. 51-52); the
    # actor's log-prob pass computes the entropy (fsdp_workers.py l. 1021) over 12 x 4096 = 49,152 tokens.
    fp = _plan().frameworks["verl"]
    s = fp.settings
    for key, line in (("actor.fsdp_config.forward_prefetch", 51), ("ref.fsdp_config.forward_prefetch", 52),
                      ("actor.entropy_from_logits_with_chunking", 53), ("ref.entropy_from_logits_with_chunking", 54)):
        item = next(item for item in s.overrides if item.key == f"actor_rollout_ref.{key}")
        assert (item.value, item.source) == (True, f"upstream {EXAMPLE} l. {line} (v0.7.0 (f9c855f7))")
    tables = load_tables()
    model, fw = tables.model("qwen3-8b"), tables.frameworks["verl"]
    rl = rl_config({}, "grpo", 4096, model, fw)
    tokens = s.value("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu") * 4096
    assert tokens == 49152
    actor = fp.roles["actor"].layout
    passed = log_prob_memory(model, fw, "grpo", rl, 8, actor.offload)
    assert passed.logits == pytest.approx((4 * tokens + 3 * 4 * 2048) * model.vocab / 2**30)
    # The pass is the actor's larger phase here, and it fits only with the entropy chunked.
    assert actor.memory.total == pytest.approx(passed.total) and passed.total <= actor.budget_gb
    assert passed.total + (2 * 4 * tokens - 3 * 4 * 2048) * model.vocab / 2**30 > actor.budget_gb


def test_the_mini_batch_keeps_the_followed_scripts_updates_a_step():
    # Review 5: DAPO qwen3-14b upstream trains its gen batch 32 (filter_groups off) in mini batches of 1: 32 updates
    # a step. At the plan's global batch the mini batch scales with it, so a step still takes 32 updates.
    s = _plan("qwen3-14b", "dapo", "snt9b").frameworks["verl"].settings
    batch, gen = s.value("data.train_batch_size"), s.value("data.gen_batch_size")
    mini = next(item for item in s.overrides if item.key == "actor_rollout_ref.actor.ppo_mini_batch_size")
    assert gen == 2 * batch and mini.value == batch // 16
    assert gen // mini.value == 32 and mini.source.endswith("; 32 updates a step")


@pytest.mark.parametrize(("model", "method", "script", "line", "batch", "gen", "mini"), [
    ("qwen3-32b", "grpo", "examples/grpo_trainer/run_qwen3-32b_npu.sh", 15, 1024, None, 64),
    ("qwen2.5_vl-7b", "grpo", "examples/grpo_trainer/run_qwen2_5_vl_7b_npu.sh", 12, 512, None, 32),
    ("qwen3-14b", "dapo", "recipe/dapo/run_dapo_qwen3_14b_base_npu.sh", 26, 16, 32, 1)])
def test_train_gen_and_mini_batch_come_from_the_followed_script(model, method, script, line, batch, gen, mini):
    # Review 5: one per-method global batch (256 GRPO, 128 DAPO) replaced upstream's per-model ones.
    plan = _plan(model, method, data={"samples": 2_000_000, "tokens_per_sample": 1024})
    s = plan.frameworks["verl"].settings
    assert plan.train.global_batch_size == s.value("data.train_batch_size") == batch
    assert plan.train.origin["global_batch_size"].startswith(f"derived: {batch} samples (upstream {script} l. {line}")
    assert s.value("actor_rollout_ref.actor.ppo_mini_batch_size") == mini
    if gen:
        assert s.value("data.gen_batch_size") == gen


def test_the_bundled_verl_example_renders_a_plan_that_reads_right(tmp_path):
    # examples/qwen3-8b-grpo-verl-snt9b.yaml: the seed's row on 8 cards, upstream's rollout TP and gmu. Without a
    # published rate the choice is not "the same estimated rate (0 tokens/s per card)", and the launch order keeps
    # its lines apart.
    example = Path(__file__).resolve().parents[1] / "examples" / "qwen3-8b-grpo-verl-snt9b.yaml"
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", str(example), "--out", str(out)])
    assert result.exit_code == 0, result.output
    job = out / "qwen3-8b-grpo-verl-snt9b"
    fw = json.loads((job / "plan.json").read_text(encoding="utf-8"))["frameworks"]["verl"]
    assert fw["cards"] == 8
    settings = {item["key"]: item["value"] for item in fw["settings"]["overrides"]}
    assert settings["actor_rollout_ref.rollout.tensor_model_parallel_size"] == 2
    assert settings["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.6
    text = (job / "PLAN.md").read_text(encoding="utf-8")
    assert "0 tokens/s per card" not in text and "this one communicates least (the plan has no rate for it)" in text
    assert "until the cluster stops.\n   Any step that fails" in text


def test_a_placeholder_rl_data_folder_is_set_through_output_dir_and_other_derived_paths_keep_their_key(tmp_path):
    # Issue 36b (c): verl's prepared-data folder lies inside output_dir, which the job writes; with output_dir a
    # placeholder PLAN.md said "set paths.rl_data", though output_dir is the one path to set.
    spec = tmp_path / "spec.yaml"
    base = {"job": "rl", "model": "qwen3-8b", "seq_len": 4096, "hardware": "snt9b"}
    spec.write_text(yaml.safe_dump({**base, "method": "grpo", "frameworks": ["verl"]}), encoding="utf-8")
    assert CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")]).exit_code == 0
    lines = (tmp_path / "out" / "rl" / "PLAN.md").read_text(encoding="utf-8").splitlines()
    assert "- rl_data: `/path/to/output/rl/verl/data` (placeholder: set `paths.output_dir` in the spec)" in lines
    # MindSpeed-LLM's converted-weights folder, also under output_dir by default, is still its own key to set.
    spec.write_text(yaml.safe_dump({**base, "method": "full", "frameworks": ["mindspeed-llm"]}), encoding="utf-8")
    assert CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "llm")]).exit_code == 0
    text = (tmp_path / "llm" / "rl" / "PLAN.md").read_text(encoding="utf-8")
    assert "(placeholder: set `paths.mcore_ckpt_dir` in the spec)" in text
