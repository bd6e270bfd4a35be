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
from collections.abc import Iterator
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import schemacheck
from .api.frozen import frozen
from .api.roles import RoleKind
from .calibration_block import Calibration
from .errors import Problem, SpecError, TableError, invisible, plain_text, show, show_name
from .frameworks import registry
from .resources import resource_dir

if TYPE_CHECKING:  # imported where a spec is validated: it is a third of a command's start-up
    import jsonschema


ROLE_NAMES = tuple(kind.value for kind in RoleKind)  # a key of layout.<framework> naming a role's own pins


@frozen
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
    # A role's own pins (layout.<framework>.<role>), by role name: they replace the framework's for that role.
    roles: tuple[tuple[str, Pins], ...] = ()


@frozen
class Spec:
    """A job spec as loaded and checked: what the resolver plans from."""

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
    scaling_given: bool = False  # the spec set scaling_efficiency: it replaces the hardware row's multi-node one
    global_batch_size: int | None = None
    quantization_bit: int | None = None  # qlora: 4 or 8
    master_addr: str | None = None
    master_port: int | None = None
    socket_ifname: str | None = None  # the collective library's network interface across nodes
    shared_storage: bool = True  # output_dir, data and weights on storage every node reads
    scheduler: str = "none"  # how the job is submitted: none, slurm, volcano, modelarts
    job_dir: str | None = None  # the rendered job folder's path on the nodes
    slurm: dict[str, Any] = field(default_factory=dict)  # cluster.slurm as given
    volcano: dict[str, Any] = field(default_factory=dict)  # cluster.volcano as given
    paths: dict[str, str] = field(default_factory=dict)  # only the keys the spec gave
    dataset_format: str | None = None  # None: the resolver's default for the model
    dataset_columns: tuple[str, ...] | None = None  # optional columns the data has; None: the model's default
    layout: dict[str, Pins] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)  # the `train:` keys the spec gave (recipe.py fills the rest)
    lora: dict[str, Any] = field(default_factory=dict)  # the `lora:` keys the spec gave
    rl: dict[str, Any] = field(default_factory=dict)  # the `rl:` keys the spec gave (the RL plugin fills the rest)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # `extra:` framework -> options passed as given
    epochs_given: bool = False  # data.epochs was written (train.steps may not be)
    calibration: Calibration | None = None  # what `gen-launch calibrate` measured in a run's log

    @property
    def samples_per_epoch(self) -> int | None:
        """The sequences one pass trains on. Fine-tuning: the given samples (or the tokens in seq_len sequences).
        Pretraining packs the text into seq_len sequences (Megatron's GPTDataset, LLaMA-Factory's stage pt), so its
        samples of tokens_per_sample tokens are tokens / seq_len sequences, not one each."""
        if self.samples is not None and self.method != "pretrain":
            return self.samples
        tokens = self.tokens_per_epoch
        return None if tokens is None else math.ceil(tokens / self.seq_len)

    @property
    def tokens_per_epoch(self) -> int | None:
        """The data set's tokens: given, or samples x tokens per sample."""
        if self.total_tokens is None and self.samples is not None and self.tokens_per_sample is not None:
            return self.samples * self.tokens_per_sample
        return self.total_tokens

    @property
    def sample_tokens(self) -> float:
        """The tokens one trained sample holds, as the run time counts them: the data's tokens over its samples
        (pretraining packs seq_len-token samples), else seq_len (no data size: a sample fills at most seq_len)."""
        tokens, samples = self.tokens_per_epoch, self.samples_per_epoch
        return tokens / samples if tokens and samples else float(self.seq_len)

    @property
    def train_tokens(self) -> float | None:
        """Tok of the seed's formula: tokens in the data set times epochs."""
        per_epoch = self.tokens_per_epoch
        return None if per_epoch is None else per_epoch * self.epochs


