"""What the folder tests (tests/test_hardening.py, tests/test_render_atomic.py) and bench/folder_sweep.py share: job
specs, a snapshot of everything render must not touch, a guard against a hang, render's write run in a forked child
killed at a random moment, and the two trials: a corrupted folder re-rendered, and a killed re-render."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import stat
import time
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.plan import MadeFrom
from generator.render import check, render_files, write
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables

BOTH = {"job": "j", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
        "frameworks": ["mindformers", "llama-factory"]}
ONE = {**BOTH, "frameworks": ["mindformers"], "data": {"samples": 1000, "tokens_per_sample": 512}}


def _spec_text(spec: dict) -> str:
    return yaml.safe_dump(spec)


def write_spec(folder: Path, spec: dict, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(_spec_text(spec), encoding="utf-8")
    return path


def cli(*args) -> CliRunner.Result:
    with no_hang():
        return CliRunner().invoke(main, [str(a) for a in args])


class Blocked(Exception):
    """Not an OSError, which the code under test catches."""


@contextmanager
def no_hang(seconds: int = 30):
    """Fail, not hang, when something blocks (a FIFO opened for reading waits for a writer forever)."""
    def fail(signum, frame):
        raise Blocked(f"blocked for {seconds} s")
    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(root: Path, skip: Path) -> dict[str, tuple]:
    """Every path under `root` except `skip` (OUT/<job>) and render's own names beside it (`.<job>+staging-*`,
    `<job>+backup-*`): kind, mode, content or link target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not _own(here / d, skip)]
        for name in dirnames + filenames:
            path = here / name
            if _own(path, skip):
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                value = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                value = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
            else:
                value = ("other", stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode))
            found[str(path.relative_to(root))] = value
    return found


def _own(path: Path, job_dir: Path) -> bool:
    name = path.name
    return path.parent == job_dir.parent and (path == job_dir or name.startswith(f".{job_dir.name}+staging-")
                                              or name.startswith(f"{job_dir.name}+backup-"))


