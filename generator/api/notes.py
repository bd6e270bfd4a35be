"""Notes: what the plan says about itself, as typed values. Each carries a code that names what it says (one code, one
sentence: a reader or a test selects notes by code, not by searching their words), whether it is a note or a
warning (warnings fail `plan --strict`), and the framework (and role) it is about; PLAN.md, `plan` and plan.json
show it as the framework's label followed by its text."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from .frozen import frozen

Kind = Literal["note", "warning"]


@frozen
class Note:
    """One note: `code` a short stable name ("cards.forced"), `text` the sentence, `kind` note or warning,
    `framework` (and `role`) the one it is about, None for the whole plan."""

    code: str
    text: str
    kind: Kind = "note"
    framework: str | None = None
    role: str | None = None

    def __str__(self) -> str:
        label = " ".join(part for part in (self.framework, self.role) if part)
        return f"{label}: {self.text}" if label else self.text

    def __contains__(self, words: str) -> bool:
        return words in str(self)

    def startswith(self, words: str) -> bool:
        return str(self).startswith(words)

    def about(self, framework: str, role: str | None = None) -> Note:
        """This note as one about `framework` (and its `role`)."""
        return replace(self, framework=framework, role=role)

    def to_json(self) -> dict:
        return {"code": self.code, "kind": self.kind, "framework": self.framework, "role": self.role,
                "text": self.text}

    @classmethod
    def from_json(cls, data: dict) -> Note:
        return cls(data["code"], data["text"], data["kind"], data["framework"], data["role"])


def warning(code: str, text: str) -> Note:
    """A warning: a note that `plan --strict` fails on."""
    return Note(code, text, "warning")


def with_code(notes: tuple[Note, ...] | list[Note], code: str) -> list[Note]:
    """The notes of `notes` with code `code`."""
    return [note for note in notes if note.code == code]