MAX_SPEC_BYTES = 1 << 20  # a job spec is a few hundred bytes; the --set values together get as much
MAX_VALUES = 10_000  # values once YAML aliases are expanded (a "billion laughs" spec expands without end)
MAX_DEPTH = 16  # nested lists and mappings; a job spec has four levels (layout.<framework>.tp)
MAX_INT_DIGITS = 30
_NO_CHARACTERS = {"Cc", "Cf", "Zl", "Zp", "Cs"}  # control, format (bidi, zero-width), line/paragraph separators

_YAML = "tag:yaml.org,2002:"
_INT = r"[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+"
_FLOAT = r"[-+]?(?:(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)|[-+]?\.(?:inf|Inf|INF)" \
         r"|\.(?:nan|NaN|NAN)"
# YAML 1.2's core schema: a plain value's type, from its text and first character ...
_IMPLICIT = {"null": (r"~|null|Null|NULL|", [*"~nN", ""]), "bool": (r"true|True|TRUE|false|False|FALSE", [*"tTfF"]),
             "int": (_INT, [*"-+0123456789"]), "float": (_FLOAT, [*"-+.0123456789"])}
# ... and what an explicit tag's text must be: what the plain value of that type is (a float may be written as a
# whole number), never what Python's int() and float() also take ('١٦', '1_6', ' 16 ').
_EXPLICIT = {f"{_YAML}null": (_IMPLICIT["null"][0], "null, ~ or nothing"),
             f"{_YAML}bool": (_IMPLICIT["bool"][0], "true or false"),
             f"{_YAML}int": (_INT, "a whole number: ASCII digits with an optional sign, 0o... or 0x..."),
             f"{_YAML}float": (rf"{_FLOAT}|[-+]?[0-9]+", ("a number: ASCII digits with an optional sign, decimal "
                                                        "point and exponent, .inf or .nan"))}
_COLLECTIONS: dict[type[yaml.Node], str] = {yaml.SequenceNode: f"{_YAML}seq", yaml.MappingNode: f"{_YAML}map"}


class _Refused(Exception):
    """What a job spec may not hold, at a key path inside the YAML text being read and the node's place there."""

    def __init__(self, parts: list, message: str, mark: yaml.Mark):
        super().__init__(message)
        self.parts, self.message, self.mark = parts, message, mark


class _SpecLoader(yaml.SafeLoader):
    """YAML 1.2's core schema (PyYAML reads 1.1: `0256` octal, `1:30` sexagesimal, `yes` true); nesting bounded
    while composing (the composer recurses per level). _inspect refuses the rest before anything is constructed."""

    yaml_implicit_resolvers: dict = {}

    def __init__(self, text: str):
        super().__init__(text)
        self.parts: list = []  # key path of the node being composed (None for a key)

    def compose_node(self, parent, index):
        if parent is None:
            return super().compose_node(parent, index)
        # index: a sequence item's position, a mapping value's key node, None for a key
        part = index.value if isinstance(index, yaml.ScalarNode) else index if isinstance(index, int) else None
        # self.parts: the collections around this node but the document's own
        if len(self.parts) + 1 >= MAX_DEPTH and self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            raise _Refused([*self.parts, part], f"is nested more than {MAX_DEPTH} levels deep; a job spec is at most "
                                                f"four levels deep", self.peek_event().start_mark)
        self.parts.append(part)
        try:
            return super().compose_node(parent, index)
        finally:
            self.parts.pop()


for _name, (_pattern_text, _first) in _IMPLICIT.items():
    _SpecLoader.add_implicit_resolver(f"{_YAML}{_name}", re.compile(rf"^(?:{_pattern_text})$"), _first)


