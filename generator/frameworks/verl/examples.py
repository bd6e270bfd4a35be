"""verl 0.7.0's upstream NPU example scripts a plan follows (data: generator/data/verl_0.7.0/examples.yaml)."""

from __future__ import annotations

from functools import cache
from typing import Any

from ...api.frozen import frozen
from ...errors import TableError
from ...resources import DATA_DIR
from ...tables import load_data

FOLDER = DATA_DIR / "verl_0.7.0"
COMMIT = "v0.7.0 (f9c855f7)"


@frozen
class Example:
    """One upstream script: the HuggingFace model it trains and its values, key -> (value, line)."""

    script: str
    method: str
    model: str
    values: dict[str, tuple[Any, int]]  # a script's values are YAML scalars

    def get(self, key: str) -> tuple[Any, str] | None:
        """(value, its source) where the script sets `key`; None where it leaves verl's default."""
        found = self.values.get(key)
        return None if found is None else (found[0], f"upstream {self.script} l. {found[1]} ({COMMIT})")


@cache
def examples() -> dict[str, Example]:
    doc = load_data(f"{FOLDER.name}/examples.yaml")
    out = {}
    for script, row in doc["examples"].items():
        values = {key: value for key, value in row.items() if key not in ("method", "model")}
        bad = [key for key, value in values.items() if not (isinstance(value, list) and len(value) == 2
                                                            and isinstance(value[1], int))]
        if bad:
            raise TableError(f"verl_0.7.0/examples.yaml {script}: {', '.join(bad)} must be [value, line]")
        out[script] = Example(script, row["method"], row["model"],
                              {key: (value[0], value[1]) for key, value in values.items()})
    return out


def example(script: str) -> Example:
    found = examples().get(script)
    if found is None:
        raise TableError(f"frameworks.yaml verl: {script} is not in verl_0.7.0/examples.yaml")
    return found
