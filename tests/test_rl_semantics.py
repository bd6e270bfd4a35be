"""Issue 36: RL that trains what upstream trains. verl's files carry the RL family's semantics: the thinking switch
of Qwen3's chat template, the example's batches whatever the data's size, tiling in sequences, and one step time
for the run estimate and the checkpoint interval."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from generator.errors import SpecError
from generator.frameworks.contract import RoleKind
from generator.frameworks.verl.examples import examples
from generator.frameworks.verl.memory import STEP_TEMPORARY_BYTES, train_memory
from generator.frameworks.verl.rl import bare, rl_config
from generator.memory import GIB
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

THINKING = "+data.apply_chat_template_kwargs.enable_thinking"
TABLES = load_tables()
# Item 6: every upstream verl NPU example for a model with a verl row of its own (its layout and lengths).
UPSTREAM = sorted((script, model, method) for script, ex in examples().items()
                  for model, row in TABLES.frameworks["verl"].models.items() for method in ("grpo", "dapo", "ppo")
                  if row.get(method) == script and bare(TABLES.model(model).hf_id) == bare(ex.model))


def _plan(model="qwen3-8b", method="grpo", hardware="snt9b", seq_len=4096, **extra):
    spec = {"job": "rl", "model": model, "method": method, "seq_len": seq_len, "hardware": hardware,
            "frameworks": ["verl"], "data": {"samples": 60000, "tokens_per_sample": 1024}, **extra}
    return resolve(parse_spec(json.dumps(spec).encode()), load_tables())


def _overrides(plan) -> dict:
    return {item.key: item.value for item in plan.frameworks["verl"].settings.overrides}


@pytest.mark.parametrize("thinking", [True, False])
def test_qwen3_thinking_reaches_verls_chat_template_kwargs(thinking):
    # Item 4: train.enable_thinking was refused ("no planned framework applies the chat template"), though verl
    # applies the tokenizer's template with data.apply_chat_template_kwargs.
    plan = _plan(train={"enable_thinking": thinking})
    assert _overrides(plan)[THINKING] is thinking
    assert plan.train.origin["enable_thinking"] == "given"


def test_qwen3_thinks_by_default_and_the_plan_says_so():
    plan = _plan()
    assert _overrides(plan)[THINKING] is True
    assert plan.train.origin["enable_thinking"].startswith("default: ")
    assert any("data.apply_chat_template_kwargs.enable_thinking" in note for note in plan.notes)


def test_a_template_without_the_switch_gets_no_key_and_a_given_one_is_refused():
    assert THINKING not in _overrides(_plan("qwen2.5-32b", seq_len=2048, hardware="snt9b23"))
    with pytest.raises(SpecError) as caught:
        _plan("qwen2.5-32b", seq_len=2048, hardware="snt9b23", train={"enable_thinking": False})
    assert str(caught.value).startswith("train.enable_thinking")


def test_a_small_data_set_keeps_the_examples_batch_and_mini_batch():
    # Item 1: the "at least 100 optimizer steps" default shrank Qwen3-32B GRPO's batch 1024 -> 64 and its mini batch
    # 64 -> 4 on 17,000 prompts; RL's batch is an algorithm setting.
    plan = _plan("qwen3-32b", data={"samples": 17000, "tokens_per_sample": 512})
    o = _overrides(plan)
    assert o["data.train_batch_size"] == plan.train.global_batch_size == 1024
    assert o["actor_rollout_ref.actor.ppo_mini_batch_size"] == 64
    assert not any("optimizer steps at a global batch" in warning for warning in plan.warnings)


def test_the_batch_tiles_in_sequences_and_never_moves():
    # Item 1: verl's rule is train_batch_size x n divisible by the ranks (verl/utils/config.py l. 109-113). DAPO
    # Qwen3-14B's 16 prompts x 16 responses on 16 dies tile; before, the batch moved (16 -> 20 on 10 dies).
    plan = _plan("qwen3-14b", "dapo", "snt9b23", 22528, data={"samples": 17000, "tokens_per_sample": 512})
    fp = plan.frameworks["verl"]
    o = _overrides(plan)
    assert o["data.train_batch_size"] == 16 and o["data.gen_batch_size"] == 32
    assert o["actor_rollout_ref.rollout.n"] == 16
    assert fp.layout.cards == 16 and "moved" not in plan.train.origin["global_batch_size"]
    # On two nodes the 16 prompts do not divide the 32 ranks, their 256 sequences do.
    two = _plan("qwen3-14b", "dapo", "snt9b23", 22528, cards=32, data={"samples": 17000, "tokens_per_sample": 512})
    assert _overrides(two)["data.train_batch_size"] == 16
    assert two.frameworks["verl"].layout.grad_accum == 16 * 16 // 32


def test_one_step_time_for_the_checkpoint_interval_and_the_run_estimate():
    # Item 3: the interval's step time counted seq_len tokens a prompt where the rate counts data tokens (32x too
    # long at 16384 / 512): one step time, the run's hours over its steps (the steps the files run: remainder b).
    plan = _plan("qwen2.5-32b", "dapo", "snt9b23", 16384, data={"samples": 17000, "tokens_per_sample": 512})
    est = plan.frameworks["verl"].estimate
    assert est.time_hours is not None
    step = est.time_hours * 3600 / plan.train.steps
    assert f"the estimated {step:.1f} s per step" in plan.train.origin["save_every_steps"]


@pytest.mark.parametrize("hardware", ["h800", "a800"])
def test_rl_chooses_whole_nodes_and_a_spec_count_keeps_the_platforms_rules(hardware):
    # Item 6: fewest-card plans fell below what upstream runs (3 H800s); every upstream example runs whole nodes.
    plan = _plan(hardware=hardware)
    assert plan.frameworks["verl"].layout.cards == 8
    assert _plan(hardware=hardware, cards=16).frameworks["verl"].layout.cards == 16
    with pytest.raises(SpecError) as caught:
        _plan(hardware="snt9b23", cards=3)
    assert "dies in pairs" in str(caught.value)


def test_a_budget_chooses_cards_never_the_batch_and_one_it_cannot_meet_is_refused():
    # Item 2: a 48 h budget moved Qwen2.5-32B DAPO's batch 128 -> 736 (gen 2208) to fill 46 nodes. The batch stays
    # the example's; a budget that needs more cards than the batch feeds is refused at its key.
    data = {"samples": 17000, "tokens_per_sample": 512}
    plan = _plan("qwen2.5-32b", "dapo", "snt9b23", 16384, data=data, time_budget_hours=48)
    o = _overrides(plan)
    assert o["data.train_batch_size"] == 128 and o["data.gen_batch_size"] == 384
    assert plan.frameworks["verl"].estimate.time_hours <= 48
    # Qwen3-8B GRPO: a mini batch of 64 prompts x n 5 (SP 1) feeds 320 dies at most.
    with pytest.raises(SpecError) as caught:
        _plan("qwen3-8b", "grpo", "snt9b23", 16384, data=data, time_budget_hours=1)
    assert str(caught.value).startswith("time_budget_hours: 1 h needs at least")
    assert "more than the 320 the global batch can use" in str(caught.value)


def test_the_update_phase_counts_adamws_step_temporaries():
    # Item 6: the update phase left out torch AdamW's foreach sqrt(exp_avg_sq), one fp32 copy of the shard, which
    # outlives the freed activations where a micro batch is small.
    model, fw = TABLES.model("qwen3-8b"), TABLES.frameworks["verl"]
    rl = replace(rl_config({"prompt_length": 128}, "grpo", 256, model, fw), micro_batch_size=1)
    phase = train_memory(RoleKind.ACTOR, model, fw, "grpo", rl, 8, False)
    extra = dict(phase.extra)["AdamW step temporaries beyond the freed activations"]
    step, shard = STEP_TEMPORARY_BYTES * model.params / 8 / GIB, 4.0 * model.params / 8 / GIB
    # the gathered FSDP unit (weights beyond the fp32 shard) is freed before the step too
    assert extra == pytest.approx(step - phase.activations - phase.logits - (phase.weights - shard))
    assert phase.total >= 16.0 * model.params / 8 / GIB + step


@pytest.mark.parametrize(("script", "model", "method"), UPSTREAM)
def test_every_upstream_npu_example_fits_and_the_plan_takes_as_many_cards_or_says_why(script, model, method):
    values = {key: value for key, (value, _) in examples()[script].values.items()}
    per_node, cards = values["gpus_per_node"], values["nnodes"] * values["gpus_per_node"]
    hardware = next(hw.name for hw in TABLES.hardware.values() if hw.accelerator == "npu"
                    and hw.cards_per_node == per_node)
    seq_len = -(-(values["prompt_length"] + values["response_length"]) // 256) * 256  # a multiple of 256
    pinned = _plan(model, method, hardware, seq_len, cards=cards, rl={"prompt_length": values["prompt_length"]},
                   layout={"verl": {"rollout": {"tp": values["rollout_tp"]}}})
    roles = pinned.frameworks["verl"].roles
    assert all(role.layout.fits for role in roles.values()), {k: r.layout.memory.total for k, r in roles.items()}
    own = _plan(model, method, hardware, seq_len, rl={"prompt_length": values["prompt_length"]})
    chosen = own.frameworks["verl"].layout.cards
    assert chosen >= cards or any(f"upstream {script} (verl 0.7.0) runs this job on {cards} cards" in note
                                  and f"the plan takes {chosen}" in note for note in own.notes)


@pytest.mark.parametrize("model", ["qwen2.5_vl-7b", "qwen2.5_vl-32b"])
def test_ppo_on_a_vision_language_model_is_refused_with_the_reason(model):
    # Item 5: verl builds that critic only through trl, which the Ascend install lacks; validate passed it.
    with pytest.raises(SpecError) as caught:
        _plan(model, "ppo", "snt9b23", 3072)
    text = str(caught.value)
    assert text.startswith("method: verl 0.7.0 cannot start ppo") and "AutoModelForCausalLMWithValueHead" in text
    assert "Use grpo or dapo" in text


@pytest.mark.parametrize(("seq_len", "response", "buffer"), [(22528, 20480, 4096), (16384, 14336, 2867),
                                                             (4096, 2048, 409)])
def test_dapos_overlong_buffer_is_the_examples_share_of_the_response(seq_len, response, buffer):
    # Item 7: the buffer started at half the response; upstream's is 20% (4096 of 20480, run_dapo_*_npu.sh l. 18).
    o = _overrides(_plan("qwen3-14b", "dapo", "snt9b23", seq_len, rl={"prompt_length": 2048}))
    assert o["data.max_response_length"] == response
    assert o["reward_model.overlong_buffer.len"] == buffer


@pytest.mark.parametrize("model", ["qwen2.5_vl-7b", "qwen2.5_vl-32b"])
def test_a_vl_rollout_takes_its_own_examples_engine_settings(model):
    # Item 7: VL DAPO jobs followed the text recipe's enforce_eager False and chunked prefill, where both VL NPU
    # examples set eager mode and no chunked prefill (run_qwen2_5_vl_*_npu.sh l. 36-37).
    plan = _plan(model, "dapo", "snt9b23", 3072)
    o = _overrides(plan)
    assert o["actor_rollout_ref.rollout.enforce_eager"] is True
    assert o["actor_rollout_ref.rollout.enable_chunked_prefill"] is False
    source = next(item.source for item in plan.frameworks["verl"].settings.overrides
                  if item.key == "actor_rollout_ref.rollout.enforce_eager")
    assert "run_qwen2_5_vl_" in source and "l. 37" in source


@pytest.mark.parametrize(("seq_len", "sp"), [(4096, 2), (8192, 4), (22528, 8)])
def test_ulysses_sp_scales_with_the_sequence(seq_len, sp):
    # Item 8: Qwen3-32B DAPO at 4096 got the recipe's SP 8, which upstream uses at 22,528 tokens (2,816 a card).
    o = _overrides(_plan("qwen3-32b", "dapo", "snt9b", seq_len, rl={"prompt_length": 2048}))
    assert o.get("actor_rollout_ref.actor.ulysses_sequence_parallel_size", 1) == sp
    assert seq_len / sp <= 22528 / 8


def test_a_script_that_trains_the_base_model_is_named_as_the_nearest():
    # Item 7: DAPO's Qwen3 scripts train the Base models, which gen-launch does not plan; the plan cited them
    # without saying so.
    plan = _plan("qwen3-8b", "dapo", seq_len=22528, rl={"prompt_length": 2048})
    assert any("trains Qwen/Qwen3-8B-Base (recipe/dapo/run_dapo_qwen3_8b_base_npu.sh)" in note
               and "the plan trains Qwen/Qwen3-8B" in note for note in plan.notes)
    assert not any("trains Qwen/Qwen3-8B-Base" in note for note in _plan().notes)  # GRPO's trains Qwen3-8B itself


def test_rl_data_under_a_given_output_dir_is_no_placeholder_and_thinking_cites_verls_default():
    # Item 9: every verl plan called rl_data a placeholder though it derives from paths.output_dir.
    plan = _plan(paths={"output_dir": "/shared/rl", "model_dir": "/m", "dataset": "/d.json"})
    assert plan.paths["rl_data"].value == "/shared/rl/verl/data" and not plan.paths["rl_data"].placeholder
    assert _plan().paths["rl_data"].placeholder  # without output_dir it is one
    # Item 4: the default's source is verl's own (no kwargs: the template's thinking).
    source = next(item.source for item in plan.frameworks["verl"].settings.overrides if item.key == THINKING)
    assert source.startswith("train.enable_thinking (default: Qwen3's chat template thinks") and \
        "legacy_data.yaml l. 131" in source


# ---------------------------------------------------------------------------------------------------------------
# The remainder of issue 36.

def _render(**fields):
    from tests.helpers import render_job

    spec = {"job": "rl", "frameworks": ["verl"], "data": {"samples": 17000, "tokens_per_sample": 512}, **fields}
    return render_job(TABLES, **spec)


def _row(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {label} |"))


@pytest.mark.parametrize(("model", "script", "line", "batch", "epochs"), [
    ("qwen3-8b", "examples/grpo_trainer/run_qwen3-8b_npu.sh", 58, 256, 15),
    ("qwen3-32b", "examples/grpo_trainer/run_qwen3-32b_npu.sh", 58, 1024, 50)])
def test_the_run_takes_the_examples_epochs_and_plan_md_cites_them(model, script, line, batch, epochs):
    # (a) trainer.total_epochs defaulted to the SFT rule (1 epoch) where upstream's example trains 15 (50).
    plan, files = _render(model=model, method="grpo", seq_len=4096, hardware="snt9b")
    o = _overrides(plan)
    assert o["data.train_batch_size"] == batch
    assert o["trainer.total_epochs"] == plan.train.epochs == epochs
    assert o["trainer.total_training_steps"] == plan.train.steps == (17000 - 850) // batch * epochs
    source = f"upstream {script} l. {line}"
    assert source in plan.train.origin["epochs"] and source in _row(files["PLAN.md"], "epochs")
    # A spec's epochs or steps win, and the example's step cap goes with its epochs.
    assert _plan(model, data={"samples": 17000, "tokens_per_sample": 512, "epochs": 2}).train.epochs == 2
    assert _plan(model, train={"steps": 30}).train.steps == 30


def test_ppos_example_caps_its_steps_and_verl_gives_the_epochs():
    # (a) the Qwen3-8B PPO script sets no total_epochs (verl's 30, ppo_trainer.yaml l. 129) and stops at 100 steps.
    plan = _plan("qwen3-8b", "ppo", seq_len=14080, rl={"prompt_length": 2000})
    o = _overrides(plan)
    assert o["trainer.total_epochs"] == 30 and "ppo_trainer.yaml l. 129" in plan.train.origin["epochs"]
    assert o["trainer.total_training_steps"] == plan.train.steps == 100
    assert "capped at the example's 100 (upstream examples/ppo_trainer/run_qwen3-8b_npu.sh l. 54" in \
        plan.train.origin["steps"]


def test_dapo_states_the_steps_its_files_run_everywhere():
    # (b) PLAN.md's recipe said 133 steps (17000 / 128) while the files ran 42 (16150 train rows // gen_batch_size
    # 384), and the estimate counted DAPO's generation three times.
    plan, files = _render(model="qwen2.5-32b", method="dapo", seq_len=16384, hardware="snt9b23")
    o = _overrides(plan)
    assert o["data.gen_batch_size"] == 384
    assert o["trainer.total_training_steps"] == plan.train.steps == 16150 // 384 == 42
    assert o["trainer.save_freq"] <= 42 and plan.train.save_every_steps <= 42
    assert "| steps | `42` |" in files["PLAN.md"]
    assert json.loads(files["plan.json"])["train"]["steps"] == 42
    est = plan.frameworks["verl"].estimate
    step = 384 * 16 * 16384 / (108 * plan.frameworks["verl"].cards)  # MindSpeed-RL's 108 tokens/s, a gen batch
    assert est.time_hours == pytest.approx(42 * step / 3600, rel=1e-6)
    assert f"the estimated {step:.1f} s per step" in plan.train.origin["save_every_steps"]


@pytest.mark.parametrize(("model", "method", "hardware", "seq_len", "script", "expected"), [
    ("qwen3-32b", "grpo", "snt9b", 4096, "examples/grpo_trainer/run_qwen3-32b_npu.sh", {
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": ("bf16", 25),
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype": ("bf16", 26),
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype": ("fp32", 27)}),
    ("qwen3-8b", "dapo", "snt9b", 22528, "recipe/dapo/run_dapo_qwen3_8b_base_npu.sh", {
        "actor_rollout_ref.actor.fsdp_config.fsdp_size": (-1, 115),
        "actor_rollout_ref.actor.entropy_checkpointing": (True, 135),
        "actor_rollout_ref.ref.entropy_checkpointing": (True, 136),
        "actor_rollout_ref.actor.fsdp_config.forward_prefetch": (True, 137),
        "actor_rollout_ref.ref.fsdp_config.forward_prefetch": (True, 138)}),
    ("qwen2.5_vl-7b", "dapo", "snt9b23", 22528, "recipe/dapo/run_dapo_qwen2.5_7b_npu.sh", {
        "actor_rollout_ref.actor.fsdp_config.fsdp_size": (-1, 121),
        "actor_rollout_ref.actor.entropy_checkpointing": (True, 137),
        "actor_rollout_ref.actor.fsdp_config.forward_prefetch": (True, 139),
        "actor_rollout_ref.actor.entropy_from_logits_with_chunking": (True, 141),
        "actor_rollout_ref.ref.entropy_from_logits_with_chunking": (True, 142)}),
    ("qwen2.5-32b", "dapo", "snt9b23", 22528, "recipe/dapo/run_dapo_qwen2.5_32b_npu.sh", {
        "actor_rollout_ref.actor.fsdp_config.fsdp_size": (-1, 123),
        "actor_rollout_ref.ref.fsdp_config.forward_prefetch": (True, 140)})])
def test_the_examples_memory_and_fsdp_keys_reach_the_files(model, method, hardware, seq_len, script, expected):
    # (c) entropy_checkpointing, entropy_from_logits_with_chunking, forward_prefetch, fsdp_size and Qwen3-32B's
    # mixed_precision lines were dropped though the examples table claims to carry what upstream sets (verl's own
    # compose accepts them: tests/test_verl_config.py's seed rows).
    plan = _plan(model, method, hardware, seq_len, rl={"prompt_length": 2048} if method == "dapo" else {})
    written = {item.key: item for item in plan.frameworks["verl"].settings.overrides}
    for key, (value, line) in expected.items():
        assert written[key].value == value, key
        assert written[key].source == f"upstream {script} l. {line} (v0.7.0 (f9c855f7))", key


def test_a_hybrid_shard_group_is_written_where_it_spans_the_cards_and_said_why_not_where_it_does_not():
    # (c) Qwen3-14B DAPO shards over groups of 8 (run_dapo_qwen3_14b_base_npu.sh l. 116); on 16 dies that keeps a copy
    # of the actor's states a group, which the memory model does not count: the plan shards over every card, and
    # says so.
    plan = _plan("qwen3-14b", "dapo", "snt9b23", 22528, rl={"prompt_length": 2048})
    item = next(i for i in plan.frameworks["verl"].settings.overrides
                if i.key == "actor_rollout_ref.actor.fsdp_config.fsdp_size")
    assert plan.frameworks["verl"].cards == 16 and item.value == -1
    assert "the example's 8 (upstream recipe/dapo/run_dapo_qwen3_14b_base_npu.sh l. 116" in item.source
    assert _overrides(plan)["actor_rollout_ref.actor.entropy_checkpointing"] is True


DYNAMIC = [(model, method) for model in sorted(TABLES.frameworks["verl"].models) for method in ("dapo", "ppo")
           if not (method == "ppo" and TABLES.model(model).vision_params_b > 0)]


@pytest.mark.parametrize(("model", "method"), DYNAMIC)
def test_dynamic_batch_token_limits_follow_verls_tuning_guide(model, method):
    # (d) verl docs/perf/perf_tuning.rst l. 148-149: the actor's (and the log-prob passes') limit at least
    # 2 x (max_prompt_length + max_response_length); l. 155-159: the critic's at least 2x the actor's. verl packs
    # limit x SP tokens a micro batch of an SP group (dp_actor.py l. 367, 441). The files held (P + R) / SP.
    # Where the card cannot hold two sequences at the plan's cards, the limit is the example's one and says why.
    plan = _plan(model, method, "snt9b23", 4096)
    o = _overrides(plan)
    sources = {item.key: item.source for item in plan.frameworks["verl"].settings.overrides}
    assert o["actor_rollout_ref.actor.use_dynamic_bsz"] is True
    sp = o.get("actor_rollout_ref.actor.ulysses_sequence_parallel_size", 1)
    sequence = o["data.max_prompt_length"] + o["data.max_response_length"]
    actor = o["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"]
    for key in ("actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
                "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"):
        assert o[key] == actor
        assert o[key] * sp >= 2 * sequence or (o[key] * sp == sequence and "below the guide's 2" in sources[key])
        assert "perf_tuning.rst l. 148-149" in sources[key]
    if method == "ppo":
        assert o["critic.ppo_max_token_len_per_gpu"] == 2 * actor
        assert "the critic's 2x the actor's, l. 155-159" in sources["critic.ppo_max_token_len_per_gpu"]


def test_a_token_limit_the_card_cannot_hold_falls_to_the_examples_and_says_why():
    # (d) At 22,528 tokens Qwen3-14B DAPO's actor cannot hold two sequences a micro batch on upstream's 16 dies
    # (SP 2): the limit falls to the example's one sequence, with the reason, rather than adding cards.
    plan = _plan("qwen3-14b", "dapo", "snt9b23", 22528, rl={"prompt_length": 2048})
    item = next(i for i in plan.frameworks["verl"].settings.overrides
                if i.key == "actor_rollout_ref.actor.ppo_max_token_len_per_gpu")
    assert plan.frameworks["verl"].cards == 16 and item.value == 22528 // 2
    assert "below the guide's 2" in item.source and "run_dapo_qwen3_14b_base_npu.sh l. 51" in item.source


def test_plan_md_prints_the_rl_rate_not_zero():
    # Item 9: an RL rate per data token is a fraction of one, which PLAN.md printed as "0 tokens/s per card".
    plan, files = _render(model="qwen2.5-32b", method="dapo", seq_len=16384, hardware="snt9b23")
    rate = plan.frameworks["verl"].estimate.tokens_per_card_s
    assert 0 < rate < 1
    text = files["PLAN.md"]
    assert f"**Time.** {rate:.3g} tokens/s per card (MindSpeed-RL's measurement" in text
    assert f"at the same estimated rate ({rate:.3g} tokens/s per card)" in text
    assert " 0 tokens/s per card" not in text and "(0 x 16 cards" not in text


@pytest.mark.parametrize("hardware", ["h800", "a800", "h100"])
def test_a_gpu_plan_follows_verls_gpu_script_for_the_model(hardware):
    # Item 9: GPU plans copied the NPU example's choices (batch 256, mini 64, micro 10) where verl ships a GPU script
    # for the model: examples/grpo_trainer/run_qwen3-8b.sh (batch 1024, mini 256, micro 32, n 5, 512 + 1024, TP 2,
    # gpu_memory_utilization 0.6, no offload, 15 epochs).
    script = "examples/grpo_trainer/run_qwen3-8b.sh"
    plan = _plan(hardware=hardware, seq_len=1536)
    sources = {item.key: item.source for item in plan.frameworks["verl"].settings.overrides}
    o = _overrides(plan)
    assert plan.frameworks["verl"].settings.upstream.startswith(script)
    expected = {"actor_rollout_ref.actor.ppo_mini_batch_size": (256, 18), "actor_rollout_ref.rollout.n": (5, 31),
                "data.max_prompt_length": (512, 11), "actor_rollout_ref.rollout.tensor_model_parallel_size": (2, 28),
                "trainer.total_epochs": (15, 43)}
    for key, (value, line) in expected.items():
        assert o[key] == value and f"{script} l. {line}" in sources[key], key
    assert o["data.train_batch_size"] == 1024
    assert f"{script} l. 10" in plan.train.origin["global_batch_size"]
    assert o["actor_rollout_ref.actor.fsdp_config.param_offload"] is False
    # The micro batches are the script's, or lower with the memory model's reason, citing it.
    for key, line in (("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 19),
                      ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", 27)):
        assert o[key] == 32 or "above the card's budget" in sources[key], key
        assert f"{script} l. {line}" in sources[key], key
    # Ascend plans and models without a GPU script keep the NPU example.
    assert _plan(seq_len=1536).frameworks["verl"].settings.upstream.startswith(
        "examples/grpo_trainer/run_qwen3-8b_npu.sh")
    assert _plan("qwen3-32b", hardware=hardware).frameworks["verl"].settings.upstream.startswith(
        "examples/grpo_trainer/run_qwen3-32b_npu.sh")


# The seed's verl rows (min_cards.csv) whose model and method upstream never ran on Ascend: no NPU example script
# trains that model (or a variant of it) with that method (PPO on a VL model is refused: item 5).
NEVER_RUN = [("qwen2.5_vl-7b", "dapo"), ("qwen2.5_vl-32b", "dapo"), ("qwen3-32b", "dapo"), ("qwen3-32b", "ppo"),
             ("qwen2.5-32b", "ppo")]


def test_the_seed_rows_upstream_never_ran_are_exactly_those_the_plan_says_so_of():
    # Item 5 (remainder f): say which rows of the seed's table upstream has never run.
    seed = sorted({(row.model, method) for row in TABLES.min_cards if row.framework == "verl"
                   for method in row.methods if not (method == "ppo" and TABLES.model(row.model).vision_params_b)})
    said = sorted((model, method) for model, method in seed
                  if any("upstream has never run this job on Ascend" in note
                         for note in _plan(model, method, "snt9b23", 4096).notes))
    assert said == sorted(NEVER_RUN)
    # On a GPU, Qwen2.5-32B PPO has verl's own script (examples/ppo_trainer/run_qwen2.5-32b.sh); Qwen3-32B GRPO's
    # NPU example stands in for the GPU script verl does not ship, and the plan says so.
    assert not any("never run" in note for note in _plan("qwen2.5-32b", "ppo", "h800", 2048).notes)
    assert any("ships no grpo GPU script for qwen3-32b: the plan follows its NPU example" in note
               for note in _plan("qwen3-32b", "grpo", "h800", 4096).notes)


def test_gpu_dapo_follows_verls_gpu_recipe():
    # Item 9: verl's GPU DAPO recipe for Qwen2.5-32B (recipe/dapo/run_dapo_qwen2.5_32b.sh: 512 prompts, generation
    # batch 1536, mini batch 32, n 16), not the NPU recipe's 128 / 384.
    script = "recipe/dapo/run_dapo_qwen2.5_32b.sh"
    plan = _plan("qwen2.5-32b", "dapo", "h800", 4096)
    sources = {item.key: item.source for item in plan.frameworks["verl"].settings.overrides}
    o = _overrides(plan)
    assert plan.frameworks["verl"].settings.upstream.startswith(script)
    assert (o["data.train_batch_size"], o["data.gen_batch_size"]) == (512, 1536)
    assert o["actor_rollout_ref.actor.ppo_mini_batch_size"] == 32 and f"{script} l. 31" in \
        sources["actor_rollout_ref.actor.ppo_mini_batch_size"]
    assert o["actor_rollout_ref.rollout.n"] == 16 and f"{script} l. 30" in sources["actor_rollout_ref.rollout.n"]
    assert o["trainer.total_training_steps"] == plan.train.steps == (60000 - 3000) // 1536
