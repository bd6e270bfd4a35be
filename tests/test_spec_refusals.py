"""The spec reader's refusals at their bounds (generator/spec.py): nesting, --set paths, tags, merge keys, files that
are not regular, characters YAML does not allow, and the hint for a whole number written otherwise; each with the
key it names and the value it shows. The mutation run of issue 42 (bench/mutants.py) removed these unseen."""

from __future__ import annotations

import os

import pytest

from generator.errors import SpecError
from generator.spec import MAX_DEPTH, MAX_SPEC_BYTES, MAX_VALUES, load_spec, parse_spec

BASE = "job: t\nmodel: qwen3-8b\nmethod: full\nseq_len: 4096\nhardware: snt9b\n"
UNKNOWN = "unknown key; allowed here: "


def problems(text: str, overrides: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as refused:
        parse_spec(text.encode(), overrides)
    return [(p.path, p.message) for p in refused.value.problems]


def nested(levels: int) -> str:
    """`x:` holding `levels` nested mappings in all (x's own value included)."""
    return "x: " + "{a: " * (levels - 1) + "1" + "}" * (levels - 1) + "\n"


def test_sixteen_levels_are_read_and_seventeen_refused_where_they_start():
    assert MAX_DEPTH == 16
    [(key, message)] = problems(BASE + nested(16))
    assert (key, message.startswith(UNKNOWN)) == ("x", True)  # read: only the key is unknown
    [(key, message)] = problems(BASE + nested(17))
    assert key == "x" + ".a" * 15
    assert message == "is nested more than 16 levels deep; a job spec is at most four levels deep (line 6, column 64)"


def test_aliases_that_nest_deeper_than_the_text_are_refused():
    anchor = "a: &deep " + "{b: " * 8 + "1" + "}" * 8 + "\n"
    [(key, message)] = problems(BASE + anchor + "c: " + "{d: " * 8 + "*deep" + "}" * 8 + "\n")
    assert (key, message) == ("(yaml)", "is nested more than 16 levels deep (YAML aliases expanded); a job spec is at "
                                        "most four levels deep")


def test_a_set_path_of_sixteen_parts_is_read_and_seventeen_refused():
    [(key, message)] = problems(BASE, (".".join(["a"] * 16) + "=1",))
    assert key == "a" and message.startswith(UNKNOWN)
    assert problems(BASE, (".".join(["a"] * 17) + "=1",)) == [
        ("(--set)", f"'{'.'.join(['a'] * 17)}' is nested more than 16 levels deep; a job spec is at most four levels "
                    f"deep")]


def test_a_set_value_that_nests_the_spec_too_deep_is_refused_at_its_key():
    path = ".".join(["a"] * 15)
    [(key, message)] = problems(BASE, (f"{path}={{b: 1}}",))  # 15 keys and one more level: 16
    assert key == "a" and message.startswith(UNKNOWN)
    path = ".".join(["a"] * 16)
    assert problems(BASE, (f"{path}={{b: 1}}",)) == [
        (path, "--set value: the spec would be nested more than 16 levels deep; a job spec is at most four levels "
               "deep")]


def test_a_set_needs_key_path_equals_value_and_a_mapping_to_go_into():
    assert problems(BASE, ("nonsense",)) == [("(--set)", "'nonsense' is not KEY.PATH=VALUE (e.g. "
                                                         "train.learning_rate=2.0e-5)")]
    assert problems(BASE, ("job.x=1",)) == [("job", "--set goes into it, but it is not a mapping")]
    assert parse_spec(BASE.encode(), ("train.steps=10",)).train["steps"] == 10


def test_explicit_core_tags_are_read_and_must_hold_their_types_text():
    assert parse_spec(BASE.replace("job: t", "job: !!str t").encode()).job == "t"
    assert parse_spec(BASE.replace("seq_len: 4096", "seq_len: !!int 4096").encode()).seq_len == 4096
    assert problems(BASE.replace("seq_len: 4096", "seq_len: !!int abc")) == [
        ("seq_len", "!!int 'abc' is not a whole number: ASCII digits with an optional sign, 0o... or 0x... (line 4, "
                    "column 10)")]


def test_collection_tags_other_than_the_core_ones_are_refused():
    assert problems(BASE + "x: !!set {a, b}\n") == [
        ("x", "the tag !!set is not read: a job spec holds YAML 1.2's core types (text, numbers, true/false, null, "
              "lists, mappings); write the value without it (line 6, column 4)")]
    assert parse_spec((BASE + "layout: !!map {}\n").encode()).layout == {}


def test_a_merge_key_is_refused_and_a_quoted_one_is_a_key():
    assert problems(BASE + "<<: {z: 1}\n") == [
        ("(top level)", "merge keys (<<) are not read: a job spec is YAML 1.2, which has none; write the keys out "
                        "(line 6, column 1)")]
    [(key, message)] = problems(BASE + "'<<': 1\n")
    assert key == "<<" and message.startswith(UNKNOWN)


def test_an_empty_file_and_a_character_yaml_does_not_allow_are_refused():
    assert problems("") == [("(file)", "is empty; a job spec needs at least job, model, method, seq_len and "
                                       "hardware")]
    assert problems(BASE + "x: \x00\n") == [
        ("(yaml)", "not valid YAML: character U+0000 at position 69 is not allowed in YAML")]


def test_only_a_regular_file_is_read(tmp_path):
    with pytest.raises(SpecError) as refused:
        load_spec(tmp_path)
    assert [(p.path, p.message) for p in refused.value.problems] == [
        ("(file)", "is not a regular file (a FIFO, a device or a folder); give the spec file")]
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(SpecError, match="is not a regular file"):
        load_spec(tmp_path / "fifo")
    (tmp_path / "spec.yaml").write_text(BASE)
    assert load_spec(tmp_path / "spec.yaml").seq_len == 4096


@pytest.mark.parametrize("line,key,message", [
    ("seq_len: 4096.0", "seq_len", "expected a whole number, got 4096.0 (write 4096: no decimal point or exponent)"),
    ("seq_len: '0256'", "seq_len", "expected a whole number, got '0256' (a leading 0 is not a number in YAML 1.2, "
                                   "and was octal in YAML 1.1: write 256 or 0o...)"),
    ("seq_len: 'abc'", "seq_len", "expected a whole number, got 'abc'"),
    ("job: 1.0", "job", "expected a string, got 1.0"),
])
def test_a_whole_number_written_otherwise_gets_the_hint_that_fixes_it(line, key, message):
    text = BASE.replace(f"{line.split(':')[0]}: {'4096' if key == 'seq_len' else 't'}", line)
    assert problems(text) == [(key, message)]


@pytest.mark.parametrize("value,read", [("1" * 30, True), ("1" * 31, False), ("1." + "0" * 98, True),
                                        ("1." + "0" * 99, False)])
def test_a_whole_number_of_30_digits_and_a_number_of_100_characters_are_read_one_more_refused(value, read):
    """spec.py _check_scalar: at most MAX_INT_DIGITS (30) characters for a whole number, 100 for any other number."""
    [(key, message)] = problems(f"{BASE}x: {value}\n")
    assert key == "x"
    if read:
        assert message.startswith(UNKNOWN)
    else:
        assert message == f"a number of {len(value)} digits is too large (line 6, column 4)"


@pytest.mark.parametrize("key,got", [("1", "'1' (quote it)"), ("true", "'true' (quote it)"),
                                     ("null", "'null' (quote it)"), ("? [a]\n", "a list"), ("? {a: 1}\n", "a mapping")])
def test_a_key_that_is_not_text_is_refused(key, got):
    """spec.py _check_keys: YAML reads `1:` as a number key, which no schema key matches; quoted, it is text."""
    column = 3 if key.startswith("?") else 1
    assert problems(f"{BASE}{key}: x\n") == [("(top level)",
                                               f"a key must be text, got {got} (line 6, column {column})")]
    [(path, message)] = problems(f"{BASE}'1': x\n")
    assert path == "1" and message.startswith(UNKNOWN)


@pytest.mark.parametrize("via", ["file", "set"])
def test_ten_thousand_values_are_read_and_one_more_refused(via):
    """spec.py MAX_VALUES, counted as _inspect counts them: BASE is 11 values (its mapping, 5 keys, 5 values),
    `x: [...]` two more and one a list item."""
    assert MAX_VALUES == 10_000
    for items, refused in ((9_987, False), (9_988, True)):
        listing = f"[{', '.join(['1'] * items)}]"
        found = problems(f"{BASE}x: {listing}\n") if via == "file" else problems(BASE, (f"x={listing}",))
        [(key, message)] = found
        if not refused:
            assert key == "x" and message.startswith(UNKNOWN)
        elif via == "file":
            assert (key, message) == ("(yaml)", "holds more than 10,000 values (YAML aliases expanded); a job spec has "
                                                "a few dozen")
        else:
            assert (key, message) == ("x", "--set value: the spec would hold more than 10,000 values with it; a job "
                                           "spec has a few dozen")


def test_a_spec_file_of_1_mib_is_read_and_one_byte_more_refused(tmp_path):
    """spec.py load_spec: MAX_SPEC_BYTES (1 MiB) read, a larger file refused before it is parsed."""
    assert MAX_SPEC_BYTES == 1 << 20
    path = tmp_path / "spec.yaml"
    path.write_text(BASE + "#" * (MAX_SPEC_BYTES - len(BASE) - 1) + "\n")
    assert path.stat().st_size == MAX_SPEC_BYTES and load_spec(path).seq_len == 4096
    path.write_text(BASE + "#" * (MAX_SPEC_BYTES - len(BASE)) + "\n")
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert [(p.path, p.message) for p in refused.value.problems] == [
        ("(file)", "is larger than 1,048,576 bytes; a job spec is a few hundred")]


def test_set_values_of_1_mib_together_are_read_and_one_byte_more_refused():
    """spec.py _apply_overrides: the --set values together get the file's bound, MAX_SPEC_BYTES."""
    [(key, message)] = problems(BASE, ("x=" + "y" * (MAX_SPEC_BYTES - 2),))
    assert key == "x" and message.startswith(UNKNOWN)
    assert problems(BASE, ("x=" + "y" * (MAX_SPEC_BYTES - 4), "z=1")) == [
        ("(--set)", "the values are larger than 1,048,576 bytes together; a job spec is a few hundred")]


@pytest.mark.parametrize("extra,key,message", [
    ("quantization_bit: 4\n", "quantization_bit", "is only used with method qlora (the bits of the quantized base "
                                                   "model)"),
    ("train: {warmup_ratio: 0.1, warmup_steps: 10}\n", "train.warmup_steps", "give warmup_ratio or warmup_steps, "
                                                                             "not both"),
    ("train: 3\n", "train", "expected a mapping, got 3"),  # the `not required` fails too: the type error says it
])
def test_a_key_that_must_not_be_given_is_refused_at_that_key(extra, key, message):
    """spec.py _describe: the schema's `not` with x-key (schemas/job.schema.json: train's warmup pair,
    quantization_bit outside qlora) is reported at that key, once."""
    assert problems(BASE + extra) == [(key, message)]


@pytest.mark.parametrize("extra,key,message", [
    ("frameworks: []\n", "frameworks", "must list at least 1 item(s)"),
    ("train: {adam_betas: [0.9]}\n", "train.adam_betas", "must list at least 2 item(s)"),
    ("frameworks: [mindformers, mindformers]\n", "frameworks", "lists the same item twice"),
])
def test_a_list_too_short_or_with_an_item_twice_is_refused_in_words(extra, key, message):
    """spec.py _value_message for minItems and uniqueItems (schemas/job.schema.json: frameworks, train.adam_betas)."""
    assert problems(BASE + extra) == [(key, message)]


def test_a_value_that_does_not_match_a_pattern_without_a_hint_names_the_pattern():
    """spec.py _value_message for a pattern the schema gives no x-hint (calibration.log_sha256's items)."""
    found = dict(problems(BASE + "calibration: {log_sha256: [xyz]}\n"))
    assert found["calibration.log_sha256.0"] == "'xyz' does not match the pattern ^[0-9a-f]{64}$"


def test_a_schema_with_a_keyword_the_checker_does_not_implement_is_refused(tmp_path, monkeypatch):
    """spec.py _schema: a job.schema.json using a keyword generator/schemacheck.py does not implement is a table
    error (exit 5), never a spec checked against a rule nobody enforces."""
    import json
    import shutil

    from helpers import clear_table_caches

    from generator import spec
    from generator.errors import TableError
    from generator.resources import resource_dir

    schemas = tmp_path / "schemas"
    shutil.copytree(resource_dir("schemas"), schemas)
    path = schemas / "job.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["properties"]["job"]["unevaluatedProperties"] = False
    path.write_text(json.dumps(schema), encoding="utf-8")
    monkeypatch.setattr(spec, "resource_dir", {"schemas": schemas}.__getitem__)
    clear_table_caches()
    try:
        with pytest.raises(TableError) as refused:
            parse_spec(BASE.encode())
        assert str(refused.value) == ("job.schema.json: #/properties/job/unevaluatedProperties: the keyword is not one "
                                      "generator/schemacheck.py implements")
    finally:
        monkeypatch.undo()
        clear_table_caches()
    assert parse_spec(BASE.encode()).seq_len == 4096
