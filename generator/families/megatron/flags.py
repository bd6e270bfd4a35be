"""A pinned upstream command-line parser, rebuilt from its declarations, and the writer that matches it: shared by
the Megatron-based plugins (mindspeed-llm, mindspeed-mm), each naming its own tables below.

The declarations (generator/data/*_flags_kinds.tsv) were read off the pinned upstream code: each flag's action,
nargs, type and choices. `parser(table)` builds an argparse parser from them that fails exactly where upstream's
would (unknown flag, a value its `type` refuses, a value outside `choices`, a wrong value count), and `words(table,
flags)` writes Python values in the type each flag declares (an int flag gets `1000000`, never `1000000.0`, which
`int()` refuses). Renderer and validator share this module, so a file can only be written the way it parses.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
from collections.abc import Callable
from functools import cache

from ...api.frozen import frozen
from ...resources import DATA_DIR

# The tables, by the program whose parser they describe.
TABLES = {
    "train": "mindspeed_llm_flags_kinds.tsv",  # pretrain_gpt.py / posttrain_gpt.py
    # convert_ckpt.py: its loader plugin (hf or mg) adds different flags, so each direction has its own table.
    "convert-hf2mg": "mindspeed_llm_convert_hf2mg_flags_kinds.tsv",
    "convert-mg2hf": "mindspeed_llm_convert_mg2hf_flags_kinds.tsv",
    "convert-v2": "mindspeed_llm_convert_v2_flags_kinds.tsv",  # convert_ckpt_v2.py, both directions
    "convert-deepseek3-hf2mcore": "mindspeed_llm_convert_deepseek3_hf2mcore_flags_kinds.tsv",
    "convert-deepseek3-mcore2hf": "mindspeed_llm_convert_deepseek3_mcore2hf_flags_kinds.tsv",
    "preprocess": "mindspeed_llm_preprocess_flags_kinds.tsv",  # preprocess_data.py
    "mm-train": "mindspeed_mm_flags_kinds.tsv",  # MindSpeed-MM v2.2.0 pretrain_vlm.py (scripts/mindspeed_mm_flags.py)
}


class ParseError(ValueError):
    """What the upstream parser would print before exiting."""


@frozen
class Flag:
    """One argument of an upstream parser, as the flag table records it."""

    name: str
    kind: str  # store_true | store_false | value
    nargs: str  # "" (one value), "*", "+", or a count
    type: str  # int, float, str, bool, or the name of an upstream converter (see CONVERTERS)
    choices: tuple[str, ...]
    dest: str
    aliases: tuple[str, ...]
    default: object = None  # upstream's default, read from its repr


    @property
    def switch(self) -> bool:
        return self.kind in ("store_true", "store_false")


def _moe_freq_type(text: str):
    # megatron/training/arguments.py (core_v0.12.1) moe_freq_type: an int, or a Python list literal like
    # "[1]*3+[0]*1" (evaluated upstream; literal lists only here).
    if "[" in text:
        value = ast.literal_eval(text)
        if not isinstance(value, list):
            raise ValueError(text)
        return value
    return int(text)


def _bool_type(text: str) -> bool:
    # argparse `type=bool`: any non-empty string is True (upstream's own quirk, kept).
    return bool(text)


def _enable_thinking(text: str) -> bool | None:
    # preprocess_data.py l. 154 and features_manager/dataset/dataset.py l. 19 (2.2.0):
    # lambda x: {'true': True, 'false': False, 'none': None}[x.lower()].
    return {"true": True, "false": False, "none": None}[text.lower()]


def _attention_backend(text: str) -> str:
    # megatron/training/arguments.py: lambda attn_backend: AttnBackend[attn_backend]. argparse also passes the
    # default through it: upstream's is the enum itself, kept here as its repr text (`<AttnBackend.auto: 5>`).
    if text.startswith("<AttnBackend."):
        return text
    if text not in ("flash", "fused", "unfused", "local", "auto"):
        raise KeyError(text)
    return f"<AttnBackend.{text}>"


CONVERTERS: dict[str, Callable[[str], object]] = {
    "int": int, "float": float, "str": str, "bool": _bool_type, "moe_freq_type": _moe_freq_type, "loads": json.loads,
    "enable_thinking": _enable_thinking, "attention_backend": _attention_backend,
    "parse_list_for_virtual_optimizer": str}
# The tables write upstream's lambdas as `<lambda>`; which function each is follows from the flag's dest.
LAMBDAS = {"attention_backend": "attention_backend", "enable_thinking": "enable_thinking"}


def _strip_repr(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "'" else text


def _default(text: str):
    """The default column holds upstream's repr(default); an enum repr (`<AttnBackend.auto: 5>`) stays text."""
    if not text:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@cache
