"""What the package derives from its own files (parsed tables, compiled templates), kept as Python keeps bytecode:
in __pycache__ beside the source (under PYTHONPYCACHEPREFIX where one is set), never written under -B or
PYTHONDONTWRITEBYTECODE or where the folder is not writable. An entry holds a digest of what it was derived from
and one of its payload: a stale, cut-short or damaged entry is derived again, so keeping changes how fast a command
starts, never what it prints.

What a kept entry trusts is what Python's bytecode trusts: whoever can write the __pycache__ folder (or the prefix's
tree) can change what a command reads, as they could change a .pyc. Beyond that an entry is data: read only when it
is a regular file of at most MAX_BYTES (a FIFO or a device there is skipped, never waited on or read without end),
marshal-loaded only under its key, which holds this interpreter's magic number (importlib.util.MAGIC_NUMBER: the
marshal format of another build of the same version differs), and written as a new file, never through a link."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from contextlib import suppress
from importlib.util import MAGIC_NUMBER
from pathlib import Path

DIGEST = 32  # bytes of a SHA-256
# The largest entry read: the biggest kept today (the parsed frameworks.yaml, the compiled plan templates) is about
# 20 KB; anything near this is not one of ours.
MAX_BYTES = 16 << 20


def entry(folder: Path, name: str, suffix: str) -> Path:
    """Where `name`, derived from a file in `folder`, is kept (`suffix` says what it holds)."""
    kept = Path(sys.pycache_prefix, *folder.resolve().parts[1:]) if sys.pycache_prefix else folder / "__pycache__"
    return kept / f"{name}.{sys.implementation.cache_tag}.{suffix}"


def read(path: Path, key: bytes) -> bytes | None:
    """The payload kept at `path`, derived from `key` (the source's text and what derives it) and intact; else
    None."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode) or found.st_size > MAX_BYTES:
                return None
            blob = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    payload = blob[2 * DIGEST:]
    if blob[:DIGEST] != _digest(key) or blob[DIGEST:2 * DIGEST] != hashlib.sha256(payload).digest():
        return None
    return payload


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(MAGIC_NUMBER + key).digest()


def write(path: Path, key: bytes, payload: bytes, source: Path) -> None:
    """Keep `payload`, derived from `key` (the text of `source`), at `path`: written whole into a new file with the
    source's mode, as Python writes bytecode (importlib's _calc_mode: the source's, owner-writable), then renamed
    over, so a reader never sees half of it; nothing where Python would write no bytecode or the folder is not
    writable, and nothing through a file or link already at the temporary name."""
    if sys.dont_write_bytecode:
        return
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        mode = (source.stat().st_mode | 0o200) & 0o666
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except OSError:
        return
    try:
        with open(descriptor, "wb") as handle:
            handle.write(_digest(key) + hashlib.sha256(payload).digest() + payload)
        os.replace(partial, path)
    except OSError:
        with suppress(OSError):
            partial.unlink()
