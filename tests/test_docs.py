"""The README's and docs/'s command output blocks are the tool's real output, and docs/spec.md is the spec's
reference generated from the schema. To refresh them after a change:
    python tests/test_docs.py --update
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from click.testing import CliRunner

from generator.cli import main
from generator.specdoc import reference

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# file -> the commands whose output fills the code block that starts with `$ gen-launch COMMAND` (`| head -N`: the
# first N lines)
BLOCKS = {
    "README.md": ["models --matrix", "plan examples/llama3.1-70b-pretrain-budget.yaml | head -10"],
    "docs/planning.md": ["plan examples/qwen3-32b-full-snt9b-16c.yaml"],
    "docs/models.md": ["models"],
}


def _output(command: str) -> str:
    import os
    args, _, head = command.partition(" | head -")
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        out = CliRunner().invoke(main, args.split(), catch_exceptions=False).output
    finally:
        os.chdir(cwd)
    return "\n".join(out.splitlines()[:int(head)]) if head else out.rstrip("\n")


def rendered(name: str, text: str) -> str:
    for command in BLOCKS[name]:
        pattern = re.compile(rf"(```\n\$ gen-launch {re.escape(command)}\n)(.*?)(\n```)", re.S)
        body = _output(command)
        text, count = pattern.subn(lambda m, body=body: m.group(1) + body + m.group(3), text)
        assert count == 1, f"{name}: block for {command} not found"
    return text


def test_the_command_output_blocks_are_current():
    for name in BLOCKS:
        text = (REPO / name).read_text(encoding="utf-8")
        assert rendered(name, text) == text, f"{name} is stale: run python tests/test_docs.py --update"


def test_the_spec_reference_is_the_schemas():
    schema = json.loads((REPO / "schemas" / "job.schema.json").read_text(encoding="utf-8"))
    text = (REPO / "docs" / "spec.md").read_text(encoding="utf-8")
    assert text == reference(schema), "docs/spec.md is stale: run gen-launch schema --markdown > docs/spec.md"
    for key in ("job", "rl.reward", "cluster.slurm.partition", "layout.llama-factory.offload", "paths.rl_data"):
        assert f"| `{key}` |" in text, key


def test_the_spec_reference_follows_a_schema_edit():
    schema = json.loads((REPO / "schemas" / "job.schema.json").read_text(encoding="utf-8"))
    schema["properties"]["seq_len"]["description"] = "Edited."
    assert "| `seq_len` | yes | integer (>= 256, <= 1,048,576, a multiple of 256) | Edited. |" in reference(schema)


def test_the_readme_is_a_guide():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for step in ("gen-launch init", "gen-launch plan", "gen-launch render", "gen-launch validate", "sbatch"):
        assert step in text, step
    for link in re.findall(r"\]\((docs/[^)#]+)\)", text):
        assert (REPO / link).is_file(), link


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    for name in BLOCKS:
        (REPO / name).write_text(rendered(name, (REPO / name).read_text(encoding="utf-8")), encoding="utf-8")


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.startswith("bash scripts/install.sh test"))
    assert (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1] == command
