"""What the package derives from its own files (parsed tables, compiled templates), kept as Python keeps bytecode:
in __pycache__ beside the source (under PYTHONPYCACHEPREFIX where one is set), never written under -B or
PYTHONDONTWRITEBYTECODE or where the folder is not writable. An entry holds a digest of what it was derived from
and one of its payload: a stale, cut-short or damaged entry is derived again, so keeping changes how fast a command
starts, never what it prints."""

from __future__ import annotations

import hashlib
import os
import sys
from contextlib import suppress
from pathlib import Path

DIGEST = 32  # bytes of a SHA-256


def entry(folder: Path, name: str, suffix: str) -> Path:
    """Where `name`, derived from a file in `folder`, is kept (`suffix` says what it holds)."""
    kept = Path(sys.pycache_prefix, *folder.resolve().parts[1:]) if sys.pycache_prefix else folder / "__pycache__"
    return kept / f"{name}.{sys.implementation.cache_tag}.{suffix}"


def read(path: Path, key: bytes) -> bytes | None:
    """The payload kept at `path`, derived from `key` (the source's text and what derives it) and intact; else
    None."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    payload = blob[2 * DIGEST:]
    if blob[:DIGEST] != hashlib.sha256(key).digest() or blob[DIGEST:2 * DIGEST] != hashlib.sha256(payload).digest():
        return None
    return payload


def write(path: Path, key: bytes, payload: bytes) -> None:
    """Keep `payload`, derived from `key`, at `path`: written whole, then renamed over, so a reader never sees half
    of it; nothing where Python would write no bytecode or the folder is not writable."""
    if sys.dont_write_bytecode:
        return
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(hashlib.sha256(key).digest() + hashlib.sha256(payload).digest() + payload)
        os.replace(partial, path)
    except OSError:
        with suppress(OSError):
            partial.unlink(missing_ok=True)
