"""Issue 22, items 9-11 (the job folder): what a stray in OUT/<job> can do to check, render, render --overwrite and
validate. Properties over the attack categories: a huge file (sparse, many GiB: no disk used, and the CLI runs under
a 1 GiB address-space limit, so reading it whole fails), a folder thousands of levels deep (past the recursion
limit and past the system's path length), stray names of any characters; then staging leftovers, an unreadable
folder, a disk that fills during an --overwrite render, and a MANIFEST line made by hand."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from folder_ops import BOTH, ONE, cli, expected, folder_files, snapshot, write_spec
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from stray_ops import (
    COMMANDS,
    backups,
    deep_trial,
    huge_trial,
    make_deep,
    memory_root,
    name_trial,
    rendered,
)

from generator.jobdir import remove_tree
from generator.shell import quote

# Each example runs the CLI (or four): few of them, and no shrinking (a failing example is printed as found).
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# 9: a large file --------------------------------------------------------------------------------------------------

@SETTINGS
@given(command=st.sampled_from(COMMANDS), where=st.sampled_from(["big.bin", "mindformers/extra.bin", "PLAN.md",
                                                                   "MANIFEST"]),
       size=st.integers(2**30 + 1, 2**36))
def test_a_huge_file_in_the_job_folder_is_never_read_whole(tmp_path, command, where, size):
    huge_trial(tmp_path / "t", command, where, size)


# 9: a deep folder -------------------------------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path):
    root = memory_root(tmp_path / "scratch")
    yield root
    remove_tree(root)  # pytest's own clean-up (shutil.rmtree) recurses


@SETTINGS
@given(command=st.sampled_from(COMMANDS), depth=st.integers(1_000, 3_000),
       leaf=st.sampled_from(["file", "link", "fifo"]), under=st.sampled_from(["", "mindformers"]))
def test_a_deep_folder_in_the_job_folder_is_walked_without_recursion(scratch, command, depth, leaf, under):
    deep_trial(scratch / "t", command, depth, leaf, under)


def test_remove_tree_deletes_any_depth_and_never_follows_a_link(scratch):
    outside = scratch / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    top = scratch / "top"
    top.mkdir()
    make_deep(top, 4_000, "file")
    (top / "link").symlink_to(outside)
    (top / "d" / ".1").mkdir()  # a name the moves up would pick
    remove_tree(top)
    assert not top.exists() and (outside / "keep.txt").read_text() == "keep\n"


# 10: staging leftovers, an unreadable folder, a full disk, a MANIFEST line made by hand ---------------------------


@pytest.mark.parametrize("depth", [0, 1_500])
def test_check_reports_staging_leftovers_and_render_removes_them(scratch, depth):
    spec, out, _ = rendered(scratch / "t")
    leftover = out / ".j+staging-x1y2z3"
    leftover.mkdir()
    (leftover / "PLAN.md").write_text("half\n")
    make_deep(leftover, depth, "file")
    result = cli("check", spec, "-o", out)
    assert result.exit_code == 1, result.output
    line = (f"staging leftover: {leftover} (a render was killed while writing it; the next render removes it, or: "
            f"rm -rf -- {quote(str(leftover))})")
    assert result.stdout.splitlines() == [line]
    assert cli("render", spec, "-o", out).exit_code == 0
    assert not leftover.exists() and cli("check", spec, "-o", out).exit_code == 0


@contextmanager
def unprivileged():
    """Run the block as `nobody` when the tests run as root (root reads a chmod-000 folder); as is otherwise."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_an_unreadable_folder_is_refused_and_kept_whole(tmp_path):
    root = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are closed to anyone but their owner
    try:
        os.chmod(root, 0o755)
        if os.geteuid() == 0:
            os.chown(root, 65534, 65534)
        spec, out, job = write_spec(root, ONE), root / "out", root / "out" / "j"
        cli("plan", spec)  # every module and table loaded before the user changes
        with unprivileged():
            assert cli("render", spec, "-o", out).exit_code == 0
            (job / "mindformers").chmod(0)
            try:
                check = cli("check", spec, "-o", out)
                refused = cli("render", spec, "-o", out)
                validated = cli("validate", job)
                forced = cli("render", spec, "-o", out, "--overwrite")
                kept = backups(out)
            finally:
                for folder in [job, *kept]:
                    if (folder / "mindformers").exists():
                        (folder / "mindformers").chmod(0o755)
        assert check.exit_code == 1 and "cannot be read: mindformers/" in check.output.splitlines(), check.output
        assert refused.exit_code == 2 and "mindformers/" in refused.stderr, refused.output
        assert validated.exit_code == 1 and "problem  mindformers  a folder that cannot be read" in validated.output
        assert forced.exit_code == 0 and folder_files(job) == expected("one")
        assert [folder_files(k) for k in kept] == [expected("one")]  # the unreadable folder's files, kept
    finally:
        remove_tree(root)


