"""The job spec's reference in Markdown, generated from the JSON Schema (`gen-launch schema --markdown`): every key
with whether it is required, what it takes and its description. docs/spec.md is this text, and
tests/test_specdoc.py holds the two equal, so the reference never drifts from what the spec check enforces."""

from __future__ import annotations

import json
from typing import Any

HEADER = """# The job spec

<!-- Generated from schemas/job.schema.json by `gen-launch schema --markdown > docs/spec.md`; tests/test_specdoc.py
holds it equal to the schema. Edit the schema's descriptions, not this file. -->

{description} Checked against `schemas/job.schema.json` (JSON Schema 2020-12); unknown keys are errors, and
errors name the file and the key. `gen-launch init MODEL --method M --hardware H` writes a starter with the keys
each method takes. How the spec is read (YAML 1.2, tags, sizes, characters): [reading.md](reading.md).

| key | required | takes | meaning |
|---|---|---|---|
"""


def reference(schema: dict) -> str:
    """The reference for `schema` (the job spec's, parsed)."""
    rows: list[str] = []
    required_with = _conditions(schema)
    _rows(schema, schema, "", set(schema.get("required", ())), required_with, rows)
    return HEADER.format(description=schema.get("description", "")) + "".join(rows)


def _conditions(schema: dict) -> dict[str, str]:
    """Keys another key or value makes required: dependentRequired, and the if / then rules of allOf."""
    out = {key: f"with `{owner}`" for owner, keys in schema.get("dependentRequired", {}).items() for key in keys}
    for rule in schema.get("allOf", ()):
        condition = rule.get("if", {}).get("properties", {})
        for name, value in condition.items():
            for key in rule.get("then", {}).get("required", ()):
                out[key] = f"with `{name}: {value.get('const')}`"
    return out


def _resolved(schema: dict, node: dict) -> dict:
    """`node` with its $ref's definition merged in (the node's own keys win)."""
    if "$ref" not in node:
        return node
    target: Any = schema
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolved(schema, target), **{k: v for k, v in node.items() if k != "$ref"}}


def _rows(schema: dict, node: dict, path: str, required: set[str], conditions: dict[str, str],
          rows: list[str]) -> None:
    for key, child in node.get("properties", {}).items():
        child = _resolved(schema, child)
        name = f"{path}.{key}" if path else key
        needed = "yes" if key in required else conditions.get(name, "no")
        rows.append(f"| `{name}` | {needed} | {_takes(schema, child)} | {_cell(child.get('description', ''))} |\n")
        if child.get("type") == "object":
            _rows(schema, child, name, set(child.get("required", ())), conditions, rows)


def _takes(schema: dict, node: dict) -> str:
    """What a key takes: its values, type and bounds, as the schema says."""
    kind = node.get("type", "")
    if isinstance(kind, list):  # a union of types, as ["number", "null"]
        kind = " or ".join(kind)
    if kind == "object":
        return "mapping"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(_takes(schema, _resolved(schema, n)) for n in node.get("oneOf", node.get("anyOf", ())))
    if kind == "array":
        items = _resolved(schema, node.get("items", {}))
        return f"list of {_takes(schema, items)}" + (", no repeats" if node.get("uniqueItems") else "")
    bounds = [f"{sign} {_number(node[key])}" for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                       ("maximum", "<="), ("exclusiveMaximum", "<"))
              if key in node]
    if kind == "string":
        bounds += [f"at most {node['maxLength']} characters"] if "maxLength" in node else []
        bounds += [f"matching `{node['pattern']}`"] if "pattern" in node and len(node["pattern"]) <= 60 else []
    if "multipleOf" in node:
        bounds.append(f"a multiple of {node['multipleOf']}")
    return (kind or "any") + (f" ({', '.join(bounds)})" if bounds else "")


def _number(value: float) -> str:
    """A bound as written: whole numbers with thousands separators."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _cell(text: str) -> str:
    """Text as one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
