"""The spec's `extra.llama-factory`: train.yaml keys gen-launch does not model (report_to, logging_steps, ...), passed
as given. Each is checked as `validate` checks train.yaml offline (LLaMA-Factory 0.9.5's argument names and types,
checks.py) and refused at its key when it is not one; a key the plan writes is refused too, unless it is one of the
template's defaults that decide nothing the plan plans (REPLACEABLE), which the option then replaces (PLAN.md says
so)."""

from __future__ import annotations

import difflib
import re

from ...errors import Problem, SpecError, show
from ...plan import Plan
from ...yamlvalue import yaml_value
from .checks import _type_ok, llamafactory_args

NAME = "llama-factory"
# train.yaml.j2's defaults no planned value depends on: logging, the data loaders' workers, the collective timeout.
REPLACEABLE = ("report_to", "logging_steps", "plot_loss", "preprocessing_num_workers", "dataloader_num_workers",
               "ddp_timeout")


def options(plan: Plan) -> dict:
    return plan.extra.get(NAME, {})


def replaced(plan: Plan) -> list[str]:
    """The template's defaults the spec's options replace (PLAN.md lists them)."""
    return [key for key in options(plan) if key in REPLACEABLE]


def with_options(plan: Plan, train: str) -> str:
    """train.yaml with the spec's options: a replaceable default's line rewritten, the other keys added at the end;
    SpecError (every problem, at its key) when one is not a LLaMA-Factory 0.9.5 argument of its type, or a key the
    plan writes."""
    given = options(plan)
    if not given:
        return train
    args = llamafactory_args()
    written = set(re.findall(r"^([a-z_0-9]+):", train, re.M))
    problems = [Problem(f"extra.{NAME}.{key}", message) for key, value in given.items()
                if (message := _problem(key, value, args, written))]
    if problems:
        raise SpecError(problems)
    for key in replaced(plan):
        train = re.sub(rf"^{key}: .*$", f"{key}: {yaml_value(given[key])}  # extra.{NAME}", train, count=1, flags=re.M)
    added = [key for key in given if key not in written]
    if added:
        train += f"\n### extra (the spec's extra.{NAME}, passed as given)\n" + \
            "".join(f"{key}: {yaml_value(given[key])}\n" for key in added)
    return train


def _problem(key: str, value: object, args: dict[str, str], written: set[str]) -> str | None:
    if key not in args:
        close = difflib.get_close_matches(key, sorted(args), n=1, cutoff=0.75)
        return f"not a LLaMA-Factory 0.9.5 training argument{f'; did you mean {close[0]}?' if close else ''}"
    if not _type_ok(value, args[key]):  # an enum's value is checked against the enum
        return f"{show(value)} is not of LLaMA-Factory's type {args[key]}"
    if key in written and key not in REPLACEABLE:
        return "the plan writes it (PLAN.md says from what); give it through the spec key that decides it"
    return None

