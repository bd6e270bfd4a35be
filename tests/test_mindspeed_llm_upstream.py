"""MindSpeed-LLM files as MindSpeed-LLM 2.2.0 would take them: every generated script is run for real (torchrun and
python replaced by recorders), and each recorded command line is parsed by the pinned upstream parser of the program
it starts and checked against the start-up rules upstream enforces (generator/frameworks/mindspeed_llm/checks.py).

The sweep covers every MindSpeed-LLM cell of the minimum-card table (each method, seq_len, platform; pretraining on
the full rows), plus MoE, context-parallel, uneven-pipeline and one-card jobs.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from helpers import render_job, run_recording, table_cells

from generator.errors import UserError
from generator.frameworks.mindspeed_llm.checks import (
    command_problems,
    conversion_problems,
    export_problems,
)
from generator.render import write
from generator.tables import load_tables

T = load_tables()
EXTRA = [
    # MoE with expert parallel pinned; context parallel for fine-tuning (packed data) and pretraining; a pipeline
    # that does not divide the layers; one card.
    {"model": "qwen3_moe-30b_a3b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
     "layout": {"mindspeed-llm": {"ep": 8}}},
    {"model": "qwen3_moe-30b_a3b", "method": "full", "seq_len": 4096, "hardware": "snt9b", "cards": 32,
     "layout": {"mindspeed-llm": {"tp": 2, "ep": 4}}},
    {"model": "llama3.1-8b", "method": "full", "seq_len": 32768, "hardware": "snt9b", "cards": 16,
     "layout": {"mindspeed-llm": {"cp": 4}}},
    {"model": "llama3.1-8b", "method": "pretrain", "seq_len": 16384, "hardware": "snt9b", "cards": 16,
     "layout": {"mindspeed-llm": {"cp": 2}}},
    {"model": "qwen2.5-7b", "method": "full", "seq_len": 4096, "hardware": "snt9b", "cards": 16,
     "layout": {"mindspeed-llm": {"pp": 8}}},
    {"model": "qwen2.5-0.5b", "method": "lora", "seq_len": 4096, "hardware": "snt9b", "cards": 1},
    # Upstream's own Qwen3-8B LoRA layout (examples/mcore/qwen3/tune_qwen3_8b_4K_lora_ptd.sh l. 18-19, 42-43): one
    # micro batch through two stages, which Megatron's 1F1B runs (schedules.py l. 1782-1787); issue 23 item 12.
    {"model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b", "cards": 8, "global_batch_size": 16,
     "layout": {"mindspeed-llm": {"tp": 1, "pp": 2, "micro_batch_size": 4}}},
    # Qwen3-235B-A22B converts with convert_ckpt_v2.py (its own parser), LoRA merging back with convert_ckpt.py.
    {"model": "qwen3_moe-235b_a22b", "method": "full", "seq_len": 4096, "hardware": "snt9b23"},
    {"model": "qwen3_moe-235b_a22b", "method": "lora", "seq_len": 4096, "hardware": "snt9b"},
    # Context parallel shards the distributed optimizer over DP x CP: this fits (was refused at 67 GiB).
    {"model": "qwen2.5-14b", "method": "full", "seq_len": 32768, "hardware": "snt9b", "cards": 16,
     "layout": {"mindspeed-llm": {"cp": 4}}},
]


def cases():
    table = [{"model": m, "method": meth, "seq_len": seq, "hardware": hw}
             for m, meth, seq, hw in sorted(table_cells(T, "mindspeed-llm"))]
    return table + EXTRA


def case_id(case):
    pins = "-".join(f"{k}{v}" for k, v in sorted(case.get("layout", {}).get("mindspeed-llm", {}).items()))
    return "-".join(str(case[k]) for k in ("model", "method", "seq_len", "hardware")) + \
        (f"-{case['cards']}c" if "cards" in case else "") + (f"-{pins}" if pins else "")


def distributed(argv):
    """torchrun's own options, the entry script and the words after it."""
    entry = next(i for i, w in enumerate(argv) if w.endswith(".py"))
    opts = dict(zip(argv[:entry:2], argv[1:entry:2]))
    return opts, argv[entry], argv[entry + 1:]


