"""Provenance: a value a framework's files hold, with where it came from. One value, one source: the plan shows both
(plan.json and PLAN.md), so every value in a file can be traced to the upstream file and line, the spec key or the
plan's decision that set it."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from .frozen import frozen

V = TypeVar("V")


@frozen
class Setting(Generic[V]):
    """One value: `key` as its reader names it (a config key, an environment variable, a step's option), the value in
    the type its reader declares (each plugin names its Value type), and its source ("upstream <file> l. N",
    "spec <key>", "plan: <what>", "derived: <how>")."""

    key: str
    value: V
    source: str

    def to_json(self) -> dict:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"key": self.key, "value": value, "source": self.source}

    @classmethod
    def from_json(cls, data: dict) -> Setting[Any]:
        """plan.json's form read back: a list value is the tuple to_json wrote; ValueError where it is not that form."""
        if not (isinstance(data, dict) and isinstance(data.get("key"), str) and isinstance(data.get("source"), str)):
            raise ValueError(f"not a setting (key, value, source): {data!r:.80}")
        value = data.get("value")
        typed: Any = tuple(value) if isinstance(value, list) else value
        return cls(data["key"], typed, data["source"])
