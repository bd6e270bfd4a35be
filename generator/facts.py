"""What the data tables may say: the closed vocabularies the code branches on, and the typed columns a table
declares (its `columns:` block, or a framework's `model_columns:`), checked row by row when the tables load.

A value outside a vocabulary, of the wrong type or out of range is a TableError (exit 5) naming the file, the row
and the key, and what is allowed, so a data edit fails when the tables load, not as a KeyError at render.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, cast

from .api.frozen import frozen
from .errors import TableError


class Vocabulary(str, Enum):
    """A closed vocabulary whose members print as their table spelling (what StrEnum does, on Python 3.10 too)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class MemoryScheme(Vocabulary):
    """How a framework stores model states per card; memory.py has one branch per scheme, layouts.py's STATE_BYTES
    one floor per scheme."""

    MEGATRON_FP32 = "megatron-fp32"
    MEGATRON_DISTOPT = "megatron-distopt"
    DEEPSPEED = "deepspeed"


class Accelerator(Vocabulary):
    """The device kind: the renderers pick the visible-devices variable and the recipe rows by it."""

    NPU = "npu"
    GPU = "gpu"


class Support(Vocabulary):
    """`listed`: only the framework's `models`; `table`: those plus every model with a row in its min_cards column."""

    LISTED = "listed"
    TABLE = "table"


class ThroughputModel(Vocabulary):
    """How throughput.py gets tokens/s per card: the step model of the layout, or an MFU per method."""

    STEP = "step"
    MFU = "mfu"


class EpDimension(Vocabulary):
    """Layout sizes an expert-parallel rule may multiply (layouts.py's EP check knows these three)."""

    DP = "dp"
    TP = "tp"
    CP = "cp"


