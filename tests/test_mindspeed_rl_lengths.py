"""Issue 38 (c): MindSpeed-RL's prompt / response split. Where the spec's seq_len holds upstream's prompt + response
the plan follows upstream's split with its source; at upstream's own max_model_len where its prompt + response
overflow it (grpo_deepseek_r1_671b_A2: 8196 + 2048 > 10240) it keeps upstream's response and the prompt that fits;
below, the lengths rule (prompt at most half of seq_len) with the reason on PLAN.md."""

from __future__ import annotations

import pytest
import yaml
from helpers import render_job

from generator.frameworks.mindspeed_rl.checks import key_problems
from generator.frameworks.mindspeed_rl.examples import example, facts
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"
# The platform an upstream config runs on: _A2 on snt9b (Atlas 800T A2), _A3 on snt9b23 (docs/algorithms/grpo.md l. 91)
PLATFORM = {"A2": "snt9b", "A3": "snt9b23"}
FOLLOWED = sorted({(method, model, hardware) for method, rows in facts().items() if method in ("grpo", "dapo", "ppo")
                   for model, row in rows.items()
                   for hardware in {PLATFORM[row["config"].rsplit("_", 1)[1]], *row.get("by_hardware", {})}})


def rendered(tmp_path, method: str, model: str, hardware: str, seq_len: int, cards: int):
    paths = {"model_dir": "/m/hf", "dataset": "/d/train.parquet", "output_dir": str(tmp_path / "out")}
    plan, files = render_job(T, frameworks=[NAME], model=model, method=method, hardware=hardware, cards=cards,
                             seq_len=seq_len, data={"samples": 17000, "tokens_per_sample": 400}, paths=paths)
    config = yaml.safe_load(files[f"{NAME}/config/{plan.frameworks[NAME].settings.config_name}.yaml"])
    return config, files["PLAN.md"]


def split(config: dict) -> tuple[int, int, int]:
    gen = config["generate_config"]
    return config["rl_config"]["max_prompt_length"], gen["sampling_config"]["max_tokens"], gen["max_model_len"]


@pytest.mark.parametrize(("method", "model", "hardware"), FOLLOWED)
def test_at_upstreams_own_length_the_plan_splits_as_upstream(tmp_path, method, model, hardware):
    ex = example(method, model, hardware)
    assert ex is not None
    prompt, tokens = ex.get("rl_config.max_prompt_length"), ex.get("generate_config.sampling_config.max_tokens")
    context = ex.get("generate_config.max_model_len")
    config, text = rendered(tmp_path, method, model, hardware, context, ex.get("rl_config.actor_resource.num_npus"))
    assert key_problems(config) == []
    if prompt + tokens <= context:
        assert split(config) == (prompt, tokens, context)
        assert f"configs/{ex.name}.yaml l. {ex.values['rl_config.max_prompt_length'][1]} (seq_len {context} holds " \
               f"upstream's prompt + response" in text
    else:  # upstream's prompt + response overflow its own max_model_len: its response, the prompt that fits
        assert ex.name == "grpo_deepseek_r1_671b_A2" and (prompt, tokens, context) == (8196, 2048, 10240)
        assert split(config) == (8192, 2048, 10240)
        assert "upstream's max_prompt_length 8196" in text and "overflow its own max_model_len 10240" in text


def test_below_upstreams_prompt_and_response_the_rule_halves_and_plan_md_says_why(tmp_path):
    config, text = rendered(tmp_path, "grpo", "deepseek-v3", "snt9b", 4096, 256)
    assert split(config) == (2048, 2048, 4096)
    assert "at most half of seq_len 4096" in text and "below upstream's prompt + response 8196 + 2048" in text


def test_a_longer_sequence_keeps_upstreams_prompt_and_gives_the_response_the_rest(tmp_path):
    # 16384 holds 8196 + 2048: upstream's prompt, the response the rest (the rule alone capped the prompt at 8192)
    config, _ = rendered(tmp_path, "grpo", "deepseek-v3", "snt9b", 16384, 256)
    assert split(config) == (8196, 16384 - 8196, 16384)


def test_dynamic_batching_packs_the_rl_familys_token_limit_where_upstream_turns_it_on(tmp_path):
    # (b) grpo_deepseek_r1_671b_A2 turns use_dynamic_bsz on with max_packing_token_size 10240, which v2.3.0 copies
    # into the reference's, actor's and update's limits before it reads the config (rl_config.py l. 139-142, 180):
    # each is written, at 2 x (prompt + response) (families/rl/batching.py).
    config, text = rendered(tmp_path, "grpo", "deepseek-v3", "snt9b", 10240, 256)
    assert key_problems(config) == []
    rl = config["rl_config"]
    assert rl["use_dynamic_bsz"] is True
    assert [rl[f"{kind}max_packing_token_size"] for kind in ("", "ref_", "actor_", "update_")] == [2 * 10240] * 4
    row = next(line for line in text.splitlines() if "`rl_config.update_max_packing_token_size`" in line)
    assert "2 x (prompt + response) = 20480" in row and "the example's is 10240" in row and "l. 139-142" in row
    # A config that leaves it off (grpo_deepseek_r1_671b_A3: max_packing_token_size 4096 alone) keeps upstream's.
    config, _ = rendered(tmp_path / "a3", "grpo", "deepseek-v3", "snt9b23", 3072, 256)
    assert "use_dynamic_bsz" not in config["rl_config"] and config["rl_config"]["max_packing_token_size"] == 4096
    assert not {"ref_max_packing_token_size", "update_max_packing_token_size"} & set(config["rl_config"])
