"""Issue 12's attack run, repeatable (not a test; CI runs smaller samples in tests/test_render_atomic.py,
tests/test_hardening.py and tests/specs/bad/): hostile values in every numeric key, hostile spec files, every
corruption of a rendered folder against every re-render, renders killed at random moments of their write, and
strays in the job folder (issue 22: huge sparse files, folders thousands of levels deep, names of any characters)
against check, render, validate and render --overwrite.
Prints the inputs tried and the failures per category (a failure: a traceback, an undocumented exit code, a path
outside OUT/<job> changed, a folder that is neither the old nor the new complete set, or drift `check` missed).

`python bench/folder_sweep.py [KILL_TRIALS]` (default 2000); about 18 minutes on 2 cores (7.5 of
them the 558 stray trials).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import folder_ops as F  # noqa: E402
import stray_ops as S  # noqa: E402

from generator.jobdir import remove_tree  # noqa: E402

BASE = {"job": "t", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
        "data": {"total_tokens": 10**9}}
NUMERIC_KEYS = ["seq_len", "cards", "global_batch_size", "cluster.master_port", "time_budget_hours",
                "tokens_per_card_s", "scaling_efficiency", "data.epochs", "data.total_tokens", "quantization_bit"]
HOSTILE_NUMBERS = ["4096.0", "128.0", "1e400", "-1e400", ".nan", ".inf", "0256", "1:30", "9" * 5000, "0x10", "0o20",
                   "yes", "on", "[1]", "{a: 1}", "''", "1e-400", "-1", "0", "1e3", "2.5", "~", "!!float 8", "&a 1",
                   "1_000"]


def spec_text(key: str, value: str) -> str:
    lines = [f"{k}: {json.dumps(v)}" for k, v in BASE.items() if k != "data"]
    section, _, leaf = key.rpartition(".")
    data = "data: {total_tokens: 1000000000}"
    if section == "data":
        data = f"data:\n  {leaf}: {value}\n  total_tokens: 1000000000" if leaf != "total_tokens" else \
            f"data:\n  total_tokens: {value}"
    elif section == "cluster":
        lines.append(f"cluster:\n  {leaf}: {value}")
    else:
        lines.append(f"{key}: {value}")
    return "\n".join(lines + [data]) + "\n"


def outcome_ok(result) -> bool:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False
    if result.exit_code not in (0, 2, 3) or "Traceback" in result.output:
        return False
    if result.exit_code == 0:
        json.loads(result.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    return True


def hostile_values(root: Path) -> tuple[int, list[str]]:
    failures, tried = [], 0
    for key, value in itertools.product(NUMERIC_KEYS, HOSTILE_NUMBERS):
        tried += 1
        path = root / "spec.yaml"
        path.write_text(spec_text(key, value))
        try:
            if not outcome_ok(F.cli("plan", path, "--json")):
                failures.append(f"{key}: {value[:20]}")
        except (ValueError, TimeoutError) as exc:
            failures.append(f"{key}: {value[:20]}: {exc}")
    return tried, failures


def hostile_files(root: Path) -> tuple[int, list[str]]:
    fifo = root / "fifo.yaml"
    os.mkfifo(fifo)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join(["*" + chr(97 + i)] * 10) + "]\n" for i in range(8))
    texts = {"deep": "x: " + "[" * 100_000 + "]" * 100_000, "laughs": laughs, "merge": "a: &x {b: 1}\nc: {<<: *x}\n",
             "list-key": "? [a]\n: 1\n", "big": "k: 1\n" * 400_000,
             "keys": "".join(f"k{i}: 1\n" for i in range(40_000)),
             "binary": "\x00\x01\xff", "bom": "\ufeffjob: t\n", "tab": "job:\tt\n", "anchors-loop": "a: &a [*a]\n"}
    paths = [fifo, Path("/dev/zero"), Path("/dev/null"), root]
    for name, text in texts.items():
        path = root / f"{name}.yaml"
        path.write_bytes(text.encode("utf-8", "surrogateescape") if name != "binary" else b"\x00\x01\xff")
        paths.append(path)
    paths += sorted((Path(__file__).resolve().parent.parent / "tests" / "specs" / "bad").glob("*.yaml"))
    failures = []
    for path in paths:
        try:
            result = F.cli("plan", path)
            if not (outcome_ok(result) and result.exit_code == 2):
                failures.append(f"{path.name}: exit {result.exit_code}")
        except TimeoutError:
            failures.append(f"{path.name}: hangs")
    return len(paths), failures


def corruptions(root: Path) -> tuple[int, list[str]]:
    failures, tried = [], 0
    for old, new, kind, pick in itertools.product(sorted(F.SPECS), sorted(F.SPECS), F.KINDS, range(3)):
        tried += 1
        trial = root / f"c{tried}"
        trial.mkdir()
        try:
            F.corruption_trial(trial, old, new, kind, pick)
        except (AssertionError, TimeoutError) as exc:
            failures.append(f"{old}->{new} {kind} {pick}: {str(exc).splitlines()[0][:120]}")
    return tried, failures


def strays(root: Path) -> tuple[int, list[str]]:
    rng = random.Random(22)
    names = ["\x1b[2J\x1b[31mred", "\u202etxt.exe", "a\nb", "\udcff\udcfe", "\xa0", "\U000f0000", "\\", "-rf", " "]
    ranges = [(1, 0x80), (0x80, 0x3000), (0xDC80, 0xDD00)]  # ASCII with controls, beyond, undecodable bytes
    names += ["".join(chr(rng.randrange(*rng.choice(ranges))) for _ in range(rng.randrange(1, 12))).replace("/", "_")
              for _ in range(60)]
    trials = [("huge", (command, where, size)) for command in S.COMMANDS
              for where in ("big.bin", "mindformers/extra.bin", "PLAN.md", "MANIFEST")
              for size in (2**30 + 1, 2**33, 2**40)]
    trials += [("deep", (command, depth, leaf, under)) for command in S.COMMANDS
               for depth in (1_000, 2_000, 3_000, 6_000) for leaf in ("file", "link", "fifo")
               for under in ("", "mindformers")]
    trials += [("name", (name, under, kind)) for name in names if name not in (".", "..")
               for under in ("", "mindformers/") for kind in ("file", "folder", "link")]
    run = {"huge": S.huge_trial, "deep": S.deep_trial, "name": S.name_trial}
    scratch = S.memory_root(root / "scratch")
    failures = []
    try:
        for kind, args in trials:
            try:
                run[kind](scratch / "t", *args)
            except (AssertionError, TimeoutError, OSError) as exc:
                failures.append(f"{kind} {args!r}: {(str(exc) or type(exc).__name__).splitlines()[0][:120]}")
    finally:
        remove_tree(scratch)
    return len(trials), failures


def kills(root: Path, trials: int) -> tuple[int, list[str], dict]:
    try:
        outcomes = F.kill_trials(root, random.Random(2026), trials)
    except AssertionError as exc:
        return trials, [str(exc).splitlines()[0]], {}
    return trials, [], outcomes


def main(kill_trials: int) -> int:
    left = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in (("hostile numeric values", hostile_values), ("hostile spec files", hostile_files),
                          ("folder corruptions x re-renders", corruptions),
                          ("strays x check, render, validate, render --overwrite", strays)):
            start = time.monotonic()
            folder = Path(tmp) / name.replace(" ", "_")
            folder.mkdir()
            tried, failures = run(folder)
            left += len(failures)
            print(f"{name}: {tried} tried, {len(failures)} failed ({time.monotonic() - start:.0f} s)")
            for failure in failures[:20]:
                print(f"  {failure}")
        start = time.monotonic()
        folder = Path(tmp) / "kills"
        folder.mkdir()
        tried, failures, outcomes = kills(folder, kill_trials)
        left += len(failures)
        print(f"killed renders: {tried} tried, {len(failures)} failed, left the old set {outcomes.get('old')} / the "
              f"new set {outcomes.get('new')} times ({time.monotonic() - start:.0f} s)")
        for failure in failures:
            print(f"  {failure}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
