"""gen-launch validate as a user runs it (issue 22 item 17): each file's line comes out as its checks finish, and
--json gives the same results as one document with the same exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "qwen3-32b-full-snt9b-16c.yaml"
JOB = "qwen3-32b-full-snt9b-16c"
# A shellcheck that holds its first run until the test has read validate's first line (GO appears), or gives up
# after 10 s and leaves GO.late: that it had to means validate printed nothing before running its checks.
HOLDING_SHELLCHECK = """#!/bin/bash
for _ in $(seq 100); do [ -e "$GO" ] && exit 0; sleep 0.1; done
touch "$GO" "$GO.late"
"""


def render(tmp_path: Path) -> Path:
    """The example with MindSpeed-LLM only: its checks are all offline, so the test stays quick."""
    result = CliRunner().invoke(main, ["render", str(EXAMPLE), "--set", "frameworks=[mindspeed-llm]", "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    return tmp_path / "out" / JOB


def test_validate_prints_each_line_before_the_later_checks_run(tmp_path):
    job = render(tmp_path)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "shellcheck").write_text(HOLDING_SHELLCHECK)
    (stubs / "shellcheck").chmod(0o755)
    go = tmp_path / "go"
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}", "GO": str(go)}
    with subprocess.Popen([sys.executable, "-m", "generator", "validate", str(job)], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        first = proc.stdout.readline()  # PLAN.md: no shell check before it
        go.touch()
        rest, errors = proc.communicate(timeout=120)
    assert first == "      ok  PLAN.md\n", errors
    assert not Path(f"{go}.late").exists(), "validate printed its first line only after a shell check ran"
    assert proc.returncode == 0 and "ok  mindspeed-llm/launch.sh" in rest


def test_validate_json_has_every_result_of_the_text_and_its_exit_status(tmp_path):
    job = render(tmp_path)
    (job / "notes.txt").write_text("a stray file\n")  # a problem: exit 1 both ways
    text = CliRunner().invoke(main, ["validate", str(job)])
    document = CliRunner().invoke(main, ["validate", "--json", str(job)])
    assert text.exit_code == document.exit_code == 1
    data = json.loads(document.stdout)
    assert data["exit_status"] == 1 and data["job_dir"] == str(job)
    lines = [f"{r['status']:>8}  {r['path']}" + (f"  {r['detail']}" if r["detail"] else "")
             for r in data["results"]]
    assert lines == text.stdout.splitlines()
    assert {"path": "notes.txt", "status": "problem"}.items() <= data["results"][-1].items()
    clean = CliRunner().invoke(main, ["validate", "--json", str(render(tmp_path / "again"))])
    assert clean.exit_code == json.loads(clean.stdout)["exit_status"] == 0


def test_validate_json_reports_a_folder_it_cannot_validate(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("")
    for folder in (tmp_path / "missing", tmp_path / "empty", tmp_path / "file"):
        result = CliRunner().invoke(main, ["validate", "--json", str(folder)])
        assert result.exit_code == 2 and result.stderr.startswith("Error:")
        document = json.loads(result.stdout)
        assert document == {"job_dir": str(folder), "exit_status": 2, "error": result.stderr[7:].rstrip("\n"),
                            "results": []}
        plain = CliRunner().invoke(main, ["validate", str(folder)])
        assert (plain.exit_code, plain.stdout, plain.stderr) == (2, "", result.stderr)


# An interpreter standing in for one with mindformers: it answers the loader check as MindFormers' would refuse.
REFUSING_PYTHON = """#!/bin/sh
echo '{"status": "problem", "detail": "stand-in refusal"}'
"""


def test_the_mindformers_interpreter_option_as_users_type_it(tmp_path):
    # Issue 24: the option is declared by the MindFormers plugin now; the flag and its variable still work.
    result = CliRunner().invoke(main, ["render", str(EXAMPLE), "--set", "frameworks=[mindformers]", "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    job = tmp_path / "out" / JOB
    python = tmp_path / "python"
    python.write_text(REFUSING_PYTHON)
    python.chmod(0o755)
    refused = "problem  mindformers/train.yaml  MindFormers' MindFormerConfig / check_rules reject it: stand-in refusal"
    by_flag = CliRunner().invoke(main, ["validate", "--mindformers-python", str(python), str(job)])
    by_variable = CliRunner().invoke(main, ["validate", str(job)], env={"GEN_LAUNCH_MINDFORMERS_PYTHON": str(python)})
    without = CliRunner().invoke(main, ["validate", str(job)], env={"GEN_LAUNCH_MINDFORMERS_PYTHON": None})
    assert by_flag.exit_code == by_variable.exit_code == 1
    assert refused in by_flag.output and refused in by_variable.output
    assert without.exit_code == 0 and "not run (opt-in: --mindformers-python, see README)" in without.output
    assert "--mindformers-python PYTHON" in CliRunner().invoke(main, ["validate", "--help"]).output


def test_validate_says_when_the_paths_are_placeholders(tmp_path):
    # Issue 37 item 7: a folder whose paths were all placeholders validated "ok" on every line; its files are
    # valid, but the job does not start until the paths are given: plan.json's line says so.
    spec = tmp_path / "job.yaml"
    spec.write_text("job: t\nmodel: qwen3-8b\nmethod: lora\nseq_len: 4096\nhardware: snt9b\n"
                    "frameworks: [mindspeed-llm]\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")]).exit_code == 0
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "out" / "t"), "--json"])
    assert result.exit_code == 0, result.output
    lines = {r["path"]: r for r in json.loads(result.stdout)["results"]}
    assert lines["plan.json"] == {"path": "plan.json", "status": "ok", "detail": (
        "not ready to launch: dataset, mcore_ckpt_dir, mindspeed_llm_dir, model_dir, output_dir are placeholders "
        "(give them under paths: in the spec and render again)")}
    given = CliRunner().invoke(main, ["validate", str(render(tmp_path / "given")), "--json"])
    assert {r["path"]: r for r in json.loads(given.stdout)["results"]}["plan.json"]["detail"] == ""