def folder_files(job_dir: Path) -> dict[str, bytes]:
    """Regular files under `job_dir` (no link followed) with their bytes; anything else as a marker."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(job_dir):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = os.lstat(path)
            rel = str(path.relative_to(job_dir))
            if stat.S_ISREG(info.st_mode):
                found[rel] = path.read_bytes()
            elif not stat.S_ISDIR(info.st_mode):
                found[rel] = b"<not a regular file>"
    return found


def killed_write(files: dict[str, str], out: Path, job: str, delay: float, overwrite: bool = False) -> int | None:
    """Run render's write phase in a forked child and SIGKILL it after `delay` seconds: its exit code, or None if
    the kill came first."""
    from generator.errors import UserError

    pid = os.fork()
    if pid == 0:  # the child: write, then leave without running the parent's cleanups
        code = 0
        try:
            write(files, out, job, overwrite)
        except UserError:
            code = 2
        except BaseException:  # noqa: BLE001 - any other end is a failure the parent must see
            code = 70
        os._exit(code)
    deadline = time.perf_counter() + delay
    while time.perf_counter() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code == -signal.SIGKILL else code


T = load_tables()
SPECS = {
    "both": BOTH, "one": ONE,
    "lf": {**BOTH, "frameworks": ["llama-factory"], "method": "qlora", "quantization_bit": 4},
    "ms": {**BOTH, "frameworks": ["mindspeed-llm"], "method": "full"},
    "pre": {**BOTH, "method": "pretrain", "frameworks": ["mindspeed-llm", "mindformers"]},
}


@cache
def files_of(name: str) -> dict[str, str]:
    """What `render OUT/../job.yaml -o OUT` writes for SPECS[name] (plan.json records the spec file)."""
    spec = parse_spec(_spec_text(SPECS[name]).encode())  # the bytes write_spec writes: the spec's sha256 is theirs
    return render_files(dataclasses.replace(resolve(spec, T), made_from=MadeFrom("job.yaml")))


def expected(name: str) -> dict[str, bytes]:
    return {path: text.encode() for path, text in files_of(name).items()}


def corrupt(kind: str, job: Path, outside: Path, pick: int) -> bool:
    """Apply one corruption; True when it is something a person did that render must not discard silently."""
    files = sorted(p for p in job.rglob("*") if p.is_file() and not p.is_symlink() and p.name != "MANIFEST")
    victim = files[pick % len(files)]
    if kind == "stray":
        (victim.parent / "stray.txt").write_text("mine\n")
    elif kind == "stray-folder":
        (job / "extra" / "empty").mkdir(parents=True)
    elif kind == "edit":
        victim.write_text(victim.read_text() + "# my change\n")
    elif kind == "delete":
        victim.unlink()
        return False
    elif kind == "chmod":
        victim.chmod(victim.stat().st_mode ^ 0o100)
        return False
    elif kind == "link-file":
        victim.unlink()
        victim.symlink_to(outside / "secret.txt")
    elif kind == "link-folder":
        folder = victim.parent if victim.parent != job else job / "mindformers"
        shutil.rmtree(folder, ignore_errors=True)
        folder.symlink_to(outside)
    elif kind == "fifo":
        victim.unlink()
        os.mkfifo(victim)
    elif kind == "manifest-edit":
        manifest = job / "MANIFEST"
        manifest.write_text(manifest.read_text() + f"{'0' * 64}  ../outside/secret.txt\n")
    return True


KINDS = ["stray", "stray-folder", "edit", "delete", "chmod", "link-file", "link-folder", "fifo", "manifest-edit"]


def corruption_trial(root: Path, old: str, new: str, kind: str, pick: int) -> None:
    """Render `old`, corrupt it, then check and re-render `new` from the same spec file, changed (with --overwrite
    when refused); asserts every property."""
    out, outside = root / "out", root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    spec = write_spec(root, SPECS[old])
    assert cli("render", spec, "-o", out).exit_code == 0
    job = out / "j"
    personal = corrupt(kind, job, outside, pick)
    before = folder_files(job)
    assert cli("check", spec, "-o", out).exit_code == 1
    write_spec(root, SPECS[new])
    before_outside = snapshot(root, job)
    refused = cli("render", spec, "-o", out)
    assert refused.exception is None or isinstance(refused.exception, SystemExit), refused.exception
    if personal:
        # plan.json or MANIFEST touched: the record of the options is not trusted, and the message says so
        assert refused.exit_code == 2 and ("edited by hand or not written by gen-launch" in refused.stderr or
                                           "so the --set overrides and --force it records" in refused.stderr)
        assert folder_files(job) == before
        forced = cli("render", spec, "-o", out, "--overwrite")
        assert forced.exit_code == 0, forced.output
        backups = list(out.glob("j+backup-*"))
        assert len(backups) == 1
    else:
        assert refused.exit_code == 0, refused.output
    assert folder_files(job) == expected(new)
    assert cli("check", spec, "-o", out).exit_code == 0
    assert snapshot(root, job) == before_outside
    assert not list(out.glob(".j+staging-*"))


def kill_trials(root: Path, rng: random.Random, trials: int) -> dict[str, int]:
    """Each trial: OUT/j holds one complete job; a write of another is killed after a random delay. Returns how
    many trials left the old set and how many the new one; asserts every property on the way."""
    names = sorted(SPECS)
    out = root / "out"
    (root / "outside").mkdir()
    (root / "outside" / "keep.txt").write_text("keep\n")
    for name in names:
        files_of(name)
    write(files_of(names[0]), out, "j", overwrite=False)
    current = names[0]
    job = out / "j"
    span = _write_time(root, files_of(names[1]))
    outcomes = {"old": 0, "new": 0}
    for _ in range(trials):
        target = rng.choice([n for n in names if n != current])
        before_outside = snapshot(root, job)
        code = killed_write(files_of(target), out, "j", rng.uniform(0, span * 1.2))
        assert code in (None, 0), code
        state = folder_files(job)
        assert state in (expected(current), expected(target)), "a mix of the old and the new folder"
        landed = "new" if state == expected(target) else "old"
        outcomes[landed] += 1
        current = target if landed == "new" else current
        left = len(list(out.glob(".j+staging-*")))
        for name in (current, target):
            lines = check(files_of(name), out, "j")
            assert sum(line.startswith("staging leftover: ") for line in lines) == left  # drift until removed
            assert (len(lines) == left) == (name == current)
        assert snapshot(root, job) == before_outside
    # A render after any kill: exit 0 (never "edited by hand" for the tool's own files), no staging left over.
    write(files_of(names[-1]), out, "j", overwrite=False)
    assert folder_files(job) == expected(names[-1]) and not list(out.glob(".j+staging-*"))
    return outcomes


def _write_time(root: Path, files: dict[str, str]) -> float:
    """How long one write of `files` over a job folder takes here, in a child as in the trials."""
    scratch = root / "timing"
    write(files_of("both"), scratch, "j", overwrite=False)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        assert killed_write(files, scratch, "j", 10.0) == 0
        times.append(time.perf_counter() - start)
        write(files_of("both"), scratch, "j", overwrite=False)
    shutil.rmtree(scratch)
    return sorted(times)[2]


