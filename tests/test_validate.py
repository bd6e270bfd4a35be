"""gen-launch validate: one line per file; problems exit 1; a folder render did not write exits 2."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import require

from generator.cli import main
from generator.frameworks.llama_factory import checks as llama_factory

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "qwen3-32b-full-snt9b-16c.yaml"
JOB = "qwen3-32b-full-snt9b-16c"


def render(tmp_path) -> Path:
    CliRunner().invoke(main, ["render", str(EXAMPLE), "-o", str(tmp_path)], catch_exceptions=False)
    return tmp_path / JOB


def rewrite(job: Path, path: str, text: str) -> None:
    """Change a file and its MANIFEST hash, so validate checks the content rather than flagging an edit."""
    (job / path).write_text(text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    manifest = (job / "MANIFEST").read_text()
    (job / "MANIFEST").write_text(re.sub(rf"^[0-9a-f]{{64}}  {re.escape(path)}$", f"{digest}  {path}", manifest,
                                         flags=re.M))


def test_fresh_render_validates(tmp_path, monkeypatch):
    monkeypatch.setattr(llama_factory, "llamafactory_installed", lambda: False)
    result = CliRunner().invoke(main, ["validate", str(render(tmp_path))], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    manifest = [l.split("  ")[1] for l in (tmp_path / JOB / "MANIFEST").read_text().splitlines()
                if not l.startswith("#")]
    assert len(lines) == len(manifest)  # one line per file
    lf = next(l for l in lines if "llama-factory/train.yaml" in l)
    assert all(line.split()[0] == "ok" for line in lines if line != lf)
    assert lf.split()[0] == "skipped" and "not installed" in lf


def test_problems_are_named_and_exit_1(tmp_path):
    job = render(tmp_path)
    ds = json.loads((job / "llama-factory" / "ds_z3_config.json").read_text())
    ds["train_batch_size"] = 7
    rewrite(job, "llama-factory/ds_z3_config.json", json.dumps(ds, indent=2) + "\n")
    mf = (job / "mindformers" / "train.yaml").read_text().replace("model_parallel: 4", "model_parallel: 3")
    rewrite(job, "mindformers/train.yaml", mf)
    ms = (job / "mindspeed-llm" / "launch.sh").read_text().replace("  --swiglu\n", "  --swiglu\n  --not-a-flag\n")
    rewrite(job, "mindspeed-llm/launch.sh", ms)
    (job / "PLAN.md").write_text("edited\n")  # edited by hand: hash no longer matches
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1
    out = result.output
    assert re.search(r"problem  llama-factory/train.yaml .*DeepSpeed train_batch_size 7 differs from the YAML's \d+ "
                     r"at world 16", out)
    assert re.search(r"problem  mindformers/train.yaml .*\(V1; mindformers tools/check_rules.py", out)
    assert "(V5; " in out and "(V6; " in out
    assert re.search(r"problem  mindspeed-llm/launch.sh .*unrecognized arguments: --not-a-flag", out)
    assert "problem  PLAN.md  changed since gen-launch render wrote it" in out


def test_a_script_that_bash_rejects(tmp_path):
    job = render(tmp_path)
    rewrite(job, "mindformers/launch.sh", (job / "mindformers" / "launch.sh").read_text() + "if then\n")
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1 and "problem  mindformers/launch.sh  bash -n:" in result.output


def test_not_a_job_folder(tmp_path):
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 2 and "no MANIFEST" in result.stderr


def test_the_defects_upstream_found_are_problems(tmp_path):
    # Issue 10: what the old validate called ok. A float where Megatron declares an int, a choice upstream does
    # not have, and a rule that only fails at start-up (overlap-param-gather without the distributed optimizer).
    job = render(tmp_path)
    launch = (job / "mindspeed-llm" / "launch.sh").read_text()
    for old, new, expected in (("--rotary-base 1000000", "--rotary-base 1000000.0", "invalid int value: '1000000.0'"),
                               ("--lr-decay-style cosine", "--lr-decay-style noaux", "invalid choice: 'noaux'"),
                               ("  --use-distributed-optimizer\n", "", "rule opg_needs_do")):
        assert old in launch
        rewrite(job, "mindspeed-llm/launch.sh", launch.replace(old, new))
        result = CliRunner().invoke(main, ["validate", str(job)])
        assert result.exit_code == 1 and expected in result.output, (old, result.output)
    rewrite(job, "mindspeed-llm/launch.sh", launch)
    convert = (job / "mindspeed-llm" / "convert_ckpt.sh").read_text()
    pp = int(re.search(r"--target-pipeline-parallel-size (\d+)", convert).group(1))
    rewrite(job, "mindspeed-llm/convert_ckpt.sh", convert.replace(f"--target-pipeline-parallel-size {pp}",
                                                                  f"--target-pipeline-parallel-size {pp * 2}", 1))
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1
    assert (f"conversion writes target_pipeline_parallel_size={pp * 2} but training uses "
            f"pipeline_model_parallel_size={pp}") in result.output


def test_nothing_in_the_job_folder_is_imported(tmp_path, monkeypatch):
    # Issue 10: validate ran `python -c` inside the job folder, so a json.py there was imported and run.
    require("llamafactory", "deepspeed")
    monkeypatch.setattr(llama_factory, "_VERDICTS", {})  # the child must really run in the folder
    job = render(tmp_path)
    marker = tmp_path / "ran"
    (job / "llama-factory" / "json.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    assert llama_factory.llamafactory_parser_check(job / "llama-factory", 16, 5120, 128) == ("ok", "")
    assert not marker.exists()


def test_a_stale_torch_extensions_lock_does_not_stall_validate(tmp_path):
    # CI of issue 12 stalled: a killed DeepSpeed build had left ~/.cache/torch_extensions/.../deepspeed_shm_comm/lock,
    # and the check's DeepSpeed start waited on it forever (torch/utils/file_baton.py). Parsing needs no collective.
    require("llamafactory", "deepspeed")
    job = render(tmp_path / "gen")
    extensions = tmp_path / "torch_extensions"
    (extensions / "deepspeed_shm_comm").mkdir(parents=True)
    (extensions / "deepspeed_shm_comm" / "lock").write_text("")
    result = subprocess.run([sys.executable, "-m", "generator", "validate", str(job)], capture_output=True, text=True,
                            env={**os.environ, "TORCH_EXTENSIONS_DIR": str(extensions)}, timeout=240)
    line = next(l for l in result.stdout.splitlines() if "llama-factory/train.yaml" in l)
    assert result.returncode == 0 and line.split()[0] == "ok", result.stdout + result.stderr


def test_a_broken_environment_is_not_a_defect(tmp_path, monkeypatch):
    # Issue 10 / 11: a package that is there but does not import is exit 4 and status env, never "problem".
    job = render(tmp_path)
    monkeypatch.setattr(llama_factory, "llamafactory_installed", lambda: True)
    monkeypatch.setattr(llama_factory, "LLAMAFACTORY_CHECK", "import no_such_module_for_the_test\n")  # dies
    result = CliRunner().invoke(main, ["validate", str(job)])
    line = next(l for l in result.output.splitlines() if "llama-factory/train.yaml" in l)
    assert result.exit_code == 4 and line.split()[0] == "env", result.output


BROKEN_TORCH = """#!{python} -I
import sys
sys.modules["torch"] = None  # installed but does not import, as a CUDA build of torch does on a host without CUDA
args = sys.argv[1:]
code = args[args.index("-c") + 1]
sys.argv = ["-c", *args[args.index("-c") + 2:]]
exec(compile(code, "<check>", "exec"), {{"__name__": "__main__"}})
"""


def test_a_broken_torch_is_an_environment_problem(tmp_path, monkeypatch):
    # Issue 11: a broken torch made every train.yaml "rejected". The real check, run by an interpreter whose torch
    # does not import: exit 4, status env, and the line says how to reinstall.
    require("llamafactory", "deepspeed")
    job = render(tmp_path)
    python = tmp_path / "python-broken-torch"
    python.write_text(BROKEN_TORCH.format(python=sys.executable))
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    result = CliRunner().invoke(main, ["validate", str(job)])
    line = next(l for l in result.output.splitlines() if "llama-factory/train.yaml" in l)
    assert result.exit_code == 4 and line.split()[0] == "env", result.output
    assert "reinstall with: bash scripts/install.sh validate" in line and "problem" not in result.output


def test_a_busy_rendezvous_port_is_an_environment_problem(tmp_path, monkeypatch):
    # Review: the check's single-rank rendezvous on a taken port was reported as a defect in the file.
    require("llamafactory", "deepspeed")
    job = render(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        monkeypatch.setattr(llama_factory, "_free_port", lambda: busy.getsockname()[1])
        monkeypatch.setattr(llama_factory, "_VERDICTS", {})
        result = CliRunner().invoke(main, ["validate", str(job)])
    line = next(l for l in result.output.splitlines() if "llama-factory/train.yaml" in l)
    assert result.exit_code == 4 and line.split()[0] == "env" and "DistNetworkError" in line, result.output


@pytest.mark.parametrize("old,new,message", [
    ('flash_attn: "fa2"', 'flash_attn: "fa4"', "flash_attn: 'fa4' is not one of auto, disabled, sdpa, fa2, fa3"),
    ("bf16: true", "bf16: false", "bf16 must be on (and fp16 off)"),
    ("gradient_accumulation_steps: ", "gradient_accumulation_steps: 1", "is not the plan's global batch"),
])
def test_hand_edits_upstream_accepts_but_the_job_would_not_survive(tmp_path, old, new, message):
    # Review: LLaMA-Factory's parser takes any string for flash_attn (it fails at model load,
    # model/model_utils/attention.py); bf16 off trains in fp32, which the plan does not count.
    job = render(tmp_path)
    text = (job / "llama-factory" / "train.yaml").read_text()
    assert old in text
    rewrite(job, "llama-factory/train.yaml", re.sub(re.escape(old) + r"\S*", new, text, count=1))
    result = CliRunner().invoke(main, ["validate", str(job)])
    line = next(l for l in result.output.splitlines() if "llama-factory/train.yaml" in l)
    assert result.exit_code == 1 and line.split()[0] == "problem" and message in line, result.output


def test_files_are_checked_against_each_other(tmp_path):
    # Issue 10 review: each file parsed alone missed what made the set inconsistent.
    job = render(tmp_path)
    ms = job / "mindspeed-llm"
    launch, convert, pre = ((ms / n).read_text() for n in ("launch.sh", "convert_ckpt.sh", "preprocess_data.sh"))
    cases = [
        ("mindspeed-llm/launch.sh", launch, launch.replace('  "${OUTPUT_ARGS[@]}" \\\n',
                                                           '  "${OUTPUT_ARGS[@]}" \\\n  --seq-length 8192 \\\n'),
         "the torchrun line is not"),
        ("mindspeed-llm/launch.sh", launch, launch.replace("--rotary-base 1000000", "--rotary-base 10000"),
         "rotary_base=10000 but qwen3-32b's config.json has 1000000"),
        ("mindspeed-llm/launch.sh", launch, launch.replace("--prompt-type qwen3", "--prompt-type qwen"),
         "differs from preprocessing's qwen3"),
        ("mindspeed-llm/preprocess_data.sh", pre, pre.replace("mindspeed-llm/data/qwen3-32b-full-snt9b-16c\n",
                                                             "mindspeed-llm/data/other\n"),
         "is not what preprocessing writes"),
        ("mindspeed-llm/preprocess_data.sh", pre, pre.replace("AlpacaStyleInstructionHandler", "AlpacaHandler"),
         "is not a handler class"),
        ("mindspeed-llm/convert_ckpt.sh", convert, convert.replace("--target-pipeline-parallel-size 1\n",
                                                                   "--target-pipeline-parallel-size 2\n"),
         "HuggingFace export needs 1"),
    ]
    for path, original, edited, expected in cases:
        assert edited != original, expected
        rewrite(job, path, edited)
        result = CliRunner().invoke(main, ["validate", str(job)])
        assert result.exit_code == 1 and expected in result.output, (expected, result.output)
        rewrite(job, path, original)
    assert CliRunner().invoke(main, ["validate", str(job)]).exit_code == 0


def test_what_manifest_does_not_vouch_for_is_a_problem(tmp_path):
    job = render(tmp_path)
    manifest = (job / "MANIFEST").read_text()
    (job / "MANIFEST").write_text("".join(l for l in manifest.splitlines(True) if "mindspeed-llm/launch.sh" not in l))
    (job / "mindformers" / "launch_old.sh").write_text("echo old\n")
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1
    assert "problem  mindspeed-llm/launch.sh  not listed in MANIFEST" in result.output
    assert "problem  mindformers/launch_old.sh  not listed in MANIFEST" in result.output


def test_a_broken_or_missing_file_is_a_problem_not_a_traceback(tmp_path):
    job = render(tmp_path)
    rewrite(job, "mindformers/train.yaml", "parallel_config: [unclosed\n")
    (job / "plan.json").unlink()
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1 and (result.exception is None or isinstance(result.exception, SystemExit))
    assert "problem  mindformers/train.yaml  not valid YAML" in result.output
    assert "problem  plan.json  missing" in result.output
    assert "plan.json is missing or unreadable" in result.output


def test_mindformers_launcher_must_start_the_yaml_world(tmp_path):
    job = render(tmp_path)
    launch = (job / "mindformers" / "launch.sh").read_text()
    rewrite(job, "mindformers/launch.sh", launch.replace("\n  16 8 ", "\n  8 8 "))
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1 and "launch.sh starts 8 worker(s) for a 16-card YAML" in result.output


@pytest.mark.parametrize("rows,jsonl", [(40, False), (25, False), (25, True)])
def test_validate_counts_the_data_files_rows(tmp_path, monkeypatch, rows, jsonl):
    # Issue 23 item 16: max_steps is fixed from data.samples, so a data file of another size trains more or fewer
    # epochs without a word. The plan says so; validate counts the rows where the file is there.
    import yaml
    monkeypatch.setattr(llama_factory, "llamafactory_installed", lambda: False)
    data = tmp_path / ("train.jsonl" if jsonl else "train.json")
    row = {"instruction": "q", "input": "", "output": "a"}
    data.write_text("\n".join(json.dumps(row) for _ in range(rows)) + "\n" if jsonl else json.dumps([row] * rows))
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "job": "rows", "model": "qwen3-8b", "method": "lora", "seq_len": 1024, "hardware": "rtx4090", "cards": 1,
        "frameworks": ["llama-factory"], "data": {"samples": 40, "tokens_per_sample": 100},
        "paths": {"dataset": str(data), "output_dir": str(tmp_path / "out")}}))
    rendered = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "jobs")], catch_exceptions=False)
    assert rendered.exit_code == 0, rendered.output
    assert "a data file of another size trains more or fewer" in (tmp_path / "jobs/rows/PLAN.md").read_text()
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "jobs/rows")], catch_exceptions=False)
    line = next(l for l in result.output.splitlines() if "llama-factory/train.yaml" in l)
    if rows == 40:
        assert result.exit_code == 0 and line.split()[0] == "skipped", result.output
    else:
        assert result.exit_code == 1 and line.split()[0] == "problem", result.output
        assert f"has {rows} rows, but the plan's steps are sized for 40" in line and "data.samples: 25" in line
