"""What validate's checks share, whichever framework wrote the file: the job folder as a check sees it (job.py), shell
scripts (shell.py), commands.txt's node ranks (commands.py), and a framework's own code run in a child interpreter
(below). Each framework's own rules, as upstream enforces them, live in its plugin (generator/frameworks/<name>/)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def child_answer(python: str, code: str, args: list[str], cwd: Path, env: dict | None = None, timeout: int = 300,
                 stdin: str | None = None) -> dict | str:
    """Run a framework's own code in a child interpreter started with -I (no working directory or PYTHON* variables
    on sys.path, so nothing in `cwd` is imported), `stdin` as its standard input. Its answer is the JSON object on
    the last line it prints; a str says why there is none (it could not start, ran out of time or died)."""
    try:
        result = subprocess.run([python, "-I", "-c", code, *args], check=False, cwd=cwd, capture_output=True,
                                text=True, env=env, timeout=timeout, input=stdin)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {python}: {exc}"
    lines = result.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        answer = None
    if isinstance(answer, dict):
        return answer
    tail = [line for line in result.stderr.strip().splitlines() if line.strip()][-1:]
    return f"the check's interpreter died (exit {result.returncode}): {' '.join(tail)}"


def run_isolated(python: str, code: str, args: list[str], cwd: Path, env: dict | None = None,
                 timeout: int = 300) -> tuple[str, str]:
    """child_answer for a check whose `code` prints one JSON line {"status", "detail"}: "ok", "problem" (the
    framework refuses the file) or "env" (its packages do not import). A child that dies before answering is the
    environment's fault too."""
    answer = child_answer(python, code, args, cwd, env, timeout)
    if isinstance(answer, str):
        return "env", answer
    try:
        return answer["status"], answer["detail"]
    except KeyError:
        return "env", f"the check's interpreter answered without a status: {json.dumps(answer)[:200]}"
