"""A yes/no check of a job spec against schemas/job.schema.json, for the keywords that schema uses, with the
semantics spec.py gives jsonschema (integers are not 4096.0 or true, a closing `$` ends the text, uniqueItems by JSON
equality).

Importing jsonschema and building its validator is a third of `gen-launch plan`'s start-up (attrs, referencing, the
bundled meta-schemas), and a valid spec, the common case, has nothing for it to explain. So a spec this check passes
is valid; one it fails goes to jsonschema, which finds and words every problem (spec.py's `schema_problems`). The
check may only be stricter than jsonschema, never more lenient: tests/test_schemacheck.py compares the two verdicts
over the bundled and test specs and generated ones. A schema keyword the check does not implement is refused when
the schema is read (`refuse_unknown`), so an edit to the schema cannot pass a spec jsonschema would refuse.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

# Keywords whose value is a schema, a list of schemas, or a mapping of names to schemas (walked by refuse_unknown).
_SUBSCHEMA = {"items", "additionalProperties", "not", "if", "then", "else"}
_SUBSCHEMAS = {"allOf", "anyOf", "oneOf"}
_NAMED_SUBSCHEMAS = {"properties", "$defs"}
_CHECKED = {"type", "enum", "const", "required", "dependentRequired", "pattern", "minLength", "maxLength", "minimum",
            "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems",
            "$ref"}
_ANNOTATIONS = {"$schema", "title", "description", "examples", "x-hint", "x-key"}  # no effect on validity
KEYWORDS = _SUBSCHEMA | _SUBSCHEMAS | _NAMED_SUBSCHEMAS | _CHECKED | _ANNOTATIONS


def python_pattern(pattern: str) -> re.Pattern[str]:
    """JSON Schema patterns are ECMA-262, where `$` ends the text; Python's `$` also matches before a final newline,
    so a closing `$` is read as `\\Z`."""
    return _compiled(re.sub(r"\$$", r"\\Z", pattern))


_compiled = lru_cache(maxsize=None)(re.compile)


def has_duplicates(items: list) -> bool:
    """Two items equal by JSON equality (true is not 1; 1 is 1.0), hashed: jsonschema compares unhashable items
    pairwise, and 3,300 mappings in `frameworks` took half a minute."""
    return len({_frozen(v) for v in items}) < len(items)


def _frozen(value: Any) -> Any:
    """A hashable stand-in equal where JSON Schema's equality holds."""
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return ("bool", value) if isinstance(value, bool) else value


def refuse_unknown(schema: Any) -> Iterator[str]:
    """Where `schema` uses a keyword `conforms` does not implement, or a `$ref` other than to a place in the same
    document, as `#/json/pointer: what`."""
    yield from _unknown(schema, schema, "#")


def _unknown(schema: Any, root: Any, where: str) -> Iterator[str]:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        yield f"{where}: a schema must be a mapping or true/false"
        return
    for key, value in schema.items():
        at = f"{where}/{key}"
        if key not in KEYWORDS:
            yield f"{at}: the keyword is not one generator/schemacheck.py implements"
        elif key == "type" and not set([value] if isinstance(value, str) else value) <= set(_TYPES):
            yield f"{at}: {value} is not a JSON Schema type"
        elif key == "$ref" and not (isinstance(value, str) and value.startswith("#/") and _resolves(root, value)):
            yield f"{at}: only a reference to a place in this document (#/...) is read"
        elif key in _SUBSCHEMA:
            yield from _unknown(value, root, at)
        elif key in _SUBSCHEMAS:
            for i, sub in enumerate(value):
                yield from _unknown(sub, root, f"{at}/{i}")
        elif key in _NAMED_SUBSCHEMAS:
            for name, sub in value.items():
                yield from _unknown(sub, root, f"{at}/{name}")


def _resolves(root: Any, ref: str) -> bool:
    try:
        _resolve(root, ref)
    except (KeyError, TypeError):
        return False
    return True