def _construct_int(loader: _SpecLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    base = {"0o": 8, "0x": 16}.get(text[:2], 10)
    return int(text[2:] if base != 10 else text, base)


def _construct_float(loader: _SpecLoader, node: yaml.ScalarNode) -> float:
    return float(loader.construct_scalar(node).lower().replace(".inf", "inf").replace(".nan", "nan"))


_SpecLoader.add_constructor(f"{_YAML}int", _construct_int)
_SpecLoader.add_constructor(f"{_YAML}float", _construct_float)


def _short_tag(tag: str) -> str:
    return show_name(tag.replace(_YAML, "!!", 1))


def _unread_tag(node: yaml.Node, parts: list) -> _Refused:
    """!!timestamp, !!binary, !!set, !!omap, a local !tag: YAML 1.1 or application types, not a job spec's."""
    return _Refused(parts, f"the tag {_short_tag(node.tag)} is not read: a job spec holds YAML 1.2's core types "
                           f"(text, numbers, true/false, null, lists, mappings); write the value without it",
                    node.start_mark)


def _check_scalar(node: yaml.ScalarNode, parts: list) -> None:
    """A scalar's tag is one the core schema has, and its text is what a plain value of that type is."""
    if node.tag == f"{_YAML}str":
        return
    if node.tag not in _EXPLICIT:
        raise _unread_tag(node, parts)
    pattern, words = _EXPLICIT[node.tag]
    if not re.fullmatch(pattern, node.value):
        raise _Refused(parts, f"{_short_tag(node.tag)} {show(node.value)} is not {words}", node.start_mark)
    if len(node.value) > (MAX_INT_DIGITS if node.tag == f"{_YAML}int" else 100):
        raise _Refused(parts, f"a number of {len(node.value)} digits is too large", node.start_mark)


def _check_keys(node: yaml.MappingNode, parts: list) -> None:
    """Keys are text, each given once (PyYAML keeps the last), and no merge keys (YAML 1.1 only)."""
    seen: set[str] = set()
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.style is None:
            raise _Refused(parts, "merge keys (<<) are not read: a job spec is YAML 1.2, which has none; write the "
                                  "keys out", key.start_mark)
        if not isinstance(key, yaml.ScalarNode) or key.tag != f"{_YAML}str":
            got = "a list" if isinstance(key, yaml.SequenceNode) else "a mapping" \
                if isinstance(key, yaml.MappingNode) else f"{show(key.value)} (quote it)"
            raise _Refused(parts, f"a key must be text, got {got}", key.start_mark)
        if key.value in seen:
            raise _Refused([*parts, key.value], "is given twice", key.start_mark)
        seen.add(key.value)


def _inspect(node: yaml.Node, parts: list, memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Refuse what a job spec may not hold (_Refused at its key path); return the values `node` stands for and its
    nesting once every alias is expanded. Memoised: an alias shares its anchor's node, which comes first, so this
    recurses no deeper than the composer did."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = (MAX_VALUES + 1, MAX_DEPTH + 1)  # a node that contains itself never ends
    if isinstance(node, yaml.ScalarNode):
        _check_scalar(node, parts)
        memo[id(node)] = (1, 0)
        return memo[id(node)]
    if node.tag != _COLLECTIONS[type(node)]:
        raise _unread_tag(node, parts)
    if isinstance(node, yaml.MappingNode):
        _check_keys(node, parts)
        children = [(parts, key) for key, _ in node.value] + [([*parts, key.value], value) for key, value in node.value]
    else:
        children = [([*parts, i], item) for i, item in enumerate(node.value)]
    measured = [_inspect(child, at, memo) for at, child in children]
    memo[id(node)] = (min(MAX_VALUES + 1, 1 + sum(size for size, _ in measured)),
                      min(MAX_DEPTH + 1, 1 + max((depth for _, depth in measured), default=0)))
    return memo[id(node)]


def _read_yaml(text: str, at: list) -> tuple[Any, int, int]:
    """The value `text` holds, with its values and nesting once aliases are expanded; `at`: the key path it is read
    at ([] for the file, a --set key). SpecError for anything a job spec may not hold."""
    where = _key_path(at) if at else "(yaml)"
    loader = None
    try:
        loader = _SpecLoader(text)  # its reader refuses characters YAML does not allow (NUL, lone surrogates)
        node = loader.get_single_node()
        if node is None:
            return None, 0, 0
        size, depth = _inspect(node, [], {})
        if size > MAX_VALUES:
            raise SpecError.at(where, f"holds more than {MAX_VALUES:,} values (YAML aliases expanded); a job spec "
                                      f"has a few dozen")
        if depth > MAX_DEPTH:
            raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep (YAML aliases expanded); a job "
                                      f"spec is at most four levels deep")
        return loader.construct_document(node), size, depth
    except _Refused as refused:
        place = f"line {refused.mark.line + 1}, column {refused.mark.column + 1}"
        raise SpecError.at(_key_path([*at, *(p for p in refused.parts if p is not None)]),
                           f"{refused.message} ({place}{' of the --set value' if at else ''})") from None
    except yaml.YAMLError as exc:
        raise SpecError.at(where, f"--set value: {_yaml_problem(exc)}" if at else _yaml_problem(exc)) from None
    finally:
        if loader is not None:
            loader.dispose()


@lru_cache(maxsize=1)
def _schema() -> dict:
    """schemas/job.schema.json, refused when it uses a keyword schemacheck does not implement (exit 5)."""
    path = resource_dir("schemas") / "job.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    unknown = list(schemacheck.refuse_unknown(schema))
    if unknown:
        raise TableError(f"{path.name}: {'; '.join(unknown)}")
    return schema


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema

    # Integers are integers: JSON Schema counts 4096.0 as one; Megatron's argparse and a shell port do not.
    validator = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, validators={"pattern": _pattern, "uniqueItems": _unique_items},
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)))
    return validator(_schema())


