"""A role's own pins (layout.<framework>.<role>) shown where a reader looks for why a layout is what it is: PLAN.md
under the roles table and `plan --candidates` on the role's heading; a plan without them shows neither (issue 35)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "qwen3-8b-grpo-verl-snt9b.yaml"
LINE = ("verl: the rollout keeps its own pins (`layout.verl.rollout`), in place of the framework's; the values they "
        "leave out are searched.")


def _spec(tmp_path: Path, layout: dict | None) -> Path:
    spec = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    if layout is not None:
        spec["layout"] = layout
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def _plan_md(tmp_path: Path, layout: dict | None) -> str:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", str(_spec(tmp_path, layout)), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return next(out.glob("*/PLAN.md")).read_text(encoding="utf-8")


def _candidates(tmp_path: Path, layout: dict | None) -> list[str]:
    result = CliRunner().invoke(main, ["plan", str(_spec(tmp_path, layout)), "--candidates"])
    assert result.exit_code == 0, result.output
    return [line for line in result.output.splitlines() if line.startswith("verl ") and line.endswith("):")]


def test_plan_md_names_a_roles_own_pins(tmp_path):
    text = _plan_md(tmp_path, {"verl": {"rollout": {"tp": 4}}})
    roles_table, _, after = text.partition("| verl | reference |")
    assert "| verl | rollout | 8 | yes | 4 |" in roles_table
    assert after.split("\n\n")[1] == LINE


def test_plan_md_without_role_pins_has_no_such_line(tmp_path):
    assert "own pins" not in _plan_md(tmp_path / "plain", None)
    # The framework's own pins are the layout table's source column ("pinned"), not a role's.
    assert "own pins" not in _plan_md(tmp_path / "framework", {"verl": {"tp": 1}})


def test_candidates_head_a_pinned_role_with_its_key(tmp_path):
    assert _candidates(tmp_path, {"verl": {"rollout": {"tp": 4}}}) == [
        "verl actor (8 cards, global batch 256):",
        "verl rollout (8 cards, global batch 256, its own pins layout.verl.rollout):",
        "verl reference (8 cards, global batch 256):"]
    assert all("pins" not in line for line in _candidates(tmp_path, None))
