"""Issue 36b (b): every key an upstream verl script sets, as the examples table carries it, reaches the override
file with the script's value, or PLAN.md says why not (the override's source gives the reason it differs, or a note
names the key). Each script the frameworks table pins (a model's NPU and GPU columns) is planned as its own job: its
cards, prompt and response lengths."""

from __future__ import annotations

import json

import pytest

from generator.frameworks.verl.examples import examples
from generator.frameworks.verl.planning import EXAMPLE_KEYS, FSDP_SIZE
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

TABLES = load_tables()
A = "actor_rollout_ref."
# examples.yaml key -> the override that carries it (the table's header names them); the rest of the table's keys
# are EXAMPLE_KEYS, carried as they are.
OVERRIDE = {
    "train_batch_size": "data.train_batch_size", "gen_batch_size": "data.gen_batch_size",
    "prompt_length": "data.max_prompt_length", "response_length": "data.max_response_length",
    "mini_batch_size": A + "actor.ppo_mini_batch_size", "micro_batch_size": A + "actor.ppo_micro_batch_size_per_gpu",
    "log_prob_micro_batch_size": A + "rollout.log_prob_micro_batch_size_per_gpu",
    "dynamic_bsz": A + "actor.use_dynamic_bsz", "lr": A + "actor.optim.lr",
    "remove_padding": A + "model.use_remove_padding", "use_kl_loss": A + "actor.use_kl_loss",
    "kl_coef": A + "actor.kl_loss_coef", "clip_ratio_low": A + "actor.clip_ratio_low",
    "clip_ratio_high": A + "actor.clip_ratio_high", "sp": A + "actor.ulysses_sequence_parallel_size",
    "param_offload": A + "actor.fsdp_config.param_offload",
    "optimizer_offload": A + "actor.fsdp_config.optimizer_offload",
    "rollout_tp": A + "rollout.tensor_model_parallel_size",
    "gpu_memory_utilization": A + "rollout.gpu_memory_utilization",
    "n": A + "rollout.n", "chunked_prefill": A + "rollout.enable_chunked_prefill",
    "max_num_batched_tokens": A + "rollout.max_num_batched_tokens", "enforce_eager": A + "rollout.enforce_eager",
    "critic_lr": "critic.optim.lr", "nnodes": "trainer.nnodes", "gpus_per_node": "trainer.n_gpus_per_node",
    "filter_groups": "algorithm.filter_groups.enable", "overlong_buffer_len": "reward_model.overlong_buffer.len",
    "lr_warmup_steps": A + "actor.optim.lr_warmup_steps", "max_token_len": A + "actor.ppo_max_token_len_per_gpu",
    "total_epochs": "trainer.total_epochs", "total_training_steps": "trainer.total_training_steps",
    "fsdp_size": FSDP_SIZE, "critic_gradient_checkpointing": "critic.model.enable_gradient_checkpointing",
    "critic_micro_batch_size": "critic.ppo_micro_batch_size_per_gpu",
    **{example_key: key for key, example_key in EXAMPLE_KEYS}}
PINNED = sorted((model, column, script) for model, row in TABLES.frameworks["verl"].models.items()
                for column, script in row.items() if column != "decoder" and script
                # PPO on a vision-language model is refused (tests/test_rl_semantics.py): no job to hold keys
                and not (column.startswith("ppo") and TABLES.model(model).vision_params_b > 0))


def test_the_table_pins_every_example_and_names_every_key():
    assert {script for _, _, script in PINNED} == set(examples())
    assert {key for ex in examples().values() for key in ex.values} <= {*OVERRIDE, "reward"}


@pytest.mark.parametrize(("model", "column", "script"), PINNED)
def test_each_key_the_example_sets_is_written_as_upstream_or_said_why_not(model, column, script):
    ex = examples()[script]
    values = {key: value for key, (value, _) in ex.values.items()}
    gpu = column.endswith("_gpu")
    per_node = values.get("gpus_per_node", 8)
    hardware = "h800" if gpu else next(hw.name for hw in TABLES.hardware.values() if hw.accelerator == "npu"
                                        and hw.cards_per_node == per_node)
    seq_len = -(-(values["prompt_length"] + values["response_length"]) // 256) * 256  # a multiple of 256
    spec = {"job": "rl", "model": model, "method": column.removesuffix("_gpu"), "seq_len": seq_len,
            "hardware": hardware, "frameworks": ["verl"], "cards": values.get("nnodes", 1) * per_node,
            "data": {"samples": 60000, "tokens_per_sample": 1024}, "rl": {"prompt_length": values["prompt_length"]}}
    plan = resolve(parse_spec(json.dumps(spec).encode()), TABLES, force=True)
    settings = plan.frameworks["verl"].settings
    assert settings.upstream.startswith(script)
    written = {item.key: item for item in settings.overrides}
    notes = " ".join(note.text for note in plan.notes)
    for key, (value, line) in ex.values.items():
        cited = f"upstream {script} l. {line} (v0.7.0 (f9c855f7))"
        if key == "reward":  # the data's rule reward, in the data-preparation settings
            assert any(f"rl.reward {value}: {cited}" in item.source for item in settings.prepare), key
            continue
        if key == "response_length":  # the rest of a seq_len rounded up to the schema's multiple of 256
            value = seq_len - values["prompt_length"]
        item = written.get(OVERRIDE[key])
        if item is None:
            assert OVERRIDE[key] in notes, f"{key}: {OVERRIDE[key]} is neither written nor named in the notes"
        elif item.value != value:
            # a value of the plan's own, its source saying why from the example's, or another upstream script's
            # for the model (a VL job's engine settings: the VL example's)
            own = item.source.startswith(("derived:", "plan:")) and cited in item.source
            other = item.source.startswith("upstream ") and not item.source.startswith(f"upstream {script} ")
            assert own or other, (key, value, item)


def _gpu_plan(model: str, method: str, seq_len: int):
    spec = {"job": "rl", "model": model, "method": method, "seq_len": seq_len, "hardware": "h800",
            "frameworks": ["verl"], "data": {"samples": 60000, "tokens_per_sample": 1024}}
    plan = resolve(parse_spec(json.dumps(spec).encode()), TABLES)
    return plan, {item.key: item for item in plan.frameworks["verl"].settings.overrides}


def test_verls_gpu_scripts_fused_kernels_and_cache_engine_reach_the_files():
    _, written = _gpu_plan("qwen2.5_vl-7b", "grpo", 3072)
    script = "upstream examples/grpo_trainer/run_qwen2_5_vl-7b.sh"
    assert (written[A + "model.use_fused_kernels"].value, written[A + "model.use_fused_kernels"].source) == \
        (True, f"{script} l. 17 (v0.7.0 (f9c855f7))")
    assert (written[A + "rollout.free_cache_engine"].value, written[A + "rollout.free_cache_engine"].source) == \
        (True, f"{script} l. 34 (v0.7.0 (f9c855f7))")


def test_the_32b_ppo_critic_keeps_checkpointing_and_the_plan_says_why():
    plan, written = _gpu_plan("qwen2.5-32b", "ppo", 2048)
    assert written["critic.model.enable_gradient_checkpointing"].value is True
    note = next(note for note in plan.notes if note.code == "verl.critic_checkpointing")
    assert "examples/ppo_trainer/run_qwen2.5-32b.sh l. 37" in note.text and "the plan keeps it on" in note.text