def path_keys() -> tuple[str, ...]:
    """The `paths:` keys that hold paths: the core's and those the framework plugins read (their Planning.path_keys;
    tests/test_roles.py checks the schema lists every plugin's)."""
    paths = _schema()["properties"]["paths"]["properties"]
    return tuple(key for key, prop in paths.items() if prop.get("$ref") == "#/$defs/path")


def schema_rule(section: str, key: str) -> tuple[str, str]:
    """(pattern, hint) of the schema's `section.key` string: launch.sh tests the same value given at run time with
    the same pattern (bash's [[ =~ ]] reads it as a POSIX extended regular expression)."""
    prop = _schema()["properties"][section]["properties"][key]
    return prop["pattern"], prop["x-hint"]


def _pattern(validator, pattern: str, instance, schema):
    """A closing `$` ends the text (schemacheck.python_pattern)."""
    import jsonschema

    if isinstance(instance, str) and not schemacheck.python_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _unique_items(validator, unique: bool, instance, schema):
    """Items compared hashed (schemacheck.has_duplicates)."""
    import jsonschema

    if unique and isinstance(instance, list) and schemacheck.has_duplicates(instance):
        yield jsonschema.ValidationError("has non-unique elements")


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


def bad_override(overrides: tuple[str, ...]) -> str | None:
    """The first override that is not plain text (a control, format, unassigned or blank-drawn character, or a line
    break): it would reach PLAN.md, plan.json and the terminal. None when all are (the rule show_name applies)."""
    return next((o for o in overrides if not plain_text(o)), None)