class Confidence(Vocabulary):
    """How sure min_cards.csv is of a row's column assignment (its header comment; plan citations show it)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


# The vocabularies a `columns:` block may name in `values:` (a list there is a vocabulary of its own).
VOCABULARIES: dict[str, type[Vocabulary]] = {"accelerator": Accelerator}
TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,),
                                      "list": (list, tuple), "dict": (dict,)}
SPEC_KEYS = {"type", "default", "meaning", "required", "values", "facts", "items", "min", "above", "max",
             "required_when", "required_unless"}


def allowed(values) -> str:
    return ", ".join(str(v) for v in values)


def check_choice(where: str, key: str, value, choices) -> None:
    """`value` is one of `choices` (an enum, a list or a mapping's keys)."""
    names = [str(c) for c in choices]
    if str(value) not in names or not isinstance(value, str | int):
        raise TableError(f"{where}: {key} {value!r} is not one of {allowed(names)}")


def is_number(value) -> bool:
    """An int or a float, and not a bool (which Python counts as an int: `true` is no number of gigabytes)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_share(where: str, key: str, value) -> None:
    """A share of a peak (an efficiency, an MFU): the time model divides by it, and above 1 is beyond the peak."""
    if not is_number(value) or not 0 < value <= 1:
        raise TableError(f"{where}: {key} {value!r} must be a number in (0, 1]")


@frozen
class Column:
    """One declared column: its type, default and meaning, and optionally a closed set of values (a list, a mapping
    value -> the facts the code reads for it, each giving the keys named in `facts`, or the name of a vocabulary
    above), the type of a list's items, a range (min and max inclusive, above exclusive; numbers only), and when a
    row must give it."""

    name: str
    type: str
    default: object = None
    required: bool = False
    values: tuple | dict | None = None
    items: str | None = None
    min: float | None = None
    above: float | None = None
    max: float | None = None
    required_when: dict | None = None  # {other key: value}: required in a row where the other key has that value
    required_unless: dict | None = None  # {other key: value}: required unless the other key has that value
    meaning: str = ""

    @classmethod
    def parse(cls, where: str, name: str, spec) -> Column:
        if not isinstance(spec, dict) or spec.get("type") not in TYPES:
            raise TableError(f"{where}.{name}: needs a type, one of {allowed(TYPES)}")
        unknown = sorted(set(spec) - SPEC_KEYS)
        if unknown:
            raise TableError(f"{where}.{name}: unknown field(s) {', '.join(unknown)} "
                             f"(allowed: {allowed(sorted(SPEC_KEYS))})")
        if spec.get("items", "str") not in TYPES:
            raise TableError(f"{where}.{name}: items must be one of {allowed(TYPES)}")
        numeric = "int" in (spec["type"], spec.get("items")) or "float" in (spec["type"], spec.get("items"))
        if not numeric and {"min", "above", "max"} & set(spec):
            raise TableError(f"{where}.{name}: a range (min, above, max) needs a number type")
        values = spec.get("values")
        if isinstance(values, str):
            if values not in VOCABULARIES:
                raise TableError(f"{where}.{name}: values {values!r} is not one of {allowed(VOCABULARIES)}")
            values = tuple(VOCABULARIES[values])
        elif isinstance(values, list):
            values = tuple(values)
        facts = spec.get("facts") or []
        for value, given in (values.items() if isinstance(values, dict) else ()):
            missing = [key for key in facts if key not in (given or {})]
            if missing:
                raise TableError(f"{where}.{name}: value {value!r} lacks {', '.join(missing)} (every value "
                                 f"gives {', '.join(facts)})")
        # No `default:` key at all means the row must give the column (hardware.yaml's required columns).
        required = spec.get("required", "default" not in spec)
        return cls(name=name, type=spec["type"], default=spec.get("default"), required=required, values=values,
                   items=spec.get("items"), min=spec.get("min"), above=spec.get("above"), max=spec.get("max"),
                   required_when=spec.get("required_when"), required_unless=spec.get("required_unless"),
                   meaning=spec.get("meaning", ""))

    def needed(self, row: dict) -> bool:
        if self.required:
            return True
        if self.required_when:
            return all(row.get(k) == v for k, v in self.required_when.items())
        if self.required_unless:
            return not all(row.get(k) == v for k, v in self.required_unless.items())
        return False

    def check(self, where: str, value) -> None:
        """`value` (not None) has the declared type, is in range and in the closed set."""
        kinds = TYPES[self.type]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise TableError(f"{where}: {self.name} {value!r} is not of type {self.type}")
        elements: list[Any] = list(cast(list, value)) if self.type == "list" else [value]
        for item in elements if self.type == "list" and self.items else []:
            if isinstance(item, bool) and self.items != "bool" or not isinstance(item, TYPES[str(self.items)]):
                raise TableError(f"{where}: {self.name} item {item!r} is not of type {self.items}")
        for item in elements:
            if self.values is not None:
                check_choice(where, self.name, item, self.values)
            if self.min is not None and item < self.min or self.max is not None and item > self.max or \
                    self.above is not None and item <= self.above:
                bounds = [f">= {self.min}" if self.min is not None else "", f"> {self.above}"
                          if self.above is not None else "", f"<= {self.max}" if self.max is not None else ""]
                raise TableError(f"{where}: {self.name} {item!r} must be {' and '.join(b for b in bounds if b)}")


def parse_columns(where: str, block) -> dict[str, Column]:
    if not isinstance(block, dict) or not block:
        raise TableError(f"{where}: missing or empty (each column: type, default, meaning)")
    return {name: Column.parse(where, name, spec) for name, spec in block.items()}


def typed(where: str, row: dict, columns: dict[str, Column], defaults: bool = True, complete: bool = True) -> dict:
    """`row` checked against `columns`: no undeclared key, every needed key given (unless not `complete`: a row
    that only says why a model is refused), every value typed and allowed; with `defaults`, every column the row
    omits filled from its declared default."""
    if not isinstance(row, dict):
        raise TableError(f"{where}: a row must be a mapping of column -> value")
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise TableError(f"{where}: {', '.join(unknown)} is not a declared column (declared: {allowed(columns)})")
    out = dict(row)
    for column in columns.values():
        if column.name not in row:
            if complete and column.needed(row):
                raise TableError(f"{where}: {column.name} is missing ({column.meaning or column.type})")
            if defaults:
                out[column.name] = column.default
            continue
        value = row[column.name]
        if value is None:
            if column.default is not None or complete and column.needed(row):
                raise TableError(f"{where}: {column.name} is null; it must be a {column.type}")
            continue
        column.check(where, value)
    return out
