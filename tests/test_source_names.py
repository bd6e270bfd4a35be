"""Issue 40: user-facing text names a source by what it is ("the Huawei card table", "the measured MFU table"), never
by the project's internal seed-document number ("seed 003"): every file `render` writes for the bundled examples and
bench/spec_sweep.py's specs (PLAN.md, plan.json, the launch files, MANIFEST), and every command's --help."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import spec_sweep
from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
INTERNAL = re.compile(r"seed[ -]?0", re.IGNORECASE)  # "seed 003", "seed-004", "Seed 000"; not "seed: 42"


def _specs(folder: Path) -> list[tuple[Path, bool]]:
    specs = [(path, False) for path in sorted((REPO / "examples").glob("*.yaml"))]
    for job in spec_sweep.SPECS:
        job = dict(job)
        force = bool(job.pop("FORCE", False))
        path = folder / f"{job['job']}.yaml"
        path.write_text(yaml.safe_dump(job, sort_keys=False), encoding="utf-8")
        specs.append((path, force))
    return specs


def _internal_names(folder: Path) -> list[str]:
    """'file: text around it' for each internal number in a file under `folder`."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.relative_to(folder)}: {text[max(m.start() - 60, 0):m.end() + 20]!r}"
                  for m in INTERNAL.finditer(text)]
    return found


def test_the_check_finds_an_internal_number(tmp_path):
    (tmp_path / "PLAN.md").write_text("min cards (Seed 000) and seed-004's MFU; seed: 42 is a value\n")
    assert len(_internal_names(tmp_path)) == 2


def test_no_rendered_file_names_a_source_by_its_internal_number(tmp_path):
    out, runner, rendered = tmp_path / "out", CliRunner(), 0
    for path, force in _specs(tmp_path):
        result = runner.invoke(main, ["render", str(path), "-o", str(out), "--overwrite",
                                      *(["--force"] if force else [])])
        rendered += result.exit_code == 0
    assert rendered >= 50  # the examples and (nearly) every sweep spec
    found = _internal_names(out)
    assert not found, "\n".join(found[:20])


def test_no_help_text_names_a_source_by_its_internal_number():
    runner = CliRunner()
    texts = {"": runner.invoke(main, ["--help"]).output}
    texts.update({name: runner.invoke(main, [name, "--help"]).output for name in main.commands})
    assert all(texts.values()) and len(texts) > 8
    assert not [name for name, text in texts.items() if INTERNAL.search(text)]
