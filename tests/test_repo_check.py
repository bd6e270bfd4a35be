"""Issue 37 item 3: `check` for an experiment repository: several specs or a folder of them, the plan values that
changed, and the pre-commit hook (.pre-commit-hooks.yaml) run by the real pre-commit package on a temporary git
repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
SPEC = {"model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b", "frameworks": ["mindspeed-llm"],
        "cards": 8, "data": {"samples": 20000, "tokens_per_sample": 1500}}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def experiment_repo(root: Path) -> Path:
    """jobs/{a,b,c}.yaml, each rendered into launch/."""
    jobs = root / "jobs"
    jobs.mkdir(parents=True)
    for name in "abc":
        (jobs / f"{name}.yaml").write_text(yaml.safe_dump({"job": f"job-{name}", **SPEC}))
        assert run("render", jobs / f"{name}.yaml", "-o", root / "launch").exit_code == 0
    return jobs


def test_check_takes_a_folder_or_several_specs_and_says_what_changed_in_the_plan(tmp_path):
    jobs = experiment_repo(tmp_path)
    out = tmp_path / "launch"
    clean = run("check", jobs, "-o", out)
    assert clean.exit_code == 0, clean.output
    assert [line.split()[-1] for line in clean.stdout.splitlines()] == ["date"] * 3
    spec = yaml.safe_load((jobs / "b.yaml").read_text())
    (jobs / "b.yaml").write_text(yaml.safe_dump({**spec, "data": {**spec["data"], "epochs": 2}}))
    for args in ([jobs], sorted(jobs.glob("*.yaml"))):
        stale = run("check", *args, "-o", out)
        assert stale.exit_code == 1, stale.output
        lines = stale.stdout.splitlines()
        assert lines[0] == f"{out / 'job-a'} is up to date" and lines[-1] == f"{out / 'job-c'} is up to date"
        changes = [line for line in lines if line.startswith("changes: ")]
        steps = next(line for line in changes if line.startswith("changes: train.steps: "))
        old, new = (int(word) for word in steps.split(": ")[-1].split(" -> "))
        assert 2 * old - 1 <= new <= 2 * old  # two epochs of the same data, same batch (steps round up)
        assert "changes: train.epochs: 1.0 -> 2.0" in changes
        assert "differs: plan.json" in lines and f"{out / 'job-b'} is out of date" in stale.stderr


def test_check_of_a_folder_without_specs_and_of_a_bad_spec(tmp_path):
    jobs = experiment_repo(tmp_path)
    (tmp_path / "empty").mkdir()
    empty = run("check", tmp_path / "empty", "-o", tmp_path / "launch")
    assert empty.exit_code == 2 and "holds no spec (*.yaml, *.yml)" in empty.stderr
    (jobs / "b.yaml").write_text("job: job-b\nmodel: [\n")  # not YAML: exit 2, the others are still checked
    bad = run("check", jobs, "-o", tmp_path / "launch")
    assert bad.exit_code == 2 and "b.yaml" in bad.stderr
    assert bad.stdout.splitlines() == [f"{tmp_path / 'launch' / j} is up to date" for j in ("job-a", "job-c")]


@pytest.fixture
def gen_launch_on_path(tmp_path):
    """A `gen-launch` command that runs this checkout's code (the hook's entry), first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gen-launch"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m generator "$@"\n')
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PRE_COMMIT_HOME": str(tmp_path / "cache"),
            "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"), "GIT_CONFIG_NOSYSTEM": "1"}


def test_the_pre_commit_hook_fails_a_stale_launch_folder(tmp_path, gen_launch_on_path):
    pytest.importorskip("pre_commit")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["gen-launch-check"]
    hook = hooks[0]
    # Published as a python hook (pre-commit installs gen-launch from the pinned rev); run here as a local hook of
    # the same entry and args against this checkout's code, so the test needs no network.
    assert hook["language"] == "python" and hook["entry"].split()[0] == "gen-launch"
    repo = tmp_path / "experiments"
    experiment_repo(repo)
    config = {"repos": [{"repo": "local", "hooks": [{**hook, "language": "unsupported"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    env = gen_launch_on_path

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    def pre_commit():
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=300)

    git("init", "-q")
    git("add", ".")
    clean = pre_commit()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "gen-launch check" in clean.stdout and "Passed" in clean.stdout
    spec = yaml.safe_load((repo / "jobs" / "c.yaml").read_text())
    (repo / "jobs" / "c.yaml").write_text(yaml.safe_dump({**spec, "train": {"learning_rate": 2e-5}}))
    git("add", ".")
    stale = pre_commit()
    assert stale.returncode == 1 and "Failed" in stale.stdout, stale.stdout + stale.stderr
    assert "changes: train.learning_rate: 0.0001 -> 2e-05" in stale.stdout
    assert "launch/job-c is out of date: run gen-launch render jobs/c.yaml -o launch" in stale.stdout
    shutil.rmtree(repo / "launch" / "job-c")
    fixed = subprocess.run(["gen-launch", "render", "jobs/c.yaml", "-o", "launch"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr
    git("add", "-A")
    assert pre_commit().returncode == 0
