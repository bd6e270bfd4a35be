"""How a plugin is loaded: `Plugin` names a framework's two sides (the contract, generator/api/contract.py) and imports
each when first used. The contract's names are re-exported here, where the plugins have always imported them; the
values only `init` (api/starter.py) and the files' side (api/output.py) use are imported from their own modules, so
that a plan loads neither."""

from __future__ import annotations

import importlib
from functools import cached_property
from types import ModuleType
from typing import Any

from ..api.contract import (
    MemoryInputs,
    Output,
    PathDefault,
    Planning,
    SearchSpace,
    Settings,
    Structure,
)
from ..api.roles import RoleDef, RoleKind
from ..errors import TableError

__all__ = ["MemoryInputs", "Output", "PathDefault", "Planning", "Plugin", "RoleDef", "RoleKind", "SearchSpace",
           "Settings", "Structure", "import_for"]


class Plugin:
    """One framework behind the contract: its name (the frameworks.yaml row and templates/<name>/) and its two
    sides. A side is given as itself or as the name of the module that holds it as `PLANNING` / `OUTPUT`, imported
    when first used: a plan asks only the frameworks it lists, and `plan` never renders or checks files (the output
    side is most of a plugin's import time)."""

    def __init__(self, name: str, planning: Planning | str, output: Output | str) -> None:
        self.name = name
        self._given = {"PLANNING": planning, "OUTPUT": output}

    @cached_property
    def planning(self) -> Planning:
        return self._side("PLANNING")

    @cached_property
    def output(self) -> Output:
        return self._side("OUTPUT")

    def _side(self, attribute: str) -> Any:
        """The side as given, or `attribute` of the module named; a module that does not import, or whose
        `attribute` is not such a side, is a table error (exit 5) then, named with the row."""
        given = self._given[attribute]
        if not isinstance(given, str):
            return given
        found = getattr(import_for(self.name, given), attribute, None)
        kind = Planning if attribute == "PLANNING" else Output
        if not isinstance(found, kind):
            raise TableError(f"frameworks.yaml {self.name}: plugin: {given} has no {attribute} meeting the "
                             f"contract's {kind.__name__} (generator/frameworks/contract.py)")
        return found


def import_for(name: str, module_name: str) -> ModuleType:
    """Module `module_name` of framework `name`'s plugin; one that does not import is a table error (exit 5),
    named with the row and the module."""
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # any error of the module's code is the row's (a SyntaxError, a RuntimeError)
        raise TableError(f"frameworks.yaml {name}: plugin: {module_name} does not import "
                         f"({type(exc).__name__}: {exc})") from None
