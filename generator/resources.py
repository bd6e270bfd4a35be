"""Where the top-level `templates/` and `schemas/` folders are, from a source checkout or an installed wheel.

The wheel build (pyproject.toml, hatch force-include) copies both folders into the package as
`generator/templates` and `generator/schemas`; a checkout keeps them beside the package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder `name` ("templates" or "schemas"): inside the installed package, else at the repo top level."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gen-launch is installed without its {name}/ folder (looked in {_PACKAGE})")


DATA_DIR = _PACKAGE / "data"
