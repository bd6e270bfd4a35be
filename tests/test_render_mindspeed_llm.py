"""MindSpeed-LLM renderer over every MindSpeed-LLM cell of the minimum-card table (pretrain on the full rows):
flags known to the pinned 2.2.0 parser with the right value counts, layout rules, conversion in training's layout."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from generator.render import write
from generator.tables import load_tables
from generator.validate import bash_arrays, parse_mindspeed_args
from helpers import check_script, render_job, table_cells

T = load_tables()
DATA = Path(__file__).parent / "data"


LISTED = {line.strip() for line in (DATA / "mindspeed_llm_flags.txt").read_text().splitlines()
          if line.startswith("--")}


def parse(words: list[str]) -> dict[str, list[str]]:
    """flag -> values as the pinned parser groups them; fails on any flag it would reject."""
    parsed, problems = parse_mindspeed_args(words)
    assert not problems, problems
    assert set(parsed) <= LISTED  # the plain flag list agrees with the kinds table
    return parsed


def sweep():
    return sorted(table_cells(T, "mindspeed-llm"))


@pytest.mark.parametrize("case", sweep(), ids=lambda c: "-".join(map(str, c)))
def test_training_script_obeys_the_pinned_parser_and_layout_rules(case, tmp_path):
    model_name, method, seq, hw = case
    plan, files = render_job(T, model=model_name, method=method, seq_len=seq, hardware=hw,
                             frameworks=["mindspeed-llm"])
    lay, model = plan.frameworks["mindspeed-llm"].layout, plan.shape
    script = files["mindspeed-llm/launch.sh"]
    for name in ("launch.sh", "convert_ckpt.sh", "preprocess_data.sh"):
        if f"mindspeed-llm/{name}" in files:
            check_script(files[f"mindspeed-llm/{name}"], tmp_path, name)
    groups = bash_arrays(script)
    assert {"GPT_ARGS", "DATA_ARGS", "CKPT_ARGS", "OUTPUT_ARGS"} <= set(groups)
    words = [w for name, ws in groups.items() if name != "DISTRIBUTED_ARGS" for w in ws]
    args = parse(words)
    npus = int(re.search(r"^NPUS_PER_NODE=(\d+)$", script, re.M).group(1))
    nnodes = int(re.search(r"^NNODES=(\d+)$", script, re.M).group(1))
    world = npus * nnodes
    assert world == lay.cards
    tp = int(args["--tensor-model-parallel-size"][0])
    pp = int(args["--pipeline-model-parallel-size"][0])
    cp = int(args.get("--context-parallel-size", ["1"])[0])
    assert world % (tp * pp * cp) == 0
    dp = world // (tp * pp * cp)
    assert model.heads % tp == 0
    assert int(args.get("--num-query-groups", [model.heads])[0]) % tp == 0
    layers = int(args["--num-layers"][0])
    if "--num-layer-list" in args:
        stages = [int(x) for x in args["--num-layer-list"][0].split(",")]
        assert len(stages) == pp > 1 and sum(stages) == layers
    else:
        assert layers % pp == 0
    mbs, gbs = int(args["--micro-batch-size"][0]), int(args["--global-batch-size"][0])
    assert gbs % (mbs * dp) == 0
    assert ("--sequence-parallel" in args) == (tp > 1)
    if "--recompute-method" in args or "--recompute-num-layers" in args:
        assert args.get("--recompute-granularity") == ["full"]
    if "--overlap-param-gather" in args:
        assert "--use-distributed-optimizer" in args and "--overlap-grad-reduce" in args
    assert int(args["--seq-length"][0]) == seq <= int(args["--max-position-embeddings"][0])
    vocab = args.get("--padded-vocab-size", args.get("--vocab-size"))
    assert int(vocab[0]) % tp == 0
    if model.is_moe:
        ep = int(args["--expert-model-parallel-size"][0])
        assert model.experts % ep == 0 and (world // pp) % ep == 0
    entry = "pretrain_gpt.py" if method == "pretrain" else "posttrain_gpt.py"
    assert f"torchrun \"${{DISTRIBUTED_ARGS[@]}}\" {entry}" in script
    if method != "pretrain":
        assert args["--stage"] == ["sft"] and "--finetune" in args
    if method == "lora":
        assert args["--lora-target-modules"] == ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
    else:
        assert "--lora-r" not in args
    if model.name.startswith("qwen3"):
        assert args["--spec"] == ["mindspeed_llm.tasks.models.spec.qwen3_spec", "layer_spec"]
        assert "--qk-layernorm" in args and args["--kv-channels"] == ["128"]
    # Conversion writes the layout training loads.
    convert = bash_arrays(files["mindspeed-llm/convert_ckpt.sh"])
    to_mcore = convert["HF2MCORE_ARGS"]
    pairs = dict(zip(to_mcore, to_mcore[1:]))
    assert int(pairs["--target-tensor-parallel-size"]) == tp
    assert int(pairs["--target-pipeline-parallel-size"]) == pp
    if "--num-layer-list" in args:
        assert pairs["--num-layer-list"] == args["--num-layer-list"][0]
    if model.is_moe:
        assert pairs["--target-expert-parallel-size"] == args["--expert-model-parallel-size"][0]
    assert pairs["--save-dir"] == args["--load"][0]


def test_commands_differ_only_in_node_rank():
    plan, files = render_job(T, model="qwen2.5-72b", method="full", frameworks=["mindspeed-llm"],
                             cluster={"master_addr": "10.0.0.1"})
    lines = [l for l in files["mindspeed-llm/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert len(lines) == plan.frameworks["mindspeed-llm"].layout.nodes > 1
    for rank, line in enumerate(lines):
        assert line == f'bash "$JOB_DIR/launch.sh" {rank} 10.0.0.1'


def test_lora_conversion_back_merges_the_adapters():
    _, files = render_job(T, model="qwen3-8b", method="lora", frameworks=["mindspeed-llm"])
    back = bash_arrays(files["mindspeed-llm/convert_ckpt.sh"])["MCORE2HF_ARGS"]
    pairs = dict(zip(back, back[1:]))
    assert pairs["--target-tensor-parallel-size"] == "1" and pairs["--target-pipeline-parallel-size"] == "1"
    assert "--lora-load" in back and "--lora-r" in back and "linear_fc2" in back


def test_deepseek_uses_its_own_converters():
    _, files = render_job(T, model="deepseek-v3", method="lora", frameworks=["mindspeed-llm"])
    script = files["mindspeed-llm/convert_ckpt.sh"]
    assert "examples/mcore/deepseek3/convert_ckpt_deepseek3.py" in script
    assert "--moe-grouped-gemm" not in script  # refused with LoRA by upstream's converter
    args = parse(bash_arrays(files["mindspeed-llm/launch.sh"])["GPT_ARGS"])
    assert "--multi-head-latent-attention" in args and "--group-query-attention" not in args


def test_pretrain_reads_the_spec_prefix_and_has_no_preprocessing():
    _, files = render_job(T, model="llama3.1-8b", method="pretrain", frameworks=["mindspeed-llm"],
                          paths={"dataset": "/data/web_text_document"})
    assert "mindspeed-llm/preprocess_data.sh" not in files
    assert parse(bash_arrays(files["mindspeed-llm/launch.sh"])["DATA_ARGS"])["--data-path"] == ["/data/web_text_document"]


def test_train_iters_from_the_data_size():
    plan, files = render_job(T, model="qwen3-8b", method="full", frameworks=["mindspeed-llm"],
                             data={"samples": 10000, "tokens_per_sample": 512, "epochs": 3}, global_batch_size=64)
    args = parse(bash_arrays(files["mindspeed-llm/launch.sh"])["GPT_ARGS"])
    assert args["--train-iters"] == [str(-(-10000 * 3 // 64))]


def test_launch_passes_every_value_as_one_word(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "argv.json"
    (bindir / "torchrun").write_text("#!/usr/bin/env python3\nimport json, sys\n"
                                     f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    (bindir / "torchrun").chmod(0o755)
    checkout = tmp_path / "Mind Speed $(x)"
    checkout.mkdir()
    hostile = "/m/it's a \"model\" `id`"
    plan, files = render_job(T, model="qwen3-8b", method="lora", frameworks=["mindspeed-llm"],
                             paths={"model_dir": hostile, "dataset": "/d.json", "output_dir": f"{tmp_path}/o u t",
                                    "mindspeed_llm_dir": str(checkout)})
    write(files, tmp_path, plan.job, force=False)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(tmp_path / plan.job / "mindspeed-llm" / "launch.sh"), "0"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text())
    assert argv[argv.index("--tokenizer-name-or-path") + 1] == hostile
    assert argv[argv.index("--node_rank") + 1] == "0" and argv[argv.index("--master_addr") + 1] == "127.0.0.1"
    assert (tmp_path / "o u t" / "mindspeed-llm" / "logs" / "train_node0.log").is_file()
