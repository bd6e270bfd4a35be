"""The framework registry: each frameworks.yaml row names the module of its plugin (`plugin:`), imported here once
and checked against the contract (contract.py). The core asks the registry; it names no framework."""

from __future__ import annotations

import importlib
from functools import lru_cache

from ..errors import TableError
from ..tables import load_tables
from .contract import Plugin


@lru_cache(maxsize=1)
def registry() -> dict[str, Plugin]:
    """Every framework of the tables, by name, in the tables' order. A row whose plugin module does not import or
    does not expose a `PLUGIN` for that name is a table error (exit 5), named with the row and the module."""
    found = {}
    for name, row in load_tables().frameworks.items():
        try:
            module = importlib.import_module(row.plugin)
        except ImportError as exc:
            raise TableError(f"frameworks.yaml {name}: plugin: {row.plugin} does not import ({exc})") from None
        plugin = getattr(module, "PLUGIN", None)
        if not isinstance(plugin, Plugin) or plugin.name != name:
            raise TableError(f"frameworks.yaml {name}: plugin: {row.plugin} has no PLUGIN = Plugin({name!r}, ...) "
                             f"(generator/frameworks/contract.py)")
        found[name] = plugin
    return found


def plugin(name: str) -> Plugin:
    """The plugin of the framework `name` (a name the tables hold)."""
    return registry()[name]