def _apply_overrides(data: dict, overrides: tuple[str, ...], values: int) -> None:
    """Set each KEY.PATH to VALUE (read as YAML 1.2, as the file is), making the mappings on the way; the spec with
    them keeps the file's limits (`values`: the file's)."""
    if sum(len(o.encode("utf-8", "surrogatepass")) for o in overrides) > MAX_SPEC_BYTES:
        raise SpecError.at("(--set)", f"the values are larger than {MAX_SPEC_BYTES:,} bytes together; a job spec is "
                                      f"a few hundred")
    for override in overrides:
        found = OVERRIDE.fullmatch(override)
        if not found:
            raise SpecError.at("(--set)", f"{show(override)} is not KEY.PATH=VALUE (e.g. train.learning_rate=2.0e-5)")
        *parents, leaf = found.group(1).split(".")
        if len(parents) >= MAX_DEPTH:
            raise SpecError.at("(--set)", f"{show(found.group(1))} is nested more than {MAX_DEPTH} levels deep; a job "
                                          f"spec is at most four levels deep")
        value, size, depth = _read_yaml(found.group(2), [*parents, leaf])
        values += size + len(parents) + 1
        if len(parents) + 1 + depth > MAX_DEPTH:
            raise SpecError.at(found.group(1), f"--set value: the spec would be nested more than {MAX_DEPTH} levels "
                                               f"deep; a job spec is at most four levels deep")
        if values > MAX_VALUES:
            raise SpecError.at(found.group(1), f"--set value: the spec would hold more than {MAX_VALUES:,} values "
                                               f"with it; a job spec has a few dozen")
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
    data, values, _ = _read_yaml(text, [])
    if data is None:
        raise SpecError.at("(file)", "is empty; a job spec needs at least job, model, method, seq_len and hardware")
    if not isinstance(data, dict):
        raise SpecError.at("(top level)", f"must be a mapping of keys to values, got {show(data)}")
    _apply_overrides(data, overrides, values)
    problems = schema_problems(data)
    if isinstance(data.get("train"), dict) and "steps" in data["train"] and \
            isinstance(data.get("data"), dict) and "epochs" in data["data"]:
        problems.append(Problem("train.steps", "give train.steps or data.epochs, not both (the other is derived "
                                               "from the data size and the global batch)"))
    calibrated = data.get("calibration")
    if isinstance(calibrated, dict) and isinstance(data.get("frameworks"), list) \
            and calibrated.get("framework") not in data["frameworks"]:
        problems.append(Problem("calibration.framework", f"{show(calibrated.get('framework'))} is not in frameworks: "
                                                         f"the calibration would go unused"))
    if "calibration" in data and "tokens_per_card_s" in data:
        problems.append(Problem("tokens_per_card_s", "give tokens_per_card_s or calibration, not both (both are "
                                                     "a measured rate)"))
    if problems:
        raise SpecError(problems)
    # The files' header names what they were made from: the file, and the overrides when there are any.
    made_from = raw + b"".join(b"\0--set " + o.encode() for o in overrides)
    return _build(data, hashlib.sha256(made_from).hexdigest())


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        return f"not valid YAML: character U+{exc.character:04X} at position {exc.position} is not allowed in YAML"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = getattr(exc, "problem", None) or "invalid syntax"
    return f"not valid YAML{where}: {what}"


def schema_problems(data: Any) -> list[Problem]:
    """Every schema violation of `data`, one sentence each."""
    problems: list[Problem] = [*_unusable_values(data, []), *_unclear_paths(data)]
    schema = _schema()
    if not schemacheck.conforms(data, schema, schema):  # only jsonschema words the problems (see schemacheck)
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


_UNCLEAR = {"Zs": "a space other than the plain one", "Co": "a private-use character", "Cn": "an unassigned code point"}


def _unclear_paths(data: Any) -> Iterator[Problem]:
    """A path holds characters that print as themselves (str.isprintable: letters, marks, digits, punctuation,
    symbols, the plain space): a no-break space, a private-use or an unassigned character looks like another
    character or like nothing, and so does a letter drawn blank (U+3164 HANGUL FILLER, U+2800 BRAILLE PATTERN
    BLANK), so the path names a folder other than the one a reader sees. Control and format characters are
    _unusable_values' to report."""
    paths = data.get("paths") if isinstance(data, dict) else None
    given = {key: paths[key] for key in path_keys() if isinstance(paths.get(key), str)} \
        if isinstance(paths, dict) else {}
    for key, value in given.items():
        odd = next((ch for ch in value if _unclear(ch)), None)
        if odd is not None:
            yield Problem(f"paths.{key}", f"{show(value)} holds U+{ord(odd):04X}, {_unclear(odd)}; a path may hold "
                                          f"letters, marks, digits, punctuation, symbols and the plain space")


