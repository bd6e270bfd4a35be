"""The CLI's entry points (`python -m generator`, the `gen-launch` script): both run cli.main, and the collector that
start-up pauses while the CLI loads (issue 35) runs again before any command does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_script_is_the_cli_with_the_collector_running_again():
    import tomllib  # Python 3.11's (the tests' interpreter)

    target = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["gen-launch"]
    module, _, name = target.partition(":")
    probe = (f"import gc, importlib; import generator.cli as cli; main = getattr(importlib.import_module({module!r}), "
             f"{name!r}); print(main is cli.main, gc.isenabled(), gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "True"]


def test_python_m_generator_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "generator", "--version"], cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "gen-launch, version " + __import__("generator").__version__ + "\n")
