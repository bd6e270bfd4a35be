"""The resolver: presets, the whole minimum-card table sweep, rules, time formula, rounding, die pairs, pins."""

from __future__ import annotations

import json
import math
import re

import pytest
from helpers import check_layout_rules, make_spec, note_lines, table_cells

from generator.errors import SpecError
from generator.render.core import plan_json
from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()


def plan_of(**fields):
    return resolve(make_spec(**fields), T)


def sweep_cases():
    """Every non-'-' cell of the table for MindSpeed-LLM and LLaMA-Factory (each method, seq_len, platform; pretrain
    on the full rows), the seed-003 presets for MindFormers, and every MindFormers model on both platforms."""
    cases = {(*cell, fw) for fw in ("mindspeed-llm", "llama-factory") for cell in table_cells(T, fw)}
    for p in T.presets:
        for method in p.methods:
            cases.add((p.model, method, p.seq_len, p.hardware, "mindformers"))
    for name in T.frameworks["mindformers"].models:
        for method in T.frameworks["mindformers"].methods_for(name):
            for hw in ("snt9b", "snt9b23"):
                cases.add((name, method, 4096, hw, "mindformers"))
    return sorted(cases)


SWEEP = sweep_cases()


@pytest.mark.parametrize("case", SWEEP, ids=lambda c: "-".join(map(str, c)))
def test_sweep_plans_obey_every_rule(case):
    model, method, seq, hw, framework = case
    plan = plan_of(model=model, method=method, seq_len=seq, hardware=hw, frameworks=[framework])
    check_layout_rules(plan, framework)
    # The global batch is the method's target unless no layout tiles it, and then the plan says so.
    target, lay = T.recipes[method].values["global_batch_size"]["value"], plan.frameworks[framework].layout
    batch = plan.train.global_batch_size
    if lay.source == "search" and (lay.cards > 1 or T.frameworks[framework].one_card_accumulation):
        assert batch == target or any(w.startswith(f"global batch moved from {target} to {batch} samples: no ")
                                      for w in plan.warnings), (batch, plan.warnings)
    row_method = "full" if method == "pretrain" else method
    column = "mindspeed-llm" if framework == "mindformers" else framework
    rows = [r for r in T.rows_for(model, column) if row_method in r.methods and seq in r.seq_lens]
    if rows and rows[0].cards[hw] is not None and framework != "mindformers":
        table_min = rows[0].cards[hw]
        assert plan.frameworks[framework].layout.cards >= max(table_min, 2 if hw == "snt9b23" else 1)


def test_sweep_covers_the_table():
    assert len(SWEEP) > 400
    assert ("qwen3-32b", "pretrain", 8192, "snt9b23", "mindspeed-llm") in SWEEP
    assert ("gemma3-27b", "full", 8192, "snt9b", "llama-factory") in SWEEP


# Seed 003 appendix tables: (model, method) -> (cards, dp, mp, pp, micro_batch_num, recompute).
SEED_003 = {
    ("qwen3-32b", "full"): (16, 1, 4, 4, 4, "full"), ("qwen3-32b", "pretrain"): (16, 1, 4, 4, 4, "full"),
    ("qwen3-14b", "full"): (8, 1, 8, 1, 1, "full"), ("qwen3-8b", "full"): (8, 1, 8, 1, 1, "none"),
    ("qwen3-4b", "full"): (8, 1, 8, 1, 1, "none"), ("qwen3-1.7b", "full"): (8, 1, 8, 1, 1, "none"),
    ("qwen3-0.6b", "full"): (8, 1, 8, 1, 1, "none"), ("qwen3-32b", "lora"): (8, 1, 8, 1, 1, "full"),
    ("qwen3-14b", "lora"): (8, 1, 8, 1, 1, "full"), ("qwen3-8b", "lora"): (8, 1, 8, 1, 1, "none"),
    ("qwen3-4b", "lora"): (8, 1, 8, 1, 1, "none"), ("qwen3-1.7b", "lora"): (8, 1, 8, 1, 1, "none"),
    ("qwen3-0.6b", "lora"): (8, 1, 8, 1, 1, "none"),
}


