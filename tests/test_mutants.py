"""A fixed sample of mutants (bench/mutants.py SAMPLE: slips the suite let through before issue 42) must each fail
its module's first covering test file, so the mutation kill rate cannot fall back unseen. Each runs in a copy of
the tree in a temporary folder; the measure of every module is `python bench/mutants.py` (bench/mutants-*.md)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("mutants", REPO / "bench" / "mutants.py")
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mutants  # dataclasses look their module up by name
_spec.loader.exec_module(mutants)

SAMPLED = sorted((m for module in mutants.TARGETS for m in mutants.mutants(module) if m.key in mutants.SAMPLE),
                 key=lambda m: m.key)


def test_every_sampled_mutant_is_still_in_its_module():
    """A sample key that no longer names a mutant (its code was rewritten) is dropped or replaced, not skipped."""
    assert {m.key for m in SAMPLED} == mutants.SAMPLE


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return mutants.copy_tree(tmp_path_factory.mktemp("mutants") / "tree", None)


@pytest.mark.parametrize("mutant", SAMPLED, ids=lambda m: f"{m.module}:{m.line}:{m.operator}")
def test_the_tests_kill_the_sampled_mutant(tree, mutant):
    target = mutants.TARGETS[mutant.module]
    path = tree / target.path
    source = path.read_text()
    assert source[mutant.start:mutant.end] == mutant.original
    first = next(a for a in target.tests if a.endswith(".py"))
    try:
        path.write_text(source[:mutant.start] + mutant.replacement + source[mutant.end:])
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", first], cwd=tree,
                              env={**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"},
                              capture_output=True, text=True, timeout=600, check=False)
    finally:
        path.write_text(source)
        shutil.rmtree(tree / ".hypothesis", ignore_errors=True)
    assert done.returncode == 1, f"{mutants.shown(mutant)} survived {first}:\n{done.stdout[-2000:]}"
