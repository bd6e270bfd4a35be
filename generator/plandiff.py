"""What changed in the plan's values between a job folder's plan.json and the one render would write now, for
`check`'s report (`train.steps: 391 -> 782`): a reviewer reads the decision that moved, not only which files differ.

The folder's plan.json is read as data (record.py's rules: never through a link, bounded, parsed as JSON); a file that
cannot be read so has no values to compare, and `check` still lists the files that differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from .jobdir import read_regular
from .record import MAX_BYTES, PLAN_JSON

MAX_CHANGES = 12  # lines of value changes per job; the rest are counted
VALUE_WIDTH = 40  # characters of one value shown
# The reasons and the provenance: they move with the values they explain.
QUIET = frozenset({"origin", "source", "note", "notes", "made_from", "spec_sha256", "gen_launch_version"})


def value_changes(job_dir: Path, new_plan_json: str) -> list[str]:
    """`key.path: old -> new` for each plan value that differs (added or removed: `-`), the plan's own before each
    framework's, each in plan.json's order; the same change of a same-named value once; the reasons (origin, source,
    notes) and the provenance are left out, they move with the values they explain."""
    data = read_regular(job_dir / PLAN_JSON, MAX_BYTES)
    try:
        old = json.loads(data.decode("utf-8")) if data is not None else None
    except (ValueError, RecursionError):
        old = None
    if not isinstance(old, dict):
        return []
    before, after = _leaves(old), _leaves(json.loads(new_plan_json))
    keys = [*after, *(k for k in before if k not in after)]
    keys.sort(key=lambda k: k.startswith("frameworks."))  # the plan's own values first, then each framework's
    lines, seen = [], set()
    for key in keys:
        old_value, new_value = before.get(key, _MISSING), after.get(key, _MISSING)
        change = (key.rsplit(".", 1)[-1], _shown(old_value), _shown(new_value))
        if old_value != new_value and change not in seen:  # a framework's copy of a change already shown: once
            seen.add(change)
            lines.append(f"{key}: {change[1]} -> {change[2]}")
    more = len(lines) - MAX_CHANGES
    return lines[:MAX_CHANGES] + ([f"... and {more} more (diff plan.json)"] if more > 0 else [])


_MISSING = object()


def _leaves(value: object, prefix: str = "") -> dict[str, object]:
    """Dotted key -> value for every value that is not a mapping (a list is one value)."""
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, object] = {}
    for key, item in value.items():
        if key not in QUIET:
            out.update(_leaves(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _shown(value: object) -> str:
    if value is _MISSING:
        return "-"
    text = json.dumps(value, ensure_ascii=True, separators=(", ", ": "))
    return text if len(text) <= VALUE_WIDTH else text[:VALUE_WIDTH - 3] + "..."