@pytest.mark.parametrize("key", sorted(SEED_003), ids=lambda k: "-".join(k))
def test_seed_003_presets_come_out_exactly(key):
    cards, dp, mp, pp, mbn, recompute = SEED_003[key]
    plan = plan_of(model=key[0], method=key[1], frameworks=["mindformers"])
    lay = plan.frameworks["mindformers"].layout
    assert (lay.cards, lay.dp, lay.tp, lay.pp, lay.grad_accum, lay.recompute) == (cards, dp, mp, pp, mbn, recompute)
    # Sequence parallel as the seed's validated commands ran: on for fine-tuning (finetune_qwen3.yaml l. 101),
    # off for pretraining (pretrain_qwen3_32b_4k.yaml l. 92) (issue 10, defect 10).
    assert lay.micro_batch_size == 1 and lay.sequence_parallel is (key[1] != "pretrain")
    assert lay.source.startswith("preset: validated")


def test_qwen3_32b_pretrain_preset_keeps_upstream_offset():
    lay = plan_of(model="qwen3-32b", method="pretrain", frameworks=["mindformers"]).frameworks["mindformers"].layout
    assert lay.num_layer_list == (15, 15, 17, 17)  # upstream offset [-1, -1, 1, 1]


def test_preset_only_on_exact_match():
    # 32 cards is not the preset's 16: the search decides.
    lay = plan_of(model="qwen3-32b", cards=32, frameworks=["mindformers"]).frameworks["mindformers"].layout
    assert lay.source == "search"


def test_snt9b23_single_die_minimum_becomes_a_pair():
    plan = plan_of(model="llama3.2-1b", method="lora", hardware="snt9b23", frameworks=["llama-factory"])
    fp = plan.frameworks["llama-factory"]
    assert fp.min_cards.value == 2 and fp.layout.cards == 2


def test_below_one_node_keeps_the_minimum_and_says_one_node_is_normal():
    plan = plan_of(model="qwen2.5-7b", method="full", frameworks=["mindspeed-llm"])
    assert plan.frameworks["mindspeed-llm"].layout.cards == 4
    assert any("below one node" in n for n in plan.notes)


def test_time_budget_rounds_to_multiple_of_8_then_whole_nodes():
    # qwen3-8b full with a measured 1000 tokens/s/card: 1e10 tokens in 24 h needs 1e10/(86400*1000*0.9) = 128.6
    plan = plan_of(model="qwen3-8b", frameworks=["mindspeed-llm"], data={"total_tokens": 10**10},
                   time_budget_hours=24, tokens_per_card_s=1000, scaling_efficiency=0.9)
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.estimate.budget_cards == math.ceil(1e10 / (24 * 3600 * 1000 * 0.9)) == 129
    assert fp.layout.cards == 136  # next multiple of 8
    assert fp.estimate.time_hours == pytest.approx(1e10 / (1000 * 136 * 0.9) / 3600)
    assert fp.estimate.time_hours <= 24
    a3 = plan_of(model="qwen3-8b", hardware="snt9b23", frameworks=["mindspeed-llm"], data={"total_tokens": 10**10},
                 time_budget_hours=24, tokens_per_card_s=1000, scaling_efficiency=0.9)
    assert a3.frameworks["mindspeed-llm"].layout.cards == 144  # 136 -> whole 16-die nodes


def test_time_budget_never_below_the_minimum():
    plan = plan_of(model="qwen3-32b", frameworks=["mindspeed-llm"], data={"total_tokens": 1000},
                   time_budget_hours=100)
    assert plan.frameworks["mindspeed-llm"].layout.cards == 16


def test_predicted_time_without_budget():
    plan = plan_of(model="qwen3-8b", frameworks=["mindspeed-llm"], data={"samples": 1000, "tokens_per_sample": 1000,
                                                                          "epochs": 2}, tokens_per_card_s=500)
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.estimate.total_tokens == 2_000_000
    assert fp.estimate.time_hours == pytest.approx(2e6 / (500 * fp.layout.cards) / 3600)


def test_frameworks_keep_their_own_card_counts_and_top_level_is_the_largest():
    plan = plan_of(model="qwen2.5-7b", method="full")
    cards = {name: fp.layout.cards for name, fp in plan.frameworks.items()}
    assert cards["mindspeed-llm"] == 4 and cards["llama-factory"] == 8
    assert plan.cards == max(cards.values()) and plan.to_json()["cards"] == 8


def test_pinned_layout_is_kept_and_completed():
    plan = plan_of(model="qwen3-32b", frameworks=["mindspeed-llm"], layout={"mindspeed-llm": {"tp": 8, "pp": 2}})
    lay = plan.frameworks["mindspeed-llm"].layout
    assert (lay.tp, lay.pp, lay.dp) == (8, 2, 1) and lay.sequence_parallel and lay.source == "pinned"


