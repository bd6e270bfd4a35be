"""What a job folder records about the render that made it (plan.json's `made_from`: the spec file, the --set
overrides in the order given, --force), read back so that `check` and a re-render plan the job as it was made.

plan.json sits in a folder a user may edit, so it is read as data: never through a link, at most MAX_BYTES,
trusted only when an intact MANIFEST lists its sha256, parsed as JSON and checked key by key. The overrides it
lists are then validated as if given on the command line (cli.py applies them through the spec loader).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .errors import UserError, plain_text, show, show_path
from .jobdir import MANIFEST, parse_manifest, read_regular, sha256
from .plan import MadeFrom
from .spec import bad_override

PLAN_JSON = "plan.json"
MAX_BYTES = 1 << 24  # plan.json is tens of KB; MANIFEST a few


class RecordError(UserError):
    """plan.json is there but its record cannot be used (not a regular file, edited by hand, not what render
    writes)."""


def spec_key(spec: str, out_dir: Path) -> str:
    """What identifies "the same spec": its path from the folder that holds OUT. A spec and its output folder
    usually live in one repository, so the key is the same in every checkout and from every working directory. The
    two folders are compared with links resolved (a checkout reached through a link is the same checkout); the
    file names are kept as given."""
    base = os.path.realpath(os.path.dirname(os.path.abspath(out_dir)))
    spec_path = os.path.abspath(spec)
    spec_path = os.path.join(os.path.realpath(os.path.dirname(spec_path)), os.path.basename(spec_path))
    key = Path(os.path.relpath(spec_path, base)).as_posix()
    if not plain_text(key):  # it is written into plan.json and PLAN.md, and printed in messages
        raise UserError(f"the spec's path {show(key)} holds a control or other non-printing character; it is "
                        f"recorded in plan.json and PLAN.md: rename the file")
    return key


def merged(recorded: tuple[str, ...], given: tuple[str, ...]) -> tuple[str, ...]:
    """The overrides a render plans with: the recorded ones, then this command line's; where a KEY.PATH is given
    again, only its last value is kept (at its last place, since a later override of a mapping replaces the keys
    set under it before)."""
    ordered = (*recorded, *given)
    last = {_key(o): i for i, o in enumerate(ordered)}
    return tuple(o for i, o in enumerate(ordered) if last[_key(o)] == i)


def _key(override: str) -> str:
    return override.partition("=")[0].strip()


def _read(path: Path, what: str) -> bytes:
    try:
        info = os.lstat(path)
    except OSError:
        raise RecordError(f"{what}: {show_path(path)} is missing") from None
    data = read_regular(path) if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_BYTES else None
    if data is None:
        raise RecordError(f"{what}: {show_path(path)} is not a regular file of at most {MAX_BYTES:,} bytes")
    return data


def read_record(job_dir: Path) -> MadeFrom | None:
    """The record in OUT/<job>/plan.json; None when there is no such folder or no plan.json in it (nothing is
    recorded). Raises RecordError when plan.json is there but cannot be trusted or is not what render writes."""
    path = job_dir / PLAN_JSON
    if job_dir.is_symlink() or not os.path.lexists(path):  # a linked job folder: refused, never read through
        return None
    data = _read(path, f"{show_path(path)} cannot be read")
    manifest = parse_manifest(_read(job_dir / MANIFEST, f"{show_path(path)} cannot be checked"))
    if not manifest.intact:
        raise RecordError(f"{show_path(path)} cannot be trusted: {show_path(job_dir / MANIFEST)} was edited by hand "
                          f"(its last line no longer hashes the lines above)")
    if manifest.entries.get(PLAN_JSON) != sha256(data):
        raise RecordError(f"{show_path(path)} was edited by hand since render wrote it (its sha256 is not the one "
                          f"MANIFEST lists)")
    try:
        document = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise RecordError(f"{show_path(path)} is not JSON text: {show(str(exc), 120)}") from None
    if not isinstance(document, dict):
        raise RecordError(f"{show_path(path)}: expected a JSON object, got {show(document)}")
    return _made_from(document.get("made_from", {}), path)  # a folder from a version before made_from: nothing


def _made_from(made: object, path: Path) -> MadeFrom:
    where = f"{show_path(path)}: made_from"
    if not isinstance(made, dict):
        raise RecordError(f"{where}: expected a mapping, got {show(made)}")
    spec_file, overrides, force = made.get("spec_file"), made.get("overrides", []), made.get("force", False)
    if not (spec_file is None or isinstance(spec_file, str) and plain_text(spec_file)):
        raise RecordError(f"{where}.spec_file: expected a path in printable text or null, got {show(spec_file)}")
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise RecordError(f"{where}.overrides: expected a list of KEY.PATH=VALUE strings, got {show(overrides)}")
    bad = bad_override(tuple(overrides))
    if bad is not None:
        raise RecordError(f"{where}.overrides: {show(bad)} holds a control or other non-printing character")
    if not isinstance(force, bool):
        raise RecordError(f"{where}.force: expected true or false, got {show(force)}")
    return MadeFrom(spec_file, tuple(overrides), force)
