"""The tables reach a plugin through the context (Context's rows, Job.framework, a plan's facts), never through a load
of its own: no module of a plugin or a family names the table loader (issue 35)."""

from __future__ import annotations

import ast
from pathlib import Path

from generator.tables import load_tables

PACKAGE = Path(__file__).resolve().parent.parent / "generator"
LOADER = "load_tables"


def _plugin_modules() -> list[Path]:
    """Every module of a plugin (generator/frameworks/<plugin>/) and of a family (generator/families/)."""
    plugins = [path for path in (PACKAGE / "frameworks").iterdir() if path.is_dir() and path.name != "__pycache__"]
    return sorted(p for folder in [*plugins, PACKAGE / "families"] for p in folder.rglob("*.py"))


def _names_loader(path: Path) -> bool:
    """Whether the module imports, calls or otherwise names the loader."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == LOADER for alias in node.names):
            return True
        if isinstance(node, ast.Name) and node.id == LOADER or isinstance(node, ast.Attribute) and node.attr == LOADER:
            return True
    return False


def test_the_walk_sees_every_plugin():
    names = {path.parent.name for path in _plugin_modules()}
    assert {"verl", "mindformers", "llama_factory", "mindspeed_llm", "mindspeed_mm", "rl"} <= names


def test_no_plugin_calls_the_table_loader():
    assert [str(path.relative_to(PACKAGE)) for path in _plugin_modules() if _names_loader(path)] == []


def test_the_walk_finds_a_planted_call(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from ...tables import tables as t\n\ndef f():\n    return t.load_tables()\n")
    assert _names_loader(planted)


def test_a_models_info_carries_its_column_facts():
    """MindFormers' renderer reads a research family's facts off the plan (FrameworkPlan.info, the context's
    model_info): the facts of each closed column's value, as the tables give them."""
    fw = load_tables().frameworks["mindformers"]
    assert fw.model_info("llama3.1-8b")["facts"] == {"layout": fw.value_facts("layout", "research"),
                                                     "family": fw.value_facts("family", "llama3_1")}
    assert fw.model_info("qwen3-8b")["facts"] == {"layout": fw.value_facts("layout", "mcore")}
