"""Spec loading and schema errors: every bad spec gets `Error: <file>: <key path>: <sentence>`, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.errors import SpecError
from generator.spec import load_spec, parse_spec

SPECS = Path(__file__).parent / "specs"
GOOD = sorted((SPECS / "good").glob("*.yaml"))
BAD = sorted((SPECS / "bad").glob("*.yaml"))


def expected_lines(path: Path) -> list[str]:
    """The `# expect:` header lines of a bad spec, as the CLI must print them."""
    return [f"Error: {path}: {line[len('# expect: '):]}"
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# expect: ")]


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_specs_plan(path):
    result = CliRunner().invoke(main, ["plan", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_specs_exit_2_with_exact_message(path):
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == expected_lines(path)
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_every_bad_spec_states_its_expectation():
    assert BAD and all(expected_lines(p) for p in BAD)


def test_all_schema_errors_are_collected_sorted_by_path():
    # Three independent mistakes must all be reported, not just the first.
    raw = b"job: Bad Name\nmodel: qwen3-8b\nmethod: sft\nseq_len: 100\nhardware: snt9b\n"
    with pytest.raises(SpecError) as info:
        parse_spec(raw)
    assert [p.path for p in info.value.problems] == ["job", "method", "seq_len"]


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert info.value.lines("nope.yaml") == ["Error: nope.yaml: (file): no such file"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(SpecError) as info:
        load_spec(empty)
    assert "is empty" in info.value.problems[0].message


def test_bool_is_not_an_integer():
    # YAML `cards: true` must not sneak through as 1.
    with pytest.raises(SpecError) as info:
        parse_spec(b"job: a\nmodel: qwen3-8b\nmethod: full\nseq_len: 4096\nhardware: snt9b\ncards: true\n")
    assert info.value.problems[0].path == "cards"


def test_spec_values_and_defaults():
    spec = load_spec(SPECS / "good" / "everything.yaml")
    assert spec.cards == 8 and spec.frameworks == ("mindformers", "mindspeed-llm")
    assert spec.train_tokens == 80000 * 1024 * 2
    assert spec.paths["model_dir"] == "/data/my model/Qwen3-32B" and spec.dataset_format == "alpaca"
    assert spec.layout["mindspeed-llm"].tp == 2 and spec.layout["mindspeed-llm"].recompute == "full"
    minimal = load_spec(SPECS / "good" / "minimal.yaml")
    assert minimal.cards is None and minimal.frameworks is None and minimal.scaling_efficiency == 1.0


def test_sha256_is_of_the_file_bytes():
    import hashlib
    path = SPECS / "good" / "minimal.yaml"
    assert load_spec(path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
