"""What tests/test_jobdir_attacks.py and bench/folder_sweep.py share (issue 22, items 9-11): a stray in OUT/<job>
against check, render, validate and render --overwrite. Each trial renders a fresh folder under `root`, plants the
stray and asserts every property: no traceback, each command's documented exit status and lines, an --overwrite backup
that is the old folder whole, nothing echoed raw."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from folder_ops import ONE, cli, expected, folder_files, write_spec

from generator.jobdir import remove_tree

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["check", "render", "validate", "render --overwrite"]  # --overwrite last: it moves the stray away
EXITS = {"check": 1, "render": 2, "render --overwrite": 0, "validate": 1}  # each command's answer to a stray


def rendered(root: Path, spec: dict = ONE) -> tuple[Path, Path, Path]:
    """(spec file, OUT, OUT/j) with OUT/j freshly rendered from `spec`."""
    remove_tree(root)
    root.mkdir(parents=True)
    spec_file, out = write_spec(root, spec), root / "out"
    assert cli("render", spec_file, "-o", out).exit_code == 0
    return spec_file, out, out / "j"


def arguments(command: str, spec: Path, out: Path) -> list[str]:
    if command == "validate":
        return ["validate", str(out / "j")]
    return [*command.split()[:1], str(spec), "-o", str(out), *command.split()[1:]]


def backups(out: Path) -> list[Path]:
    return sorted(out.glob("j+backup-*"))


def memory_root(fallback: Path) -> Path:
    """A new empty folder for deep trees: in /dev/shm where there is one (a folder costs milliseconds to create or
    delete on this disk, microseconds in memory); remove it with remove_tree (shutil.rmtree recurses)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(dir=shm))
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


# 9: a large file (sparse: no disk used), read by a CLI that may not map more than 1 GiB

LIMIT_AS = 2**30
# Runs the CLI in a child under a 1 GiB address-space limit and prints the child's peak resident memory (KiB).
RUN_LIMITED = f"""
import resource, subprocess, sys
limit = lambda: resource.setrlimit(resource.RLIMIT_AS, ({LIMIT_AS}, {LIMIT_AS}))
done = subprocess.run([sys.executable, "-m", "generator", *sys.argv[1:]], preexec_fn=limit)
print(f"peak-rss-kib {{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}}", file=sys.stderr)
sys.exit(done.returncode)
"""


def limited_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", RUN_LIMITED, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def huge_trial(root: Path, command: str, where: str, size: int) -> None:
    """A sparse file of `size` bytes at `where` in the job folder."""
    spec, out, job = rendered(root)
    big = job / where
    big.unlink(missing_ok=True)
    os.truncate(os.open(big, os.O_CREAT | os.O_WRONLY, 0o644), size)  # sparse: no disk used
    done = limited_cli(*arguments(command, spec, out))
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    peak = int(done.stderr.rsplit("peak-rss-kib ", 1)[1])
    assert peak < 256 * 1024, f"peak RSS {peak} KiB"
    generated = where in ("PLAN.md", "MANIFEST")
    if command == "validate" and where == "MANIFEST":
        assert done.returncode == 2 and f"over {16 * 2**20} bytes" in done.stderr
    elif command == "validate":
        assert done.returncode == 1 and f"problem  {where}  " in done.stdout, done.stdout
    else:
        assert done.returncode == EXITS[command], done.stdout + done.stderr
    if command == "check":
        assert f"{'differs' if generated else 'not generated'}: {where}" in done.stdout.splitlines()
    if command == "render --overwrite":
        assert folder_files(job) == expected("one")
        [kept] = backups(out)
        assert (kept / where).stat().st_size == size  # kept whole: the old folder itself, moved


# 9: a deep folder


def make_deep(top: Path, depth: int, leaf: str) -> None:
    """`depth` nested folders `d` under `top` (through descriptors: the path outgrows PATH_MAX), ending in `leaf`."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    if leaf == "file":
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    elif leaf == "link":
        os.symlink("/etc", "l", dir_fd=fd)
    elif leaf == "fifo":
        os.mkfifo("p", dir_fd=fd)
    os.close(fd)


def depth_of(top: Path) -> int:
    """How many `d` folders are nested under `top`."""
    fd, depth = os.open(top, os.O_RDONLY | os.O_DIRECTORY), 0
    try:
        while True:
            try:
                inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return depth
            os.close(fd)
            fd, depth = inner, depth + 1
    finally:
        os.close(fd)


def deep_trial(root: Path, command: str, depth: int, leaf: str, under: str) -> None:
    """`depth` nested folders in the job folder (or its folder `under`), ending in a `leaf`."""
    spec, out, job = rendered(root)
    make_deep(job / under, depth, leaf)
    result = cli(*arguments(command, spec, out))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == EXITS[command], result.output
    if command == "check":
        top = f"{under}/d" if under else "d"
        assert all(line.startswith((f"not generated: {top}/", f"cannot be read: {top}/"))
                   for line in result.stdout.splitlines()), result.output
    if command == "render --overwrite":
        assert folder_files(job) == expected("one")
        [kept] = backups(out)
        assert depth_of(kept / under) == depth
        assert cli("render", spec, "-o", out).exit_code == 0


# 11: a stray of any name


def name_trial(root: Path, name: str, under: str, kind: str) -> bool:
    """False when `name` is one render writes (nothing tried)."""
    spec, out, job = rendered(root)
    stray = job / f"{under}{name}"
    if os.path.lexists(stray):
        return False  # a generated name
    if kind == "file":
        stray.write_bytes(b"x")
    elif kind == "folder":
        stray.mkdir()
    else:
        stray.symlink_to("/etc")
    for command in COMMANDS:
        result = cli(*arguments(command, spec, out))
        empty = command == "validate" and kind == "folder"  # validate reads files: an empty folder is no problem
        assert result.exit_code == (0 if empty else EXITS[command]), (command, result.output)
        text = result.stdout + result.stderr
        raw = [ch for ch in text if not (ch.isprintable() or ch == "\n")]
        assert not raw, (command, raw, text[-800:])
    return True
