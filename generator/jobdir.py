"""A job folder on disk: what it holds, read without following a link or opening anything but a regular file; the
MANIFEST render writes into it; and the one way render replaces it (a complete new folder beside the old, swapped in
by one atomic rename, under a lock on OUT).

Render only ever writes, swaps or removes OUT/<job> itself and its own staging folders beside it (`.<job>+...`; `+`
cannot occur in a job name). The paths MANIFEST lists are compared with what a walk of the folder finds; they never
name a file to open or delete. Nothing here recurses or reads a file whole: a folder thousands of levels deep or a
file of many GiB costs time in proportion, never a RecursionError or the memory it holds.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
import tempfile
import time
from collections.abc import Container, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from .api.frozen import frozen
from .errors import UserError, show_path

MANIFEST = "MANIFEST"
SEAL = "# gen-launch seal of the lines above: "
# The seal is keyed, so a line added by hand and a plain sha256 recomputed over the lines do not verify: MANIFEST
# vouches only for what render itself wrote (it lets a plain render remove a file without a backup).
_SEAL_KEY = b"gen-launch MANIFEST: files render wrote"
STAGING, BACKUP = "+staging-", "+backup-"
MAX_READ = 16 * 2**20  # bytes: no file render writes comes near it; a larger one is never read (nor hashed)
_CHUNK = 2**20


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# What a folder holds


@frozen
class Entry:
    """One thing found under the job folder. kind: file | folder | symlink | special (FIFO, socket, device) |
    unreadable (a folder that cannot be listed)."""

    kind: str
    digest: str | None = None  # files scan was asked to hash, and not over MAX_READ
    executable: bool = False  # files only: the one mode bit git keeps


def _open_regular(path: Path) -> int | None:
    """A read-only descriptor of `path` if it is a regular file (never through a link, never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def read_regular(path: Path, limit: int = MAX_READ) -> bytes | None:
    """The bytes of `path` if it is a regular file of at most `limit` bytes, else None (read whole: small files)."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
        return data if len(data) <= limit else None  # grew while read
    finally:
        os.close(fd)


def file_digest(path: Path, limit: int = MAX_READ) -> str | None:
    """The sha256 of a regular file of at most `limit` bytes, read in chunks; None for anything else."""
    fd = _open_regular(path)
    if fd is None:
        return None
    digest, size = hashlib.sha256(), 0
    try:
        while size <= limit:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
            size += len(chunk)
        return None
    finally:
        os.close(fd)


def scan(job_dir: Path, hashed: Container[str] = ()) -> dict[str, Entry]:
    """Everything under `job_dir` by relative POSIX path, parents before children; links are reported, never
    followed. Only the files named in `hashed` are read (for their sha256; None when over MAX_READ): a stray is
    stray whatever it holds. A folder that cannot be listed (no permission, a path over the system's limit) is
    `unreadable`. An explicit stack, not recursion: any depth."""
    found: dict[str, Entry] = {}
    stack = [(job_dir, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            children = _listing(folder)
        except OSError:
            found[prefix.rstrip("/") or "."] = Entry("unreadable")
            continue
        for name, mode in children:
            rel = f"{prefix}{name}"
            if stat.S_ISLNK(mode):
                found[rel] = Entry("symlink")
            elif stat.S_ISDIR(mode):
                found[rel] = Entry("folder")
                stack.append((folder / name, f"{rel}/"))
            elif stat.S_ISREG(mode):
                digest = file_digest(folder / name) if rel in hashed else None
                found[rel] = Entry("file", digest, bool(mode & stat.S_IXUSR))
            else:
                found[rel] = Entry("special")
    return dict(sorted(found.items()))


def _listing(folder: Path) -> list[tuple[str, int]]:
    """(name, lstat mode) of each entry of `folder`, opened without following a link."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with os.scandir(fd) as entries:
            return [(e.name, e.stat(follow_symlinks=False).st_mode) for e in entries]
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete the folder `path` and everything in it, never following a link, at any depth: each pass deletes the
    files of the folder's sub-folders and moves their sub-folders up into it (one rename each), so at most two
    folders are open and nothing recurses. Raises OSError when something cannot be removed."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        moved = 0
        while subfolders := _unlink_files(top):
            for name in subfolders:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
                try:
                    for inner in _unlink_files(sub):
                        moved = _free_name(top, moved)
                        os.rename(inner, f".{moved}", src_dir_fd=sub, dst_dir_fd=top)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def _unlink_files(fd: int) -> list[str]:
    """Delete everything but sub-folders in the open folder `fd`; the names of its sub-folders."""
    with os.scandir(fd) as entries:
        listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    for name, folder in listed:
        if not folder:
            os.unlink(name, dir_fd=fd)
    return [name for name, folder in listed if folder]


def _free_name(fd: int, n: int) -> int:
    """The next n whose `.n` is not taken in folder `fd`."""
    while True:
        n += 1
        try:
            os.lstat(f".{n}", dir_fd=fd)
        except FileNotFoundError:
            return n


def safe_relative(path: str) -> bool:
    """A path render could have written: relative, no `..`, `.` or empty parts, no backslash."""
    parts = path.split("/")
    return bool(path) and "\\" not in path and not PurePosixPath(path).is_absolute() \
        and all(p not in ("", ".", "..") for p in parts)


# ----------------------------------------------------------------------------------------------------------------
# MANIFEST


def manifest_text(header_lines: list[str], files: dict[str, str]) -> str:
    """The MANIFEST: comment lines, `<sha256>  <path>` per file, and a last line sealing all the lines above, so a
    hand edit to MANIFEST itself is seen."""
    body = "".join(f"{line}\n" for line in header_lines)
    body += "".join(f"{sha256(text.encode('utf-8'))}  {path}\n" for path, text in files.items())
    return f"{body}{SEAL}{_seal(body)}\n"


def _seal(body: str) -> str:
    return hmac.new(_SEAL_KEY, body.encode("utf-8"), hashlib.sha256).hexdigest()


@frozen
class Manifest:
    """MANIFEST as read: each path's sha256, and whether its seal holds."""

    entries: dict[str, str]  # path -> sha256, only paths render could have written
    intact: bool  # the seal matches: render wrote it as it is


def parse_manifest(data: bytes | None) -> Manifest:
    if data is None:
        return Manifest({}, False)
    text = data.decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    intact = last.startswith(SEAL) and hmac.compare_digest(last[len(SEAL):], _seal(f"{body}\n"))
    entries = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            digest, _, path = line.partition("  ")
            if safe_relative(path):
                entries[path] = digest
    return Manifest(entries, intact)


# ----------------------------------------------------------------------------------------------------------------
# Comparing what render would write with what is there


@frozen
class Change:
    """What replacing the job folder does to one path."""

    path: str
    action: str  # create | overwrite | identical | mode | remove | edited | stray


def compare(files: dict[str, str], job_dir: Path) -> list[Change]:
    """What replacing `job_dir` with `files` would do, path by path.

    edited: a generated path whose content differs from what MANIFEST says render wrote (or MANIFEST itself edited);
    stray: anything else render did not write (an unlisted file, a link, a FIFO, an empty folder); unreadable: a
    folder that cannot be listed, so nobody can tell what replacing it would lose."""
    manifest = parse_manifest(read_regular(job_dir / MANIFEST)) if job_dir.is_dir() and not job_dir.is_symlink() \
        else Manifest({}, False)
    trusted = manifest.entries if manifest.intact else {}
    found = scan(job_dir, files.keys() | trusted.keys()) if job_dir.is_dir() and not job_dir.is_symlink() else {}
    folders = {str(p) for f in files for p in PurePosixPath(f).parents}
    changes = []
    for path, text in files.items():
        entry = found.get(path)
        if entry is None:
            changes.append(Change(path, "create"))
        elif entry.kind != "file":
            changes.append(Change(path, "stray"))
        elif entry.digest == sha256(text.encode("utf-8")):
            changes.append(Change(path, "identical" if entry.executable == path.endswith(".sh") else "mode"))
        elif path == MANIFEST and manifest.intact or _vouched(trusted, path, entry):
            changes.append(Change(path, "overwrite"))
        else:
            changes.append(Change(path, "edited"))
    parents = {path.rpartition("/")[0] for path in found}
    for path, entry in found.items():
        if path in files or entry.kind == "folder" and path in folders:
            continue
        if entry.kind == "unreadable":
            changes.append(Change(f"{path}/", "unreadable"))
        elif entry.kind == "folder":
            if path not in parents:
                changes.append(Change(f"{path}/", "stray"))  # an empty folder; its contents are listed otherwise
        elif _vouched(trusted, path, entry):
            changes.append(Change(path, "remove"))
        else:
            changes.append(Change(path, "stray"))
    return changes


def _vouched(trusted: dict[str, str], path: str, entry: Entry) -> bool:
    """The file is as render wrote it, by an intact MANIFEST."""
    return entry.kind == "file" and entry.digest is not None and trusted.get(path) == entry.digest


REFUSED = ("edited", "stray", "unreadable")  # what a render without --overwrite will not replace


def drift(changes: list[Change]) -> list[str]:
    """`check`'s lines: every difference between the folder and what render would write."""
    words = {"create": "missing", "overwrite": "differs", "edited": "differs", "mode": "mode differs",
             "remove": "no longer generated", "stray": "not generated", "unreadable": "cannot be read"}
    return [f"{words[c.action]}: {show_path(c.path)}" for c in changes if c.action != "identical"]


# ----------------------------------------------------------------------------------------------------------------
# Writing


@contextmanager
def locked(out_dir: Path) -> Iterator[None]:
    """One render at a time in OUT: an exclusive lock on the folder itself (no lock file is left behind)."""
    import fcntl  # here, as ctypes below: only render writes, and every command imports this module

    fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{show_path(out_dir)}: another gen-launch render is writing here; wait for it and run "
                            f"again") \
                from None
        yield
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    import ctypes

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


def leftovers(out_dir: Path, job: str) -> list[Path]:
    """Staging folders a killed render left in OUT: the next render removes them, `check` reports them."""
    return sorted(p for p in out_dir.glob(f".{job}{STAGING}*") if p.is_dir() and not p.is_symlink())


def clear_leftovers(out_dir: Path, job: str) -> None:
    """Remove what killed renders left (never the live folder: `+` cannot occur in a job name). Under `locked`."""
    for leftover in leftovers(out_dir, job):
        _discard(leftover)


def _backup_name(job_dir: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = job_dir.with_name(f"{job_dir.name}{BACKUP}{stamp}")
    n = 1
    while target.exists() or target.is_symlink():
        n += 1
        target = job_dir.with_name(f"{job_dir.name}{BACKUP}{stamp}-{n}")
    return target


def _swap(new: Path, job_dir: Path) -> None:
    """Put the folder `new` at `job_dir` and the old `job_dir` at `new`."""
    if not _exchange(new, job_dir):
        # No atomic exchange here (not Linux, or a file system without it): two renames, a moment apart.
        os.rename(job_dir, f"{new}.old")
        os.rename(new, job_dir)
        os.rename(f"{new}.old", new)


def _discard(folder: Path) -> None:
    """Remove a folder render made (or the old job folder after a swap); one that resists stays for `check`."""
    with suppress(OSError):
        remove_tree(folder)


def replace(files: dict[str, str], out_dir: Path, job: str, backup: bool) -> Path | None:
    """Make OUT/<job> hold exactly `files`: written complete into a staging folder beside it, then swapped in by one
    rename. The old folder goes; with `backup` it is kept whole as OUT/<job>+backup-<UTC time> (returned): the old
    folder is renamed to that name, then the complete new one to OUT/<job>, so the old folder is moved, never copied
    (no partial copy on a full disk, nothing read), never sits under a name render removes, and a backup never holds
    the new render (killed between the two renames, OUT/<job> is absent for the next render to write, the old
    folder whole in its backup). Call under `locked(out_dir)`."""
    job_dir = out_dir / job
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
            return None
        if not backup:
            _swap(staging, job_dir)
            return None
        kept = _backup_name(job_dir)
        os.rename(job_dir, kept)
        try:
            os.rename(staging, job_dir)
        except OSError:
            os.rename(kept, job_dir)  # the old folder back in place
            raise
        return kept
    finally:
        _discard(staging)  # after a swap: the old folder; after a rename: nothing
