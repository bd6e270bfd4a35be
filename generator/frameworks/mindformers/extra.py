"""The spec's `extra.mindformers`: keys of MindFormers' run config gen-launch does not model
(context.jit_config.jit_level, context.max_call_depth, monitor_config.monitor_on, ...), a dotted key per setting,
merged into train.yaml through the YAML serializer. Each is checked against the keys MindFormers' template declares
(generator/data/mindformers_config_keys.tsv): a key outside them, or outside a section that refuses unexpected keys,
is refused at its spec key with the nearest; so is a key the plan writes (its parallel config, batch, seq_length,
paths, schedule), unless it is one of the template's defaults that decide nothing the plan plans (REPLACEABLE),
which the option then replaces (PLAN.md says so). `validate` then runs MindFormers' own loader on the whole file."""

from __future__ import annotations

import difflib
from functools import cache

import yaml

from ...errors import Problem, SpecError, show
from ...plan import Plan
from ...resources import DATA_DIR

NAME = "mindformers"
TOP = "(top)"
# train.yaml's defaults no planned value depends on: the profiler's switches and steps, the graph compiler's level.
REPLACEABLE = ("profile", "profile_start_step", "profile_stop_step", "init_start_profile", "profile_communication",
               "profile_memory", "context.jit_config.jit_level", "context.memory_optimize_level")
SCALARS = (bool, int, float, str, type(None))


@cache
def config_keys() -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """({section: strict | open}, {section: its declared keys}); the general keys are section TOP's."""
    text = (DATA_DIR / "mindformers_config_keys.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")][1:]
    kinds = {section: kind for section, kind, _, _ in rows}
    keys = {section: frozenset(key for s, _, key, _ in rows if s == section) for section in kinds}
    return kinds, keys


def options(plan: Plan) -> dict:
    return plan.extra.get(NAME, {})


def replaced(plan: Plan) -> list[str]:
    """The template's defaults the spec's options replace (PLAN.md lists them)."""
    return [key for key in options(plan) if key in REPLACEABLE]


def with_options(plan: Plan, text: str) -> str:
    """train.yaml with the spec's options merged in and written again by the serializer (the template's opening
    comment kept); SpecError (every problem, at its key) when one is not a key MindFormers' template takes, or one
    the plan writes."""
    given = options(plan)
    if not given:
        return text
    config = yaml.safe_load(text)
    written = set(_leaves(config))
    problems = [Problem(f"extra.{NAME}.{key}", message) for key, value in given.items()
                if (message := _problem(key, value, written))]
    if problems:
        raise SpecError(problems)
    for key, value in given.items():
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return (f"{_opening(text)}# extra.{NAME}: the spec's own keys merged in ({', '.join(given)}); written by a YAML "
            f"serializer\n" + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=120))


def _opening(text: str) -> str:
    """The template's leading comment lines."""
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line + "\n")
    return "".join(out)


def _leaves(node: object, path: str = "") -> list[str]:
    """The dotted path of every value that is not a mapping (a list is one value; so is an empty mapping)."""
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, f"{path}.{key}" if path else str(key))]
    return [path]


def _problem(key: str, value: object, written: set[str]) -> str | None:
    kinds, keys = config_keys()
    section, *rest = key.split(".")
    if not rest and section not in keys[TOP]:
        if section in kinds:
            return f"a section of MindFormers' config; give its keys one by one (extra.{NAME}.{section}.<key>)"
        return _unknown(section, "not a key of MindFormers' run config", sorted(keys[TOP] | set(kinds) - {TOP}))
    if rest and (section not in kinds or kinds[section] == "top"):
        return _unknown(section, "not a section of MindFormers' run config", sorted(set(kinds) - {TOP}))
    if rest and kinds[section] == "strict" and (len(rest) > 1 or rest[0] not in keys[section]):
        return _unknown(rest[0], f"not a key of MindFormers' {section} (it refuses keys it does not declare)",
                        sorted(keys[section]))
    planned = next((w for w in sorted(written) if w == key or w.startswith(f"{key}.") or key.startswith(f"{w}.")),
                   None)
    if planned is not None and key not in REPLACEABLE:
        return f"the plan writes {planned} (PLAN.md says from what); give it through the spec key that decides it"
    if not isinstance(value, SCALARS) and not (isinstance(value, list) and all(isinstance(v, SCALARS) for v in value)):
        return f"{show(value)}: a number, string, boolean, null or list of them (a mapping: give its keys one by one)"
    return None


def _unknown(name: str, what: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"{what}{f'; did you mean {close[0]}?' if close else ''}"
