"""The spec's `extra.verl`: Hydra overrides of verl 0.7.0's config that gen-launch does not model
(trainer.log_val_generations, trainer.balance_batch, ...), added to overrides.txt under a comment naming
`extra.verl`. A key is checked against the keys of the config the plan's entry composes
(generator/data/verl_0.7.0/config_keys.tsv, read off verl's own Hydra compose by scripts/verl_config_keys.py): a key
that config lacks is refused with a did-you-mean, as Hydra refuses it ("Key ... is not in struct"); a value of
another kind than the default's, or a whole group, is refused; so is a key the plan writes, or one inside or above
it. `validate` then runs verl's own compose and validate_config on the whole file (checks.py)."""

from __future__ import annotations

import difflib
from functools import cache

from ...errors import Problem, SpecError, show
from ...plan import Plan
from ...resources import DATA_DIR
from .checks import ENTRIES
from .settings import Value, VerlSettings, hydra_value

NAME = "verl"
# The kinds of the table, and the values each takes (any: a null default, `???` or an interpolation). An int
# default takes a float too: the YAML writes some float fields' defaults as `0` (rollout.yaml val_kwargs.temperature,
# a float in RolloutConfig); verl's dataclasses, which validate runs, decide between the two.
KINDS: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int, float), "float": (int, float), "str": (str,),
                                      "list": (list,), "any": (bool, int, float, str, list)}


@cache
def config_keys(config: str) -> dict[str, str]:
    """key -> its default's kind, in the config entry `config` (a key of checks.ENTRIES) composes."""
    text = (DATA_DIR / "verl_0.7.0" / "config_keys.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")][1:]
    return {key: kind for name, key, kind in rows if name == config}


def extra_lines(plan: Plan, settings: VerlSettings) -> list[str]:
    """overrides.txt's lines for the spec's options (none: no line); SpecError (every problem, at its key) when
    one is not a key of the entry's config with a value of its kind, or one the plan writes."""
    given = plan.extra.get(NAME, {})
    if not given:
        return []
    keys = config_keys(settings.config)
    planned = [item.key.lstrip("+") for item in settings.overrides]
    config = ENTRIES[settings.config][1]
    problems = [Problem(f"extra.{NAME}.{key}", message) for key, value in given.items()
                if (message := _problem(key, value, keys, planned, config))]
    if problems:
        raise SpecError(problems)
    return [f"# extra.{NAME}: the spec's own overrides (PLAN.md lists them), passed as given",
            *(f"{key}={hydra_value(_value(value))}" for key, value in given.items())]


def extra_rows(plan: Plan) -> list[tuple[str, str]]:
    """(key, value as written) of each of the spec's options, for PLAN.md's table of overrides."""
    return [(key, hydra_value(_value(value))) for key, value in plan.extra.get(NAME, {}).items()]


def _value(value) -> Value:
    return tuple(value) if isinstance(value, list) else value


def _problem(key: str, value: object, keys: dict[str, str], planned: list[str], config: str) -> str | None:
    if key not in keys:
        close = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.75)
        groups = sorted(k for k in keys if "." not in k)
        hint = f"did you mean {close[0]}?" if close else f"its groups: {', '.join(groups)}"
        return f"not a key of verl 0.7.0's {config} config; {hint}"
    written = next((p for p in planned if key == p or key.startswith(f"{p}.") or p.startswith(f"{key}.")), None)
    if written is not None:
        return f"the plan writes {written} (PLAN.md says from what); give it through the spec key that decides it"
    kind = keys[key]
    if kind == "dict":
        return "a group of verl's config; give its keys one by one (extra.verl.<group>.<key>)"
    if isinstance(value, bool) and kind in ("int", "float") or not isinstance(value, KINDS[kind]):
        return f"{show(value)} is not of the kind verl's default is ({kind})"
    if isinstance(value, list) and not all(item is None or isinstance(item, (bool, int, float, str)) for item in value):
        return "a list of numbers, strings, booleans or nulls only"
    try:
        hydra_value(_value(value))
    except ValueError as exc:
        return str(exc)
    return None
