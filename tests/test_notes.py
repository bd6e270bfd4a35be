"""Notes are typed values (issue 35): each carries a code naming what it says, its kind and the framework it is about;
PLAN.md, `plan` and plan.json show it as before, and a reader selects notes by code, not by their words."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

from click.testing import CliRunner
from helpers import make_spec, sweep_plans

from generator.api.notes import Note, warning, with_code
from generator.cli import main
from generator.resolve import resolve
from generator.tables import load_tables

PACKAGE = Path(__file__).resolve().parent.parent / "generator"
CODE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+")
MAKERS = {"Note", "warning"}


def _makers() -> list[tuple[str, int, ast.Call]]:
    """Every Note(...) and warning(...) call in the package: (file, line, call)."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MAKERS:
                calls.append((str(path.relative_to(PACKAGE)), node.lineno, node))
    return [(where, line, call) for where, line, call in calls if where != "api/notes.py"]  # warning() itself


def test_every_note_is_made_with_a_literal_code_at_one_place():
    # One code, one sentence: a code is written at one call in the package, so no two sentences share it (a note
    # from data, as an upstream departure, carries its data's text under the one code that says what it is).
    calls = _makers()
    assert len(calls) > 50
    codes = []
    for where, line, call in calls:
        code = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "code"), None)
        assert isinstance(code, ast.Constant) and isinstance(code.value, str), f"{where}:{line}: not a literal code"
        assert CODE.fullmatch(code.value), f"{where}:{line}: {code.value!r} is not a dotted lower-case code"
        codes.append(code.value)
    assert [code for code, n in Counter(codes).items() if n > 1] == []


def test_every_note_of_the_examples_and_the_sweep_has_a_code_and_its_kind():
    plans = sweep_plans()
    assert len(plans) >= 50
    seen: Counter = Counter()
    for job, plan in plans.items():
        for note in plan.notes:
            assert isinstance(note, Note) and CODE.fullmatch(note.code) and note.kind == "note", (job, note)
            seen[note.code] += 1
        for warned in plan.warnings:
            assert isinstance(warned, Note) and CODE.fullmatch(warned.code) and warned.kind == "warning", (job, warned)
            seen[warned.code] += 1
        # A note about a framework names one the plan has (or one a defaulted list left out: its text says so).
        assert {n.framework for n in plan.notes + plan.warnings} <= {None, *plan.frameworks}, job
    assert len(seen) >= 10, seen


# Codes whose text is data (an upstream departure, a refusal's reason, a hardware alias's source) under one meaning.
FROM_DATA = {"upstream.departure", "frameworks.left_out", "frameworks.no_fit_reason", "hardware.alias"}


def _words(text: str) -> set[str]:
    """The words of a note's own sentence: its parentheses (sources, layouts) taken out."""
    while (bare := re.sub(r"\([^()]*\)", "", text)) != text:
        text = bare
    return set(re.findall(r"\b[a-z]{3,}\b", text))


def test_a_code_carries_one_sentence_across_the_sweep():
    # The notes of one code differ in their values only: each shares most of its words (numbers and names aside)
    # with every other of the code, where two sentences under one code would share few.
    by_code: dict[str, set[str]] = {}
    for plan in sweep_plans().values():
        for note in plan.notes + plan.warnings:
            by_code.setdefault(note.code, set()).add(note.text)
    assert sum(len(texts) > 1 for texts in by_code.values()) >= 10
    for code, texts in by_code.items():
        if code in FROM_DATA:
            continue
        first = _words(min(texts))
        for text in texts:
            shared = len(first & _words(text)) / len(first | _words(text))
            assert shared >= 0.5, (code, min(texts), text)


def test_notes_are_selected_by_code_and_show_as_before():
    tables = load_tables()
    forced = resolve(make_spec(frameworks=["mindspeed-llm"], layout={"mindspeed-llm": {"tp": 1, "pp": 1}},
                               cards=8), tables, force=True)
    [warned] = with_code(forced.warnings, "layout.forced_over_budget")
    assert (warned.kind, warned.framework, warned.role) == ("warning", "mindspeed-llm", None)
    assert str(warned) == f"mindspeed-llm: {warned.text}" and warned.text.startswith("layout tp=1 pp=1 dp=8 ")
    assert not with_code(forced.notes, "layout.forced_over_budget")
    below = resolve(make_spec(frameworks=["mindspeed-llm"], cards=4), tables, force=True)
    [note] = with_code(below.notes, "cards.forced")
    assert note.framework == "mindspeed-llm" and note.text.startswith("FORCED: 4 cards is below the table minimum ")
    # plan.json carries the typed fields, and reads back as the same note.
    data = json.loads(json.dumps(below.to_json()))
    assert [Note.from_json(n) for n in data["notes"]] == list(below.notes)
    assert {"code": "cards.forced", "kind": "note", "framework": "mindspeed-llm", "role": None,
            "text": note.text} in data["notes"]


def test_a_role_note_shows_the_framework_and_the_role():
    note = warning("layout.forced_over_budget", "layout tp=2 may not fit").about("verl", "critic")
    assert str(note) == "verl critic: layout tp=2 may not fit" and "tp=2" in note and note.startswith("verl critic")
    assert Note.from_json(note.to_json()) == note


def test_strict_fails_on_warnings_and_prints_them_as_lines(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"job": "w", "model": "qwen3-8b", "method": "full", "seq_len": 4096,
                                "hardware": "snt9b", "frameworks": ["mindspeed-llm"], "cards": 8,
                                "layout": {"mindspeed-llm": {"tp": 1, "pp": 1}}}))
    result = CliRunner().invoke(main, ["plan", str(spec), "--force", "--strict"])
    assert result.exit_code == 3
    assert "Warning: mindspeed-llm: layout tp=1 pp=1 dp=8 mbs=1 recompute=full may not fit" in result.stderr
