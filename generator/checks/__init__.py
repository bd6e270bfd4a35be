"""What validate's checks share, whichever framework wrote the file: the job folder as a check sees it (job.py), shell
scripts (shell.py), commands.txt's node ranks (commands.py), and a framework's own code run in a child interpreter
(below). Each framework's own rules, as upstream enforces them, live in its plugin (generator/frameworks/<name>/)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def run_isolated(python: str, code: str, args: list[str], cwd: Path, env: dict | None = None,
                 timeout: int = 300) -> tuple[str, str]:
    """Run a framework's own code in a child interpreter started with -I (no working directory or PYTHON* variables
    on sys.path, so nothing in `cwd` is imported). `code` prints one JSON line {"status", "detail"}: "ok",
    "problem" (the framework refuses the file) or "env" (its packages do not import). A child that dies before
    answering is the environment's fault too."""
    try:
        result = subprocess.run([python, "-I", "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                                env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "env", f"cannot run {python}: {exc}"
    lines = result.stdout.strip().splitlines()
    try:
        verdict = json.loads(lines[-1])
        return verdict["status"], verdict["detail"]
    except (IndexError, ValueError, KeyError, TypeError):
        tail = [line for line in result.stderr.strip().splitlines() if line.strip()][-1:]
        return "env", f"the check's interpreter died (exit {result.returncode}): {' '.join(tail)}"
