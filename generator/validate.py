"""`gen-launch validate OUT/<job>`: check a rendered job folder with each framework's own rules.

One Result per file, in MANIFEST order:
- ok        every check that applies ran and passed;
- problem   a defect in the file (what is wrong, and the upstream rule it breaks);
- skipped   an optional check did not run because its package is not installed (the note says how to add it);
- env       a check could not run because the environment is broken (a package that does not import): this says
            nothing about the file.
Every file gets the checks of its format here (bash -n and shellcheck, JSON syntax, the node ranks of commands.txt);
a file in a framework's folder also goes to that framework's plugin (Output.check, generator/frameworks/<name>/),
which applies the framework's own parsers and rules. No code from the job folder is run or imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from .checks import commands
from .checks.job import NO_PLAN, Job, Result, text
from .checks.shell import shell_problems
from .errors import UserError, show_path
from .frameworks import load_outputs, registry
from .jobdir import MANIFEST, MAX_READ, Manifest, parse_manifest, read_regular, scan

__all__ = ["Result", "validate"]


def validate(job_dir: Path, options: Mapping[str, str | None] | None = None) -> Iterator[Result]:
    """Each file's Result as soon as its checks finish (the slow ones, such as a framework's own parser, run in child
    interpreters); a folder that is not a job folder raises UserError before the first. `options`: the values of the
    options the plugins declare (Output.options), by their dest; an opt-in check runs when its option is given.

    Only regular files found by a walk of the folder are read (jobdir.scan: no link followed, no FIFO opened);
    MANIFEST's paths are compared with them, never opened."""
    if job_dir.is_symlink():
        raise UserError(f"{show_path(job_dir)} is a symbolic link; validate reads only a real job folder")
    if not job_dir.is_dir():
        raise UserError(f"{show_path(job_dir)} is not a folder (or does not exist); give a job folder render wrote")
    data = read_regular(job_dir / MANIFEST)
    if data is None:
        raise UserError(f"{show_path(job_dir)}: no {MANIFEST} (or not a regular file, or over {MAX_READ} bytes); "
                        f"not a folder gen-launch render wrote")
    load_outputs()  # a plugin that does not load, its output side too, is a table error (exit 5) before any result
    return _results(job_dir, parse_manifest(data), options or {})


def _results(job_dir: Path, manifest: Manifest, options: Mapping[str, str | None]) -> Iterator[Result]:
    found = scan(job_dir, manifest.entries)
    job = Job.read(job_dir, options)
    if not manifest.intact:
        yield Result(MANIFEST, "problem", "edited since gen-launch render wrote it (its last line's hash does not "
                                          "match)")
    for path, digest in manifest.entries.items():
        entry = found.get(path)
        if entry is None or entry.kind != "file":
            yield Result(path, "problem", "missing (or not a regular file)")
        elif entry.digest != digest:
            # Over MAX_READ the file is not read, so its checks cannot run either.
            yield _changed(_check(job, path)) if entry.digest else \
                Result(path, "problem", f"{CHANGED} (over {MAX_READ} bytes: not read)")
        else:
            yield _check(job, path)
    for path in sorted(p for p, e in found.items() if e.kind != "folder" and p != MANIFEST
                       and p not in manifest.entries):
        yield Result(path, "problem", UNREADABLE if found[path].kind == "unreadable" else
                     f"not listed in {MANIFEST}: gen-launch did not write it (or {MANIFEST} was edited), so "
                     f"nothing vouches for it")


def _placeholders(job: Job) -> list[str]:
    """The paths the spec left out, written as placeholders the launch refuses: the files are valid, the job does
    not start until they are given (said on plan.json's line, so an all-ok folder does not read as ready)."""
    left = sorted(key for key, path in job.plan.paths.items() if path.placeholder) if job.plan else []
    return [f"not ready to launch: {', '.join(left)} are placeholders (give them under paths: in the spec and "
            f"render again)"] if left else []


CHANGED = "changed since gen-launch render wrote it"
UNREADABLE = "a folder that cannot be read (permissions, or nested deeper than the system's path limit)"


def _changed(checked: Result) -> Result:
    """A file edited by hand is a problem (nothing vouches for it), and its checks still run: the detail says both,
    so a user sees whether the edit also breaks the framework's rules."""
    verdict = {"ok": "its checks pass", "skipped": "checked offline"}.get(checked.status, checked.status)
    return Result(checked.path, "problem", f"{CHANGED}; {verdict}" + (f": {checked.detail}" if checked.detail else ""))


def _check(job: Job, path: str) -> Result:
    """The checks of the file's format, then its framework's own (the plugin of the folder it is in)."""
    file = job.folder / path
    folder = path.split("/", 1)[0] if "/" in path else None
    plugin = registry().get(folder) if folder else None
    notes: list[str] = []
    problems: list[str] = []
    if path.endswith((".sh", ".sbatch")):  # an sbatch script is a bash script (its #SBATCH lines are comments)
        found, skipped = shell_problems(file)
        problems += found
        notes += [skipped] if skipped else []
    elif file.name == "commands.txt" and folder:
        nodes = job.layout_value(folder, "nodes")
        problems += commands.rank_problems(text(file), nodes, plugin.output.launchers if plugin else ()) \
            if nodes else [NO_PLAN]
    elif path.endswith(".json"):
        try:
            json.loads(text(file))
        except ValueError as exc:
            problems.append(f"not JSON: {exc}")
    own = plugin.output.check(job, path) if plugin else None
    if path == "plan.json":
        notes += _placeholders(job)
    if own is not None and own.status == "problem":
        problems.append(own.detail)
    if problems:
        return Result(path, "problem", "; ".join(problems))
    if own is None:
        return Result(path, "ok", "; ".join(notes))
    return Result(path, own.status, "; ".join(notes + ([own.detail] if own.detail else [])))
