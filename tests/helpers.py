"""Helpers shared by the test modules (imported as `helpers`: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import yaml

from generator.spec import parse_spec


def make_spec(**fields):
    """A Spec from keyword fields on top of a minimal valid one, through the real parser."""
    data = {"job": "t", "model": "qwen3-8b", "method": "full", "seq_len": 4096, "hardware": "snt9b"}
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    return parse_spec(yaml.safe_dump(data).encode())


def render_job(tables, **fields):
    """Plan and render a job in memory: (plan, {relative path: text})."""
    from generator.render import render_files
    from generator.resolve import resolve

    plan = resolve(make_spec(**fields), tables)
    return plan, render_files(plan)


def check_script(text: str, tmp_path, name: str = "launch.sh") -> None:
    """bash -n and shellcheck (warning level) on a generated script; raises AssertionError with their output."""
    import subprocess

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    lint = subprocess.run(["shellcheck", "-S", "warning", str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def flat_keys(node, prefix: str = "") -> set[str]:
    """Every key path of a YAML document; list items of mappings share one `[]` path."""
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            keys.add(path)
            keys |= flat_keys(value, path)
    elif isinstance(node, list):
        for item in node:
            keys |= flat_keys(item, f"{prefix}[]")
    return keys


def table_cells(tables, framework: str) -> set[tuple]:
    """(model, method, seq_len, hardware) for every non-'-' cell of `framework`'s minimum-card column, each method
    and seq_len a row lists; MindSpeed-LLM also pretrains on its full rows."""
    cells = set()
    for row in tables.min_cards:
        if row.framework != framework:
            continue
        for hw, value in row.cards.items():
            if value is None:
                continue
            for method in row.methods:
                for seq in row.seq_lens:
                    cells.add((row.model, method, seq, hw))
                    if method == "full" and framework == "mindspeed-llm":
                        cells.add((row.model, "pretrain", seq, hw))
    return cells
