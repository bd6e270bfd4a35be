"""A job folder on disk: what it holds, read without following a link or opening anything but a regular file; the
MANIFEST render writes into it; and the one way render replaces it (a complete new folder beside the old, swapped in
by one atomic rename, under a lock on OUT).

Render only ever writes, swaps or removes OUT/<job> itself and its own staging folders beside it (`.<job>+...`; `+`
cannot occur in a job name). The paths MANIFEST lists are compared with what a walk of the folder finds; they never
name a file to open or delete.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator

from .errors import UserError

MANIFEST = "MANIFEST"
SELF_HASH = "# sha256 of the lines above: "
STAGING, BACKUP = "+staging-", "+backup-"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# What a folder holds


@dataclass(frozen=True)
class Entry:
    """One thing found under the job folder. kind: file | folder | symlink | special (FIFO, socket, device)."""

    kind: str
    digest: str | None = None  # files only
    executable: bool = False  # files only: the one mode bit git keeps


def read_regular(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file (never through a link, never blocking on a FIFO), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def scan(job_dir: Path) -> dict[str, Entry]:
    """Everything under `job_dir` by relative POSIX path; links are reported, never followed."""
    found: dict[str, Entry] = {}

    def walk(folder: Path, prefix: str) -> None:
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for child in children:
            rel = f"{prefix}{child.name}"
            mode = child.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                found[rel] = Entry("symlink")
            elif stat.S_ISDIR(mode):
                found[rel] = Entry("folder")
                walk(Path(child.path), f"{rel}/")
            elif stat.S_ISREG(mode):
                data = read_regular(Path(child.path))  # None: replaced by something else since the scan
                found[rel] = Entry("special") if data is None else \
                    Entry("file", sha256(data), bool(mode & stat.S_IXUSR))
            else:
                found[rel] = Entry("special")

    walk(job_dir, "")
    return found


def safe_relative(path: str) -> bool:
    """A path render could have written: relative, no `..`, `.` or empty parts, no backslash."""
    parts = path.split("/")
    return bool(path) and "\\" not in path and not PurePosixPath(path).is_absolute() \
        and all(p not in ("", ".", "..") for p in parts)


# ----------------------------------------------------------------------------------------------------------------
# MANIFEST


def manifest_text(header_lines: list[str], files: dict[str, str]) -> str:
    """The MANIFEST: comment lines, `<sha256>  <path>` per file, and a last line hashing all the lines above, so a
    hand edit to MANIFEST itself is seen."""
    body = "".join(f"{line}\n" for line in header_lines)
    body += "".join(f"{sha256(text.encode('utf-8'))}  {path}\n" for path, text in files.items())
    return f"{body}{SELF_HASH}{sha256(body.encode('utf-8'))}\n"


@dataclass(frozen=True)
class Manifest:
    entries: dict[str, str]  # path -> sha256, only paths render could have written
    intact: bool  # the self-hash matches: nobody edited it since render wrote it


def parse_manifest(data: bytes | None) -> Manifest:
    if data is None:
        return Manifest({}, False)
    text = data.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    intact = last.startswith(SELF_HASH) and last[len(SELF_HASH):] == sha256(f"{body}\n".encode("utf-8"))
    entries = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            digest, _, path = line.partition("  ")
            if safe_relative(path):
                entries[path] = digest
    return Manifest(entries, intact)


# ----------------------------------------------------------------------------------------------------------------
# Comparing what render would write with what is there


@dataclass(frozen=True)
class Change:
    path: str
    action: str  # create | overwrite | identical | mode | remove | edited | stray


def compare(files: dict[str, str], job_dir: Path) -> list[Change]:
    """What replacing `job_dir` with `files` would do, path by path.

    edited: a generated path whose content differs from what MANIFEST says render wrote (or MANIFEST itself edited);
    stray: anything else render did not write (an unlisted file, a link, a FIFO, an empty folder)."""
    found = scan(job_dir) if job_dir.is_dir() and not job_dir.is_symlink() else {}
    old = found.get(MANIFEST)
    manifest = parse_manifest(read_regular(job_dir / MANIFEST)) if old and old.kind == "file" else Manifest({}, False)
    trusted = manifest.entries if manifest.intact else {}
    folders = {str(PurePosixPath(p).parent) for p in files} | {str(p) for f in files for p in PurePosixPath(f).parents}
    changes = []
    for path, text in files.items():
        entry = found.get(path)
        wanted = sha256(text.encode("utf-8"))
        if entry is None:
            changes.append(Change(path, "create"))
        elif entry.kind != "file":
            changes.append(Change(path, "stray"))
        elif entry.digest == wanted:
            changes.append(Change(path, "identical" if entry.executable == path.endswith(".sh") else "mode"))
        elif path == MANIFEST and manifest.intact or trusted.get(path) == entry.digest:
            changes.append(Change(path, "overwrite"))
        else:
            changes.append(Change(path, "edited"))
    for path, entry in found.items():
        if path in files or entry.kind == "folder" and path in folders:
            continue
        if entry.kind == "folder":
            if not any(p.startswith(f"{path}/") for p in found):
                changes.append(Change(path + "/", "stray"))  # an empty folder; its contents are listed otherwise
        elif entry.kind == "file" and trusted.get(path) == entry.digest:
            changes.append(Change(path, "remove"))
        else:
            changes.append(Change(path, "stray"))
    return changes


def drift(changes: list[Change]) -> list[str]:
    """`check`'s lines: every difference between the folder and what render would write."""
    words = {"create": "missing", "overwrite": "differs", "edited": "differs", "mode": "mode differs",
             "remove": "no longer generated", "stray": "not generated"}
    return [f"{words[c.action]}: {c.path}" for c in changes if c.action != "identical"]


