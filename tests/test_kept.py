"""Issue 34 item 5: what the kept caches (generator/kept.py) read and write. An entry is data: a FIFO or a device
at its name is skipped at once (a FIFO hung every command; /dev/zero ran out of memory), a link at the temporary
name is never written through, an entry takes its source's mode as bytecode does, and one written by an interpreter
of another magic number is derived again."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from generator import kept

REPO = Path(__file__).resolve().parent.parent
KEY = b"the source's text"


@pytest.fixture
def writing(monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


def source(tmp_path: Path, mode: int = 0o644) -> Path:
    path = tmp_path / "table.yaml"
    path.write_text("a: 1\n")
    path.chmod(mode)
    return path


def test_an_entry_is_read_back_under_its_key(tmp_path, writing):
    entry = tmp_path / "__pycache__" / "table.marshal"
    kept.write(entry, KEY, b"payload", source(tmp_path))
    assert kept.read(entry, KEY) == b"payload" and kept.read(entry, KEY + b"!") is None


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_an_entry_takes_its_sources_mode(tmp_path, writing, mode):
    entry = tmp_path / "__pycache__" / "table.marshal"
    old = os.umask(0o022)
    try:
        kept.write(entry, KEY, b"payload", source(tmp_path, mode))
    finally:
        os.umask(old)
    assert entry.stat().st_mode & 0o777 == mode


def test_a_link_at_the_temporary_name_is_never_written_through(tmp_path, writing):
    entry = tmp_path / "__pycache__" / "table.marshal"
    entry.parent.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    entry.with_name(f"{entry.name}.{os.getpid()}.tmp").symlink_to(victim)
    kept.write(entry, KEY, b"payload", source(tmp_path))
    assert victim.read_bytes() == b"keep" and kept.read(entry, KEY) is None


def test_an_entry_of_another_interpreter_is_derived_again(tmp_path, writing, monkeypatch):
    # The same cache tag (cpython-311) with another magic number: a build whose marshal format differs.
    entry = tmp_path / "__pycache__" / "table.marshal"
    kept.write(entry, KEY, b"payload", source(tmp_path))
    monkeypatch.setattr(kept, "MAGIC_NUMBER", b"\x00\x00\r\n")
    assert kept.read(entry, KEY) is None


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # a read without end fails here, not the machine


@pytest.mark.parametrize("planted", ["fifo", "/dev/zero", "large"])
def test_an_entry_that_is_no_small_regular_file_is_skipped_at_once(tmp_path, planted):
    entry = tmp_path / "__pycache__" / "table.marshal"
    entry.parent.mkdir()
    if planted == "fifo":
        os.mkfifo(entry)
    elif planted == "large":
        with open(entry, "wb") as handle:
            handle.truncate(kept.MAX_BYTES + 1)
    else:
        entry.symlink_to(planted)
    code = "import sys; from pathlib import Path; from generator import kept; print(kept.read(Path(sys.argv[1]), b'k'))"
    result = subprocess.run([sys.executable, "-c", code, str(entry)], capture_output=True, text=True, timeout=30,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_limited, check=False)
    assert (result.returncode, result.stdout) == (0, "None\n"), result.stderr
