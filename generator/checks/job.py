"""A rendered job folder as `validate` hands it to each framework's checks: its plan.json and model, the options
`validate` was given, readers that never follow a link or open more than MAX_READ bytes, and one result per file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ..api.frozen import frozen
from ..errors import UserError
from ..jobdir import read_regular
from ..tables import Framework, Model, Tables, load_tables
from .plan_record import FrameworkRecord, PlanRecord

T = TypeVar("T")

NO_PLAN = "plan.json is missing or unreadable: the card count and model this file is checked against are unknown"


@frozen
class Result:
    """One check's verdict on one file."""

    path: str
    status: str  # ok | problem | skipped | env (validate.py's docstring says what each means)
    detail: str = ""


@dataclass
class Job:
    """One validate run's view of a job folder. `plan`: what it reads of plan.json (None when unreadable); `model`: its
    model's table row; `options`: validate's plugin-declared options by their dest (None: not given); `tables`:
    the tables the run loaded, which a plugin's checks read through `framework` rather than loading them again."""

    folder: Path
    plan: PlanRecord | None
    model: Model | None
    options: Mapping[str, str | None] = field(default_factory=dict)
    tables: Tables = field(default_factory=load_tables)
    _once: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, folder: Path, options: Mapping[str, str | None]) -> Job:
        plan, tables = _plan(text(folder / "plan.json")), load_tables()
        return cls(folder, plan, _model(tables, plan), dict(options), tables)

    def framework(self, name: str) -> Framework:
        """Framework `name`'s row of the tables."""
        return self.tables.frameworks[name]

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()` the first time `key` is asked in this run, then its value: checks of files against each other
        run once for all of them."""
        if key not in self._once:
            self._once[key] = compute()
        return self._once[key]

    def planned(self, framework: str) -> FrameworkRecord | None:
        """The framework's counts and settings on plan.json, None if it has none."""
        return None if self.plan is None else self.plan.frameworks.get(framework)

    def layout_value(self, framework: str, key: str) -> int | None:
        """An integer of the framework's layout on plan.json (cards, nodes, global_batch_size), None if absent."""
        planned = self.planned(framework)
        return None if planned is None else getattr(planned, key)


def text(file: Path) -> str:
    """A generated file's text; "" when it is missing or not a regular file (reported per file elsewhere)."""
    data = read_regular(file)
    return "" if data is None else data.decode("utf-8", "replace")


def yaml_mapping(file: Path) -> tuple[dict | None, str]:
    """(the file's YAML mapping, "") or (None, what is wrong)."""
    try:
        doc = yaml.safe_load(text(file))
    except yaml.YAMLError as exc:
        return None, f"not valid YAML: {str(exc).splitlines()[0]}"
    return (doc, "") if isinstance(doc, dict) else (None, "not a YAML mapping")


def _plan(data: str) -> PlanRecord | None:
    try:
        return PlanRecord.from_json(json.loads(data))
    except (ValueError, RecursionError):  # not JSON, or not the values render writes
        return None


def _model(tables: Tables, plan: PlanRecord | None) -> Model | None:
    try:
        return tables.model(plan.model) if plan else None
    except UserError:
        return None
