"""Issue 12, properties of a job folder under re-render: random specs, random corruptions of the folder (stray,
edited, deleted, linked, FIFO, chmod, forged MANIFEST) and renders killed at random moments. Whatever happens:
no traceback, only documented exit codes, nothing outside OUT/<job> changed, the folder is the old complete set or
the new complete set, and `check` exits 1 on every difference. bench/folder_sweep.py runs more trials."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from folder_ops import (
    KINDS,
    ONE,
    SPECS,
    cli,
    corruption_trial,
    expected,
    files_of,
    folder_files,
    kill_trials,
    write_spec,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator import jobdir
from generator.render import write


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(old=st.sampled_from(sorted(SPECS)), new=st.sampled_from(sorted(SPECS)), kind=st.sampled_from(KINDS),
       pick=st.integers(0, 50))
def test_corrupted_folders_are_drift_and_never_lost(tmp_path_factory, old, new, kind, pick):
    corruption_trial(tmp_path_factory.mktemp("c"), old, new, kind, pick)


def test_killed_renders_leave_the_old_or_the_new_folder(tmp_path):
    """Renders killed at random moments of the write: 200 trials (the bench runs more)."""
    rng = random.Random(12)
    outcomes = kill_trials(tmp_path, rng, 200)
    assert outcomes["old"] > 10 and outcomes["new"] > 10, outcomes  # kills landed before and after the swap


@pytest.mark.parametrize("fail_at", [1, 3, 6])
def test_a_write_that_fails_midway_leaves_the_old_folder(tmp_path, monkeypatch, fail_at):
    out = tmp_path / "out"
    write(files_of("both"), out, "j", overwrite=False)
    calls = {"n": 0}
    real = Path.write_bytes

    def failing(self, data):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    result = cli("render", write_spec(tmp_path, ONE), "-o", out)
    monkeypatch.undo()
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert folder_files(out / "j") == expected("both") and not list(out.glob(".j+staging-*"))


def test_an_overwrite_killed_between_its_renames_never_leaves_the_new_render_as_the_backup(tmp_path, monkeypatch):
    # Issue 34 item 6: render --overwrite moves the old folder aside whole; killed between that and putting the new
    # one in place, the backup holds the old folder (never the new render), and nothing is lost.
    out = tmp_path / "out"
    write(files_of("both"), out, "j", overwrite=False)
    (out / "j" / "notes.txt").write_text("mine\n")  # not render's: the old folder is kept as a backup
    old = folder_files(out / "j")
    steps = {"n": 0}
    rename, exchange = jobdir.os.rename, jobdir._exchange

    def killed_at_the_second(step):
        def run(*args):
            steps["n"] += 1
            if steps["n"] == 2:
                raise KeyboardInterrupt  # the process dies here
            return step(*args)
        return run

    monkeypatch.setattr(jobdir.os, "rename", killed_at_the_second(rename))
    monkeypatch.setattr(jobdir, "_exchange", killed_at_the_second(exchange))
    with pytest.raises(KeyboardInterrupt):
        write(files_of("one"), out, "j", overwrite=True)
    monkeypatch.undo()
    backups = list(out.glob("j+backup-*"))
    assert len(backups) == 1 and folder_files(backups[0]) == old
    assert not (out / "j").exists() or folder_files(out / "j") == old
    write(files_of("one"), out, "j", overwrite=True)  # the next render puts the new folder in place
    assert folder_files(out / "j") == expected("one") and folder_files(backups[0]) == old