def _resolve(root: dict, ref: str) -> Any:
    """The subschema a `#/json/pointer` reference names."""
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _equal(one: Any, two: Any) -> bool:
    """JSON Schema's equality, as jsonschema's `_utils.equal`: true is not 1, 1 is 1.0, lists and mappings by
    their items."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(key in two and _equal(value, two[key]) for key, value in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


_TYPES = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
          "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
          "null": lambda v: v is None, "number": _is_number,
          "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)}  # 4096.0 is not an integer


def conforms(instance: Any, schema: Any, root: dict) -> bool:
    """Whether `instance` is valid under `schema` (a part of `root`, where `$ref`s point), as Draft 2020-12 reads
    the keywords in KEYWORDS."""
    if isinstance(schema, bool):
        return schema
    if "$ref" in schema and not conforms(instance, _resolve(root, schema["$ref"]), root):
        return False
    return _value_conforms(instance, schema, root) and _applicators_conform(instance, schema, root)


def _value_conforms(instance: Any, schema: dict, root: dict) -> bool:
    """The keywords on the value itself: type, enum, const, and those of its kind (object, array, string, number)."""
    if "type" in schema:
        wanted = schema["type"]
        if not any(_TYPES[t](instance) for t in ([wanted] if isinstance(wanted, str) else wanted)):
            return False
    if "enum" in schema and not any(_equal(instance, v) for v in schema["enum"]):
        return False
    if "const" in schema and not _equal(instance, schema["const"]):
        return False
    if isinstance(instance, dict) and not _object_conforms(instance, schema, root):
        return False
    if isinstance(instance, list) and not _array_conforms(instance, schema, root):
        return False
    if isinstance(instance, str) and not _string_conforms(instance, schema):
        return False
    return not _is_number(instance) or _number_conforms(instance, schema)


def _applicators_conform(instance: Any, schema: dict, root: dict) -> bool:
    """The keywords that apply subschemas: allOf, anyOf, oneOf, not, if / then / else."""
    if "allOf" in schema and not all(conforms(instance, sub, root) for sub in schema["allOf"]):
        return False
    if "anyOf" in schema and not any(conforms(instance, sub, root) for sub in schema["anyOf"]):
        return False
    if "oneOf" in schema and sum(conforms(instance, sub, root) for sub in schema["oneOf"]) != 1:
        return False
    if "not" in schema and conforms(instance, schema["not"], root):
        return False
    if "if" in schema:
        branch = "then" if conforms(instance, schema["if"], root) else "else"
        if branch in schema and not conforms(instance, schema[branch], root):
            return False
    return True


def _object_conforms(instance: dict, schema: dict, root: dict) -> bool:
    properties = schema.get("properties", {})
    if any(key in instance and not conforms(instance[key], sub, root) for key, sub in properties.items()):
        return False
    if "additionalProperties" in schema and any(
            not conforms(instance[key], schema["additionalProperties"], root) for key in instance
            if key not in properties):
        return False
    if any(key not in instance for key in schema.get("required", ())):
        return False
    return all(need in instance for key, needs in schema.get("dependentRequired", {}).items() if key in instance
               for need in needs)


def _array_conforms(instance: list, schema: dict, root: dict) -> bool:
    if "items" in schema and not all(conforms(item, schema["items"], root) for item in instance):
        return False
    if len(instance) < schema.get("minItems", 0) or len(instance) > schema.get("maxItems", len(instance)):
        return False
    return not (schema.get("uniqueItems") and has_duplicates(instance))


def _string_conforms(instance: str, schema: dict) -> bool:
    if len(instance) < schema.get("minLength", 0) or len(instance) > schema.get("maxLength", len(instance)):
        return False
    return "pattern" not in schema or python_pattern(schema["pattern"]).search(instance) is not None


def _number_conforms(instance: Any, schema: dict) -> bool:
    if "minimum" in schema and instance < schema["minimum"]:
        return False
    if "maximum" in schema and instance > schema["maximum"]:
        return False
    if "exclusiveMinimum" in schema and instance <= schema["exclusiveMinimum"]:
        return False
    if "exclusiveMaximum" in schema and instance >= schema["exclusiveMaximum"]:
        return False
    return "multipleOf" not in schema or _multiple_of(instance, schema["multipleOf"])


def _multiple_of(instance: Any, step: Any) -> bool:
    """As jsonschema's multipleOf: a float step divides, and the quotient must be whole (a quotient too large for a
    float is not taken as whole here: stricter, and jsonschema then decides)."""
    if isinstance(step, float):
        quotient = instance / step
        try:
            return bool(int(quotient) == quotient)
        except (OverflowError, ValueError):
            return False
    return not instance % step
