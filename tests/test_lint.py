"""Lint and type checks, as part of the suite so CI runs them: ruff over the code, tests and bench scripts, mypy
over the package, both with the configuration in pyproject.toml (the test extra pins both and mypy's stubs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import require

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing():
    require("ruff")
    result = _run("ruff", "check", "--no-cache", "generator", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    require("mypy")
    result = _run("mypy")  # the files and options: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr
