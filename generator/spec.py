"""Read a job spec (YAML), validate it against schemas/job.schema.json and return a `Spec`.

Every problem becomes a `Problem(key path, sentence)`; all schema problems are collected, not just the first.
This module knows nothing about the model table: an unknown model name is the resolver's to report.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

from .errors import Problem, SpecError, show
from .resources import resource_dir

PATH_KEYS = ("model_dir", "dataset", "output_dir", "mindformers_dir", "mindspeed_llm_dir", "mcore_ckpt_dir",
             "media_dir")


@dataclass(frozen=True)
class Pins:
    """A framework's pinned layout values from `layout.<framework>`; None = let the resolver choose."""

    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    ep: int | None = None
    micro_batch_size: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None  # Megatron-style frameworks: sequence parallel on / off (needs TP > 1)
    offload: bool | None = None  # LLaMA-Factory: ZeRO-3 offload of parameters and optimizer states


@dataclass(frozen=True)
class Spec:
    job: str
    model: str
    method: str
    seq_len: int
    hardware: str
    frameworks: tuple[str, ...] | None  # None: every framework that supports the model
    cards: int | None  # None: "auto"
    sha256: str  # of the spec file's bytes: goes into every generated file's header
    total_tokens: int | None = None  # per epoch
    samples: int | None = None
    tokens_per_sample: int | None = None
    epochs: float = 1.0
    time_budget_hours: float | None = None
    tokens_per_card_s: float | None = None
    scaling_efficiency: float = 1.0
    global_batch_size: int | None = None
    quantization_bit: int | None = None  # qlora: 4 or 8
    master_addr: str | None = None
    master_port: int | None = None
    socket_ifname: str | None = None  # the collective library's network interface across nodes
    shared_storage: bool = True  # output_dir, data and weights on storage every node reads
    paths: dict[str, str] = field(default_factory=dict)  # only the keys the spec gave
    dataset_format: str | None = None  # None: the resolver's default for the model
    dataset_columns: tuple[str, ...] | None = None  # optional columns the data has; None: the model's default
    layout: dict[str, Pins] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)  # the `train:` keys the spec gave (recipe.py fills the rest)
    lora: dict[str, Any] = field(default_factory=dict)  # the `lora:` keys the spec gave
    epochs_given: bool = False  # data.epochs was written (train.steps may not be)

    @property
    def samples_per_epoch(self) -> int | None:
        """The data set's samples: given, or its tokens in seq_len sequences (pretraining data)."""
        if self.samples is not None:
            return self.samples
        return None if self.total_tokens is None else math.ceil(self.total_tokens / self.seq_len)

    @property
    def tokens_per_epoch(self) -> int | None:
        """The data set's tokens: given, or samples x tokens per sample."""
        if self.total_tokens is None and self.samples is not None and self.tokens_per_sample is not None:
            return self.samples * self.tokens_per_sample
        return self.total_tokens

    @property
    def train_tokens(self) -> float | None:
        """Tok of the seed's formula: tokens in the data set times epochs."""
        per_epoch = self.tokens_per_epoch
        return None if per_epoch is None else per_epoch * self.epochs


MAX_SPEC_BYTES = 1 << 20  # a job spec is a few hundred bytes
MAX_VALUES = 10_000  # values once YAML aliases are expanded (a "billion laughs" spec expands without end)
MAX_INT_DIGITS = 30
_NO_CHARACTERS = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # control, format (bidi, zero-width), line/paragraph separators


class _SpecLoader(yaml.SafeLoader):
    """YAML 1.2's core schema (PyYAML reads 1.1: `0256` octal, `1:30` sexagesimal, `yes` true); a key given twice
    refused (PyYAML keeps the last); keys only text; no merge keys; aliases bounded."""

    yaml_implicit_resolvers: dict = {}


for _tag, _pattern, _first in [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", [*"~nN", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", [*"tTfF"]),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+)$", [*"-+0123456789"]),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", [*"-+.0123456789"]),
]:
    _SpecLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _too_large(node: yaml.Node, digits: int) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, f"a number of {digits} digits is too large", node.start_mark)