def _unclear(ch: str) -> str | None:
    """What hides `ch` in a path, None when it prints as itself (or is a control or format character, which
    _unusable_values reports)."""
    category = unicodedata.category(ch)
    if ch == " " or category in _NO_CHARACTERS:
        return None
    if category in _UNCLEAR:
        return _UNCLEAR[category]
    return "a character drawn as nothing (Unicode's default-ignorable or blank)" if invisible(ch) else None


def _key_path(parts) -> str:
    return ".".join(show_name(p) if isinstance(p, str) else str(p) for p in parts) or "(top level)"


def _moved(path: list) -> str | None:
    """Where a key an earlier version read lives now: a framework's pins (layout.<framework>.<key>) ask its plugin
    (Planning.moved_pins)."""
    if len(path) == 3 and path[0] == "layout":
        found = registry().get(path[1])
        return None if found is None else found.planning.moved_pins.get(path[2])
    return None


def _closest_key(key: str) -> str:
    """" (did you mean train.learning_rate?)" for the spec key, at any level, whose name is closest to `key` (a key
    written at the wrong level, or misspelt); "" when none is close."""
    import difflib

    keys = _spec_keys(_schema(), ())
    close = difflib.get_close_matches(key, sorted({k[-1] for k in keys}), n=1, cutoff=0.75) if isinstance(key, str) \
        else []
    found = [k for k in keys if close and k[-1] == close[0]]
    # The shallowest first: `seqlen` at the top means seq_len, not calibration.seq_len.
    paths = sorted(".".join(k) for k in found if len(k) == min(map(len, found)))
    return f" (did you mean {' or '.join(paths)}?)" if paths else ""


def _spec_keys(schema: dict, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every key path the schema declares (a framework's own mapping, layout.<framework>, once as <framework>)."""
    found = []
    for name, sub in schema.get("properties", {}).items():
        found.append((*prefix, name))
        if isinstance(sub, dict):
            found.extend(_spec_keys(sub, (*prefix, name)))
    return found


_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "a string", "object": "a mapping",
               "array": "a list", "boolean": "true or false"}


def _describe(error: jsonschema.ValidationError) -> list[Problem]:
    """Turn one jsonschema error into plain sentences at the offending key."""
    path = _key_path(error.absolute_path)
    kind = error.validator
    # jsonschema types the instance, the failing subschema and the keyword's value as possibly unset; every error
    # iter_errors yields has all three, and this schema's subschemas are all mappings.
    value: Any = error.instance
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    validator_value: Any = error.validator_value
    hint = schema.get("x-hint")
    if kind == "not" and "x-key" in schema:
        # `required` holds for anything but a mapping, so `not required` fails on a wrong type: the type error says it
        return [Problem(_key_path([*error.absolute_path, schema["x-key"]]), schema["x-hint"])] \
            if isinstance(value, dict) else []
    if kind == "additionalProperties":
        allowed = ", ".join(sorted(schema.get("properties", {})))
        extra = sorted(k for k in value if k not in schema.get("properties", {}))
        return [Problem(_key_path([*error.absolute_path, k]),
                        _moved([*error.absolute_path, k]) or f"unknown key{_closest_key(k)}; allowed here: {allowed}")
                for k in extra]
    if kind == "required":
        missing = [k for k in validator_value if k not in value]
        return [Problem(_key_path([*error.absolute_path, k]), "is required but missing") for k in missing]
    if kind == "dependentRequired":
        return [Problem(_key_path([*error.absolute_path, need]), f"is required when {key} is given")
                for key, needs in validator_value.items() if key in value
                for need in needs if need not in value]
    if kind in ("oneOf", "anyOf") and hint:
        return [Problem(path, f"{show(value)} is not valid: {hint}")]
    if kind in ("oneOf", "anyOf"):
        return _describe_best(error, path)
    return [Problem(path, _value_message(kind, value, validator_value, hint))]


def _describe_best(error: jsonschema.ValidationError, path: str) -> list[Problem]:
    """A oneOf / anyOf error as its best-matching alternative's, and how many other ways the value could be valid."""
    from jsonschema.exceptions import best_match

    best = best_match(error.context or [])
    if best is None:
        return [Problem(path, f"{show(error.instance)} is not valid here")]
    others = len(error.context) - 1
    found = _describe(best)
    if others > 0:
        found = [Problem(p.path, f"{p.message} (and {others} other way(s) it could be valid)") for p in found]
    return found


def _value_message(kind: Any, value: Any, validator_value: Any, hint: str | None) -> str:
    """What is wrong with a value that jsonschema's keyword `kind` refused, in words (the schema's x-hint first)."""
    if kind == "enum":
        return f"{show(value)} is not allowed; choose one of: {', '.join(str(v) for v in validator_value)}"
    if kind == "const":
        return f"{show(value)} is not allowed; expected {show(validator_value)}"
    if kind == "type":
        wanted = [validator_value] if isinstance(validator_value, str) else validator_value
        words = " or ".join(_TYPE_WORDS.get(w, w) for w in wanted)
        return f"expected {words}, got {show(value)}{_number_hint(value, wanted)}"
    if hint:
        return f"{show(value)} is not valid: {hint}"
    if kind == "pattern":
        return f"{show(value)} does not match the pattern {validator_value}"
    if kind == "multipleOf":
        return f"{show(value)} is not a multiple of {validator_value}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "at least", "exclusiveMinimum": "greater than", "maximum": "at most",
                 "exclusiveMaximum": "less than"}[kind]
        return f"{show(value)} is out of range: must be {words} {validator_value}"
    if kind in ("minLength", "maxLength"):
        words = "at least" if kind == "minLength" else "at most"
        return f"{show(value)} must be {words} {validator_value} characters long"
    if kind == "minItems":
        return f"must list at least {validator_value} item(s)"
    if kind == "uniqueItems":
        return "lists the same item twice"
    if kind == "not":
        return "has a combination of keys that is not allowed here"
    return f"{show(value)} is not valid ({kind})"


