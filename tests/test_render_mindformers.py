"""MindFormers renderer: train.yaml against upstream's keys and MindFormers' rules, launch.sh and commands.txt,
across every model, platform and method MindFormers is offered for."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import check_script, flat_keys, render_job

from generator.errors import UserError
from generator.frameworks.mindformers.checks import mindformers_problems
from generator.tables import SERVING_METHODS, load_tables

T = load_tables()
UPSTREAM = Path(__file__).parent / "data" / "upstream" / "mindformers"

def sweep():
    fw = T.frameworks["mindformers"]
    return [(model, method, hw) for model in fw.models if model != "debug-tiny"
            for method in fw.methods_for(model) if method not in SERVING_METHODS  # predict: test_mindformers_predict.py
            for hw in ("snt9b", "snt9b23")]


def msrun_args(launch: str) -> list[str]:
    """WORKER_NUM LOCAL_WORKER ... from the msrun_launcher.sh line of launch.sh."""
    tail = launch.split("bash scripts/msrun_launcher.sh ", 1)[1].split("\n", 1)[1]
    return tail.replace("\\", " ").split()


@pytest.mark.parametrize("case", sweep(), ids=lambda c: "-".join(c))
def test_train_yaml_obeys_mindformers_rules(case, tmp_path):
    model_name, method, hw = case
    plan, files = render_job(T, model=model_name, method=method, hardware=hw, frameworks=["mindformers"])
    lay, model = plan.frameworks["mindformers"].layout, plan.shape
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    pc, rc = doc["parallel_config"], doc["recompute_config"]
    assert mindformers_problems(doc, lay.cards, model) == []
    assert "pp_interleave_num" not in pc  # V13
    for required in (doc["trainer"], doc["optimizer"], doc["lr_schedule"], doc["runner_wrapper"],
                     doc["train_dataset_task"], *doc["callbacks"]):
        assert "type" in required
    cp = pc.get("context_parallel", 1)
    world = pc["data_parallel"] * pc["model_parallel"] * cp * pc["pipeline_stage"]
    assert world == lay.cards  # V1
    mc = doc["model"]["model_config"]
    assert model.heads % pc["model_parallel"] == 0 and model.kv_heads % pc["model_parallel"] == 0  # V5, V6
    if pc["pipeline_stage"] > 1:
        assert pc["micro_batch_num"] >= pc["pipeline_stage"]  # V3
        assert doc["runner_config"]["gradient_accumulation_steps"] == 1
    if pc["use_seq_parallel"]:
        assert pc["model_parallel"] > 1  # V8
    offset = mc["offset"]
    if isinstance(offset, list):  # V12
        assert len(offset) == pc["pipeline_stage"] and sum(offset) == model.layers % pc["pipeline_stage"]
        assert all(model.layers // pc["pipeline_stage"] + o >= 1 for o in offset)
    else:
        assert offset == 0 and model.layers % pc["pipeline_stage"] == 0
    # The plan's usable memory: the card's 58GB, or less where the model's upstream recipe caps it (DeepSeek-V3: 56GB).
    assert doc["context"]["max_device_memory"] == f"{lay.usable_gb:g}GB" and lay.usable_gb <= 58
    assert rc["recompute"] == (lay.recompute == "full")
    # Global batch: batch_size x micro_batch_num x GA x dp (MindFormers base_trainer) equals the plan's.
    rcfg = doc["runner_config"]
    assert rcfg["batch_size"] * pc["micro_batch_num"] * rcfg["gradient_accumulation_steps"] * pc["data_parallel"] \
        == lay.global_batch_size
    data = doc["train_dataset"]
    if "parallel" in doc and doc["parallel"].get("full_batch") is False:  # V17
        strategy = doc["parallel"]["dataset_strategy"]
        assert len(strategy) == len(data["input_columns"]) and strategy[0][0] == pc["data_parallel"]
    # V25: one seq_length everywhere.
    seqs = {int(v) for v in re.findall(r"seq_length: (\d+)", files["mindformers/train.yaml"])}
    assert seqs == {plan.seq_len}
    handlers = data["data_loader"].get("handler", [])
    assert all(h["type"] != "take" for h in handlers)  # never silently cut the data set
    if method == "lora":
        assert mc["pet_config"]["pet_type"] == "lora" and mc["pet_config"]["lora_rank"] > 0
    else:
        assert "pet_config" not in mc
    if model.is_moe:
        assert pc["expert_parallel"] == lay.ep
    launch = files["mindformers/launch.sh"]
    check_script(launch, tmp_path)
    if lay.cards > 1:
        worker, local = msrun_args(launch)[:2]
        assert int(worker) == world and int(local) == min(lay.cards, lay.cards_per_node)
        assert ("export DEVICE_NUM_PER_NODE=16" in launch) == (hw == "snt9b23")
    assert doc["use_parallel"] == (lay.cards > 1)


def test_seed_003_configs_reproduced_exactly_in_the_yaml():
    # seed 003 appendix: (model, method) -> parallel_config and recompute. use_seq_parallel is True for fine-tuning:
    # the seed's validated commands ran finetune_qwen3.yaml (use_seq_parallel: True) unchanged (issue 10, defect 10).
    expected = {
        ("qwen3-32b", "full"): dict(data_parallel=1, model_parallel=4, pipeline_stage=4, micro_batch_num=4,
                                    use_seq_parallel=True, gradient_aggregation_group=1, recompute=True),
        ("qwen3-32b", "lora"): dict(data_parallel=1, model_parallel=8, pipeline_stage=1, micro_batch_num=1,
                                    use_seq_parallel=True, gradient_aggregation_group=1, recompute=True),
        ("qwen3-14b", "full"): dict(data_parallel=1, model_parallel=8, pipeline_stage=1, micro_batch_num=1,
                                    use_seq_parallel=True, gradient_aggregation_group=1, recompute=True),
        ("qwen3-8b", "full"): dict(data_parallel=1, model_parallel=8, pipeline_stage=1, micro_batch_num=1,
                                   use_seq_parallel=True, gradient_aggregation_group=1, recompute=False),
        ("qwen3-0.6b", "lora"): dict(data_parallel=1, model_parallel=8, pipeline_stage=1, micro_batch_num=1,
                                     use_seq_parallel=True, gradient_aggregation_group=1, recompute=False),
    }
    for (model, method), want in expected.items():
        _, files = render_job(T, model=model, method=method, frameworks=["mindformers"])
        doc = yaml.safe_load(files["mindformers/train.yaml"])
        recompute = want.pop("recompute")
        assert doc["parallel_config"] == want, (model, method)
        assert doc["recompute_config"] == {"recompute": recompute, "select_recompute": False,
                                           "parallel_optimizer_comm_recompute": True, "mp_comm_recompute": True}
        assert doc["context"]["max_device_memory"] == "58GB"


def upstream(name):
    return yaml.safe_load((UPSTREAM / name).read_text(encoding="utf-8"))


def keys(doc) -> set[str]:
    """Key paths, leaving out the copy that the *train_dataset alias makes under train_dataset_task."""
    return {k for k in flat_keys(doc) if not k.startswith("train_dataset_task.dataset_config.")}


def test_finetune_key_tree_matches_upstream_qwen3():
    _, files = render_job(T, model="qwen3-32b", method="full", frameworks=["mindformers"])
    ours = yaml.safe_load(files["mindformers/train.yaml"])
    theirs = upstream("configs__qwen3__finetune_qwen3.yaml")
    assert list(ours) == list(theirs)  # same top-level keys, same order
    added = keys(ours) - keys(theirs)
    removed = keys(theirs) - keys(ours)
    # lr_end: the plan's cosine floor (upstream's constant schedule has none; issue 13's recipe)
    assert added == {"runner_config.sink_mode", "runner_config.sink_size", "train_dataset.data_loader.data_files",
                     "model.model_config.seq_length", "lr_schedule.lr_end", "runner_wrapper.max_grad_norm"}
    assert removed == {"train_dataset.data_loader.handler[].n"}  # the `take` handler that cuts the data


def test_pretrain_key_tree_matches_upstream_qwen3_32b():
    _, files = render_job(T, model="qwen3-32b", method="pretrain", frameworks=["mindformers"])
    ours = yaml.safe_load(files["mindformers/train.yaml"])
    theirs = upstream("configs__qwen3__pretrain_qwen3_32b_4k.yaml")
    # pretrained_model_dir: continued pretraining from the HF weights (issue 10, defect 9).
    assert [k for k in ours if k != "pretrained_model_dir"] == list(theirs)
    # Its continued-pretraining schedule is upstream's ConstantWarmUpLR (issue 23 item 4): no lr_end.
    assert keys(ours) - keys(theirs) == {"runner_config.sink_mode", "runner_config.sink_size", "pretrained_model_dir",
                                         "runner_wrapper.max_grad_norm"}
    assert ours["lr_schedule"] == {**theirs["lr_schedule"], "total_steps": ours["lr_schedule"]["total_steps"]}
    assert keys(theirs) - keys(ours) == set()
    mc, up = ours["model"]["model_config"], theirs["model"]["model_config"]
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "offset", "tie_word_embeddings"):
        assert mc[key] == up[key], key
    assert ours["parallel_config"] == theirs["parallel_config"]


@pytest.mark.parametrize("model,name", [("llama3.1-8b", "research__llama3_1__llama3_1_8b__finetune_llama3_1_8b.yaml"),
                                        ("qwen2.5-7b", "research__qwen2_5__finetune_qwen2_5_7b_8k.yaml")])
def test_research_layout_keeps_upstream_sections(model, name):
    _, files = render_job(T, model=model, method="full", seq_len=8192, frameworks=["mindformers"])
    ours = yaml.safe_load(files["mindformers/train.yaml"])
    theirs = upstream(name)
    assert set(theirs) - {"src_strategy_path_or_dir"} <= set(ours)
    mc = ours["model"]["model_config"]
    for key in ("hidden_size", "num_layers", "num_heads", "n_kv_heads", "vocab_size", "seq_length", "rms_norm_eps"):
        assert mc[key] == theirs["model"]["model_config"][key], key
    assert ours["model"]["arch"] == theirs["model"]["arch"]


def test_untied_flag_follows_the_model():
    _, tied = render_job(T, model="qwen3-0.6b", method="full", frameworks=["mindformers"])
    mc = yaml.safe_load(tied["mindformers/train.yaml"])["model"]["model_config"]
    assert mc["untie_embeddings_and_output_weights"] is False  # Qwen3-0.6B ties its embeddings


def test_single_card_runs_python_directly(tmp_path):
    plan, files = render_job(T, model="debug-tiny", method="full", frameworks=["mindformers"], cards=1)
    launch = files["mindformers/launch.sh"]
    assert "bash scripts/msrun_launcher.sh" not in launch
    assert 'python run_mindformer.py --config "$CONFIG" --run_mode train --use_parallel False' in launch
    assert yaml.safe_load(files["mindformers/train.yaml"])["use_parallel"] is False
    check_script(launch, tmp_path)


def test_commands_run_each_nodes_launch():
    plan, files = render_job(T, model="qwen3-32b", method="full", frameworks=["mindformers"], cards=32)
    lines = [l for l in files["mindformers/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert len(lines) == plan.frameworks["mindformers"].layout.nodes == 4
    assert lines == [f'bash "${{JOB_DIR:?}}/launch.sh" {rank} "$MASTER_ADDR"' for rank in range(4)]


HOSTILE = "/data/my model/it's \"q\" $(touch pwned) `id` ünï"


def fake_mindformers(root: Path) -> Path:
    """A MindFormers checkout whose msrun_launcher.sh builds and evals the command like upstream's, and an `msrun`
    and python that record the arguments they get."""
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "msrun_launcher.sh").write_text(
        '#!/bin/bash\n'
        'WORKER_NUM=$2; LOCAL_WORKER=$3; MASTER_ADDR=$4; MASTER_PORT=$5; NODE_RANK=$6; LOG_DIR=$7; JOIN=$8; '
        'CLUSTER_TIME_OUT=$9\n'
        'MSRUN_CMD="msrun --bind_core=True --worker_num=$WORKER_NUM --local_worker_num=$LOCAL_WORKER '
        '--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT --node_rank=$NODE_RANK --log_dir=$LOG_DIR '
        '--join=$JOIN --cluster_time_out=$CLUSTER_TIME_OUT"\n'
        'eval "$MSRUN_CMD $1"\n')
    bindir = root / "bin"
    bindir.mkdir()
    recorder = '#!/usr/bin/env python3\nimport json, os, sys\n' \
               'open(os.environ["RECORD"], "a").write(json.dumps(sys.argv[1:]) + "\\n")\n'
    for name in ("msrun", "python"):
        (bindir / name).write_text(recorder)
        (bindir / name).chmod(0o755)
    return bindir


@pytest.mark.parametrize("cards", [16, 1])
def test_launch_passes_hostile_paths_as_one_literal_argument(tmp_path, cards):
    from generator.render import write
    checkout = tmp_path / "mf $(x) 'dir'"
    bindir = fake_mindformers(checkout)
    fields = dict(model="qwen3-32b" if cards > 1 else "debug-tiny", method="full", frameworks=["mindformers"],
                  cards=cards, paths={"mindformers_dir": str(checkout), "model_dir": "/m", "dataset": "/d.json",
                                      "output_dir": str(tmp_path / "o")})
    plan, files = render_job(T, **fields)
    out = tmp_path / HOSTILE.lstrip("/").replace("/", "_")
    write(files, out, plan.job, overwrite=False)
    job_dir = out / plan.job
    record = tmp_path / "record.jsonl"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": str(record), "MASTER_ADDR": "10.0.0.9"}
    result = subprocess.run(["bash", str(job_dir / "mindformers" / "launch.sh"), "0"], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text().splitlines()[0])
    config = str((job_dir / "mindformers" / "train.yaml").resolve())
    assert argv[argv.index("--config") + 1] == config
    if cards > 1:
        assert "--worker_num=16" in argv and "--node_rank=0" in argv and "--master_addr=10.0.0.9" in argv
    assert not (tmp_path / "pwned").exists()


def test_launch_refuses_a_bad_node_rank_and_placeholders(tmp_path):
    from generator.render import write
    plan, files = render_job(T, model="qwen3-32b", method="full", frameworks=["mindformers"])
    write(files, tmp_path, plan.job, overwrite=False)
    script = tmp_path / plan.job / "mindformers" / "launch.sh"
    env = {**os.environ, "MASTER_ADDR": "10.0.0.9"}
    for bad in ("", "x", "2", "-1"):
        result = subprocess.run(["bash", str(script), bad], env=env, capture_output=True, text=True)
        assert result.returncode == 2 and ("usage" in result.stderr or "out of range" in result.stderr)
    result = subprocess.run(["bash", str(script), "0"], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "paths.model_dir is the placeholder" in result.stderr
    no_addr = {k: v for k, v in os.environ.items() if k != "MASTER_ADDR"}
    result = subprocess.run(["bash", str(script), "0"], env=no_addr, capture_output=True, text=True)
    assert result.returncode != 0 and "MASTER_ADDR" in result.stderr
    # An option-like second word is not an address (it reached msrun as --master_addr=--); a third is refused.
    for args, message in ((["1", "--"], "MASTER_ADDR: must be a host name or IPv4 address"),
                          (["1", "10.0.0.9", "x"], "unexpected argument(s): x")):
        result = subprocess.run(["bash", str(script), *args], env=no_addr, capture_output=True, text=True)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_hostile_values_are_inert_in_the_yaml():
    _, files = render_job(T, model="qwen3-8b", method="lora", frameworks=["mindformers"],
                          paths={"model_dir": HOSTILE, "dataset": "/x: y #z", "output_dir": "/o: 'p'"})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["pretrained_model_dir"] == HOSTILE
    assert doc["train_dataset"]["data_loader"]["data_files"] == "/x: y #z"
    assert doc["output_dir"] == "/o: 'p'/mindformers"


@pytest.mark.parametrize("model,deepseek", [("deepseek-v3", True), ("qwen3-32b", False)])
def test_deepseek_recipe_extras_follow_the_data(model, deepseek):
    _, files = render_job(T, model=model, method="lora", frameworks=["mindformers"], cards=64)
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["train_dataset"]["data_loader"]["create_attention_mask"] is deepseek
    assert ({"type": "TopkBiasBalanceCallback"} in doc["callbacks"]) is deepseek


# ----------------------------------------------------------------------------------------------------------------
# Issue 10, defects 6-11: MindFormers' own rules (generator/frameworks/mindformers/checks.py cites each upstream line).


def rules_broken(doc, cards, model):
    return {p.split("(")[-1].split(";")[0] for p in mindformers_problems(doc, cards, model)}


def test_moe_with_context_parallel_keeps_ep_inside_dp_times_mp():
    # Defect 6: 32 cards at 16K got dp16 cp2 ep32; MindFormers needs (dp x mp) % ep == 0, cp not counted
    # (moe/ffn.py l. 189-195).
    plan, files = render_job(T, model="qwen3_moe-30b_a3b", method="full", seq_len=16384, hardware="snt9b",
                             cards=32, frameworks=["mindformers"], layout={"mindformers": {"cp": 2, "ep": 8}})
    lay, model = plan.frameworks["mindformers"].layout, plan.shape
    assert lay.cp == 2 and lay.ep == 8 and (lay.dp * lay.tp) % lay.ep == 0
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert mindformers_problems(doc, lay.cards, model) == []
    doc["parallel_config"].update(data_parallel=16, model_parallel=1, context_parallel=2, expert_parallel=32,
                                  pipeline_stage=1)
    assert "N1" in rules_broken(doc, 32, model)
    with pytest.raises(UserError, match=r"EP \(32\) must divide DP 16 x TP 1 = 16"):
        render_job(T, model="qwen3_moe-30b_a3b", method="full", seq_len=16384, cards=32, frameworks=["mindformers"],
                   layout={"mindformers": {"cp": 2, "ep": 32, "tp": 1, "pp": 1}})


def test_one_card_has_no_gradient_accumulation_so_the_plan_says_so():
    # Defect 7: --use_parallel False resets gradient accumulation to 1 (base_trainer.py l. 320-327).
    plan, files = render_job(T, model="debug-tiny", method="full", cards=1, global_batch_size=8,
                             frameworks=["mindformers"])
    lay = plan.frameworks["mindformers"].layout
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["use_parallel"] is False and doc["runner_config"]["gradient_accumulation_steps"] == 1
    assert doc["runner_config"]["batch_size"] == lay.global_batch_size == lay.micro_batch_size == 8
    assert any("no gradient accumulation" in n for n in plan.notes)
    doc["runner_config"].update(batch_size=1, gradient_accumulation_steps=8)
    assert "N7" in rules_broken(doc, 1, plan.shape)


def test_deepseek_mtp_layer_is_counted_on_the_last_stage():
    # Defect 8: the MTP layer (num_nextn_predict_layers 1) sits on the last stage; it gets fewer decoder layers and
    # the memory model counts the MTP layer and its logits there.
    plan, files = render_job(T, model="deepseek-v3", method="lora", frameworks=["mindformers"])
    lay = plan.frameworks["mindformers"].layout
    assert lay.num_layer_list[-1] < max(lay.num_layer_list) and sum(lay.num_layer_list) == 61
    assert lay.fits and lay.memory.total <= lay.budget_gb
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["model"]["model_config"]["num_nextn_predict_layers"] == 1
    assert mindformers_problems(doc, lay.cards, plan.shape) == []
    from dataclasses import replace

    from generator.layouts import split_layers
    from generator.memory import MemoryJob, estimate
    assert lay.mtp_layers == 1
    job = MemoryJob(plan.shape, "lora", "megatron-fp32", 4096, plan.train.adapter.rank, 3.0)
    chosen = estimate(job, lay)
    # The split that ignores MTP leaves the last stage a full share of layers plus the MTP layer: the heaviest.
    naive = estimate(job, replace(lay, num_layer_list=split_layers(61, lay.pp)))
    assert naive.stage == lay.pp - 1 and naive.total > chosen.total


def test_pretraining_loads_the_same_weights_in_both_frameworks():
    # Defect 9: MindFormers pretraining started from random weights while MindSpeed-LLM loaded the HF weights.
    plan, files = render_job(T, model="qwen3-32b", method="pretrain", cards=16,
                             frameworks=["mindformers", "mindspeed-llm"], paths={"model_dir": "/m/Qwen3-32B"})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["pretrained_model_dir"] == "/m/Qwen3-32B" and doc["auto_trans_ckpt"] is True
    assert mindformers_problems(doc, 16, plan.shape) == []
    assert "--auto_trans_ckpt True" in files["mindformers/launch.sh"]
    assert "hf2mcore" in files["mindspeed-llm/convert_ckpt.sh"]
    assert files["PLAN.md"].count("continues from the HuggingFace weights") == 2
    pre = files["mindformers/preprocess_data.sh"]
    assert "preprocess_indexed_dataset.py" in pre and "--tokenizer-dir /m/Qwen3-32B" in pre
    prefix = doc["train_dataset"]["data_loader"]["config"]["data_path"][1]
    assert prefix.endswith("_text_document") and f"--output-prefix {prefix[:-len('_text_document')]}" in pre


def test_sequence_parallel_choice_is_stated_counted_and_pinnable():
    # Defect 10: seed 003's table says False, its validated commands ran True.
    plan, files = render_job(T, model="qwen3-32b", method="full", cards=16, frameworks=["mindformers"])
    lay = plan.frameworks["mindformers"].layout
    assert lay.sequence_parallel and yaml.safe_load(files["mindformers/train.yaml"])["parallel_config"][
        "use_seq_parallel"] is True
    assert any("sequence parallel on" in n for n in plan.notes) and "sequence parallel on" in files["PLAN.md"]
    pinned, files = render_job(T, model="qwen3-32b", method="full", cards=16, frameworks=["mindformers"],
                               layout={"mindformers": {"sequence_parallel": False}})
    off = pinned.frameworks["mindformers"].layout
    assert off.preset_level and not off.sequence_parallel and off.memory.activations > lay.memory.activations
    assert yaml.safe_load(files["mindformers/train.yaml"])["parallel_config"]["use_seq_parallel"] is False
    pretrain, _ = render_job(T, model="qwen3-32b", method="pretrain", cards=16, frameworks=["mindformers"])
    assert not pretrain.frameworks["mindformers"].layout.sequence_parallel  # pretrain_qwen3_32b_4k.yaml l. 92


@pytest.mark.parametrize("model", ["qwen2.5-7b", "llama3.1-8b"])
def test_research_layout_builds_its_mindrecord_at_the_job_seq_len(model):
    # Defect 11: upstream's recipe builds the MindRecord at 8192 / 32768; the job's seq_len must be used.
    plan, files = render_job(T, model=model, method="full", seq_len=4096, frameworks=["mindformers"],
                             paths={"dataset": "/d/alpaca.json", "output_dir": "/o"})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    pre = files["mindformers/preprocess_data.sh"]
    assert "--seq_length 4096" in pre and "--output_file /o/mindformers/data/t.mindrecord" in pre
    assert doc["train_dataset"]["data_loader"]["dataset_dir"] == "/o/mindformers/data/t.mindrecord"
    assert doc["load_ckpt_format"] == "safetensors" and doc["auto_trans_ckpt"] is True
    assert mindformers_problems(doc, plan.frameworks["mindformers"].layout.cards, plan.shape) == []
    assert "preprocess_data.sh" in files["PLAN.md"]


def test_recompute_list_longer_than_the_pipeline_is_refused():
    # V14 (check_rules.py l. 293-297): MindFormers refuses a per-stage recompute list longer than pipeline_stage.
    plan, files = render_job(T, model="qwen3-32b", method="full", cards=16, frameworks=["mindformers"])
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    doc["recompute_config"]["recompute"] = [1, 1, 1, 1, 1]
    assert "V14" in rules_broken(doc, 16, plan.shape)
    doc["recompute_config"]["recompute"] = [1, 1, 1, 1]
    assert "V14" not in rules_broken(doc, 16, plan.shape)


# ----------------------------------------------------------------------------------------------------------------
# Issue 23: what MindFormers trains from the generated file.

# The router keys of Qwen3-MoE's HuggingFace config.json (huggingface.co/Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B,
# config.json: the same router; no routed_scaling_factor, so no scaling).
QWEN3_MOE_ROUTER = {"norm_topk_prob": True, "num_experts_per_tok": 8, "num_experts": 128, "router_aux_loss_coef": 0.001}


def merged_model_config(doc: dict, hf_config: dict) -> dict:
    """The model config MindFormers builds: the checkpoint's config.json with the YAML's model_config laid on top
    (mindformers 2.1.0 models/build_config.py l. 125-136, merge_model_config)."""
    assert doc["pretrained_model_dir"]
    merged = dict(hf_config)
    merged.update(doc["model"]["model_config"])
    return merged


@pytest.mark.parametrize("model", ["qwen3_moe-30b_a3b", "qwen3_moe-235b_a22b"])
@pytest.mark.parametrize("method", ["pretrain", "full"])
def test_moe_router_is_the_checkpoints_when_its_weights_load(model, method):
    # Item 1: continued pretraining wrote upstream's from-scratch router (norm_topk_prob False, routed_scaling_factor
    # 1.5 with pre-softmax), which overrides config.json and changes the loaded model's routing.
    plan, files = render_job(T, model=model, method=method, frameworks=["mindformers"])
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    merged = merged_model_config(doc, QWEN3_MOE_ROUTER)
    assert {k: merged[k] for k in QWEN3_MOE_ROUTER} == QWEN3_MOE_ROUTER
    # routed_scaling_factor -> moe_router_topk_scaling_factor (config_converter_qwen3_moe.py l. 32): HF has none.
    assert not {"routed_scaling_factor", "moe_router_pre_softmax", "moe_router_topk_scaling_factor"} & set(merged)
    assert mindformers_problems(doc, plan.frameworks["mindformers"].layout.cards, plan.shape) == []


def speed_up_path(doc: dict):
    """What MindSpore reads: context.ascend_config.parallel_speed_up_json_path (relative to the MindFormers root)."""
    return ((doc.get("context") or {}).get("ascend_config") or {}).get("parallel_speed_up_json_path")


@pytest.mark.parametrize("model,method,theirs", [
    ("qwen3-8b", "full", "configs__qwen3__finetune_qwen3.yaml"),
    ("qwen3-32b", "pretrain", "configs__qwen3__pretrain_qwen3_32b_4k.yaml"),
    ("qwen3_moe-30b_a3b", "pretrain", "configs__qwen3_moe__pretrain_qwen3_30b_a3b_4k.yaml"),
    ("qwen3_moe-30b_a3b", "full", "configs__qwen3_moe__pretrain_qwen3_30b_a3b_4k.yaml"),
    ("deepseek-v3", "lora", "configs__deepseek3__finetune_deepseek3_671b.yaml")])
def test_parallel_speed_up_file_is_the_models_own(model, method, theirs):
    # Item 15: Qwen3-MoE and DeepSeek-V3 pointed at configs/qwen3/parallel_speed_up.json. Each model's upstream
    # config names its own file (qwen3_moe's), or none (DeepSeek-V3 671B sets no ascend_config).
    _, files = render_job(T, model=model, method=method, frameworks=["mindformers"], cards=64)
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert speed_up_path(doc) == speed_up_path(upstream(theirs))


def mindformers_global_batch(doc: dict) -> int:
    """The global batch MindFormers trains (trainer/base_trainer.py l. 201-283, full_batch False): batch_size x
    micro_batch_num x gradient_accumulation_steps x data_parallel (stand-alone: batch_size alone)."""
    rc, pc = doc["runner_config"], doc["parallel_config"]
    if not doc["use_parallel"]:
        return rc["batch_size"]
    return rc["batch_size"] * pc["micro_batch_num"] * rc["gradient_accumulation_steps"] * pc["data_parallel"]


@pytest.mark.parametrize("model,method,cards", [("qwen3-8b", "full", None), ("qwen3-32b", "full", None),
                                                ("qwen3-0.6b", "lora", None), ("debug-tiny", "full", 1)])
def test_plan_states_the_global_batch_mindformers_trains(model, method, cards):
    # Item 13: a Qwen3 preset planned for MindFormers alone trains the preset's batch (1 for Qwen3-8B) while the
    # recipe table said "a round number near 128 samples".
    _, files = render_job(T, model=model, method=method, cards=cards, frameworks=["mindformers"])
    trained = mindformers_global_batch(yaml.safe_load(files["mindformers/train.yaml"]))
    train = json.loads(files["plan.json"])["train"]
    assert train["global_batch_size"] == trained
    why = train["origin"]["global_batch_size"]
    assert "near" not in why and ("preset" in why or "one card" in why)


@pytest.mark.parametrize("epochs", [2, 1.5])
def test_epoch_sized_fine_tune_states_the_steps_mindformers_counts(epochs):
    # Item 15: PLAN.md said 1250 steps and a checkpoint every 200, while MindFormers, counting global batches of
    # packed sequences, ran 156 steps and so saved no checkpoint before the end.
    plan, files = render_job(T, model="qwen3-8b", method="full", frameworks=["mindformers", "mindspeed-llm"],
                             data={"samples": 80000, "tokens_per_sample": 512, "epochs": epochs})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    # MindFormers' count: PackingHandler fills seq_length sequences (at best tokens / seq_len of them), the loader
    # drops the last partial global batch (drop_remainder True), runner_config.epochs passes, TrainCallBack stops.
    sequences = math.ceil(80000 * 512 / doc["model"]["model_config"]["seq_length"])
    per_pass = sequences // mindformers_global_batch(doc)
    counted = math.ceil(epochs * per_pass)
    assert doc["runner_config"]["epochs"] == math.ceil(epochs)
    stop = next((c["stop_step"] for c in doc["callbacks"] if c["type"] == "TrainCallBack"), None)
    assert stop in (None, counted) and (stop is None) == (epochs == int(epochs))
    assert plan.train.steps > 4 * counted  # the plan's count over unpacked samples
    assert f"about {counted} steps for {epochs:g} epochs" in files["PLAN.md"]
    every = next(c["save_checkpoint_steps"] for c in doc["callbacks"] if c["type"] == "CheckpointMonitor")
    assert f"checkpoint every {every} of them" in files["PLAN.md"]
    # as many checkpoints in the run as the plan gives the other frameworks
    assert round(counted / every) == round(plan.train.steps / plan.train.save_every_steps)


def drop_policy(value):
    """MindFormers' reading of moe_token_drop_policy (parallel_core/transformer_config_utils.py l. 92-98, 2.1.0)."""
    return ("position" if value else "probs") if isinstance(value, bool) else value


