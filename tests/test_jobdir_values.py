"""The job folder's rules as values (generator/jobdir.py): what is read (never through a link, never more than the
limit), what MANIFEST vouches for (only with an intact seal), which paths it may name, and what each file becomes
on a re-render. The mutation run of issue 42 (bench/mutants.py) changed these unseen by the attack tests."""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import hashlib
import os
import stat
from pathlib import Path

import pytest
from folder_ops import no_hang

from generator import jobdir
from generator.errors import UserError
from generator.jobdir import (
    MANIFEST,
    SEAL,
    Change,
    Entry,
    compare,
    drift,
    file_digest,
    leftovers,
    locked,
    manifest_text,
    parse_manifest,
    read_regular,
    remove_tree,
    safe_relative,
    scan,
)


def test_a_regular_file_is_read_up_to_its_limit_and_no_further(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_regular(path, limit=10) == b"x" * 10
    assert read_regular(path, limit=9) is None
    assert file_digest(path, limit=10) == hashlib.sha256(b"x" * 10).hexdigest()
    assert file_digest(path, limit=9) is None
    assert read_regular(tmp_path / "missing") is None


def test_a_link_a_folder_or_a_fifo_is_never_read(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")  # opened without O_NONBLOCK this would hang the read
    for name in ("link", "fifo"):
        assert read_regular(tmp_path / name) is None
        assert file_digest(tmp_path / name) is None
    assert read_regular(tmp_path) is None


def test_scan_reports_each_kind_hashes_only_what_it_is_asked_and_follows_no_link(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "a" / "run.sh").chmod(0o755)
    (tmp_path / "a" / "data").write_bytes(b"d")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_bytes(b"x")
    (tmp_path / "job").mkdir()
    for name in ("a",):
        os.rename(tmp_path / name, tmp_path / "job" / name)
    (tmp_path / "job" / "link").symlink_to(tmp_path / "outside")
    os.mkfifo(tmp_path / "job" / "fifo")
    found = scan(tmp_path / "job", hashed={"a/run.sh"})
    assert found == {"a": Entry("folder"), "a/data": Entry("file", None, False),
                     "a/run.sh": Entry("file", hashlib.sha256(b"#!/bin/sh\n").hexdigest(), True),
                     "fifo": Entry("special"), "link": Entry("symlink")}
    assert list(found) == sorted(found)
    assert Entry("file").executable is False and Entry("file").digest is None
    assert len({Entry("file"), Entry("file"), Entry("folder")}) == 2  # a value: compared and hashed, never changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        Entry("file").kind = "symlink"  # type: ignore[misc]


@pytest.mark.parametrize("path,safe", [("a/b.sh", True), ("MANIFEST", True), ("", False), ("/etc/passwd", False),
                                       ("../x", False), ("a/../x", False), ("a/./x", False), ("a//x", False),
                                       ("a/", False), ("a\\b", False), (".", False), ("a/..", False)])
def test_manifest_may_name_only_paths_render_could_write(path, safe):
    assert safe_relative(path) is safe


def test_an_intact_manifest_lists_its_files_and_skips_comments_and_unsafe_paths():
    text = manifest_text(["# header"], {"a.sh": "A", "b/c.yaml": "C"})
    lines = text.splitlines()
    assert lines[0] == "# header"
    assert lines[1] == f"{hashlib.sha256(b'A').hexdigest()}  a.sh"
    assert lines[-1].startswith(SEAL)
    manifest = parse_manifest(text.encode())
    assert manifest.intact
    assert manifest.entries == {"a.sh": hashlib.sha256(b"A").hexdigest(), "b/c.yaml": hashlib.sha256(b"C").hexdigest()}
    sneaky = manifest_text([], {"../evil": "E", "/abs": "E", "ok": "O"})
    assert parse_manifest(sneaky.encode()).entries == {"ok": hashlib.sha256(b"O").hexdigest()}


def test_a_manifest_edited_by_hand_or_sealed_with_a_plain_hash_is_not_intact():
    text = manifest_text(["# header"], {"a.sh": "A"})
    body, seal = text.rsplit(SEAL, 1)
    assert not parse_manifest(f"{body}{hashlib.sha256(b'B').hexdigest()}  b.sh\n{SEAL}{seal}".encode()).intact
    assert not parse_manifest(f"{body}{SEAL}{hashlib.sha256(body.encode()).hexdigest()}\n".encode()).intact
    assert not parse_manifest(body.encode()).intact  # no seal line
    assert not parse_manifest(f"{body}# {SEAL}{seal}".encode()).intact
    none = parse_manifest(None)
    assert (none.entries, none.intact) == ({}, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        none.intact = True  # type: ignore[misc]  # a value: what MANIFEST vouches for is never changed after parsing


def job(tmp_path, files: dict[str, str], header=("# made by a test",)):
    """A job folder as render writes it: the files and their MANIFEST."""
    everything = {**files, MANIFEST: manifest_text(list(header), files)}
    for path, text in everything.items():
        target = tmp_path / "job" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(0o755 if path.endswith(".sh") else 0o644)
    return tmp_path / "job", everything


def actions(changes: list[Change]) -> dict[str, str]:
    return {c.path: c.action for c in changes}


def test_a_rerender_knows_each_file_by_the_intact_manifest(tmp_path):
    folder, files = job(tmp_path, {"a/run.sh": "run", "a/conf.yaml": "old", "gone.txt": "g"})
    (folder / "a" / "stray.txt").write_text("mine")
    (folder / "empty").mkdir()
    new = {"a/run.sh": "run", "a/conf.yaml": "new", "b/made.txt": "m",
           MANIFEST: manifest_text([], {"a/run.sh": "run", "a/conf.yaml": "new", "b/made.txt": "m"})}
    assert actions(compare(new, folder)) == {"a/run.sh": "identical", "a/conf.yaml": "overwrite",
                                            "b/made.txt": "create", MANIFEST: "overwrite", "a/stray.txt": "stray",
                                            "empty/": "stray", "gone.txt": "remove"}
    (folder / "a" / "run.sh").chmod(0o644)
    assert actions(compare(new, folder))["a/run.sh"] == "mode"


def test_a_broken_seal_vouches_for_nothing(tmp_path):
    folder, files = job(tmp_path, {"conf.yaml": "old", "gone.txt": "g"})
    (folder / MANIFEST).write_text(files[MANIFEST].replace("# made by a test", "# edited"))
    new = {"conf.yaml": "new", MANIFEST: manifest_text([], {"conf.yaml": "new"})}
    assert actions(compare(new, folder)) == {"conf.yaml": "edited", MANIFEST: "edited", "gone.txt": "stray"}


def test_a_file_edited_since_render_is_edited_and_a_link_in_its_place_is_stray(tmp_path):
    folder, _ = job(tmp_path, {"conf.yaml": "old", "other.yaml": "o"})
    (folder / "conf.yaml").write_text("changed by hand")
    (folder / "other.yaml").unlink()
    (folder / "other.yaml").symlink_to(tmp_path)
    new = {"conf.yaml": "new", "other.yaml": "o"}
    assert actions(compare(new, folder)) == {"conf.yaml": "edited", "other.yaml": "stray", MANIFEST: "stray"}


def test_a_linked_job_folder_is_never_looked_into(tmp_path):
    folder, _ = job(tmp_path, {"conf.yaml": "c"})
    (tmp_path / "linked").symlink_to(folder)
    assert actions(compare({"conf.yaml": "c"}, tmp_path / "linked")) == {"conf.yaml": "create"}


def test_drift_names_every_difference_in_check_words():
    changes = [Change(p, a) for p, a in [("a", "create"), ("b", "overwrite"), ("c", "edited"), ("d", "mode"),
                                         ("e", "remove"), ("f", "stray"), ("g/", "unreadable"), ("h", "identical")]]
    assert drift(changes) == ["missing: a", "differs: b", "differs: c", "mode differs: d", "no longer generated: e",
                              "not generated: f", "cannot be read: g/"]


def test_remove_tree_removes_any_depth_and_follows_no_link(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("p")
    deep = tmp_path / "tree"
    folder = deep
    for n in range(40):
        folder = folder / f"d{n}"
        folder.mkdir(parents=True)
        (folder / "f").write_text(str(n))
    (folder / "link").symlink_to(keep)
    (deep / "d0" / ".1").mkdir()  # a name remove_tree's renames would take: it picks another
    remove_tree(deep)
    assert not deep.exists()
    assert (keep / "precious").read_text() == "p"
    remove_tree(tmp_path / "missing")  # nothing there: nothing to do


def test_replace_writes_every_file_with_its_mode_and_keeps_a_backup_whole(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    files = {"a/b/run.sh": "r", "a/b/conf.yaml": "c", "top.txt": "t"}
    assert jobdir.replace(files, out, "j", backup=False) is None
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(out / "j" / "a/b/run.sh").st_mode) == 0o777 & ~mask
    assert stat.S_IMODE(os.stat(out / "j" / "a/b/conf.yaml").st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(os.stat(out / "j").st_mode) == 0o777 & ~mask
    kept = jobdir.replace({"new.txt": "n"}, out, "j", backup=True)
    assert kept is not None and (kept / "a/b/run.sh").read_text() == "r"
    assert sorted(p.name for p in (out / "j").iterdir()) == ["new.txt"]
    assert jobdir.replace({"x.txt": "x"}, out, "j", backup=False) is None
    assert sorted(p.name for p in (out / "j").iterdir()) == ["x.txt"]
    assert sorted(p.name for p in out.iterdir()) == ["j", kept.name]  # no staging folder left


def test_a_backup_name_that_is_taken_even_by_a_dangling_link_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(jobdir.time, "strftime", lambda *_: "STAMP")
    (tmp_path / "j+backup-STAMP").symlink_to(tmp_path / "nowhere")
    assert jobdir._backup_name(tmp_path / "j") == tmp_path / "j+backup-STAMP-2"
    (tmp_path / "j+backup-STAMP-2").mkdir()
    assert jobdir._backup_name(tmp_path / "j") == tmp_path / "j+backup-STAMP-3"


def test_folders_swap_in_one_exchange_and_a_failed_one_says_why(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "from_a").write_text("a")
    (tmp_path / "b").mkdir()
    assert jobdir._exchange(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b" / "from_a").exists() and not (tmp_path / "a" / "from_a").exists()
    with pytest.raises(OSError) as failed:
        jobdir._exchange(tmp_path / "a", tmp_path / "missing")
    assert failed.value.errno == errno.ENOENT


def test_leftovers_are_the_jobs_staging_folders_only(tmp_path):
    for name in (".j+staging-1", ".j+staging-2", ".jj+staging-1", "j"):
        (tmp_path / name).mkdir()
    (tmp_path / ".j+staging-link").symlink_to(tmp_path / "j")
    assert leftovers(tmp_path, "j") == [tmp_path / ".j+staging-1", tmp_path / ".j+staging-2"]
    jobdir.clear_leftovers(tmp_path, "j")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".j+staging-link", ".jj+staging-1", "j"]


def test_one_render_at_a_time(tmp_path):
    with locked(tmp_path), pytest.raises(UserError, match="another gen-launch render is writing here"), \
            locked(tmp_path):
        pass
    with locked(tmp_path):  # released
        pass


def test_a_file_of_16_mib_is_read_and_hashed_and_one_byte_more_is_not(tmp_path):
    """jobdir.py MAX_READ: no file render writes comes near 16 MiB; a larger one is never read nor hashed."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * (16 * 2**20))
    assert len(read_regular(path) or b"") == 16 * 2**20
    assert file_digest(path) == hashlib.sha256(b"x" * (16 * 2**20)).hexdigest()
    with path.open("ab") as grown:
        grown.write(b"x")
    assert read_regular(path) is None and file_digest(path) is None


def test_a_file_is_hashed_one_mib_at_a_time(tmp_path, monkeypatch):
    """jobdir.py file_digest: the file is read in 1 MiB chunks (_CHUNK), never whole, up to its end."""
    path = tmp_path / "f"
    path.write_bytes(b"y" * (3 * 2**20))
    asked: list[int] = []
    real_read = os.read

    def read(fd: int, size: int) -> bytes:
        asked.append(size)
        return real_read(fd, size)

    monkeypatch.setattr(jobdir.os, "read", read)
    assert file_digest(path) == hashlib.sha256(b"y" * (3 * 2**20)).hexdigest()
    assert asked == [2**20] * 4  # three chunks, then the end


def test_a_file_over_the_limit_is_refused_by_its_size_without_a_read(tmp_path, monkeypatch):
    """jobdir.py read_regular: MAX_READ's "a larger one is never read": the size the file has decides first."""
    path = tmp_path / "f"
    path.write_bytes(b"z" * 11)
    opened: list[int] = []
    real_fdopen = os.fdopen
    monkeypatch.setattr(jobdir.os, "fdopen", lambda fd, *a, **k: opened.append(fd) or real_fdopen(fd, *a, **k))
    assert read_regular(path, limit=10) is None
    assert opened == []
    assert read_regular(path, limit=11) == b"z" * 11 and len(opened) == 1


def test_a_fifo_where_a_folder_was_is_unreadable_at_once_and_never_removed(tmp_path):
    """jobdir.py _listing and remove_tree open a folder with O_DIRECTORY: a FIFO put in its place fails at once
    (ENOTDIR) instead of blocking the command until something writes to it."""
    fifo = tmp_path / "job"
    os.mkfifo(fifo)
    with no_hang(5):
        assert scan(fifo) == {".": Entry("unreadable")}
        with pytest.raises(NotADirectoryError):
            remove_tree(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_comment_line_in_manifest_never_lists_a_file():
    """jobdir.py parse_manifest: a `#` line is a comment even when it holds `<text>  <path>`; a change is a value."""
    text = manifest_text(["# made from  a.sh", ""], {"b.sh": "B"})
    assert parse_manifest(text.encode()).entries == {"b.sh": hashlib.sha256(b"B").hexdigest()}
    with pytest.raises(dataclasses.FrozenInstanceError):
        Change("b.sh", "create").action = "stray"  # type: ignore[misc]


def test_compare_reads_nothing_through_a_linked_job_folder(tmp_path, monkeypatch):
    """jobdir.py compare: a job folder that is a link is never looked into, its MANIFEST included."""
    folder, files = job(tmp_path, {"conf.yaml": "c"})
    (tmp_path / "linked").symlink_to(folder)
    read: list[str] = []
    real = jobdir.read_regular
    monkeypatch.setattr(jobdir, "read_regular", lambda path, *a: read.append(str(path)) or real(path, *a))
    assert actions(compare(files, tmp_path / "linked")) == {"conf.yaml": "create", MANIFEST: "create"}
    assert read == []
    compare(files, folder)
    assert read == [str(folder / MANIFEST)]


def test_the_render_lock_is_taken_on_a_folder_only(tmp_path):
    """jobdir.py locked opens OUT with O_DIRECTORY: a file or a FIFO there is refused at once, never locked (a FIFO
    would block the render until something wrote to it)."""
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    with no_hang(5):
        for name in ("file", "fifo"):
            with pytest.raises(NotADirectoryError), locked(tmp_path / name):
                pass


class _Libc:
    """A C library as ctypes.CDLL finds it on a system without an atomic exchange: no renameat2 at all (glibc
    before 2.28, macOS), or one that fails with `code` (a file system without RENAME_EXCHANGE)."""

    def __init__(self, code: int | None):
        if code is not None:
            self.renameat2 = lambda *_: ctypes.set_errno(code) or -1


@pytest.mark.parametrize("code", [None, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP])
def test_without_an_atomic_exchange_folders_swap_by_renames(tmp_path, monkeypatch, code):
    """jobdir.py _exchange answers False where the system cannot exchange, and _swap then renames twice."""
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "made").write_text("new")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "old").write_text("old")
    monkeypatch.setattr(ctypes, "CDLL", lambda *_, **__: _Libc(code))
    assert jobdir._exchange(tmp_path / "new", tmp_path / "job") is False
    jobdir._swap(tmp_path / "new", tmp_path / "job")
    assert [p.name for p in (tmp_path / "job").iterdir()] == ["made"]
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job", "new"]


def test_folders_swap_by_relative_paths_from_the_working_folder(tmp_path, monkeypatch):
    """jobdir.py _exchange passes AT_FDCWD (-100 on Linux, fcntl.h) so that relative paths are from the working
    folder, as OUT given on the command line is."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "from_a").write_text("a")
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path)
    assert jobdir._exchange(Path("a"), Path("b"))
    assert (tmp_path / "b" / "from_a").exists()


def test_a_sub_folder_swapped_for_a_fifo_while_removing_is_refused_at_once(tmp_path, monkeypatch):
    """jobdir.py remove_tree opens each sub-folder with O_DIRECTORY: one replaced by a FIFO between the listing and
    the open (another process racing the removal) fails at once instead of blocking."""
    (tmp_path / "job" / "sub").mkdir(parents=True)
    real = jobdir._unlink_files

    def racing(fd: int) -> list[str]:
        names = real(fd)
        if "sub" in names:
            (tmp_path / "job" / "sub").rmdir()
            os.mkfifo(tmp_path / "job" / "sub")
        return names

    monkeypatch.setattr(jobdir, "_unlink_files", racing)
    with no_hang(5), pytest.raises(NotADirectoryError):
        remove_tree(tmp_path / "job")
