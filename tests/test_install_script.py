"""scripts/install.sh: one command that installs an extra and leaves an environment whose packages import."""

from __future__ import annotations

import json
import os
import shutil
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
    assert calls[0] == "-m pip install .[test]"
    assert calls[1] == "-m pip install coverage==7.17.5 pytest-cov==7.1.0"  # bench/mutants.py's test selection
    assert "-m pip uninstall -y torchvision" in calls
    assert "-m pip uninstall -y torchaudio" not in calls  # it imports here: a CUDA host keeps it


def test_plain_install_removes_nothing(tmp_path):
    status, calls = run_install(tmp_path)
    assert status == 0
    assert calls[0] == "-m pip install ."
    assert not [call for call in calls if "coverage" in call]  # only the test install runs the mutation bench
    assert not [call for call in calls if "uninstall" in call]


@pytest.mark.parametrize("extra", ["tests", "validate test", "verl test", "--user"])
def test_refuses_an_unknown_extra(tmp_path, extra):
    status, calls = run_install(tmp_path, *extra.split())
    assert status == 2
    assert calls == []


def test_charts_installs_the_browser_where_missing_and_mermaid_as_pinned(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("npm", "apt-get"):  # stand-ins that record their arguments
        (bindir / tool).write_text(f'#!/usr/bin/env bash\nprintf "{tool} %s\\n" "$*" >> "$RECORD"\n')
        (bindir / tool).chmod(0o755)
    record = tmp_path / "record"
    record.write_text("")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": str(record)}
    result = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), "charts"], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    calls = record.read_text().splitlines()
    browser = [] if shutil.which("chromium") else ["apt-get update", "apt-get install -y --no-install-recommends "
                                                                     "chromium"]
    assert calls == [*browser, "npm ci --no-audit --no-fund"]
    assert json.loads((REPO / "package.json").read_text())["dependencies"] == {"mermaid": "12.3.0"}
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/mermaid"]["version"] == "12.3.0"