def _construct_int(loader: _SpecLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if len(text) > MAX_INT_DIGITS:
        raise _too_large(node, len(text))
    base = {"0o": 8, "0x": 16}.get(text[:2], 10)
    return int(text[2:] if base != 10 else text, base)


def _construct_float(loader: _SpecLoader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node)
    if len(text) > 100:
        raise _too_large(node, len(text))
    return float(text.lower().replace(".inf", "inf").replace(".nan", "nan"))


def _construct_mapping(loader: _SpecLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or (key_node.value == "<<" and key_node.style is None):
            raise yaml.constructor.ConstructorError(
                None, None, "merge keys (<<) are not read: a job spec is YAML 1.2, which has none; write the keys "
                            "out", key_node.start_mark)
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise yaml.constructor.ConstructorError(None, None, f"a key must be text, got {show(key)}",
                                                    key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {show(key)} is given twice",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_SpecLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Values `node` stands for once every alias is expanded (memoised: an alias shares its anchor's node)."""
    if id(node) not in memo:
        memo[id(node)] = MAX_VALUES + 1  # a node that contains itself never ends
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        memo[id(node)] = min(MAX_VALUES + 1, 1 + sum(_expanded_size(c, memo) for c in children))
    return memo[id(node)]


def _read_yaml(text: str):
    loader = _SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_VALUES:
            raise SpecError.at("(yaml)", f"holds more than {MAX_VALUES:,} values (YAML aliases expanded); a job "
                                         f"spec has a few dozen")
        return loader.construct_document(node)
    finally:
        loader.dispose()


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads((resource_dir("schemas") / "job.schema.json").read_text(encoding="utf-8"))
    return _Validator(schema)


def _pattern(validator, pattern: str, instance, schema):
    """JSON Schema patterns are ECMA-262, where `$` ends the text; Python's `$` also matches before a final newline,
    so a closing `$` is read as `\\Z`."""
    if isinstance(instance, str) and not re.search(re.sub(r"\$$", r"\\Z", pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# Integers are integers: JSON Schema counts 4096.0 as one; Megatron's argparse and a shell port do not.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)))


def load_spec(path: str | Path, overrides: tuple[str, ...] = ()) -> Spec:
    """Read and validate the spec file at `path` with `overrides` (KEY.PATH=VALUE, from --set) applied; raise
    SpecError listing every problem."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
    except FileNotFoundError:
        raise SpecError.at("(file)", "no such file") from None
    except OSError as exc:
        raise SpecError.at("(file)", f"cannot be read ({exc.strerror or 'I/O error'})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError.at("(file)", "is not a regular file (a FIFO, a device or a folder); give the spec file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError.at("(file)", f"cannot be read ({exc.strerror or 'I/O error'})") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError.at("(file)", f"is larger than {MAX_SPEC_BYTES:,} bytes; a job spec is a few hundred")
    return parse_spec(raw, overrides)


OVERRIDE = re.compile(r"([a-z_][a-z0-9_-]*(?:\.[a-z_][a-z0-9_-]*)*)=(.*)", re.S)


def _apply_overrides(data: dict, overrides: tuple[str, ...]) -> None:
    """Set each KEY.PATH to VALUE (read as YAML 1.2, as the file is), making the mappings on the way."""
    for override in overrides:
        found = OVERRIDE.fullmatch(override)
        if not found:
            raise SpecError.at("(--set)", f"{show(override)} is not KEY.PATH=VALUE (e.g. train.learning_rate=2.0e-5)")
        *parents, leaf = found.group(1).split(".")
        try:
            value = _read_yaml(found.group(2))
        except yaml.YAMLError as exc:
            raise SpecError.at(found.group(1), f"--set value: {_yaml_problem(exc)}") from None
        node = data
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SpecError.at(".".join(parents[:i + 1]), "--set goes into it, but it is not a mapping")
        node[leaf] = value


def parse_spec(raw: bytes, overrides: tuple[str, ...] = ()) -> Spec:
    """Validate the bytes of a spec file (with --set overrides applied) and build the Spec."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError.at("(file)", "is not UTF-8 text") from None
    try:
        data = _read_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecError.at("(yaml)", _yaml_problem(exc)) from None
    except RecursionError:
        raise SpecError.at("(yaml)", "is nested too deeply; a job spec is at most four levels deep") from None
    if data is None:
        raise SpecError.at("(file)", "is empty; a job spec needs at least job, model, method, seq_len and hardware")
    if not isinstance(data, dict):
        raise SpecError.at("(top level)", f"must be a mapping of keys to values, got {show(data)}")
    _apply_overrides(data, overrides)
    problems = schema_problems(data)
    if isinstance(data.get("train"), dict) and "steps" in data["train"] and \
            isinstance(data.get("data"), dict) and "epochs" in data["data"]:
        problems.append(Problem("train.steps", "give train.steps or data.epochs, not both (the other is derived "
                                               "from the data size and the global batch)"))
    if problems:
        raise SpecError(problems)
    # The files' header names what they were made from: the file, and the overrides when there are any.
    made_from = raw + b"".join(b"\0--set " + o.encode() for o in overrides)
    return _build(data, hashlib.sha256(made_from).hexdigest())


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = getattr(exc, "problem", None) or "invalid syntax"
    return f"not valid YAML{where}: {what}"


def schema_problems(data: Any) -> list[Problem]:
    """Every schema violation of `data`, one sentence each."""
    problems: list[Problem] = list(_unusable_values(data, []))
    for error in _validator().iter_errors(data):
        problems.extend(_describe(error))
    unique = {(p.path, p.message): p for p in problems}
    return sorted(unique.values(), key=lambda p: (p.path, p.message))


def _unusable_values(node: Any, parts: list) -> Iterator[Problem]:
    """Values no file may carry: text with a newline, a control character (ESC starts terminal sequences such as
    OSC 52), a bidi or zero-width format character (text that reads other than it runs); numbers that are not
    finite (NaN compares false with every bound, and no JSON reader takes it)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _unusable_values(key, [*parts, key])
            yield from _unusable_values(value, [*parts, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _unusable_values(value, [*parts, i])
    elif isinstance(node, str) and any(unicodedata.category(ch) in _NO_CHARACTERS for ch in node):
        yield Problem(_key_path(parts), f"{show(node)} contains a newline, a control character or an invisible "
                                        f"format character; no value may")
    elif isinstance(node, float) and not math.isfinite(node):
        yield Problem(_key_path(parts), f"{node} is not a finite number")


def _key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


# Keys an earlier version read, and where they live now.
MOVED = {"layout.llama-factory.lora_rank": "has moved to lora.rank (one adapter shape for every framework)"}

_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "a string", "object": "a mapping",
               "array": "a list", "boolean": "true or false"}


def _describe(error: jsonschema.ValidationError) -> list[Problem]:
    """Turn one jsonschema error into plain sentences at the offending key."""
    path = _key_path(error.absolute_path)
    kind, schema, value = error.validator, error.schema, error.instance
    hint = schema.get("x-hint") if isinstance(schema, dict) else None
    if kind == "not" and isinstance(schema, dict) and "x-key" in schema:
        # `required` holds for anything but a mapping, so `not required` fails on a wrong type: the type error says it
        return [Problem(_key_path([*error.absolute_path, schema["x-key"]]), schema["x-hint"])] \
            if isinstance(value, dict) else []
    if kind == "additionalProperties":
        allowed = ", ".join(sorted(schema.get("properties", {})))
        extra = sorted(k for k in value if k not in schema.get("properties", {}))
        return [Problem(_key_path([*error.absolute_path, k]),
                        MOVED.get(_key_path([*error.absolute_path, k]), f"unknown key; allowed here: {allowed}"))
                for k in extra]
    if kind == "required":
        missing = [k for k in error.validator_value if k not in value]
        return [Problem(_key_path([*error.absolute_path, k]), "is required but missing") for k in missing]
    if kind == "dependentRequired":
        return [Problem(_key_path([*error.absolute_path, need]), f"is required when {key} is given")
                for key, needs in error.validator_value.items() if key in value
                for need in needs if need not in value]
    if kind in ("oneOf", "anyOf") and hint:
        return [Problem(path, f"{show(value)} is not valid: {hint}")]
    if kind in ("oneOf", "anyOf"):
        best = jsonschema.exceptions.best_match(error.context or [])
        if best is None:
            return [Problem(path, f"{show(value)} is not valid here")]
        extra = len(error.context) - 1
        found = _describe(best)
        if extra > 0:
            found = [Problem(p.path, f"{p.message} (and {extra} other way(s) it could be valid)") for p in found]
        return found
    if kind == "enum":
        return [Problem(path, f"{show(value)} is not allowed; choose one of: "
                              f"{', '.join(str(v) for v in error.validator_value)}")]
    if kind == "const":
        return [Problem(path, f"{show(value)} is not allowed; expected {show(error.validator_value)}")]
    if kind == "type":
        wanted = error.validator_value
        wanted = [wanted] if isinstance(wanted, str) else wanted
        words = " or ".join(_TYPE_WORDS.get(w, w) for w in wanted)
        return [Problem(path, f"expected {words}, got {show(value)}{_number_hint(value, wanted)}")]
    if hint:
        return [Problem(path, f"{show(value)} is not valid: {hint}")]
    if kind == "pattern":
        return [Problem(path, f"{show(value)} does not match the pattern {error.validator_value}")]
    if kind == "multipleOf":
        return [Problem(path, f"{show(value)} is not a multiple of {error.validator_value}")]
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "at least", "exclusiveMinimum": "greater than", "maximum": "at most",
                 "exclusiveMaximum": "less than"}[kind]
        return [Problem(path, f"{show(value)} is out of range: must be {words} {error.validator_value}")]
    if kind in ("minLength", "maxLength"):
        words = "at least" if kind == "minLength" else "at most"
        return [Problem(path, f"{show(value)} must be {words} {error.validator_value} characters long")]
    if kind == "minItems":
        return [Problem(path, f"must list at least {error.validator_value} item(s)")]
    if kind == "uniqueItems":
        return [Problem(path, "lists the same item twice")]
    if kind == "not":
        return [Problem(path, "has a combination of keys that is not allowed here")]
    return [Problem(path, f"{show(value)} is not valid ({kind})")]


def _number_hint(value: Any, wanted: list[str]) -> str:
    """How to write a whole number the reader will take."""
    if "integer" not in wanted:
        return ""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return f" (write {int(value)}: no decimal point or exponent)"
    if isinstance(value, str) and re.fullmatch(r"[-+]?0[0-9]+", value):
        return f" (a leading 0 is not a number in YAML 1.2, and was octal in YAML 1.1: write {int(value)} or 0o...)"
    return ""


def _build(data: dict, sha256: str) -> Spec:
    data_block = data.get("data") or {}
    cluster = data.get("cluster") or {}
    paths = dict(data.get("paths") or {})
    dataset_format = paths.pop("dataset_format", None)
    columns = paths.pop("dataset_columns", None)
    cards = data.get("cards", "auto")
    frameworks = data.get("frameworks")
    return Spec(
        job=data["job"],
        model=data["model"],
        method=data["method"],
        seq_len=data["seq_len"],
        hardware=data["hardware"],
        frameworks=tuple(frameworks) if frameworks is not None else None,
        cards=None if cards == "auto" else cards,
        sha256=sha256,
        total_tokens=data_block.get("total_tokens"),
        samples=data_block.get("samples"),
        tokens_per_sample=data_block.get("tokens_per_sample"),
        epochs=data_block.get("epochs", 1),
        time_budget_hours=data.get("time_budget_hours"),
        tokens_per_card_s=data.get("tokens_per_card_s"),
        scaling_efficiency=data.get("scaling_efficiency", 1.0),
        global_batch_size=data.get("global_batch_size"),
        quantization_bit=data.get("quantization_bit"),
        master_addr=cluster.get("master_addr"),
        master_port=cluster.get("master_port"),
        socket_ifname=cluster.get("socket_ifname"),
        shared_storage=cluster.get("shared_storage", True),
        paths=paths,
        dataset_format=dataset_format,
        dataset_columns=None if columns is None else tuple(columns),
        layout={fw: Pins(**pins) for fw, pins in (data.get("layout") or {}).items()},
        train=dict(data.get("train") or {}),
        lora=dict(data.get("lora") or {}),
        epochs_given="epochs" in data_block,
    )