# ----------------------------------------------------------------------------------------------------------------
# Writing


@contextmanager
def locked(out_dir: Path) -> Iterator[None]:
    """One render at a time in OUT: an exclusive lock on the folder itself (no lock file is left behind)."""
    fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{out_dir}: another gen-launch render is writing here; wait for it and run again") \
                from None
        yield
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    function = getattr(libc, "renameat2", None)
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _leftovers(out_dir: Path, job: str) -> list[Path]:
    return sorted(p for p in out_dir.glob(f".{job}{STAGING}*") if p.is_dir() and not p.is_symlink())


def _backup(job_dir: Path, found: dict[str, Entry]) -> Path:
    """A copy of the folder as it is (regular files and links; FIFOs and devices have no content to keep)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = job_dir.with_name(f"{job_dir.name}{BACKUP}{stamp}")
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = job_dir.with_name(f"{job_dir.name}{BACKUP}{stamp}-{n}")
    partial = Path(tempfile.mkdtemp(prefix=f".{job_dir.name}{STAGING}", dir=job_dir.parent))
    for path, entry in found.items():
        source, copy = job_dir / path, partial / path
        if entry.kind == "folder":
            copy.mkdir(parents=True, exist_ok=True)
        elif entry.kind == "symlink":
            copy.symlink_to(os.readlink(source))
        elif entry.kind == "file":
            data = read_regular(source)
            if data is not None:
                copy.write_bytes(data)
                copy.chmod(stat.S_IMODE(os.lstat(source).st_mode))
    os.rename(partial, target)
    return target


def replace(files: dict[str, str], out_dir: Path, job: str, backup: bool) -> Path | None:
    """Make OUT/<job> hold exactly `files`: written complete into a staging folder beside it, then swapped in by one
    rename. The old folder goes, after a copy of it is kept when `backup` (returned). Call under `locked(out_dir)`."""
    job_dir = out_dir / job
    for leftover in _leftovers(out_dir, job):  # from a render killed earlier: never the live folder
        shutil.rmtree(leftover, ignore_errors=True)
    kept = _backup(job_dir, scan(job_dir)) if backup else None
    mask = _umask()
    staging = Path(tempfile.mkdtemp(prefix=f".{job}{STAGING}", dir=out_dir))
    try:
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            target.chmod((0o777 if path.endswith(".sh") else 0o666) & ~mask)
        os.chmod(staging, 0o777 & ~mask)  # mkdtemp makes it 0700; teammates read and check these folders
        if not job_dir.exists():
            os.rename(staging, job_dir)
        elif not _exchange(staging, job_dir):
            # No atomic exchange here (not Linux, or a file system without it): two renames, a moment apart.
            os.rename(job_dir, f"{staging}.old")
            os.rename(staging, job_dir)
            os.rename(f"{staging}.old", staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # after a swap: the old folder
    return kept
