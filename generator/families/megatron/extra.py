"""The spec's `extra.<framework>` for the Megatron family's plugins: training flags
gen-launch does not model, passed as given in launch.sh's EXTRA_ARGS array. A key is a flag of the pinned training
parser (`log-interval` or `--log-interval`), checked as `validate` checks launch.sh: against the declared flags
(generator/data/*_flags_kinds.tsv through flags.py), its value in the flag's type, count and choices. A
flag whose destination the plan decides (written, or left out on purpose) is refused at its key. With them in, the
first launch's words go through the start-up rules validate runs on launch.sh (refuse_broken)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ...errors import Problem, SpecError, show
from ...plan import Plan
from .flags import Flag, Flags, ParseError, declarations, parse, typed

GROUP = "EXTRA_ARGS"
Words = list[tuple[str, list[str]]]  # a typed array: (flag, its value words)


def extra_flags(plan: Plan, framework: str, table: str, program: str, decided: Iterable[str]) -> Flags:
    """The spec's options as (flag, value) pairs; SpecError (every problem, at its key) when one is not a flag of
    `program`'s pinned parser with a value it takes, or one the plan decides."""
    given = plan.extra.get(framework, {})
    known = declarations(table)
    taken = {known[name].dest for name in decided}
    out: Flags = []
    problems = []
    for key, value in given.items():
        name = key if key.startswith("--") else f"--{key}"
        message = _problem(known.get(name), key, value, table, program, known, taken)
        if message:
            problems.append(Problem(f"extra.{framework}.{key}", message))
        else:
            out.append((name, value))
    if problems:
        raise SpecError(problems)
    return out


def _problem(flag: Flag | None, key: str, value: object, table: str, program: str, known: dict[str, Flag],
             taken: set[str]) -> str | None:
    if flag is None:
        names = sorted({name.lstrip("-") for name in known})
        close = difflib.get_close_matches(key.lstrip("-"), names, n=1, cutoff=0.75)
        return f"not a flag of {program}'s pinned parser{f'; did you mean {close[0]}?' if close else ''}"
    if flag.dest in taken:
        return "the plan decides it (PLAN.md says from what); give it through the spec key that decides it"
    if flag.switch:
        return None if isinstance(value, bool) else f"{show(value)}: {flag.name} is a switch; give true or false"
    if not isinstance(value, (str, int, float, list)) or isinstance(value, bool):
        return f"{show(value)} is not a value of {flag.name} (of type {flag.type})"
    try:  # written as the renderer writes it, then read back by the parser validate runs
        words = typed(table, [(flag.name, value)])
        parse(table, [w for name, values in words for w in (name, *values)])
    except (TypeError, ValueError, ParseError) as exc:
        return f"{show(value)} is not taken by {program}'s parser: {exc}"
    return None


def words(*arrays: Words) -> list[str]:
    """The command-line words of typed arrays, in order (as launch.sh passes them)."""
    return [word for array in arrays for flag, values in array for word in (flag, *values)]


def refuse_broken(plan: Plan, framework: str, problems: list[str]) -> None:
    """The start-up rules validate checks launch.sh with, broken once the spec's flags are in (the plan's own words
    keep them): refused at extra.<framework>, nothing written."""
    if plan.extra.get(framework) and problems:
        raise SpecError.at(f"extra.{framework}", f"with these flags the launch would not start as planned: "
                                                 f"{'; '.join(problems)}")
