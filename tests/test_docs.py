"""The README's example plan and model list are the tool's real output. To refresh them after a change:
    python tests/test_docs.py --update
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BLOCKS = {  # marker -> command whose output fills the code block that holds the marker
    "example-plan": ["plan", "examples/qwen3-32b-full-snt9b-16c.yaml"],
    "models": ["models"],
}


def _output(args: list[str]) -> str:
    import os
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False).output
    finally:
        os.chdir(cwd)


def rendered_readme(text: str) -> str:
    for marker, args in BLOCKS.items():
        pattern = re.compile(rf"(\$ gen-launch {re.escape(' '.join(args))}\n)(.*?)(\n```)", re.S)
        body = _output(args).rstrip("\n")
        text, count = pattern.subn(lambda m, body=body: m.group(1) + body + m.group(3), text)
        assert count == 1, f"README block for {marker} not found"
    return text


def test_readme_blocks_are_current():
    text = README.read_text(encoding="utf-8")
    assert rendered_readme(text) == text, "README is stale: run python tests/test_docs.py --update"


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    README.write_text(rendered_readme(README.read_text(encoding="utf-8")), encoding="utf-8")


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.startswith("bash scripts/install.sh test"))
    assert (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1] == command
