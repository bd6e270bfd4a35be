"""A training job's own log, read as data: the step samples and stated facts a framework's log format finds, and
the steady-state figures `gen-launch calibrate` derives from them.

A log is hostile input: it is read in chunks up to MAX_LOG_BYTES, a line longer than MAX_LINE is skipped, control
and format characters become spaces, and a number is taken only as ASCII digits of bounded length that convert to
a finite value. Nothing in it is evaluated.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from .api.frozen import frozen
from .errors import UserError, prints_as_itself, show_path

MAX_LOG_BYTES = 1 << 30  # a day of a 64-node job's rank-0 log is well under this; the rest is not read
MAX_LINE = 1 << 16  # a step line is a few hundred characters; a config dump line a few thousand
MAX_SAMPLES = 200_000  # step samples kept per log: steady state needs a few dozen
MAX_NUMBER = 40  # characters of one number
WARMUP_SHARE = 0.1  # the first logged samples (at least one) are warm-up: graph compile, allocator growth
MIN_STEADY = 3  # step samples after warm-up that steady state needs
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


class LogError(UserError):
    """A log calibrate cannot use: `Error: <log>: <why>`, exit 2."""

    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{show_path(path)}: {message}")


def number(text: str) -> float | None:
    """`text` as a finite number (ASCII digits, a point, an exponent), else None: never eval, never inf or nan."""
    text = text.strip().replace(",", "")
    if len(text) > MAX_NUMBER or not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if abs(value) < 1e300 else None


def whole(text: str) -> int | None:
    """`text` as a whole number (thousands separators allowed), else None."""
    value = number(text)
    return int(value) if value is not None and value == int(value) and "." not in text else None


@frozen
class Sample:
    """One logged interval: the step it ends at, the steps it covers and the seconds per step over them."""

    step: int
    span: int
    seconds: float
    throughput: float | None = None  # the framework's own tokens/s per card for the interval, where it logs one
    excluded: str | None = None  # "checkpoint save", "validation": not steady state


@dataclass
class LogFacts:
    """What a framework's log format found: samples, the layout and model the log states, peak memory."""

    samples: list[Sample] = field(default_factory=list)
    stated: dict[str, int] = field(default_factory=dict)  # tp, pp, cp, ep, cards, micro_batch_size, ...
    peak_gib: float | None = None
    pending: str | None = None  # a save or validation seen since the last sample: the next one is not steady
    saved: set[int] = field(default_factory=set)  # steps after which a log (of several) says a checkpoint was saved

    def add(self, sample: Sample) -> None:
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(sample if self.pending is None else replace(sample, excluded=self.pending))
        self.pending = None

    def state(self, key: str, value: int | None) -> None:
        if value is not None:
            self.stated[key] = value

    def peak(self, gib: float | None) -> None:
        if gib is not None:
            self.peak_gib = gib if self.peak_gib is None else max(self.peak_gib, gib)


class LogFormat(Protocol):
    """A framework's log format (its plugin's logs.py): every line of the job's logs goes through `read`."""

    source: str  # the upstream file and line of the format strings it reads

    def read(self, line: str, facts: LogFacts) -> None: ...


def lines(path: Path, digest: Any = None) -> Iterator[str]:
    """The log's lines, bounded and cleaned (module docstring); `digest` (a hashlib object) takes the bytes read.
    A file that is not a regular file is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise LogError(path, f"cannot be read ({error.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogError(path, "is not a regular file (a log is a file the job wrote)")
        left, rest, skipping = MAX_LOG_BYTES, b"", False
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)
            if digest is not None:
                digest.update(chunk)
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            if skipping and parts:  # the end of a line past the bound
                parts, skipping = parts[1:], False
            if len(rest) > MAX_LINE:  # a line past the bound: dropped up to its end, never held
                rest, skipping = b"", True
            yield from (_clean(part) for part in parts if len(part) <= MAX_LINE)
        if rest and not skipping:
            yield _clean(rest)


def _clean(raw: bytes) -> str:
    return "".join(ch if prints_as_itself(ch) else " " for ch in raw.decode("utf-8", errors="replace"))


@frozen
class Steady:
    """The steady-state figures of a log: seconds per step, the framework's own throughput where it logs one."""

    seconds: float
    throughput: float | None
    steps: int  # steps the figures average over
    logged: int  # samples in the log


def steady(samples: list[Sample], path: str, saved: frozenset[int] = frozenset()) -> Steady:
    """The mean over the steady samples (weighted by the steps each covers): the latest sample of each step (a
    relaunch logs steps again), less the first WARMUP_SHARE (at least one) and those with a save or validation
    (`saved`: steps after which another log of the run says a checkpoint was saved)."""
    latest = {sample.step: sample for sample in samples}
    for step in saved:  # the save runs after `step`: the interval holding step + 1 paid for it
        hit = next((at for at in sorted(latest) if at - latest[at].span < step + 1 <= at), None)
        if hit is not None:
            latest[hit] = replace(latest[hit], excluded="checkpoint save")
    ordered = [latest[step] for step in sorted(latest)]
    warmup = max(1, int(len(ordered) * WARMUP_SHARE + 0.5))
    kept = [sample for sample in ordered[warmup:] if sample.excluded is None and sample.seconds >= 0]
    if len(kept) < MIN_STEADY:
        skipped = len(ordered[warmup:]) - len(kept)
        raise LogError(path, f"{len(ordered)} step(s) logged, {len(kept)} after warm-up ({warmup} step line(s)) "
                             f"and {skipped} with a save or validation; steady state needs {MIN_STEADY}: the job "
                             f"crashed or stopped before it (calibrate with the log of a run past its first "
                             f"{warmup + MIN_STEADY} step lines)")
    steps = sum(sample.span for sample in kept)
    seconds = sum(sample.seconds * sample.span for sample in kept) / steps
    if seconds <= 0:
        raise LogError(path, f"the {steps} steady steps took no measurable time (the log's clock did not move)")
    rates = [sample for sample in kept if sample.throughput is not None]
    throughput = sum((s.throughput or 0.0) * s.span for s in rates) / sum(s.span for s in rates) \
        if rates else None
    return Steady(seconds, throughput, steps, len(ordered))
