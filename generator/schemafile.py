"""The job spec's JSON Schema as a file beside the specs (`gen-launch schema -o DIR`, and `init`), so the editor
modeline a spec carries names it by a path relative to the spec, which works wherever the folder is checked out
(yaml-language-server resolves a relative `$schema=` against the YAML file's own folder)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError, show_path
from .resources import resource_dir

SCHEMA_NAME = "job.schema.json"


def schema_bytes() -> bytes:
    return (resource_dir("schemas") / SCHEMA_NAME).read_bytes()


def current(path: Path) -> bool:
    """`path` is a regular file holding this version's schema."""
    return path.is_file() and not path.is_symlink() and path.stat().st_size == len(schema_bytes()) \
        and path.read_bytes() == schema_bytes()


def write_schema(folder: Path) -> tuple[str, Path]:
    """Write FOLDER/job.schema.json (the folder made if missing), replacing an older copy in one rename:
    ("create" | "overwrite" | "identical", its path). Anything there but a regular file is refused."""
    path = folder / SCHEMA_NAME
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UserError(f"{show_path(path)} is not a regular file; gen-launch writes only a plain {SCHEMA_NAME} there")
    if current(path):
        return "identical", path
    action = "overwrite" if path.exists() else "create"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".{SCHEMA_NAME}.{os.getpid()}.tmp"
        staged.write_bytes(schema_bytes())
        os.replace(staged, path)
    except OSError as exc:
        raise UserError(f"cannot write {show_path(path)}: {exc.strerror}") from None
    return action, path


def schema_ref(folder: Path, spec_folder: Path) -> str:
    """FOLDER/job.schema.json relative to the spec's folder, as the modeline holds it: the modeline ends at the
    first space, so a path with one is refused."""
    ref = Path(os.path.relpath(folder / SCHEMA_NAME, spec_folder)).as_posix()
    if any(c.isspace() for c in ref):
        raise UserError(f"the schema path {ref!r} has a space, which an editor's schema line cannot hold; "
                        f"choose a --schema folder without one")
    return ref