def test_pinned_pp_that_does_not_divide_layers_gets_a_layer_list():
    plan = plan_of(model="qwen3-14b", frameworks=["mindspeed-llm"], cards=24,
                   layout={"mindspeed-llm": {"tp": 8, "pp": 3}})
    lay = plan.frameworks["mindspeed-llm"].layout
    assert lay.num_layer_list == (13, 13, 14) and lay.uneven_layers


def test_a_pinned_layout_that_does_not_fit_is_refused_unless_forced(spec_file):
    # Issue 14: 214.7 GiB pinned on a 58 GiB card was a warning and render exited 0. Now exit 2 with the breakdown
    # and the layout that fits on the same cards; --force keeps the pin with the warning.
    from click.testing import CliRunner

    from generator.cli import main
    spec = {"job": "j", "model": "qwen3-32b", "method": "full", "seq_len": 4096, "hardware": "snt9b",
            "frameworks": ["mindspeed-llm"], "layout": {"mindspeed-llm": {"tp": 1, "pp": 2}}}
    with pytest.raises(SpecError) as refused:
        resolve(make_spec(**{k: v for k, v in spec.items() if k != "job"}), T)
    message = str(refused.value)
    assert "layout.mindspeed-llm: tp=1 pp=2" in message and "GiB per card (weights" in message
    assert "without the pins, tp=" in message and "--force to keep them" in message
    path = spec_file(spec)
    assert CliRunner().invoke(main, ["render", str(path), "-o", str(path.parent / "out")]).exit_code == 2
    assert not (path.parent / "out").exists()
    forced = resolve(make_spec(**{k: v for k, v in spec.items() if k != "job"}), T, force=True)
    assert forced.warnings and "may not fit" in forced.warnings[0]


@pytest.mark.parametrize("pins,path,text", [
    ({"tp": 3}, "layout.mindspeed-llm.tp", "TP (3) must divide the 64 attention heads of qwen3-32b"),
    ({"tp": 8, "pp": 3}, "layout.mindspeed-llm.pp", "TP (8) x PP (3) x CP (1) = 24 must divide the 16 cards"),
    ({"pp": 65}, "layout.mindspeed-llm.pp", "PP (65) exceeds the 64 layers of qwen3-32b"),
    ({"cp": 2}, "layout.mindspeed-llm.cp", "CP (2) is for long sequences (> 8192); seq_len is 4096"),
])
def test_pinned_rule_breaks_are_errors_naming_the_rule(pins, path, text):
    with pytest.raises(SpecError) as info:
        plan_of(model="qwen3-32b", frameworks=["mindspeed-llm"], layout={"mindspeed-llm": pins})
    assert (path, text) in [(p.path, p.message) for p in info.value.problems]


def test_llama_factory_pins_are_data_parallel_only():
    with pytest.raises(SpecError) as info:
        plan_of(model="qwen3-8b", frameworks=["llama-factory"], layout={"llama-factory": {"tp": 2}})
    assert info.value.problems[0].path == "layout.llama-factory.tp"


def test_force_accepts_below_minimum_and_flags_it():
    spec = make_spec(model="qwen3-32b", frameworks=["mindspeed-llm"], cards=8)
    with pytest.raises(SpecError):
        resolve(spec, T)
    plan = resolve(spec, T, force=True)
    assert plan.frameworks["mindspeed-llm"].forced and any("FORCED" in n for n in plan.notes)


def test_a_dash_cell_is_the_tables_silence_and_the_memory_model_decides(tmp_path):
    # The table's '-' for LLaMA-Factory full fine-tuning of Llama-3.1-8B gives no count; it was read as "not
    # supported on any platform" and refused without --force.
    import json

    import yaml

    from generator.frameworks.llama_factory.checks import llamafactory_problems
    from generator.render import render_files
    plan = resolve(make_spec(model="llama3.1-8b", frameworks=["llama-factory"]), T)
    fp = plan.frameworks["llama-factory"]
    assert not fp.forced and fp.min_cards.case == "memory model (the table gives no count)"
    assert any("the table is silent for snt9b (min_cards.csv line 9" in n for n in plan.notes)
    assert fp.layout.fits and not fp.layout.offload and fp.layout.cards == fp.min_cards.value > 1
    check_layout_rules(plan, "llama-factory")
    files = render_files(plan)
    assert "memory model (the table gives no count)" in files["PLAN.md"]
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    ds = json.loads(files[f"llama-factory/{train['deepspeed']}"])
    assert train["finetuning_type"] == "full" and train["template"] == "llama3"
    assert llamafactory_problems(train, ds, fp.layout.cards, fp.layout.global_batch_size) == []
    # A defaulted framework list keeps LLaMA-Factory too.
    assert "llama-factory" in plan_of(model="llama3.1-8b").frameworks