@pytest.mark.parametrize("method", ["lora", "full"])
def test_deepseek_v3_follows_the_671b_recipe(method):
    # Item 13: the YAML followed upstream's 12B smoke test (finetune_deepseek3_12b_16p_pp16.yaml): aux-loss 0.001,
    # router-bias rate 1e-3 (the default), MTP loss at its default weight, no mask compression.
    plan, files = render_job(T, model="deepseek-v3", method=method, frameworks=["mindformers"])
    ours = yaml.safe_load(files["mindformers/train.yaml"])["model"]["model_config"]
    theirs = upstream("configs__deepseek3__finetune_deepseek3_671b.yaml")["model"]["model_config"]
    layout = {"offset", "pp_interleave_num"}  # the plan's pipeline (no interleave); initializer_range: weights load
    for key in set(theirs) - layout - {"initializer_range"}:
        normal = drop_policy if key == "moe_token_drop_policy" else (lambda v: v)
        assert normal(ours.get(key)) == normal(theirs[key]), key
    assert "configs/deepseek3/finetune_deepseek3_671b.yaml" in files["mindformers/train.yaml"].split("\n", 3)[1]
    assert mindformers_problems(yaml.safe_load(files["mindformers/train.yaml"]),
                                plan.frameworks["mindformers"].layout.cards, plan.shape) == []


