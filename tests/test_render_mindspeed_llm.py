"""MindSpeed-LLM renderer: particular jobs (the sweep through upstream's parsers and rules is in
test_mindspeed_llm_upstream.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import check_script, render_job, table_cells

from generator.checks.shell import bash_arrays
from generator.families.megatron import flags
from generator.frameworks.mindspeed_llm.checks import conversion_problems
from generator.render import write
from generator.tables import load_tables

T = load_tables()
DATA = Path(__file__).parent / "data"


def parse(words: list[str]) -> dict[str, list[str]]:
    """flag -> value words; the pinned parser must accept them (generator/families/megatron/flags.py)."""
    flags.parse("train", words)
    out: dict[str, list[str]] = {}
    for word in words:
        if word.startswith("--"):
            current = out.setdefault(word, [])
        else:
            current.append(word)
    return out


def test_commands_run_each_nodes_launch():
    plan, files = render_job(T, model="qwen2.5-72b", method="full", frameworks=["mindspeed-llm"],
                             cluster={"master_addr": "10.0.0.1"})
    lines = [l for l in files["mindspeed-llm/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert len(lines) == plan.frameworks["mindspeed-llm"].layout.nodes > 1
    for rank, line in enumerate(lines):
        assert line == f'bash "${{JOB_DIR:?}}/launch.sh" {rank}'


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
    # Grouped GEMM on both sides, as training: the converted expert layout must be the one training builds
    # (ckpt_convert_deepseek3_merge_lora2hf.sh passes it with LoRA too).
    arrays = bash_arrays(script)
    assert "--moe-grouped-gemm" in arrays["HF2MCORE_ARGS"] and "--moe-grouped-gemm" in arrays["MCORE2HF_ARGS"]
    assert "--lora-load" not in arrays["MCORE2HF_ARGS"]  # the LoRA checkpoint holds the base weights too
    args = parse(bash_arrays(files["mindspeed-llm/launch.sh"])["GPT_ARGS"])
    # Issue 10, defect 2: upstream's DeepSeek-V3 routing and MLA flags (tune_deepseek3_671b_4k_lora_ptd.sh).
    assert "--multi-latent-attention" in args and "--group-query-attention" not in args
    assert args["--moe-router-load-balancing-type"] == ["none"] and "--qk-layernorm" in args
    assert args["--moe-router-num-groups"] == ["8"] and args["--moe-router-group-topk"] == ["4"]
    assert args["--moe-router-topk-scaling-factor"] == ["2.5"] and "--routed-scaling-factor" not in args
    assert "--topk-group" not in args


def test_pretraining_preprocesses_its_text_and_trains_on_the_output():
    # Issue 10, defect 3: the raw file went to --data-path; now preprocess_data.sh writes <prefix>_text_document.
    _, files = render_job(T, model="llama3.1-8b", method="pretrain", frameworks=["mindspeed-llm"],
                          paths={"dataset": "/data/web.jsonl", "output_dir": "/o"})
    pre = dict(zip(*[iter(bash_arrays(files["mindspeed-llm/preprocess_data.sh"])["PREPROCESS_ARGS"])] * 2))
    assert pre["--input"] == "/data/web.jsonl" and pre["--handler-name"] == "GeneralPretrainHandler"
    assert pre["--json-keys"] == "text" and pre["--output-prefix"] == "/o/mindspeed-llm/data/t"
    data = parse(bash_arrays(files["mindspeed-llm/launch.sh"])["DATA_ARGS"])
    assert data["--data-path"] == ["/o/mindspeed-llm/data/t_text_document"]


def test_rotary_base_is_written_as_the_int_megatron_declares():
    # Issue 10, defect 1: `--rotary-base 1000000.0` exits in argparse (type=int, arguments.py l. 1260).
    for model, base in (("qwen3-8b", "1000000"), ("llama3.1-8b", "500000"), ("glm4-9b", "5000000")):
        _, files = render_job(T, model=model, method="full", frameworks=["mindspeed-llm"])
        assert parse(bash_arrays(files["mindspeed-llm/launch.sh"])["GPT_ARGS"])["--rotary-base"] == [base]


def test_glm4_and_deepseek_say_which_weights_the_converter_reads():
    # Issue 10, defects 4 and 5.
    plan, files = render_job(T, model="glm4-9b", method="lora", frameworks=["mindspeed-llm"])
    assert "THUDM/glm-4-9b-chat" in files["mindspeed-llm/convert_ckpt.sh"]
    assert "THUDM/glm-4-9b-chat" in files["PLAN.md"] and "glm-4-9b-chat-hf" in files["PLAN.md"]
    plan, files = render_job(T, model="deepseek-v3", method="lora", frameworks=["mindspeed-llm"])
    for name in ("mindspeed-llm/convert_ckpt.sh", "PLAN.md"):
        assert "FP8" in files[name] and "fp8_cast_bf16.py" in files[name]


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
    write(files, tmp_path, plan.job, overwrite=False)
    converted = tmp_path / "o u t" / "mcore_tp1_pp1"
    converted.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    refused = subprocess.run(["bash", str(tmp_path / plan.job / "mindspeed-llm" / "launch.sh"), "0"], env=env,
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "convert_ckpt.sh hf2mcore first" in refused.stderr  # no weights yet
    (converted / "latest_checkpointed_iteration.txt").write_text("1\n")
    result = subprocess.run(["bash", str(tmp_path / plan.job / "mindspeed-llm" / "launch.sh"), "0"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text())
    assert argv[argv.index("--tokenizer-name-or-path") + 1] == hostile
    assert argv[argv.index("--node_rank") + 1] == "0" and argv[argv.index("--master_addr") + 1] == "127.0.0.1"
    assert (tmp_path / "o u t" / "mindspeed-llm" / "logs" / "train_node0.log").is_file()


@pytest.mark.parametrize("model", sorted({m for m, *_ in table_cells(T, "mindspeed-llm")}))
def test_scripts_pass_bash_and_shellcheck(model, tmp_path):
    for method in ("lora", "pretrain"):
        _, files = render_job(T, model=model, method=method, frameworks=["mindspeed-llm"])
        for name in ("launch.sh", "convert_ckpt.sh", "preprocess_data.sh"):
            check_script(files[f"mindspeed-llm/{name}"], tmp_path, name)


@pytest.mark.parametrize("method", ["pretrain", "full"])
def test_every_script_that_runs_torch_npu_says_to_source_cann_first(method):
    # Issue 23 item 17: preprocess_data.py imports torch_npu as the converter does, so its script says, like
    # convert_ckpt.sh, that CANN's set_env.sh comes first (upstream's data_convert_*.sh source it, l. 1-2).
    _, files = render_job(T, model="qwen3-8b", method=method, frameworks=["mindspeed-llm"])
    for name in ("convert_ckpt.sh", "preprocess_data.sh"):
        header = files[f"mindspeed-llm/{name}"].split("set -euo pipefail", 1)[0]
        assert "Source CANN's set_env.sh first" in header, name


def test_converted_weights_folder_names_the_expert_layout():
    # Issue 23 item 12: mcore_tp<TP>_pp<PP> left EP out, so a re-plan with another EP found the old folder, whose
    # expert shards (mp_rank_TT_PPP_EEE) were split for a different EP.
    folders = set()
    for ep in (4, 8):
        _, files = render_job(T, model="qwen3_moe-30b_a3b", method="lora", cards=16, frameworks=["mindspeed-llm"],
                                 paths={"output_dir": "/o"}, layout={"mindspeed-llm": {"ep": ep}})
        args = flags.parse("convert-hf2mg", bash_arrays(files["mindspeed-llm/convert_ckpt.sh"])["HF2MCORE_ARGS"])
        assert args.target_expert_parallel_size == ep
        assert args.save_dir.rsplit("/", 1)[1] == f"mcore_tp{args.target_tensor_parallel_size}_pp" \
                                                  f"{args.target_pipeline_parallel_size}_ep{ep}"
        folders.add(args.save_dir)
    assert len(folders) == 2
    _, files = render_job(T, model="qwen3-8b", method="lora", frameworks=["mindspeed-llm"], paths={"output_dir": "/o"})
    args = flags.parse("convert-hf2mg", bash_arrays(files["mindspeed-llm/convert_ckpt.sh"])["HF2MCORE_ARGS"])
    assert args.save_dir == "/o/mcore_tp1_pp1"  # a dense model keeps its name


@pytest.mark.parametrize("shared", [True, False, None])
def test_no_shared_storage_is_written_when_nodes_have_their_own_disks(shared):
    # Issue 23 item 12: a multi-node job whose output folder is not shared never got --no-shared-storage, so only
    # global rank 0 built the dataset index (blended_megatron_dataset_builder.py l. 26-35) and the other nodes'
    # disks had none. The plan says which storage it assumes.
    cluster = {"master_addr": "10.0.0.1", **({} if shared is None else {"shared_storage": shared})}
    plan, files = render_job(T, model="qwen2.5-32b", method="full", frameworks=["mindspeed-llm", "llama-factory"],
                             cluster=cluster)
    assert plan.frameworks["mindspeed-llm"].layout.nodes > 1
    args = parse(bash_arrays(files["mindspeed-llm/launch.sh"])["DATA_ARGS"])
    assert ("--no-shared-storage" in args) is (shared is False)
    assert json.loads(files["plan.json"])["cluster"]["shared_storage"] is (shared is not False)
    if shared is False:
        assert "cluster.shared_storage: false" in files["PLAN.md"]
        assert any("llama-factory: cluster.shared_storage is false" in w for w in plan.warnings)
    else:
        assert "cluster.shared_storage: true, the default this plan assumes" in files["PLAN.md"]
    _, files = render_job(T, model="qwen3-8b", method="full", frameworks=["mindspeed-llm"],
                          cluster={"shared_storage": False})
    assert "--no-shared-storage" not in bash_arrays(files["mindspeed-llm/launch.sh"])["DATA_ARGS"]


# The weight converter each model family's upstream examples run (MindSpeed-LLM 2.2.0 examples/mcore/<family>/
# ckpt_convert_*_hf2mcore.sh, l. 3-5 `python <script>`): convert_ckpt_v2.py for Qwen3-235B-A22B alone
# (qwen3_moe/ckpt_convert_qwen3_moe_235b_hf2mcore.sh l. 4; the 30B's ckpt_convert_qwen3_moe_hf2mcore.sh l. 5 runs
# convert_ckpt.py), DeepSeek-V3's own script, convert_ckpt.py for every other family (llama2, llama31, llama32,
# qwen2, qwen25, qwen3, glm4, mixtral).
UPSTREAM_CONVERTER = {"qwen3_moe-235b_a22b": "convert_ckpt_v2.py",
                      "deepseek-v3": "examples/mcore/deepseek3/convert_ckpt_deepseek3.py"}


@pytest.mark.parametrize("model", sorted(m for m in T.frameworks["mindspeed-llm"].models if m != "debug-tiny"))
def test_each_model_converts_with_its_upstream_converter(model):
    # Issue 23 item 11: Qwen3-235B went through convert_ckpt.py, which loads the whole ~470 GB model into host memory.
    _, files = render_job(T, model=model, method="full", frameworks=["mindspeed-llm"], hardware="snt9b")
    script = files["mindspeed-llm/convert_ckpt.sh"]
    used = re.search(r'hf2mcore\) python (\S+) "\$\{HF2MCORE_ARGS\[@\]\}"', script).group(1)
    assert used == UPSTREAM_CONVERTER.get(model, "convert_ckpt.py")


def test_qwen3_235b_conversion_is_what_upstream_runs_and_what_training_loads():
    # convert_ckpt_v2.py's own parser (convert_ckpt_v2.py l. 9-51) reads both directions; hf2mcore writes the layout
    # training loads; a LoRA run merges its adapters back with convert_ckpt.py (v2 has no LoRA flags).
    for method, back_script in (("full", "convert_ckpt_v2.py"), ("lora", "convert_ckpt.py")):
        _, files = render_job(T, model="qwen3_moe-235b_a22b", method=method, frameworks=["mindspeed-llm"])
        script = files["mindspeed-llm/convert_ckpt.sh"]
        arrays = bash_arrays(script)
        to_mcore = flags.parse("convert-v2", arrays["HF2MCORE_ARGS"])
        assert (to_mcore.load_model_type, to_mcore.save_model_type, to_mcore.model_type_hf) == ("hf", "mg", "qwen3-moe")
        assert to_mcore.moe_grouped_gemm
        launch = bash_arrays(files["mindspeed-llm/launch.sh"])
        train = [w for name in ("GPT_ARGS", "DATA_ARGS", "OUTPUT_ARGS", "TUNE_ARGS", "LORA_ARGS", "START_ARGS")
                 for w in launch.get(name, [])]  # the first launch's command line
        assert conversion_problems(train, "convert_ckpt_v2.py", arrays["HF2MCORE_ARGS"]) == []
        assert f'mcore2hf) python {back_script} "${{MCORE2HF_ARGS[@]}}"' in script
    with pytest.raises(flags.ParseError):  # upstream would drop a misspelt flag silently (parse_known_args, l. 50)
        flags.parse("convert-v2", ["--load-dir", "a", "--save-dir", "b", "--target-expert-parallel", "2"])
