"""The framework registry: each frameworks.yaml row names the module of its plugin (`plugin:`), imported here once
and checked against the contract (contract.py). The core asks the registry; it names no framework."""

from __future__ import annotations

from functools import cache

from ..api.contract import Output
from ..errors import TableError
from ..tables import Framework, Tables, load_tables
from .contract import Plugin, import_for

_built: tuple[Tables, dict[str, Plugin]] | None = None  # the registry of the tables last loaded


def registry() -> dict[str, Plugin]:
    """Every framework of the tables, by name, in the tables' order: one dict for as long as the same tables are
    loaded (tables loaded anew, as tests with other data do, get their own)."""
    global _built
    tables = load_tables()
    if _built is None or _built[0] is not tables:
        _built = (tables, {name: plugin_of(row) for name, row in tables.frameworks.items()})
    return _built[1]


def load_outputs() -> list[Output]:
    """Every plugin's output side, imported now (contract.py Plugin defers it to first use): one that does not
    import is a table error (exit 5) before a command checks a file."""
    return [plugin.output for plugin in registry().values()]


def plugin_of(row: Framework) -> Plugin:
    """The plugin a frameworks.yaml row names. A module that does not import or does not expose a `PLUGIN` for
    that name is a table error (exit 5), named with the row and the module."""
    return _load(row.name, row.plugin)


@cache
def _load(name: str, module_name: str) -> Plugin:
    found = getattr(import_for(name, module_name), "PLUGIN", None)
    if not isinstance(found, Plugin) or found.name != name:
        raise TableError(f"frameworks.yaml {name}: plugin: {module_name} has no PLUGIN = Plugin({name!r}, ...) "
                         f"(generator/frameworks/contract.py)")
    return found