def test_deepseek_v3_memory_and_parallel_keys_follow_the_671b_recipe():
    # Item 13: the layout and memory keys followed neither upstream's 671B recipe nor its memory cap: max_device_memory
    # was the card's 58GB against the recipe's 56GB, and the parallel optimizer was off, its states unsharded.
    plan, files = render_job(T, model="deepseek-v3", method="full", frameworks=["mindformers"], cards=512,
                             data={"samples": 50000, "tokens_per_sample": 1024})
    ours = yaml.safe_load(files["mindformers/train.yaml"])
    theirs = upstream("configs__deepseek3__finetune_deepseek3_671b.yaml")
    assert mindformers_problems(ours, 512, plan.shape) == []
    # The same as upstream: the memory cap and pool block (l. 90-91), the parallel optimizer (l. 116, 123-126), and
    # the parallel context around them.
    for key in ("max_device_memory", "mempool_block_size", "mode", "memory_optimize_level"):
        assert ours["context"][key] == theirs["context"][key], key
    for key in ("enable_parallel_optimizer", "parallel_optimizer_config", "parallel_mode", "enable_alltoall",
                "search_mode"):
        assert ours["parallel"][key] == theirs["parallel"][key], key
    # The cap is the plan's budget too: it never plans more than the file lets MindSpore use.
    fw = json.loads(files["plan.json"])["frameworks"]["mindformers"]
    assert f"{fw['usable_gib']}GB" == theirs["context"]["max_device_memory"]
    assert fw["memory_per_card_gib"] <= fw["budget_gib"] == pytest.approx(fw["usable_gib"] * 0.9)
    assert "l. 90" in fw["usable_cap"]
    # The plan's own: the layout for 512 cards (upstream's is 256), so DP, EP, micro batches and the layer split
    # differ; the states split over each weight's data-parallel group, as the memory model counts them.
    lay = plan.frameworks["mindformers"].layout
    assert ours["parallel_config"]["data_parallel"] == lay.dp != theirs["parallel_config"]["data_parallel"]
    assert fw["parallel_optimizer"] == {"optimizer_weight_shard_size": 256,
                                        "states_split": {"dense": lay.dp * lay.cp,
                                                         "expert": lay.dp * lay.cp * lay.tp // lay.ep}}
    # Not followed, and PLAN.md says so with the reason: the interleaved seqpipe pipeline and optimizer swap.
    assert "pipeline_config" not in ours["parallel"] and "pp_interleave_num" not in ours["model"]["model_config"]
    assert theirs["parallel"]["pipeline_config"]["pipeline_interleave"] and theirs["optimizer"]["swap"]
    assert "swap" not in ours["optimizer"]
    text = " ".join(files["PLAN.md"].split())
    assert "interleaves its pipeline (pp_interleave_num 2 with the seqpipe scheduler" in text
    assert "keeps the AdamW states in host memory" in text and "does not set" in text
    assert "splits them over each weight's data-parallel group" in text


def test_models_without_an_upstream_memory_cap_keep_the_cards_own():
    _, files = render_job(T, model="qwen3-8b", method="full", frameworks=["mindformers"])
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    usable = T.hardware["snt9b"].usable_gb
    assert doc["context"]["max_device_memory"] == f"{usable:g}GB" and "mempool_block_size" not in doc["context"]
    assert doc["parallel"]["enable_parallel_optimizer"] is False and "parallel_optimizer_config" not in doc["parallel"]
    fw = json.loads(files["plan.json"])["frameworks"]["mindformers"]
    assert "usable_cap" not in fw and "parallel_optimizer" not in fw


def test_parallel_optimizer_config_keys_are_mindspores():
    # MindSpore's set_auto_parallel_context refuses any other key (_auto_parallel_context.py l. 1041-1048); the
    # deepseek-v3 plan writes upstream's three.
    plan, files = render_job(T, model="deepseek-v3", method="full", frameworks=["mindformers"], cards=512)
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert mindformers_problems(doc, 512, plan.shape) == []
    doc["parallel"]["parallel_optimizer_config"]["optimizer_shard_size"] = 8
    assert any("(N10;" in p for p in mindformers_problems(doc, 512, plan.shape))


def test_plan_json_holds_the_run_length_train_yaml_writes():
    # Issue 24: MindFormers' count over packed data (epochs 3, 73243 steps, a checkpoint every 2930) was decided in
    # its renderer; plan.json said steps 500000 and a checkpoint every 20000 and nothing of MindFormers' own.
    _, files = render_job(T, model="qwen3-8b", method="lora", frameworks=["mindformers"],
                          data={"samples": 200000, "tokens_per_sample": 600, "epochs": 2.5})
    run = json.loads(files["plan.json"])["frameworks"]["mindformers"]["run"]
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    stop = next(c["stop_step"] for c in doc["callbacks"] if c["type"] == "TrainCallBack")
    every = next(c["save_checkpoint_steps"] for c in doc["callbacks"] if c["type"] == "CheckpointMonitor")
    written = {"epochs": doc["runner_config"]["epochs"], "total_steps": doc["lr_schedule"]["total_steps"],
               "stop_step": stop, "save_every_steps": every}
    assert written == {key: run[key] for key in written}
    assert written["stop_step"] != json.loads(files["plan.json"])["train"]["steps"]  # MindFormers' own count
    assert "packed data" in run["source"]
