"""The one kind of exception for problems a user can fix, and how it is printed."""

from __future__ import annotations

from dataclasses import dataclass


MAX_SHOWN = 20  # problems printed for one spec: a spec of thousands of unknown keys would print them all


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the dotted key path and a plain sentence."""

    path: str
    message: str


class UserError(Exception):
    """Printed as `Error: ...` lines; exit status 2 (bad spec, bad arguments, refusal) unless told otherwise."""

    exit_code = 2

    def lines(self, source: str) -> list[str]:
        return [f"Error: {self.args[0]}"]


class TableError(UserError):
    """A data table under generator/data/ breaks the registry's rules (a row lacks a fact a framework needs):
    `Error: <file>: <what>`, exit status 5, before any spec is read."""

    exit_code = 5


class SpecError(UserError):
    """Problems tied to keys of the job spec: `Error: <spec file>: <key path>: <sentence>`, sorted by key path."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))
        self.problems = sorted(problems, key=lambda p: (p.path, p.message))

    @classmethod
    def at(cls, path: str, message: str) -> "SpecError":
        return cls([Problem(path, message)])

    def lines(self, source: str) -> list[str]:
        source = show_name(source, limit=4096)
        shown = [f"Error: {source}: {p.path}: {p.message}" for p in self.problems[:MAX_SHOWN]]
        more = len(self.problems) - MAX_SHOWN
        return shown + ([f"Error: {source}: (more): {more} more problem(s) not listed; fix these first"]
                        if more > 0 else [])


def show(value: object, limit: int = 60) -> str:
    """A user value inside a message: quoted, escaped and cut short, never a Python repr of a container."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        text = value.encode("unicode_escape").decode("ascii").replace("'", "\\'")
        if len(text) > limit:
            text = text[: limit - 3] + "..."
        return f"'{text}'"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def show_name(text: str, limit: int = 60) -> str:
    """A name (a key, a file) inside a message: as written when every character prints as itself (no control,
    format or unusual space character, which a terminal may act on or show as something else), else show()n."""
    return text if text.isprintable() and 0 < len(text) <= limit else show(text, limit)
