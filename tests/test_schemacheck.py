"""generator/schemacheck.py, the yes/no schema check that spares a valid spec jsonschema's import, gives the verdict
jsonschema (with spec.py's semantics) gives: over every bundled and test spec and over generated specs with
mistakes drawn from the schema itself. Passing a spec jsonschema refuses would let it through unexplained; refusing
one it passes would cost only the import, but would mean the check no longer does its work."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import clear_table_caches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz import valid_specs

from generator import schemacheck, spec
from generator.cli import main
from generator.errors import SpecError, TableError

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = spec._schema()
SPEC_FILES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/specs/*/*.yaml")])


def jsonschema_accepts(data) -> bool:
    return next(iter(spec._validator().iter_errors(data)), None) is None


@pytest.mark.parametrize(("schema", "instance"), [
    ({"enum": [1, 2]}, True), ({"enum": [0]}, False), ({"const": 1}, 1.0), ({"enum": [[1, True]]}, [1.0, True]),
    ({"const": {"a": [1]}}, {"a": [True]}), ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, 3),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -3), ({"type": "integer"}, 4096.0),
    ({"type": "number"}, True), ({"multipleOf": 0.5}, 1.5), ({"multipleOf": 0.5}, 1.25),
    ({"pattern": "^a$"}, "a\n"), ({"uniqueItems": True}, [1, 1.0]), ({"uniqueItems": True}, [1, True]),
    ({"if": {"minimum": 5}, "then": {"maximum": 6}}, 7), ({"if": {"minimum": 5}, "else": {"maximum": 2}}, 3),
    ({"additionalProperties": {"type": "string"}, "properties": {"a": {}}}, {"a": 1, "b": "x"}),
    ({"dependentRequired": {"a": ["b"]}}, {"a": 1}), ({"$defs": {"n": {"type": "null"}}, "$ref": "#/$defs/n"}, 0),
])
def test_each_keyword_reads_as_jsonschema_reads_it(schema, instance):
    """Cases the job schema does not tell apart today (no enum holds 1, its oneOf branches exclude each other)."""
    assert schemacheck.conforms(instance, schema, schema) == type(spec._validator())(schema).is_valid(instance)


def assert_same_verdict(data) -> None:
    assert schemacheck.conforms(data, SCHEMA, SCHEMA) == jsonschema_accepts(data), json.dumps(data, default=repr)


def read(path: Path):
    try:
        return spec._read_yaml(path.read_text(encoding="utf-8"), [])[0]
    except SpecError:
        return None  # refused while reading YAML: never reaches the schema


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bundled_and_test_spec_gets_jsonschemas_verdict(path):
    data = read(path)
    if data is not None:
        assert_same_verdict(data)


def test_the_bundled_examples_pass_without_jsonschema():
    """The examples are what a user starts from: the check must pass them, or every run pays the import."""
    for path in ROOT.glob("examples/*.yaml"):
        assert schemacheck.conforms(read(path), SCHEMA, SCHEMA), path


def parent(data: dict, path: tuple) -> dict:
    """The mapping that holds `path`'s last key in `data`, made (or made a mapping) on the way."""
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    return data


def _resolved(schema):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = schemacheck._resolve(SCHEMA, schema["$ref"])
    return schema


def _slots(schema, path: tuple) -> list[tuple[tuple, dict]]:
    """(key path, its schema) of every property the schema names, nested ones included."""
    found = []
    for key, sub in _resolved(schema).get("properties", {}).items():
        found.append(((*path, key), sub))
        found.extend(_slots(sub, (*path, key)))
    return found


SLOTS = _slots(SCHEMA, ())
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.sampled_from([0.5, 4096.0, 1e30, -0.0]),
                    st.text(max_size=8))
ANY_VALUE = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "tp", "total_tokens", "samples", "name", "port"]), inner, max_size=3), max_leaves=6)


def candidates(schema, depth: int = 0) -> list:
    """A few values at `schema`'s edges: its enum and const, its bounds and one past them, a value from a bundled
    spec with and without a trailing newline, lengths one short and one over; for a list, an allowed item alone,
    twice, and beside each of its items' edge values; for a mapping, each pair of its keys with values the schema
    allows (the pairs `oneOf`, `not` and `dependentRequired` judge)."""
    schema = _resolved(schema)
    found: list = [None, True, "x", 1.5, [], {}]
    for sub in (*schema.get("oneOf", ()), *schema.get("anyOf", ())):
        found.extend(candidates(sub, depth))
    found.extend(schema.get("enum", ()))
    if "const" in schema:
        found.append(schema["const"])
    for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        if bound in schema:
            found.extend([schema[bound] - 1, schema[bound], schema[bound] + 1, float(schema[bound])])
    if "pattern" in schema or "minLength" in schema:
        seen = [v for v in SEEN.get(json.dumps(schema, sort_keys=True), ()) if isinstance(v, str)]
        found.extend([*seen[:2], *(v + "\n" for v in seen[:1]), "/" * schema.get("minLength", 1)])
        if "maxLength" in schema:
            found.extend(["/" * schema["maxLength"], "/" * (schema["maxLength"] + 1)])
    if "items" in schema:
        items = candidates(schema["items"], depth + 1)
        good = [v for v in items if _accepted(schema["items"], v)][:1]
        found.extend([good, good * 2, *([*good, v] for v in items)])
    if "properties" in schema and depth < 1:
        allowed = {key: [v for v in candidates(sub, depth + 1) if _accepted(sub, v)][:1]
                   for key, sub in schema["properties"].items()}
        keys = sorted(key for key, values in allowed.items() if values)
        found.extend({a: allowed[a][0], b: allowed[b][0]} for i, a in enumerate(keys) for b in keys[i:])
    return found