def _number_hint(value: Any, wanted: list[str]) -> str:
    """How to write a whole number the reader will take."""
    if "integer" not in wanted:
        return ""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return f" (write {int(value)}: no decimal point or exponent)"
    if isinstance(value, str) and re.fullmatch(r"[-+]?0[0-9]+", value):
        return f" (a leading 0 is not a number in YAML 1.2, and was octal in YAML 1.1: write {int(value)} or 0o...)"
    return ""


def _pins(given: dict) -> Pins:
    """layout.<framework>: its pins, with each role's own under the role's name."""
    roles = tuple((key, Pins(**value)) for key, value in given.items() if key in ROLE_NAMES)
    return Pins(**{key: value for key, value in given.items() if key not in ROLE_NAMES}, roles=roles)

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
        scaling_given="scaling_efficiency" in data,
        global_batch_size=data.get("global_batch_size"),
        quantization_bit=data.get("quantization_bit"),
        master_addr=cluster.get("master_addr"),
        master_port=cluster.get("master_port"),
        socket_ifname=cluster.get("socket_ifname"),
        shared_storage=cluster.get("shared_storage", True),
        scheduler=cluster.get("scheduler", "none"),
        job_dir=cluster.get("job_dir"),
        slurm=dict(cluster.get("slurm") or {}),
        volcano=dict(cluster.get("volcano") or {}),
        paths=paths,
        dataset_format=dataset_format,
        dataset_columns=None if columns is None else tuple(columns),
        layout={fw: _pins(pins) for fw, pins in (data.get("layout") or {}).items()},
        train=dict(data.get("train") or {}),
        lora=dict(data.get("lora") or {}),
        rl=dict(data.get("rl") or {}),
        extra={fw: dict(options) for fw, options in (data.get("extra") or {}).items()},
        epochs_given="epochs" in data_block,
        calibration=Calibration.from_spec(data["calibration"]) if "calibration" in data else None,
    )
