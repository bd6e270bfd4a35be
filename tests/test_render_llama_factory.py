"""LLaMA-Factory renderer over every LLaMA-Factory cell of the minimum-card table: the YAML only uses arguments
LLaMA-Factory 0.9.5 accepts, with the right types; the DeepSpeed JSON agrees with it; launch lines are sane."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.render import write
from generator.tables import load_tables
from generator.checks.llama_factory import llamafactory_parser_check, llamafactory_problems
from helpers import check_script, flat_keys, render_job, table_cells

T = load_tables()
DATA = Path(__file__).parent / "data"
UPSTREAM = DATA / "upstream" / "llamafactory"


def sweep():
    return sorted(table_cells(T, "llama-factory"))


def load_pair(files):
    """(train.yaml, its DeepSpeed JSON or None when it uses no DeepSpeed)."""
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    name = train.get("deepspeed")
    return train, None if name is None else json.loads(files[f"llama-factory/{name}"])


@pytest.mark.parametrize("case", sweep(), ids=lambda c: "-".join(map(str, c)))
def test_yaml_and_deepspeed_json_agree(case, tmp_path):
    model, method, seq, hw = case
    plan, files = render_job(T, model=model, method=method, seq_len=seq, hardware=hw, frameworks=["llama-factory"])
    lay = plan.frameworks["llama-factory"].layout
    train, ds = load_pair(files)
    assert llamafactory_problems(train, ds, lay.cards) == []  # names, types, batch arithmetic, no max_samples
    assert not [f for f in files if f.endswith(".json") and "ds_z" in f and f != f"llama-factory/{train.get('deepspeed')}"]
    if ds is None:  # one card training adapters runs without DeepSpeed (seed 002's single-GPU LoRA rows)
        assert lay.cards == 1 and method == "lora" and lay.zero_stage is None
        assert "| none |" in files["PLAN.md"]  # said in words, not the Megatron frameworks' "-"
        assert train["per_device_train_batch_size"] * train["gradient_accumulation_steps"] == lay.global_batch_size
        return check_script(files["llama-factory/launch.sh"], tmp_path)
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * \
        lay.cards
    assert ds["train_micro_batch_size_per_gpu"] == train["per_device_train_batch_size"]
    assert ds["gradient_accumulation_steps"] == train["gradient_accumulation_steps"]
    assert ds["train_batch_size"] == lay.global_batch_size
    assert ds["gradient_clipping"] == train["max_grad_norm"]
    assert ds["bf16"]["enabled"] is True and train["bf16"] is True and ds["fp16"]["enabled"] is False
    assert ds["zero_optimization"]["stage"] == lay.zero_stage == 3 and isinstance(ds["zero_optimization"]["stage"], int)
    assert train["cutoff_len"] == seq and train["stage"] == "sft"
    assert train["finetuning_type"] == method
    assert isinstance(train["learning_rate"], float)
    assert train["template"] == T.frameworks["llama-factory"].models[model]["template"]
    info = json.loads(files["llama-factory/dataset_info.json"])
    assert train["dataset"] in info and train["dataset_dir"] == "."
    launch = files["llama-factory/launch.sh"]
    check_script(launch, tmp_path)
    assert f"NPROC_PER_NODE={lay.local_cards}" in launch
    assert f"ASCEND_RT_VISIBLE_DEVICES={','.join(map(str, range(lay.local_cards)))}" in launch


def upstream_keys(name: str) -> set[str]:
    return set(yaml.safe_load((UPSTREAM / name).read_text()))


@pytest.mark.parametrize("method,example", [("full", "examples__train_full__qwen3_full_sft.yaml"),
                                            ("lora", "examples__train_lora__qwen3_lora_sft_ds3.yaml")])
def test_key_set_covers_upstream_example(method, example):
    _, files = render_job(T, model="qwen3-8b", method=method, frameworks=["llama-factory"])
    ours = set(yaml.safe_load(files["llama-factory/train.yaml"]))
    assert upstream_keys(example) - {"max_samples"} <= ours


@pytest.mark.parametrize("offload", [False, True])
def test_json_has_upstreams_structure(offload):
    name = "ds_z3_offload_config.json" if offload else "ds_z3_config.json"
    # The table's single card for a full Qwen2-7B fine-tune only fits with offload; 8B on 8 cards fits without.
    model, cards = ("qwen2-7b", 1) if offload else ("qwen3-8b", 8)
    plan, files = render_job(T, model=model, method="full", frameworks=["llama-factory"], cards=cards,
                             global_batch_size=64)
    assert plan.frameworks["llama-factory"].layout.offload is offload
    ours = json.loads(files[f"llama-factory/{name}"])
    theirs = json.loads((UPSTREAM / f"examples__deepspeed__{name}").read_text())
    assert flat_keys(ours) == flat_keys(theirs)
    assert list(ours) == list(theirs) and list(ours["zero_optimization"]) == list(theirs["zero_optimization"])


def test_seed_001_32b_lora_fits_one_node_and_unsharded_does_not():
    plan, files = render_job(T, model="qwen2.5-32b", method="lora", frameworks=["llama-factory"])
    lay = plan.frameworks["llama-factory"].layout
    assert lay.cards == 8 and lay.fits and not lay.offload
    assert plan.shape.params * 2 / 2**30 > lay.usable_gb  # bf16 weights on one card alone do not fit
    assert any("seed 001 check" in n for n in plan.notes)
    assert "% of the 58 GiB usable" in files["PLAN.md"]


def test_gbs_reached_with_micro_batch_and_accumulation():
    plan, files = render_job(T, model="qwen2.5-7b", method="lora", frameworks=["llama-factory"], cards=8,
                             global_batch_size=256, seq_len=1024)
    train, ds = load_pair(files)
    assert ds["train_batch_size"] == 256
    assert train["per_device_train_batch_size"] * train["gradient_accumulation_steps"] * 8 == 256


def test_commands_differ_only_in_node_rank():
    plan, files = render_job(T, model="qwen2.5-32b", method="full", frameworks=["llama-factory"], cards=32,
                             cluster={"master_addr": "10.0.0.1", "master_port": 29500})
    lines = [l for l in files["llama-factory/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert len(lines) == 4
    for rank, line in enumerate(lines):
        assert line == lines[0].replace("NODE_RANK=0 ", f"NODE_RANK={rank} ")
        assert "MASTER_PORT=29500" in line and "NNODES=4" in line


def test_dataset_info_for_each_format():
    _, alpaca = render_job(T, model="qwen3-8b", method="lora", frameworks=["llama-factory"],
                           paths={"dataset": "/d/a b.json"})
    entry = json.loads(alpaca["llama-factory/dataset_info.json"])["t"]
    assert entry["file_name"] == "/d/a b.json" and entry["columns"]["prompt"] == "instruction"
    _, share = render_job(T, model="qwen3-8b", method="lora", frameworks=["llama-factory"],
                          paths={"dataset": "/d/c.jsonl", "dataset_format": "sharegpt"})
    entry = json.loads(share["llama-factory/dataset_info.json"])["t"]
    assert entry["formatting"] == "sharegpt" and entry["columns"]["messages"] == "conversations"


def test_launch_runs_llamafactory_from_its_folder_with_the_right_environment(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "record.json"
    (bindir / "llamafactory-cli").write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'cwd': os.getcwd(), 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n")
    (bindir / "llamafactory-cli").chmod(0o755)
    plan, files = render_job(T, model="qwen2.5-32b", method="full", frameworks=["llama-factory"], cards=16,
                             paths={"model_dir": "/m", "dataset": "/d x.json", "output_dir": "/o"})
    out = tmp_path / "my repo $(x)"
    write(files, out, plan.job, force=False)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "MASTER_ADDR": "10.0.0.2"}
    result = subprocess.run(["bash", str(out / plan.job / "llama-factory" / "launch.sh"), "1"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    got = json.loads(record.read_text())
    assert got["argv"] == ["train", "train.yaml"]
    assert Path(got["cwd"]) == (out / plan.job / "llama-factory").resolve()
    assert {k: got["env"][k] for k in ("FORCE_TORCHRUN", "NNODES", "NODE_RANK", "NPROC_PER_NODE", "MASTER_ADDR",
                                        "MASTER_PORT", "ASCEND_RT_VISIBLE_DEVICES")} == {
        "FORCE_TORCHRUN": "1", "NNODES": "2", "NODE_RANK": "1", "NPROC_PER_NODE": "8", "MASTER_ADDR": "10.0.0.2",
        "MASTER_PORT": "50001", "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


@pytest.mark.integration
@pytest.mark.skipif(not (importlib.util.find_spec("llamafactory") and importlib.util.find_spec("deepspeed")),
                    reason="llamafactory and deepspeed are not installed (pip install llamafactory==0.9.5 deepspeed)")
@pytest.mark.parametrize("fields", [
    dict(model="qwen3-8b", method="lora"),
    dict(model="qwen2.5-32b", method="full", cards=16),
    dict(model="qwen2-7b", method="full", cards=1),  # ZeRO-3 offload
    dict(model="qwen3-8b", method="pretrain"),
    dict(model="glm4-9b", method="lora", paths={"dataset": "/d/chat.jsonl", "dataset_format": "sharegpt"}),
], ids=["lora", "full-16", "offload", "pretrain", "sharegpt"])
def test_llamafactory_and_deepspeed_accept_the_pair(tmp_path, fields):  # pragma: no cover - needs the packages
    plan, files = render_job(T, frameworks=["llama-factory"], **fields)
    write(files, tmp_path, plan.job, force=False)
    folder = tmp_path / plan.job / "llama-factory"
    assert llamafactory_parser_check(folder, plan.frameworks["llama-factory"].layout.cards) == ("ok", "")