def _accepted(schema, value) -> bool:
    return spec._validator().evolve(schema=schema).is_valid(value)


def _seen(node, schema, seen: dict) -> None:
    """The values the bundled specs give each subschema (keyed by its JSON text)."""
    schema = _resolved(schema)
    if not isinstance(schema, dict):
        return
    seen.setdefault(json.dumps(schema, sort_keys=True), []).append(node)
    if isinstance(node, dict):
        for key, value in node.items():
            if key in schema.get("properties", {}):
                _seen(value, schema["properties"][key], seen)


READ = [read(path) for path in SPEC_FILES]
SEEN: dict = {}
for _data in READ:
    _seen(_data, SCHEMA, SEEN)
BASES = [read(ROOT / "examples/qwen3-32b-full-snt9b-16c.yaml"), read(ROOT / "examples/qwen2.5-7b-qlora-rtx4090.yaml")]


@pytest.mark.parametrize(("path", "schema"), SLOTS, ids=[".".join(path) for path, _ in SLOTS])
def test_each_key_at_its_edges_gets_jsonschemas_verdict(path, schema):
    """Every key the schema names, set in turn to each of its edge values (and removed) in two bundled specs."""
    for base in BASES:
        for value in [*candidates(schema), KeyError]:
            data = copy.deepcopy(base)
            node = parent(data, path)
            if value is KeyError:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
            assert_same_verdict(data)


def values_for(schema) -> st.SearchStrategy:
    """`candidates`, text its pattern matches (with a trailing newline or not), and now and then anything."""
    near = st.sampled_from(candidates(schema))
    options = [near, near, near, ANY_VALUE]
    pattern = _resolved(schema).get("pattern")
    if pattern is not None:
        matching = st.from_regex(schemacheck.python_pattern(pattern), fullmatch=True)
        options.extend([matching, matching.map(lambda text: text + "\n")])
    return st.one_of(options)


SLOT_VALUES = [(path, values_for(schema)) for path, schema in SLOTS]
BUNDLED = [data for data in READ if isinstance(data, dict)]


@st.composite
def mutated_specs(draw) -> dict:
    """A valid spec (tests/test_fuzz.py's) or a bundled one, with one to three changes at keys the schema names:
    a value near or past what it allows, the key removed, or a key the schema does not name added."""
    data = copy.deepcopy(draw(st.one_of(valid_specs(), st.sampled_from(BUNDLED))))
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        path, values = draw(st.sampled_from(SLOT_VALUES))
        node = parent(data, path)
        action = draw(st.integers(0, 5))
        if action == 0:
            node.pop(path[-1], None)
        elif action == 1:
            node[draw(st.sampled_from(["extra", "tp", "host"]))] = draw(SCALARS)
        else:
            node[path[-1]] = draw(values)
    return data


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(mutated_specs())
def test_generated_specs_get_jsonschemas_verdict(data):
    assert_same_verdict(data)


def test_the_bundled_schema_uses_only_keywords_the_check_implements():
    assert list(schemacheck.refuse_unknown(SCHEMA)) == []


@pytest.mark.parametrize(("edit", "where"), [
    (lambda s: s["properties"]["job"].update(format="hostname"), "#/properties/job/format"),
    (lambda s: s["$defs"]["pins"].update(patternProperties={"^x": True}), "#/$defs/pins/patternProperties"),
    (lambda s: s["properties"]["cards"]["oneOf"][1].update(type="int"), "#/properties/cards/oneOf/1/type"),
    (lambda s: s["properties"]["paths"]["properties"]["model_dir"].update({"$ref": "other.json#/x"}),
     "#/properties/paths/properties/model_dir/$ref"),
    (lambda s: s["$defs"]["pins"]["properties"]["tp"].update({"$ref": "#/$defs/nothing"}),
     "#/$defs/pins/properties/tp/$ref"),
])
def test_a_schema_keyword_the_check_does_not_implement_is_refused_when_read(edit, where, tmp_path, monkeypatch):
    schema = copy.deepcopy(SCHEMA)
    edit(schema)
    (tmp_path / "job.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    monkeypatch.setattr(spec, "resource_dir", {"schemas": tmp_path}.__getitem__)
    clear_table_caches()
    try:
        with pytest.raises(TableError, match=re.escape(f"job.schema.json: {where}: ")):
            spec._schema()
        result = CliRunner().invoke(main, ["plan", str(ROOT / "examples/qwen3-32b-full-snt9b-16c.yaml")])
        assert result.exit_code == 5 and result.stderr.startswith(f"Error: job.schema.json: {where}: ")
    finally:
        monkeypatch.undo()
        clear_table_caches()