def test_llama_factory_is_offered_for_llama_31_70b():
    # LLaMA-Factory trains the Llama 3 family up to 70B (template llama3); the table's column never lists it.
    plan = plan_of(model="llama3.1-70b")
    fp = plan.frameworks["llama-factory"]
    assert fp.min_cards.case == "memory model (no table row)" and fp.layout.fits and not fp.layout.offload
    assert fp.layout.zero_stage == 3 and fp.info["template"] == "llama3"
    check_layout_rules(plan, "llama-factory")


def test_models_table_shows_silence_as_mem():
    from generator.resolve import minimum_table
    rows = {(r["model"], r["framework"]): r for r in minimum_table(T, 4096)}
    assert rows[("llama3.1-8b", "llama-factory")]["full/snt9b"] == "mem"
    assert rows[("llama3.1-70b", "llama-factory")]["lora/snt9b"] == "mem"


def test_no_table_row_uses_the_memory_model():
    plan = plan_of(model="debug-tiny", frameworks=["mindspeed-llm"])
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.min_cards.case == "memory model (no table row)" and fp.layout.cards == 1


def test_seq_len_between_rows_uses_the_next_larger():
    plan = plan_of(model="qwen3-32b", seq_len=6144, frameworks=["mindspeed-llm"])
    assert plan.frameworks["mindspeed-llm"].min_cards.case == "next larger seq_len row"
    long = plan_of(model="qwen3-32b", seq_len=16384, frameworks=["mindspeed-llm"])
    fp = long.frameworks["mindspeed-llm"]
    assert fp.min_cards.case == "largest seq_len row"
    check_layout_rules(long, "mindspeed-llm")


def test_rejected_candidates_carry_their_rule():
    plan = plan_of(model="qwen3-32b", frameworks=["mindspeed-llm"])
    reasons = [r.reason for r in plan.rejected]
    assert any(r.startswith("memory:") for r in reasons)
    assert all(r.framework == "mindspeed-llm" and r.layout for r in plan.rejected)


def test_gbs_divisibility_is_respected():
    plan = plan_of(model="qwen3-8b", frameworks=["mindspeed-llm"], global_batch_size=96)
    lay = plan.frameworks["mindspeed-llm"].layout
    assert lay.global_batch_size == 96 and 96 % (lay.micro_batch_size * lay.dp) == 0


def test_dataset_advice_from_seed_001():
    plan = plan_of(model="qwen3-32b", method="lora", data={"samples": 20000, "tokens_per_sample": 512})
    assert any("about 80000 good samples" in n for n in plan.notes)


def test_plan_json_has_the_fixed_keys():
    data = plan_of(model="qwen3-8b", data={"total_tokens": 10**9}).to_json()
    for key in ("job", "model", "method", "seq_len", "hardware", "cards", "nodes", "cards_per_node", "min_cards",
                "estimate", "frameworks", "rejected", "notes"):
        assert key in data
    assert set(data["min_cards"]) >= {"value", "source"}
    assert set(data["estimate"]) >= {"total_tokens", "tokens_per_card_s", "tps_source", "time_hours"}
    for fw in data["frameworks"].values():
        assert set(fw) >= {"cards", "nodes", "tp", "pp", "dp", "cp", "ep", "micro_batch_size", "global_batch_size",
                           "grad_accum", "recompute", "sequence_parallel", "zero_stage", "offload",
                           "memory_per_card_gib", "source"}


def test_dataset_format_a_framework_cannot_read():
    # MindFormers' upstream fine-tuning recipes read alpaca only: named, it is an error; defaulted, it is left out.
    with pytest.raises(SpecError) as info:
        plan_of(model="qwen3-8b", method="lora", frameworks=["mindformers"],
                paths={"dataset": "/d.jsonl", "dataset_format": "sharegpt"})
    assert (info.value.problems[0].path, info.value.problems[0].message) == (
        "frameworks.0", "mindformers fine-tuning reads alpaca data, not sharegpt (paths.dataset_format)")
    plan = plan_of(model="qwen3-8b", method="lora", paths={"dataset": "/d.jsonl", "dataset_format": "sharegpt"})
    assert set(plan.frameworks) == {"mindspeed-llm", "llama-factory"}
    assert "mindformers left out: mindformers fine-tuning reads alpaca data, not sharegpt (paths.dataset_format)" \
        in note_lines(plan.notes)


