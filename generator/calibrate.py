"""`gen-launch calibrate`: a run's own logs read back into a `calibration:` block the spec carries.

Each framework's plugin names its log format (`<plugin>.logs.log_format()`); every line of every log goes through
the formats of the frameworks the plan holds, and the one whose format finds step lines measured the run. The log
must state the layout and model the spec plans where it states them (a log of another run is refused, naming the
key), and reach steady state (logs.steady).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path

import yaml

from . import __version__
from .calibration import layout_of
from .calibration_block import Calibration
from .errors import SpecError, UserError, show_path
from .logs import LogError, LogFacts, LogFormat, lines, steady
from .plan import FrameworkPlan, Plan
from .spec import Spec, parse_spec
from .tables import RL_METHODS, load_tables

# What a log may state, and which of the plan's values it must equal: another layout, or another model.
LAYOUT_FACTS = ("cards", "tp", "pp", "cp", "ep", "micro_batch_size", "global_batch_size")
MODEL_FACTS = ("layers", "hidden")  # models.yaml columns


def log_format(framework: str) -> LogFormat | None:
    """A fresh reader of `framework`'s log format (its plugin's logs module), None where it declares none."""
    module = f"{load_tables().frameworks[framework].plugin}.logs"
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        return None
    reader: LogFormat = found.log_format()
    return reader


def read_logs(paths: list[Path], frameworks: list[str]) -> tuple[dict[str, LogFacts], list[str]]:
    """Every log through each framework's format: (what each found, the sha256 of each log's bytes read)."""
    formats = {name: found for name in frameworks if (found := log_format(name)) is not None}
    facts = {name: LogFacts() for name in formats}
    digests = []
    for path in paths:
        digest = hashlib.sha256()
        for line in lines(path, digest):
            for name, reader in formats.items():
                reader.read(line, facts[name])
        digests.append(digest.hexdigest())
    return facts, digests


def calibration_of(spec: Spec, plan: Plan, paths: list[Path]) -> Calibration:
    """The calibration `paths` (one run's logs) give for `plan` (the plan of the spec that made the run)."""
    shown = ", ".join(str(path) for path in paths)
    facts, digests = read_logs(paths, list(plan.frameworks))
    found = [name for name, got in facts.items() if got.samples]
    if not found:
        raise LogError(shown, f"no step line of {' or '.join(plan.frameworks)} (the formats: "
                              f"{'; '.join(fmt.source for n in plan.frameworks if (fmt := log_format(n)))}): "
                              f"give the log the job's launch wrote, or the spec of that job")
    name = found[0]
    got, fp = facts[name], plan.frameworks[name]
    _same_run(got, fp, plan, shown)
    measured = steady(got.samples, shown, frozenset(got.saved))
    lay = fp.layout
    if plan.method in RL_METHODS:  # an RL rate is the framework's own figure: its plugin converts it
        if measured.throughput is None:
            raise LogError(shown, f"the steady steps log no {name} throughput, which an RL rate is measured in")
        rate = measured.throughput
    else:
        per_sample = spec.tokens_per_epoch / spec.samples_per_epoch \
            if spec.tokens_per_epoch and spec.samples_per_epoch else float(spec.seq_len)
        rate = lay.global_batch_size * per_sample / (measured.seconds * lay.cards)
    return Calibration(framework=name, model=plan.model, method=plan.method, hardware=plan.hardware,
                       seq_len=plan.seq_len, tokens_per_card_s=_round(rate), step_time_s=_round(measured.seconds),
                       peak_memory_gib=None if got.peak_gib is None else round(got.peak_gib, 2),
                       steps=measured.steps, layout=layout_of(lay), log_sha256=tuple(digests),
                       gen_launch_version=__version__)


def _round(value: float) -> float:
    """Four significant digits: more than a log's timing resolves, and byte-stable."""
    return float(f"{value:.4g}")


def _same_run(got: LogFacts, fp: FrameworkPlan, plan: Plan, shown: str) -> None:
    """Refuse a log whose stated layout or model is not the plan's."""
    lay = fp.layout
    for key, value in got.stated.items():
        if key in MODEL_FACTS and getattr(plan.shape, key) != value:
            raise LogError(shown, f"the run trained another model: {key} {value} in the log, {plan.model} has "
                                  f"{getattr(plan.shape, key)}; give the spec of that run")
        if key == "seq_len" and value != plan.seq_len:
            raise LogError(shown, f"the run trained at sequence length {value}; the spec plans {plan.seq_len}")
        if key in LAYOUT_FACTS and getattr(lay, key) != value:
            raise LogError(shown, f"the run used another layout: {key} {value} in the log, the plan has "
                                  f"{getattr(lay, key)} ({lay.describe()} on {lay.cards} cards); calibrate with the "
                                  f"spec and --set options that made the run")


def block_text(cal: Calibration) -> str:
    """The `calibration:` block as YAML, keys in a fixed order."""
    return yaml.safe_dump({"calibration": cal.to_spec()}, sort_keys=False, allow_unicode=False, width=120)


def write_spec(spec_path: Path, spec: Spec, cal: Calibration, out: Path) -> None:
    """OUT: the spec file's text with the block added, in one rename. OUT is the spec itself or a new file; a spec
    that already carries a calibration is refused (appending would give the key twice: remove the old block)."""
    if spec.calibration is not None:
        raise UserError(f"{show_path(spec_path)} already has a calibration block; remove it to record a new one "
                        f"(or print the block without -o)")
    if out.exists() and not (out.is_file() and out.samefile(spec_path)):
        raise UserError(f"{show_path(out)} exists and is not the spec; give a new file, or the spec itself to add "
                        f"the block to it")
    text = spec_path.read_bytes().decode("utf-8")
    text += ("" if text.endswith("\n") or not text else "\n") + block_text(cal)
    try:
        added = parse_spec(text.encode("utf-8")).calibration
    except SpecError:
        added = None
    if added != cal:  # a spec written as one flow mapping ({...}) or JSON cannot take a block after it
        raise UserError(f"{show_path(spec_path)}: the block cannot be appended to this spec's text (its top level is "
                        f"not a block mapping); run without -o and add the printed block by hand")
    staged = out.parent / f".{out.name}.{os.getpid()}.tmp"
    try:
        staged.write_text(text, encoding="utf-8", newline="\n")
        os.replace(staged, out)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise UserError(f"cannot write {show_path(out)}: {exc.strerror}") from None
