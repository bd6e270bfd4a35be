"""scripts/install.sh: one command that installs an extra and leaves an environment whose packages import."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A python3 that records its arguments; `pip show NAME` succeeds for the names in $INSTALLED and `-c "import NAME"`
# fails for those in $BROKEN, as PyPI's CUDA torchvision does beside a CPU torch.
STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$RECORD"
case "$*" in
  "-m pip show -q "*) [[ " $INSTALLED " == *" ${@: -1} "* ]] ;;
  "-c import "*) name="${2#import }"; [[ " $BROKEN " != *" $name "* ]] ;;
  *) exit 0 ;;
esac
"""


def run_install(tmp_path: Path, *args: str, installed: str = "", broken: str = "") -> tuple[int, list[str]]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    stub = bindir / "python3"
    stub.write_text(STUB, encoding="utf-8")
    stub.chmod(0o755)
    record = tmp_path / "record"
    record.write_text("", encoding="utf-8")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": str(record), "INSTALLED": installed,
           "BROKEN": broken}
    result = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), *args], env=env, capture_output=True,
                            text=True)
    return result.returncode, record.read_text(encoding="utf-8").splitlines()


def test_removes_only_what_does_not_import(tmp_path):
    status, calls = run_install(tmp_path, "test", installed="torchvision torchaudio", broken="torchvision")
    assert status == 0
    assert calls[0] == "-m pip install -e .[test]"
    assert "-m pip uninstall -y torchvision" in calls
    assert "-m pip uninstall -y torchaudio" not in calls  # it imports here: a CUDA host keeps it


def test_plain_install_removes_nothing(tmp_path):
    status, calls = run_install(tmp_path)
    assert status == 0
    assert calls[0] == "-m pip install -e ."
    assert not [call for call in calls if "uninstall" in call]


@pytest.mark.parametrize("extra", ["tests", "validate test", "verl test", "--user"])
def test_refuses_an_unknown_extra(tmp_path, extra):
    status, calls = run_install(tmp_path, *extra.split())
    assert status == 2
    assert calls == []