@contextmanager
def small_disk(where: Path, size: int):
    """A tmpfs of `size` bytes at `where` (skips where mounting is not allowed)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, check=False)
    if mounted.returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(path: Path, leave: int) -> None:
    """Write zeros to `path` until at most `leave` bytes of its file system are free."""
    with open(path, "wb", buffering=0) as handle:
        while True:
            free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
            if free <= leave:
                return
            try:
                handle.write(b"\0" * min(free - leave, 2**20))
                handle.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return


@pytest.mark.parametrize("room", ["room for the new folder", "a full disk"])
def test_a_forced_render_on_a_full_disk_leaves_no_partial_copy(tmp_path, room):
    with small_disk(tmp_path / "disk", 4 * 2**20) as disk:
        spec = write_spec(disk, ONE)  # beside OUT, as expected() records it
        out, job = disk / "out", disk / "out" / "j"
        assert cli("render", spec, "-o", out).exit_code == 0
        fill(job / "notes.bin", 1 * 2**20 if room == "room for the new folder" else 0)
        before, outside = folder_files(job), snapshot(disk, job)
        result = cli("render", spec, "-o", out, "--overwrite")
        assert not list(out.glob(".j+staging-*"))
        assert snapshot(disk, job) == outside
        if room == "a full disk":
            assert result.exit_code == 2 and "No space left on device" in result.stderr, result.output
            assert folder_files(job) == before and not backups(out)
        else:
            assert result.exit_code == 0, result.output
            assert folder_files(job) == expected("one") and [folder_files(k) for k in backups(out)] == [before]


@pytest.mark.parametrize("fail_at", [1, 4])
def test_a_forced_render_that_fails_midway_leaves_the_old_folder_and_no_backup(tmp_path, monkeypatch, fail_at):
    spec, out, job = rendered(tmp_path / "t")
    (job / "notes.txt").write_text("mine\n")
    before = folder_files(job)
    calls = {"n": 0}
    real = Path.write_bytes

    def failing(self, data):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    result = cli("render", spec, "-o", out, "--overwrite")
    monkeypatch.undo()
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert folder_files(job) == before and not backups(out) and not list(out.glob(".j+staging-*"))


def forged_lines(job: Path, path: str, last: str) -> None:
    """A MANIFEST line for `path` with its right sha256, and a last line recomputed over the lines above."""
    lines = (job / "MANIFEST").read_text().splitlines(True)[:-1]
    digest = hashlib.sha256((job / path).read_bytes()).hexdigest()
    body = "".join(lines) + f"{digest}  {path}\n"
    (job / "MANIFEST").write_text(f"{body}{last}{hashlib.sha256(body.encode()).hexdigest()}\n")


@pytest.mark.parametrize("last", ["# sha256 of the lines above: ", "# gen-launch seal of the lines above: "])
@pytest.mark.parametrize("path", ["notes.txt", "mindformers/my_launch.sh", "llama-factory/train.yaml"])
def test_a_manifest_line_made_by_hand_vouches_for_nothing(tmp_path, path, last):
    spec, out, job = rendered(tmp_path / "t")
    (job / path).parent.mkdir(exist_ok=True)
    (job / path).write_text("mine\n")
    forged_lines(job, path, last)
    before = folder_files(job)
    result = cli("render", spec, "-o", out)
    # Refused: the MANIFEST does not verify, so neither the file nor the plan.json record it vouches for is trusted.
    assert result.exit_code == 2 and "MANIFEST" in result.stderr, result.output
    assert folder_files(job) == before
    checked = cli("check", spec, "-o", out)
    assert checked.exit_code == 1 and path in checked.output
    forced = cli("render", spec, "-o", out, "--overwrite")
    assert forced.exit_code == 0 and [folder_files(k) for k in backups(out)] == [before]


def test_files_render_wrote_are_still_removed_without_a_backup(tmp_path):
    spec, out, job = rendered(tmp_path / "t", BOTH)
    write_spec(spec.parent, ONE)  # the same spec file, now with one framework fewer
    result = cli("render", spec, "-o", out)
    assert result.exit_code == 0 and "   remove  " in result.output and not backups(out)
    assert folder_files(job) == expected("one")


# 11 (folder part): names echoed escaped ----------------------------------------------------------------------------

NAMES = st.one_of(
    st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1, max_size=16),
    st.binary(min_size=1, max_size=16).filter(lambda b: b"/" not in b and b"\0" not in b).map(os.fsdecode),
).filter(lambda name: name not in (".", "..") and len(os.fsencode(name)) < 200)


@settings(SETTINGS, max_examples=25)
@given(name=NAMES, under=st.sampled_from(["", "mindformers/"]), kind=st.sampled_from(["file", "folder", "link"]))
def test_stray_names_are_echoed_escaped(tmp_path, name, under, kind):
    assume(name_trial(tmp_path / "t", name, under, kind))
