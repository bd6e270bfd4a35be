"""What `gen-launch plan` leaves unimported (issue 26: its start-up against the bare imports, bench/startup.py): the
code only render and validate run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter: the modules this process has imported say nothing about plan's own.
PLAN_AND_LIST = """
import sys
from generator.cli import main
try:
    main(["plan", sys.argv[1]])
except SystemExit:
    pass
print("imported:", *sorted(sys.modules))
"""


def test_plan_imports_nothing_only_render_and_validate_use():
    result = subprocess.run([sys.executable, "-c", PLAN_AND_LIST, "examples/qwen3-32b-full-snt9b-16c.yaml"],
                            capture_output=True, text=True, cwd=REPO, check=True)
    imported = result.stdout.splitlines()[-1].split()[1:]
    # The plugins' output side, the planning side of the frameworks the example does not plan (contract.py Plugin
    # imports each when first used; the example fine-tunes, which verl and MindSpeed-MM do not), and what jobdir.py
    # needs only to write a job folder
    unused = [name for name in imported if name in ("ctypes", "fcntl", "generator.frameworks.verl.planning",
                                                    "generator.frameworks.mindspeed_mm.planning") or (
        name.startswith("generator.frameworks.") and name.rsplit(".", 1)[1] in ("output", "render", "validate",
                                                                                "checks"))]
    assert "generator.resolve" in imported and not unused, unused


# Issue 37 item 7: `--version` and `--help` imported the resolver, the tables and the renderer (a whole plan's
# start-up) to print a line or the command list.
RUN_AND_LIST = """
import sys
from generator.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("imported:", *sorted(sys.modules))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"], ["plan", "--help"], ["render", "--help"]])
def test_version_and_help_import_no_planner(args):
    result = subprocess.run([sys.executable, "-c", RUN_AND_LIST, *args], capture_output=True, text=True, cwd=REPO,
                            check=True)
    imported = result.stdout.splitlines()[-1].split()[1:]
    heavy = [name for name in imported if name in ("generator.resolve", "generator.tables", "generator.render",
                                                   "generator.plan", "generator.spec", "generator.frameworks",
                                                   "jinja2", "yaml", "jsonschema")]
    assert heavy == [], heavy


EXAMPLES = sorted(path.relative_to(REPO).as_posix() for path in (REPO / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_plan_loads_no_job_folder_code(example):
    """Issue 35: `plan` prints a plan through the one Jinja environment (templating.py) and loads none of what writes
    or checks a job folder: the renderer (generator/render/), the folder's own operations (jobdir.py) and record
    (record.py). The renderer came with the environment, jobdir with cli.py's MANIFEST name, and with MindFormers'
    predict planning its files' helpers (render/common.py): some 10 ms of a 170 ms plan."""
    result = subprocess.run([sys.executable, "-c", RUN_AND_LIST, "plan", example], capture_output=True, text=True,
                            cwd=REPO, check=True)
    imported = result.stdout.splitlines()[-1].split()[1:]
    folder = [name for name in imported if name.startswith("generator.render")
              or name in ("generator.jobdir", "generator.record")]
    assert "generator.resolve" in imported and folder == [], folder