def render_and_run(case, tmp_path):
    """Render the case with real folders, then run launch.sh (node 0), both conversions and the preprocessing."""
    checkout, model_dir = tmp_path / "MindSpeed-LLM", tmp_path / "hf"
    checkout.mkdir()
    model_dir.mkdir()
    spec = {**case, "frameworks": ["mindspeed-llm"], "cluster": {"master_addr": "10.0.0.1"},
            "paths": {"model_dir": str(model_dir), "dataset": f"{tmp_path}/data.json",
                      "output_dir": f"{tmp_path}/out", "mindspeed_llm_dir": str(checkout)}}
    plan, files = render_job(T, **spec)
    write(files, tmp_path / "jobs", plan.job, overwrite=False)
    job = tmp_path / "jobs" / plan.job / "mindspeed-llm"
    # The converted weights, where convert_ckpt.sh hf2mcore writes them (its --save-dir) and training loads them.
    ckpt = Path(plan.paths["mcore_ckpt_dir"].value)
    ckpt.mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1\n")
    calls = {}
    for name, args in (("launch", ["0"]), ("hf2mcore", ["hf2mcore"]), ("mcore2hf", ["mcore2hf"]),
                       ("preprocess", [])):
        script = job / ("launch.sh" if name == "launch" else
                        "preprocess_data.sh" if name == "preprocess" else "convert_ckpt.sh")
        result, recorded = run_recording(script, args, tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        assert len(recorded) == 1, (name, recorded)
        calls[name] = recorded[0]
    return plan, calls


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_every_generated_command_is_accepted_by_mindspeed_llm(case, tmp_path):
    plan, calls = render_and_run(case, tmp_path)
    lay = plan.frameworks["mindspeed-llm"].layout
    launch = calls["launch"]
    assert launch["program"] == "torchrun" and launch["cwd"] == str(tmp_path / "MindSpeed-LLM")
    opts, entry, argv = distributed(launch["argv"])
    world = int(opts["--nproc_per_node"]) * int(opts["--nnodes"])
    assert world == lay.cards and int(opts["--nnodes"]) == lay.nodes
    assert entry == ("pretrain_gpt.py" if plan.method == "pretrain" else "posttrain_gpt.py")
    assert command_problems(entry, argv, world, {"CUDA_DEVICE_MAX_CONNECTIONS": launch["cuda_max_conn"]}) == []
    for direction in ("hf2mcore", "mcore2hf"):
        call = calls[direction]
        assert call["program"] == "python"
        program, words = call["argv"][0], call["argv"][1:]
        assert command_problems(program, words) == [], direction
    hf2mcore, mcore2hf = calls["hf2mcore"]["argv"], calls["mcore2hf"]["argv"]
    assert conversion_problems(argv, hf2mcore[0], hf2mcore[1:]) == []
    assert export_problems(argv, mcore2hf[0], mcore2hf[1:]) == []
    pre = calls["preprocess"]["argv"]
    assert pre[0] == "preprocess_data.py" and command_problems(pre[0], pre[1:]) == []
    # The values that matter: what trains is what the plan says, on the data the preprocessing writes.
    words = dict(zip(argv, argv[1:]))
    assert int(words["--tensor-model-parallel-size"]) == lay.tp
    assert int(words["--pipeline-model-parallel-size"]) == lay.pp
    assert int(words.get("--context-parallel-size", 1)) == lay.cp
    assert int(words["--seq-length"]) == plan.seq_len
    assert int(words["--global-batch-size"]) == lay.global_batch_size
    assert int(words["--micro-batch-size"]) == lay.micro_batch_size
    prefix = dict(zip(pre, pre[1:]))["--output-prefix"]
    suffix = "_text_document" if plan.method == "pretrain" else ""
    assert words["--data-path"] == prefix + suffix
    if plan.method != "pretrain":
        assert ("--variable-seq-lengths" in argv) == (lay.cp == 1)
        # Context parallel: neat packing on both sides (positions from the sample ids, not from every EOS).
        assert ("--pack" in pre) == ("--neat-pack" in pre) == ("--neat-pack" in argv) == (lay.cp > 1)


def test_the_sweep_covers_the_cases_the_issue_names():
    plans = []
    for case in cases():
        try:
            plans.append(render_job(T, **{**case, "frameworks": ["mindspeed-llm"]})[0])
        except UserError:
            continue
    lays = [p.frameworks["mindspeed-llm"].layout for p in plans]
    assert any(lay.ep > 1 for lay in lays) and any(lay.cp > 1 for lay in lays)
    assert any(lay.uneven_layers for lay in lays) and any(lay.cards == 1 for lay in lays)
    assert {p.method for p in plans} == {"full", "lora", "pretrain"}
    assert len(plans) == len(cases())  # nothing the table offers is refused


def test_a_deep_pipeline_keeps_the_pretraining_batch(tmp_path):
    # Qwen3-32B pretraining on 96 cards: the pipeline's own minimum set 528 sequences per step; the batch is the
    # 512 the recipe asks for, as MindSpeed-LLM parses the launch line and checks it at start-up.
    case = {"model": "qwen3-32b", "method": "pretrain", "seq_len": 4096, "hardware": "snt9b", "cards": 96}
    plan, calls = render_and_run(case, tmp_path)
    lay = plan.frameworks["mindspeed-llm"].layout
    opts, entry, argv = distributed(calls["launch"]["argv"])
    world = int(opts["--nproc_per_node"]) * int(opts["--nnodes"])
    assert command_problems(entry, argv, world, {"CUDA_DEVICE_MAX_CONNECTIONS": calls["launch"]["cuda_max_conn"]}) == []
    words = dict(pairwise(argv))
    assert int(words["--global-batch-size"]) == plan.train.global_batch_size == 512
    assert [w for w in plan.warnings if not w.startswith("train.steps: the spec gives no data size")] == []
    assert (lay.pp - 1) / (512 // (lay.micro_batch_size * lay.dp)) <= 0.25