def declarations(table: str) -> dict[str, Flag]:
    """flag -> Flag for one program's pinned parser (aliases map to the same Flag)."""
    text = (DATA_DIR / TABLES[table]).read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    header, body = rows[0], rows[1:]
    out: dict[str, Flag] = {}
    for row in body:
        rec = dict(zip(header, row + [""] * (len(header) - len(row))))
        kind_type = LAMBDAS[rec["dest"]] if rec["type"] == "<lambda>" else rec["type"]
        flag = Flag(name=rec["flag"], kind=rec["kind"], nargs=rec["nargs"], type=kind_type or "str",
                    choices=tuple(_strip_repr(c) for c in rec["choices"].split(",")) if rec["choices"] else (),
                    dest=rec["dest"], aliases=tuple(a for a in rec.get("aliases", "").split(",") if a),
                    default=_default(rec["default"]))
        if flag.type not in CONVERTERS:
            raise ValueError(f"{TABLES[table]}: {flag.name}: unknown type {flag.type!r}")
        out[flag.name] = flag
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit 2
        raise ParseError(message)


@cache
def parser(table: str) -> argparse.ArgumentParser:
    """An argparse parser with the pinned program's flags, types, choices and value counts (allow_abbrev off, as
    Megatron's parse_args and MindSpeed-LLM's tools build theirs)."""
    built = _Parser(prog=table, allow_abbrev=False, add_help=False, exit_on_error=False)
    seen: set[str] = set()
    for flag in declarations(table).values():
        if flag.name in seen:
            continue
        names = [flag.name, *(a for a in flag.aliases if a not in seen)]
        seen.update(names)
        if flag.switch:
            built.add_argument(*names, dest=flag.dest, action=flag.kind)
            continue
        convert = CONVERTERS[flag.type]
        kwargs: dict = {"dest": flag.dest, "type": convert, "default": flag.default}
        if flag.nargs:
            kwargs["nargs"] = int(flag.nargs) if flag.nargs.isdigit() else flag.nargs
        if flag.choices and flag.type != "attention_backend":
            kwargs["choices"] = [convert(c) for c in flag.choices]
        built.add_argument(*names, **kwargs)
    return built


def parse(table: str, argv: list[str]) -> argparse.Namespace:
    """Parse `argv` as the pinned program would; ParseError with upstream's message when it would exit."""
    try:
        return parser(table).parse_args(argv)
    except argparse.ArgumentError as exc:
        raise ParseError(str(exc)) from None


# ----------------------------------------------------------------------------------------------------------------
# Writing

Flags = list[tuple[str, object]]  # (flag, value): True/False/None for a switch, a list for nargs * / +


def _word(flag: Flag, value) -> str:
    """One value as text the flag's declared type reads back to the same value."""
    if isinstance(value, bool):
        raise TypeError(f"{flag.name}: a boolean is not a value of a {flag.type} flag")
    if flag.type == "int":
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"{flag.name} is declared int upstream; {value} is not a whole number")
        return str(int(value))
    if flag.type == "float":
        number = float(value)
        if not math.isfinite(number):
            raise TypeError(f"{flag.name}: {value} is not a finite number")
        return repr(number)
    return str(value)


def typed(table: str, flags: Flags) -> list[tuple[str, list[str]]]:
    """(flag, value) pairs as (flag, value words) in each flag's declared type; switches that are off and values
    that are None are left out. An unknown flag or a value the type cannot hold is a bug here: it raises."""
    known = declarations(table)
    out: list[tuple[str, list[str]]] = []
    for name, value in flags:
        flag = known.get(name)
        if flag is None:
            raise KeyError(f"{name} is not a flag of the pinned {table} parser ({TABLES[table]})")
        if flag.switch:
            if value not in (True, False, None):
                raise TypeError(f"switch {name} takes no value, got {value!r}")
            if value:
                out.append((name, []))
            continue
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not flag.nargs and len(values) != 1:
            raise TypeError(f"{name} takes one value, got {values!r}")
        out.append((name, [_word(flag, v) for v in values]))
    return out


# Megatron's own ring attention across the context-parallel ranks: MindSpeed's --context-parallel-algo default
# (generator/data/mindspeed_llm_flags_kinds.tsv l. 66: 'megatron_cp_algo', from ContextParallelFeature).
RING_CP_ALGO = "megatron_cp_algo"


def cp_algo(cp: int) -> str | None:
    """--context-parallel-algo at context-parallel size `cp`: the ring where CP splits the sequence, else unset."""
    return RING_CP_ALGO if cp > 1 else None