def test_no_pipeline_stage_holds_only_deepseeks_dense_layers():
    # MindSpeed-LLM asserts first_k_dense_replace < layers // PP at start-up; the search found it by ranking layouts
    # by speed (PP 16 puts 3 of DeepSeek-V3's 61 layers, all dense, on the first stage).
    plan = plan_of(model="deepseek-v3", frameworks=["mindspeed-llm"])
    lay = plan.frameworks["mindspeed-llm"].layout
    assert 61 // lay.pp > 3
    with pytest.raises(SpecError, match=r"layout.mindspeed-llm.pp: PP \(16\) leaves a stage of only the first 3"):
        plan_of(model="deepseek-v3", frameworks=["mindspeed-llm"], cards=lay.cards,
                layout={"mindspeed-llm": {"pp": 16}})


def test_a_budget_job_with_pins_names_the_final_count():
    # Issue 14: pinning tp1 pp16 for a 70B budget job was refused with "must divide the 168 cards", an intermediate
    # count; counts the pins cannot tile are passed over and the notes name the count that fell short.
    plan = plan_of(model="llama3.1-70b", method="full", frameworks=["mindspeed-llm"],
                   data={"total_tokens": 5 * 10**10}, time_budget_hours=168,
                   layout={"mindspeed-llm": {"tp": 1, "pp": 16}})
    fp = plan.frameworks["mindspeed-llm"]
    assert (fp.layout.tp, fp.layout.pp, fp.layout.cards) == (1, 16, 336) and fp.estimate.time_hours <= 168
    assert any("320 cards fall short" in n and "336 cards are the fewest that meet it" in n for n in plan.notes)


def test_the_global_batch_stays_the_target_when_cards_change():
    # 128 samples per step on 128 dies; 144 dies used to move it silently to 144 (and 2048 cards to 2048): a layout
    # that tiles 128 is searched for first, and where none does the plan warns with both values.
    kept = plan_of(model="qwen3-8b", hardware="snt9b23", cards=128)
    assert kept.train.global_batch_size == 128 and not batch_warnings(kept)
    for fp in kept.frameworks.values():
        assert fp.layout.global_batch_size == 128
    moved = plan_of(model="qwen3-8b", hardware="snt9b23", cards=144, frameworks=["mindspeed-llm", "llama-factory"])
    assert moved.train.global_batch_size == 144
    assert any(w.startswith("global batch moved from 128 to 144 samples: no llama-factory layout that fits on 144 "
                            "cards tiles 128") for w in moved.warnings)
    assert "moved to 144" in moved.train.origin["global_batch_size"]


def batch_warnings(plan) -> list[str]:
    """The plan's warnings but the placeholder step count's (these specs give no data size)."""
    return [w for w in plan.warnings if not w.startswith("train.steps: the spec gives no data size")]


@pytest.mark.parametrize("model,cards", [("llama3.1-70b", 768), ("qwen2.5-72b", 1536), ("qwen3-32b", 96)])
def test_deep_pipelines_do_not_inflate_the_batch(model, cards):
    # Pretraining at 512 sequences per step: a pipeline's own minimum (PP 12 on 768 cards) set 2,048, 4,096 or 528.
    plan = plan_of(model=model, method="pretrain", cards=cards, frameworks=["mindspeed-llm"])
    lay = plan.frameworks["mindspeed-llm"].layout
    assert plan.train.global_batch_size == lay.global_batch_size == 512 and not batch_warnings(plan)
    assert (lay.pp - 1) / lay.grad_accum <= 0.25


def test_few_steps_and_a_long_warmup_are_warned():
    # 80,000 samples on 2,048 cards: the batch moves to 2,048 (one sample per card), so 40 steps.
    plan = plan_of(model="qwen3-8b", cards=2048, frameworks=["llama-factory"],
                   data={"samples": 80000, "tokens_per_sample": 2048})
    assert plan.train.global_batch_size == 2048 and plan.train.steps == 40
    assert any(w.startswith("global batch moved from 128 to 2048 samples") for w in plan.warnings)
    assert any(w.startswith("40 optimizer steps at a global batch of 2048: fewer than about 100")
               for w in plan.warnings)
    warm = plan_of(model="qwen3-8b", cards=8, frameworks=["mindspeed-llm"], global_batch_size=128,
                   data={"samples": 128000, "tokens_per_sample": 1024}, train={"warmup_steps": 800})
    assert warm.train.steps == 1000
    assert any(w.startswith("warmup covers 800 of the 1000 steps") for w in warm.warnings)


