"""Templates compile once and are kept in __pycache__ beside them (generator/templating.py `_CompiledTemplates`), as
Python keeps compiled modules: a kept one is used, an edited template compiles again, and where nothing may or can
be written the templates compile each run with the same output."""

from __future__ import annotations

import hashlib
import marshal
import sys

import pytest

from generator import templating

SOURCE = "plan: {{ plan | sh }} {{ 2.5 | duration }}\n"


@pytest.fixture
def templates(tmp_path, monkeypatch):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "t.txt.j2").write_text(SOURCE, encoding="utf-8")
    monkeypatch.setattr(templating, "resource_dir", {"templates": folder}.__getitem__)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    return folder


def kept(folder, name: str = "t.txt.j2") -> bool:
    """Whether a fresh environment finds `name` compiled from its current text."""
    env = templating.environment()
    assert env.bytecode_cache is not None
    source = (folder / name).read_text(encoding="utf-8")
    return env.bytecode_cache.get_bucket(env, name, str(folder / name), source).code is not None


def test_a_compiled_template_is_kept_and_used_until_its_text_changes(templates):
    assert not kept(templates)
    assert templating.environment().get_template("t.txt.j2").render(plan="it's") == "plan: 'it'\"'\"'s' 2.5 h\n"
    assert [p.parent.name for p in templates.rglob("*.jinja")] == ["__pycache__"]
    assert kept(templates)
    assert templating.environment().get_template("t.txt.j2").render(plan="x") == "plan: x 2.5 h\n"
    (templates / "t.txt.j2").write_text(SOURCE.replace("plan:", "PLAN:"), encoding="utf-8")
    assert not kept(templates)
    assert templating.environment().get_template("t.txt.j2").render(plan="x") == "PLAN: x 2.5 h\n"


@pytest.mark.parametrize("case", ["-B", "unwritable", "prefix"])
def test_nothing_is_kept_where_python_would_keep_no_bytecode(case, templates, tmp_path, monkeypatch):
    if case == "-B":
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
    elif case == "unwritable":
        (templates / "__pycache__").write_text("", encoding="utf-8")  # not a folder: makedirs fails as read-only does
    else:
        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    assert templating.environment().get_template("t.txt.j2").render(plan="x") == "plan: x 2.5 h\n"
    assert not list(templates.rglob("*.jinja"))
    assert bool(list(tmp_path.glob("prefix/**/*.jinja"))) == (case == "prefix")



def test_a_kept_file_cut_short_is_compiled_again(templates):
    templating.environment().get_template("t.txt.j2")
    [entry] = templates.rglob("*.jinja")
    entry.write_bytes(entry.read_bytes()[:20])
    assert not kept(templates)
    assert templating.environment().get_template("t.txt.j2").render(plan="x") == "plan: x 2.5 h\n"
    assert kept(templates)


@pytest.mark.parametrize("damage", ["flipped", "not code", "pickle"])
def test_a_damaged_kept_file_is_compiled_again(damage, templates):
    # The review changed a kept file's text ("training recipe" -> "TRAINING RECIPE") and the plan printed it; and a
    # kept file with a valid header but another payload crashed with a traceback. Each entry now carries a digest of
    # its payload (kept.py), and only a code object is used.
    templating.environment().get_template("t.txt.j2")
    [entry] = templates.rglob("*.jinja")
    blob = entry.read_bytes()
    if damage == "flipped":
        blob = blob.replace(b"plan: ", b"PLAN: ")
    else:
        payload = marshal.dumps(5) if damage == "not code" else b"\x80\x02cnosuch\nx\n."
        blob = blob[:32] + hashlib.sha256(payload).digest() + payload
    entry.write_bytes(blob)
    assert templating.environment().get_template("t.txt.j2").render(plan="x") == "plan: x 2.5 h\n"
