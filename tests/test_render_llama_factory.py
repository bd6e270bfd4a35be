"""LLaMA-Factory renderer over every LLaMA-Factory cell of the minimum-card table: the YAML only uses arguments
LLaMA-Factory 0.9.5 accepts, with the right types; the DeepSpeed JSON agrees with it; launch lines are sane."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import (
    check_script,
    flat_keys,
    hf_deepspeed,
    render_job,
    require,
    table_cells,
)
from llamafactory_exec import environment

from generator.api.notes import with_code
from generator.errors import SpecError
from generator.frameworks.llama_factory.checks import (
    llamafactory_parser_check,
    llamafactory_problems,
)
from generator.render import write
from generator.shell import quote
from generator.tables import load_tables

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
    # names, types, batch arithmetic, no max_samples
    assert llamafactory_problems(train, ds, lay.cards, lay.global_batch_size) == []
    own = f"llama-factory/{train.get('deepspeed')}"
    assert not [f for f in files if f.endswith(".json") and "ds_z" in f and f != own]
    if ds is None:  # one card runs without DeepSpeed (seed 002's single-GPU rows)
        assert lay.cards == 1 and lay.zero_stage is None
        assert "| none |" in files["PLAN.md"]  # said in words, not the Megatron frameworks' "-"
        assert train["per_device_train_batch_size"] * train["gradient_accumulation_steps"] == lay.global_batch_size
        return check_script(files["llama-factory/launch.sh"], tmp_path)
    # Batch, clipping and precision are "auto", as upstream's JSONs: transformers' own reconciliation fills them
    # from the YAML at the planned world size, and they must come out as the plan.
    assert {ds[k] for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                            "gradient_clipping")} | {ds["bf16"]["enabled"], ds["fp16"]["enabled"]} == {"auto"}
    filled = hf_deepspeed(ds, train, lay.cards, plan.shape.hidden)
    assert filled["train_batch_size"] == lay.global_batch_size
    assert (filled["train_micro_batch_size_per_gpu"], filled["gradient_accumulation_steps"]) == \
        (lay.micro_batch_size, lay.grad_accum)
    assert filled["gradient_clipping"] == train["max_grad_norm"]
    assert filled["bf16"]["enabled"] is True and train["bf16"] is True and filled["fp16"]["enabled"] is False
    assert ds["zero_optimization"]["stage"] == lay.zero_stage and isinstance(ds["zero_optimization"]["stage"], int)
    assert flat_keys(ds) == flat_keys(json.loads((UPSTREAM / f"examples__deepspeed__{train['deepspeed']}").read_text()))
    assert train["cutoff_len"] == seq and train["stage"] == "sft"
    assert train["finetuning_type"] == method
    assert isinstance(train["learning_rate"], float)
    assert train["template"] == T.frameworks["llama-factory"].models[model]["template"]
    info = json.loads(files["llama-factory/dataset_info.json"])
    assert train["dataset"] in info and train["dataset_dir"] == "."
    launch = files["llama-factory/launch.sh"]
    check_script(launch, tmp_path)
    assert f"NPROC_PER_NODE={lay.local_cards}" in launch
    assert f"export ASCEND_RT_VISIBLE_DEVICES={quote(','.join(map(str, range(lay.local_cards))))}\n" in launch


def upstream_keys(name: str) -> set[str]:
    return set(yaml.safe_load((UPSTREAM / name).read_text()))


@pytest.mark.parametrize("method,example", [("full", "examples__train_full__qwen3_full_sft.yaml"),
                                            ("lora", "examples__train_lora__qwen3_lora_sft_ds3.yaml")])
def test_key_set_covers_upstream_example(method, example):
    _, files = render_job(T, model="qwen3-8b", method=method, frameworks=["llama-factory"])
    ours = set(yaml.safe_load(files["llama-factory/train.yaml"]))
    # warmup_ratio: deprecated in transformers 5 (training_args.py l. 1511-1513), written as warmup_steps (a share
    # below 1); resume_from_checkpoint: left unset so LLaMA-Factory finds the last checkpoint itself (issue 13).
    assert upstream_keys(example) - {"max_samples", "warmup_ratio", "resume_from_checkpoint"} <= ours
    assert {"warmup_steps"} <= ours


@pytest.mark.parametrize("fields,stage,offload,lighter", [
    # A two-node LoRA job whose bf16 weights fit every card: data parallel, nothing sharded.
    ({"model": "qwen3-8b", "method": "lora", "cards": 16}, 0, False, []),
    # 8B full fine-tuning on one node: ZeRO-0's 18 bytes per parameter do not fit, sharded states do.
    ({"model": "qwen3-8b", "method": "full", "cards": 8}, 2, False, ["ZeRO-0"]),
    # 32B full fine-tuning: the weights must be sharded too.
    ({"model": "qwen3-32b", "method": "full", "cards": 16}, 3, False, ["ZeRO-0", "ZeRO-2"]),
    # one card: no DeepSpeed at all.
    ({"model": "qwen2.5-0.5b", "method": "full", "cards": 1}, None, False, []),
], ids=["lora-2-nodes", "full-8b-8", "full-32b-16", "one-card"])
def test_the_lightest_deepspeed_setting_that_fits(fields, stage, offload, lighter):
    plan, files = render_job(T, frameworks=["llama-factory"], **fields)
    lay = plan.frameworks["llama-factory"].layout
    assert (lay.zero_stage, lay.offload) == (stage, offload) and lay.fits
    train, ds = load_pair(files)
    if stage is None:
        assert "deepspeed" not in train and ds is None
    else:
        # The file LLaMA-Factory loads is upstream's for that stage, as DeepSpeed reads it.
        assert train["deepspeed"] == f"ds_z{stage}_config.json" and ds["zero_optimization"]["stage"] == stage
        theirs = json.loads((UPSTREAM / f"examples__deepspeed__{train['deepspeed']}").read_text())
        assert flat_keys(ds) == flat_keys(theirs) and list(ds) == list(theirs)
        assert llamafactory_problems(train, ds, lay.cards, lay.global_batch_size) == []
    reason = next(n for n in plan.notes if "the lightest setting that fits" in n)
    assert all(f"DeepSpeed {name} memory:" in reason for name in lighter)


@pytest.mark.parametrize("offload", [False, True])
def test_json_has_upstreams_structure(offload):
    name = "ds_z3_offload_config.json" if offload else "ds_z3_config.json"
    # The table's single card for a full Qwen2-7B fine-tune only fits with offload; 32B on 16 cards fits without
    # (8B on 8 cards now takes the lighter ZeRO-2).
    model, cards = ("qwen2-7b", 1) if offload else ("qwen3-32b", 16)
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
    [check] = with_code(plan.notes, "llama_factory.zero3_report_check")
    assert check.framework == "llama-factory" and check.text.startswith("the ZeRO-3 field report's check: ")
    assert "% of the 58 GiB usable" in files["PLAN.md"]


def test_gbs_reached_with_micro_batch_and_accumulation():
    plan, files = render_job(T, model="qwen2.5-7b", method="lora", frameworks=["llama-factory"], cards=8,
                             global_batch_size=256, seq_len=1024)
    train, ds = load_pair(files)
    assert hf_deepspeed(ds, train, 8, plan.shape.hidden)["train_batch_size"] == 256
    assert train["per_device_train_batch_size"] * train["gradient_accumulation_steps"] * 8 == 256


def test_commands_run_each_nodes_launch():
    plan, files = render_job(T, model="qwen2.5-32b", method="full", frameworks=["llama-factory"], cards=32,
                             cluster={"master_addr": "10.0.0.1", "master_port": 29500})
    lines = [l for l in files["llama-factory/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert lines == [f'bash "${{JOB_DIR:?}}/launch.sh" {rank}' for rank in range(4)]


def dataset_entry(**fields) -> dict:
    plan, files = render_job(T, frameworks=["llama-factory"], **fields)
    return json.loads(files["llama-factory/dataset_info.json"])[plan.job]


def test_dataset_info_registers_only_the_columns_the_data_has():
    # Defect 1: a registered column is read from every row (LLaMA-Factory data/converter.py), so by default only
    # the required ones are, as upstream registers alpaca_en_demo.json; the spec names the optional ones its data has.
    entry = dataset_entry(model="qwen3-8b", method="lora", paths={"dataset": "/d/a b.json"})
    assert entry == {"file_name": "/d/a b.json",
                     "columns": {"prompt": "instruction", "query": "input", "response": "output"}}
    entry = dataset_entry(model="qwen3-8b", method="lora",
                          paths={"dataset": "/d/c.jsonl", "dataset_format": "sharegpt"})
    assert entry == {"file_name": "/d/c.jsonl", "formatting": "sharegpt", "columns": {"messages": "conversations"}}
    entry = dataset_entry(model="qwen3-8b", method="lora",
                          paths={"dataset": "/d/a.json", "dataset_columns": ["history", "system"]})
    assert entry["columns"] == {"prompt": "instruction", "query": "input", "response": "output", "system": "system",
                                "history": "history"}
    assert dataset_entry(model="qwen3-8b", method="pretrain", paths={"dataset": "/d/t.jsonl"})["columns"] == \
        {"prompt": "text"}


@pytest.mark.parametrize("columns,message", [
    (["tools"], "paths.dataset_columns.0: 'tools' is not a column of alpaca data; alpaca allows: system, history"),
    (["images"], "paths.dataset_columns.0: qwen3-8b is a text model: it cannot train on images"),
    # OpenAI-style tool turns fail LLaMA-Factory's role check and the row is dropped (data/converter.py l.161-162)
    (["tools"], "paths.dataset_columns.0: 'tools' is not a column of openai data; openai allows: system, images"),
])
def test_a_column_the_data_cannot_have_is_refused(columns, message):
    fmt = "openai" if "openai" in message else "alpaca"
    with pytest.raises(SpecError, match=re.escape(message)):
        render_job(T, model="qwen3-8b", method="lora", frameworks=["llama-factory"],
                   paths={"dataset": "/d/a.json", "dataset_format": fmt, "dataset_columns": columns})


@pytest.mark.parametrize("key,value", [("dataset_format", "sharegpt"), ("dataset_columns", ["system"])])
def test_pretraining_data_is_plain_text(key, value):
    with pytest.raises(SpecError, match=f"paths.{key}: pretraining reads plain text"):
        render_job(T, model="qwen3-8b", method="pretrain", frameworks=["llama-factory"],
                   paths={"dataset": "/d/t.jsonl", key: value})


def test_full_fine_tuning_a_vision_model_trains_the_language_model_only():
    # LLaMA-Factory freezes the vision tower by default (freeze_vision_tower, hparams/finetuning_args.py l.527 at
    # v0.9.5): its weights are held, with no gradients or Adam states.
    plan, _ = render_job(T, model="gemma3-27b", method="full", frameworks=["llama-factory"], cards=16)
    lay, shape = plan.frameworks["llama-factory"].layout, plan.shape
    assert shape.vision_params > 0 and not lay.offload
    trained = shape.params - shape.vision_params
    assert lay.memory.gradients == pytest.approx(4.0 * trained / lay.cards / 2**30)
    assert lay.memory.optimizer == pytest.approx(12.0 * trained / lay.cards / 2**30)


def test_vision_language_data_registers_images_tags_and_media_dir():
    # Defect 3: upstream's mllm_demo entry (data/dataset_info.json at v0.9.5): OpenAI-style messages with tags and
    # an images column; relative image paths resolve against media_dir (default: the data file's folder).
    plan, files = render_job(T, model="gemma3-27b", method="lora", frameworks=["llama-factory"],
                             paths={"dataset": "/data/mllm/train.json"})
    entry = json.loads(files["llama-factory/dataset_info.json"])[plan.job]
    assert entry == {"file_name": "/data/mllm/train.json", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "images": "images"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                              "assistant_tag": "assistant", "system_tag": "system"}}
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    assert train["media_dir"] == "/data/mllm" and train["template"] == "gemma3"
    plan, files = render_job(T, model="qwen2.5_vl-7b", method="lora", frameworks=["llama-factory"],
                             paths={"dataset": "/d/train.json", "media_dir": "/img"})
    assert yaml.safe_load(files["llama-factory/train.yaml"])["media_dir"] == "/img"
    with pytest.raises(SpecError, match="paths.media_dir"):
        render_job(T, model="qwen3-8b", method="lora", frameworks=["llama-factory"],
                   paths={"dataset": "/d/a.json", "media_dir": "/img"})


def test_every_template_exists_in_the_pinned_llamafactory_or_the_row_is_refused(tmp_path):
    # Defect 2: LLaMA-Factory 0.9.5's own template registry decides, not our copy of its names.
    require("llamafactory")
    names = subprocess.run([sys.executable, "-c", "import json; from llamafactory.data.template import TEMPLATES; "
                            "print(json.dumps(sorted(TEMPLATES)))"], env=environment(tmp_path), capture_output=True,
                           text=True, check=True)
    TEMPLATES = set(json.loads(names.stdout))
    rows = T.frameworks["llama-factory"].models
    missing = {model for model, row in rows.items() if "refuse" not in row and row["template"] not in TEMPLATES}
    assert missing == set()
    assert set(T.frameworks["llama-factory"].templates) <= set(TEMPLATES)
    assert "baichuan2" not in TEMPLATES and "refuse" in rows["baichuan2-7b"]


def test_each_rows_template_is_the_one_llamafactory_registers_for_its_model(tmp_path):
    # A wrong but existing template trains on the wrong chat format; LLaMA-Factory 0.9.5 names each chat model's
    # template (extras/constants.py register_model_group -> DEFAULT_TEMPLATE).
    require("llamafactory")
    code = ("import json; from llamafactory.extras.constants import DEFAULT_TEMPLATE as T, SUPPORTED_MODELS as M; "
            "print(json.dumps({str(p): T[n] for n, ps in M.items() if n in T for p in ps.values()}))")
    upstream = json.loads(subprocess.run([sys.executable, "-c", code], env=environment(tmp_path),
                                         capture_output=True, text=True, check=True).stdout)
    rows = T.frameworks["llama-factory"].models
    checked = {m: (row["template"], upstream[T.model(m).hf_id]) for m, row in rows.items()
               if "refuse" not in row and T.model(m).hf_id in upstream}
    assert len(checked) >= 10, checked
    assert {m: pair for m, pair in checked.items() if pair[0] != pair[1]} == {}


def test_baichuan2_is_refused_with_the_reason():
    with pytest.raises(SpecError, match="no longer registers the baichuan2 template"):
        render_job(T, model="baichuan2-7b", method="qlora", frameworks=["llama-factory"], quantization_bit=4)


@pytest.mark.parametrize("hardware,value", [("snt9b", "fa2"), ("h800", "fa2")])
def test_flash_attention_is_written_as_the_memory_model_counts_it(hardware, value):
    # Defect 5: upstream's Ascend recipe sets flash_attn: fa2 (examples/ascend/qwen3_full_sft_fsdp2.yaml l.11); the
    # memory model stores no s^2 attention scores (generator/memory.py), which holds only with a fused kernel.
    plan, files = render_job(T, model="qwen3-8b", method="lora", hardware=hardware, frameworks=["llama-factory"])
    assert yaml.safe_load(files["llama-factory/train.yaml"])["flash_attn"] == value
    assert plan.to_json()["frameworks"]["llama-factory"]["flash_attn"] == value


def test_launch_runs_llamafactory_from_its_folder_with_the_right_environment(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "record.json"
    (bindir / "llamafactory-cli").write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'cwd': os.getcwd(), 'env': dict(os.environ)}}, "
        f"open({str(record)!r}, 'w'))\n")
    (bindir / "llamafactory-cli").chmod(0o755)
    plan, files = render_job(T, model="qwen2.5-32b", method="full", frameworks=["llama-factory"], cards=16,
                             paths={"model_dir": "/m", "dataset": "/d x.json", "output_dir": str(tmp_path / "o")})
    out = tmp_path / "my repo $(x)"
    write(files, out, plan.job, overwrite=False)
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


def run_launch(tmp_path, args, **fields):
    """Render a job, run its launch.sh with `args` and a recording llamafactory-cli; (result, what it recorded)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    (bindir / "llamafactory-cli").write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n")
    (bindir / "llamafactory-cli").chmod(0o755)
    # A fresh output folder per render: a launch refuses the output of another render (its SPEC_SHA256 mark).
    paths = {"model_dir": "/m", "dataset": "/d.json", "output_dir": tempfile.mkdtemp(dir=tmp_path)}
    plan, files = render_job(T, frameworks=["llama-factory"], paths=paths, **fields)
    write(files, tmp_path / "out", plan.job, overwrite=True)
    env = {k: v for k, v in os.environ.items() if not k.endswith("SOCKET_IFNAME")}
    env.update(PATH=f"{bindir}:{os.environ['PATH']}", MASTER_ADDR="10.0.0.2")
    result = subprocess.run(["bash", str(tmp_path / "out" / plan.job / "llama-factory" / "launch.sh"), *args],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result, json.loads(record.read_text())


@pytest.mark.parametrize("hardware,variable", [("snt9b", "HCCL_SOCKET_IFNAME"), ("h800", "NCCL_SOCKET_IFNAME")])
def test_multi_node_launch_exports_the_socket_interface(tmp_path, hardware, variable):
    # Defect 4: LLaMA-Factory's NPU guide has every node export HCCL_SOCKET_IFNAME; the spec sets it.
    fields = dict(model="qwen2.5-32b", method="full", cards=16, hardware=hardware)
    result, got = run_launch(tmp_path, ["1"], cluster={"socket_ifname": "enp189s0f0"}, **fields)
    assert got["env"][variable] == "enp189s0f0" and "is unset" not in result.stderr
    result, got = run_launch(tmp_path, ["1"], **fields)  # unset: the launch says so and still starts
    assert variable not in got["env"]
    assert f"note: {variable} is unset" in result.stderr and "cluster.socket_ifname" in result.stderr


def test_socket_interface_in_the_libraries_own_syntax(tmp_path):
    # HCCL and NCCL take comma lists, "=" for exact names and "^" to exclude.
    result, got = run_launch(tmp_path, ["1"], model="qwen2.5-32b", method="full", cards=16,
                             cluster={"socket_ifname": "^docker,lo"})
    assert got["env"]["HCCL_SOCKET_IFNAME"] == "^docker,lo"


@pytest.mark.parametrize("args,message", [
    (["0", "max_steps=10"], "unexpected argument(s): max_steps=10   (overrides go after --)"),
    (["0", "--", "run_name=my run"], "override 'run_name=my run' is empty or has white space"),
    (["0", "--", "output_dir=/a\u00a0b"], "override 'output_dir=/a\u00a0b' is empty or has white space"),
    (["0", "--", "x=\x1fy"], "override 'x=\x1fy' is empty or has white space"),
    (["0", "--", ""], "override '' is empty"),
])
def test_launch_refuses_what_it_would_drop_or_mangle(tmp_path, args, message):
    # Words after MASTER_ADDR were dropped silently; LLaMA-Factory's launcher joins the overrides with spaces and
    # splits them again (launcher.py l.107, l.127), so one with a space would become two.
    plan, files = render_job(T, frameworks=["llama-factory"], model="qwen3-8b", method="lora", cards=8,
                             paths={"model_dir": "/m", "dataset": "/d.json", "output_dir": "/o"})
    write(files, tmp_path, plan.job, overwrite=False)
    result = subprocess.run(["bash", str(tmp_path / plan.job / "llama-factory" / "launch.sh"), *args],
                            capture_output=True, text=True, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and message in result.stderr


def test_one_node_launch_leaves_the_socket_interface_alone(tmp_path):
    result, got = run_launch(tmp_path, ["0"], model="qwen3-8b", method="lora", cards=8)
    assert "SOCKET_IFNAME" not in result.stderr + "".join(got["env"])


def test_words_after_double_dash_reach_llamafactory_cli_as_overrides(tmp_path):
    result, got = run_launch(tmp_path, ["0", "--", "max_steps=2", "bf16=false"], model="qwen3-8b", method="lora",
                             cards=8)
    assert got["argv"] == ["train", "train.yaml", "max_steps=2", "bf16=false"]


@pytest.mark.integration
@pytest.mark.parametrize("fields", [
    dict(model="qwen3-8b", method="lora"),
    dict(model="qwen2.5-32b", method="full", cards=16),
    dict(model="qwen2-7b", method="full", cards=1),  # ZeRO-3 offload
    {"model": "qwen3-8b", "method": "lora", "cards": 16},  # ZeRO-0
    {"model": "qwen3-8b", "method": "full", "cards": 8},  # ZeRO-2
    dict(model="qwen3-8b", method="pretrain"),
    dict(model="glm4-9b", method="lora", paths={"dataset": "/d/chat.jsonl", "dataset_format": "sharegpt"}),
], ids=["lora", "full-16", "offload", "zero0", "zero2", "pretrain", "sharegpt"])
def test_llamafactory_and_deepspeed_accept_the_pair(tmp_path, fields):
    require("llamafactory", "deepspeed")
    plan, files = render_job(T, frameworks=["llama-factory"], **fields)
    write(files, tmp_path, plan.job, overwrite=False)
    folder = tmp_path / plan.job / "llama-factory"
    lay = plan.frameworks["llama-factory"].layout
    assert llamafactory_parser_check(folder, lay.cards, plan.shape.hidden, lay.global_batch_size) == ("ok", "")
    # The same files at a world the plan did not make: transformers fills the batch for that world, which is not
    # the plan's global batch.
    if lay.zero_stage is not None:
        status, detail = llamafactory_parser_check(folder, lay.cards * 2, plan.shape.hidden, lay.global_batch_size)
        assert status == "problem" and f"the plan's global batch is {lay.global_batch_size}" in detail


@pytest.mark.parametrize("hardware,example", [("rtx4090", "train_qlora/qwen3_lora_sft_otfq.yaml"),
                                              ("snt9b", "train_qlora/qwen3_lora_sft_bnb_npu.yaml")])
def test_qlora_follows_the_example_for_its_accelerator(hardware, example):
    # Issue 23 item 16: a GPU QLoRA train.yaml said it followed the Ascend example file; upstream's GPU one is the
    # on-the-fly bitsandbytes example, whose keys the file covers.
    _, files = render_job(T, model="qwen3-8b", method="qlora", quantization_bit=4, hardware=hardware, cards=8,
                          frameworks=["llama-factory"])
    text = files["llama-factory/train.yaml"]
    assert f"laid out as upstream's examples/{example}." in text and f"`examples/{example}`" in files["PLAN.md"]
    theirs = upstream_keys("examples__" + example.replace("/", "__"))
    assert theirs - {"max_samples", "warmup_ratio", "num_train_epochs"} <= set(yaml.safe_load(text))


def test_plan_paths_say_where_each_framework_writes():
    # Issue 23 item 16: PLAN.md's paths list gave output_dir while LLaMA-Factory writes into <output_dir>/llama-factory.
    _, files = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["mindspeed-llm", "llama-factory"],
                          paths={"output_dir": "/data/run"})
    assert yaml.safe_load(files["llama-factory/train.yaml"])["output_dir"] == "/data/run/llama-factory"
    line = next(l for l in files["PLAN.md"].splitlines() if l.startswith("- output_dir:"))
    assert "`/data/run/llama-factory`" in line and "`/data/run/mindspeed-llm`" in line