def test_a_time_budget_prefers_card_counts_that_tile_the_batch():
    # 40 cards met a 10 h budget by moving LLaMA-Factory's batch to 160 without a word; counts that tile 128 come
    # first, and the plan says which it passed over.
    plan = plan_of(model="qwen3-8b", frameworks=["llama-factory"], time_budget_hours=10,
                   data={"total_tokens": 2_000_000_000})
    lay = plan.frameworks["llama-factory"].layout
    assert (lay.cards, plan.train.global_batch_size) == (64, 128) and not plan.warnings
    assert "llama-factory: time budget: 40, 48, 56 cards passed over: no layout there tiles the global batch of " \
           "128" in note_lines(plan.notes)
    assert plan.frameworks["llama-factory"].estimate.time_hours <= 10


def test_a_role_kind_is_typed_and_plan_json_keeps_its_name():
    # Issue 24: Role.kind was a str the resolver turned back into a RoleKind; it is the RoleKind, written as its name.
    from generator.frameworks.contract import RoleKind
    plan = resolve(make_spec(cards=8, frameworks=["mindspeed-llm"], method="lora"), T)
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.primary.kind is RoleKind.TRAIN and list(fp.roles) == ["train"]
    assert list(fp.to_json()["roles"]) == ["train"] and "kind" not in fp.to_json()["roles"]["train"]


def test_a_table_minimum_above_the_memory_model_is_kept_and_noted():
    # Issue 26 item 5: Qwen3-235B full fine-tuning with MindSpeed-LLM on snt9b: the seed's table says 256 cards; the
    # memory model fits it on fewer. The plan keeps the table's count, as its minimum too, and says how to use fewer.
    fields = dict(model="qwen3_moe-235b_a22b", method="full", seq_len=4096, hardware="snt9b",
                  frameworks=["mindspeed-llm"])
    plan = plan_of(**fields)
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.min_cards.value == fp.layout.cards == 256 and "min_cards.csv line 81" in fp.min_cards.source
    data = json.loads(plan_json(plan))
    assert data["min_cards"]["value"] == data["frameworks"]["mindspeed-llm"]["min_cards"]["value"] == 256
    assert any("more than the memory model needs" in n for n in note_lines(data["notes"]))
    [note] = [str(n) for n in plan.notes if "more than the memory model needs" in n]
    fewer = int(re.search(r"set cards: (\d+) and pass --force", note).group(1))
    assert fewer < 256 and f"fits on {fewer} cards" in note
    # The advice works: that count plans a layout that fits (with --force: it is below the table's minimum).
    forced = resolve(make_spec(**fields, cards=fewer), T, force=True).frameworks["mindspeed-llm"]
    assert forced.layout.cards == fewer and forced.layout.fits
    # The spec's own count, or a minimum within one node (seed 000's whole node), gets no such note.
    assert not any("more than the memory model needs" in n for n in plan_of(**fields, cards=256).notes)
    small = plan_of(model="qwen3-8b", method="lora", seq_len=8192, hardware="snt9b23", frameworks=["mindspeed-llm"])
    assert small.frameworks["mindspeed-llm"].min_cards.value == 8
    assert not any("more than the memory model needs" in n for n in small.notes)


def test_a_table_minimum_above_the_memory_model_is_noted_under_a_time_budget_too():
    # Review of issue 26: with a time budget the note was skipped, though the budget search starts at the table's
    # count: Qwen3-235B full, 1e10 tokens, 168 h planned the table's 256 cards at 31.7 h and said nothing of fewer.
    plan = plan_of(model="qwen3_moe-235b_a22b", method="full", seq_len=4096, hardware="snt9b",
                   frameworks=["mindspeed-llm"], data={"total_tokens": 10**10}, time_budget_hours=168)
    fp = plan.frameworks["mindspeed-llm"]
    assert fp.layout.cards == fp.min_cards.value == 256 and fp.estimate.time_hours < 168
    [note] = [str(n) for n in plan.notes if "more than the memory model needs" in n]
    fewer = int(re.search(r"set cards: (\d+) and pass --force", note).group(1))
    assert fewer < 256
