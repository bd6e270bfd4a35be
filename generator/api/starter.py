"""What a plugin's planning side gives `gen-launch init` (contract.py Planning.starter_section): the spec section it
writes for a method the framework plans in its own terms. Apart from the contract: a plan never writes a starter."""

from __future__ import annotations

from .frozen import frozen


@frozen
class StarterRow:
    """One key of a starter's own section: its value and source; `written` as a key, else as a comment to edit."""

    key: str
    value: object
    source: str
    written: bool = False


@frozen
class StarterSection:
    """A spec section `init` writes for a method a framework plans in its own terms (the values the plan would
    use), and the seq_len the starter takes from it."""

    key: str  # the spec key (rl)
    comment: str  # what the section is, one line
    seq_len: int
    rows: tuple[StarterRow, ...]
