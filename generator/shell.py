"""The one quoting helper for every value that reaches a shell line.

`quote` makes any string one literal word for bash (single quotes; embedded quotes closed and escaped), so paths
with spaces, quotes, `$(...)`, backticks or newlines reach the program unchanged and inert.
"""

from __future__ import annotations

import shlex


def quote(value: object) -> str:
    text = str(value)
    if "," in text and shlex.quote(text) == text:
        return f"'{text}'"  # a bare comma list reads like a mistaken array to shellcheck (SC2054); same word to bash
    return shlex.quote(text)
