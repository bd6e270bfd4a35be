"""What `validate` reads of a job folder's plan.json, as typed values: the model by name, the paths (and which are
placeholders), the data file's rows, and each framework's cards, nodes, global batch and settings. plan.json is
data a user may have edited: a value of another type than render writes makes the record unreadable (None), and
every check then says the plan is unknown, never guesses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api.frozen import frozen
from ..plan import PathValue


@frozen
class FrameworkRecord:
    """One framework's counts on plan.json; `settings`: its plugin's settings as plan.json holds them (the plugin's
    own reader types them; None: the plugin has none)."""

    cards: int
    nodes: int
    global_batch_size: int
    settings: Mapping[str, Any] | None = None


@frozen
class PlanRecord:
    """What validate reads of plan.json: the model, the paths, the data rows and each framework's record."""

    model: str  # the model table's name
    paths: Mapping[str, PathValue]
    data_rows: int | None  # fine-tuning: the data file's rows the steps are sized for
    frameworks: Mapping[str, FrameworkRecord]

    @classmethod
    def from_json(cls, data: object) -> PlanRecord:
        """The record of plan.json's `data`; ValueError where a value is missing or not of the type render writes."""
        plan = _mapping(data, "plan.json")
        paths = {key: PathValue(_typed(value, "value", str, key), _typed(value, "placeholder", bool, key))
                 for key, value in _mapping(plan.get("paths"), "paths").items()}
        rows = _mapping(plan.get("data"), "data").get("rows")
        frameworks = {name: _framework(name, fw) for name, fw in _mapping(plan.get("frameworks"), "frameworks").items()}
        return cls(_typed(plan, "model", str, "plan.json"), paths, _count(rows, "data.rows", optional=True),
                   frameworks)


def _framework(name: str, data: object) -> FrameworkRecord:
    fw = _mapping(data, f"frameworks.{name}")
    settings = fw.get("settings")
    cards, nodes, batch = (_count(fw.get(key), f"frameworks.{name}.{key}") for key in
                           ("cards", "nodes", "global_batch_size"))
    return FrameworkRecord(cards, nodes, batch,
                           None if settings is None else _mapping(settings, f"frameworks.{name}.settings"))


def _mapping(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping")
    return value


def _typed(mapping: object, key: str, kind: type, where: str) -> Any:
    value = _mapping(mapping, where).get(key)
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key}: expected {kind.__name__}")
    return value


def _count(value: object, where: str, optional: bool = False) -> Any:
    """A whole number (JSON's bool is not one)."""
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{where}: expected a whole number")
    return value
