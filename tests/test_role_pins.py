"""A role's own pins (layout.<framework>.<role>) on a bundled framework: verl's rollout TP pinned apart from the
actor's, honoured on the plan and in the file's override with the pin as its source; a pin breaking a layout rule is
refused at the role's key, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from generator.cli import main

REPO = Path(__file__).resolve().parent.parent


def _spec(tmp_path: Path, rollout: dict) -> Path:
    spec = yaml.safe_load((REPO / "examples" / "qwen3-8b-grpo-verl-snt9b.yaml").read_text(encoding="utf-8"))
    spec["layout"] = {"verl": {"rollout": rollout}}
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def test_a_rollout_tp_pin_is_honoured(tmp_path):
    result = CliRunner().invoke(main, ["plan", str(_spec(tmp_path, {"tp": 4})), "--json"])
    assert result.exit_code == 0, result.output
    verl = json.loads(result.output)["frameworks"]["verl"]
    assert verl["roles"]["rollout"]["tp"] == 4 and verl["roles"]["actor"]["tp"] == 1  # the example's rollout TP: 2
    override = next(item for item in verl["settings"]["overrides"]
                    if item["key"] == "actor_rollout_ref.rollout.tensor_model_parallel_size")
    assert (override["value"], override["source"]) == (4, "layout.verl.rollout.tp: the spec's pin")


def test_a_broken_rollout_pin_is_refused_at_its_key(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", str(_spec(tmp_path, {"tp": 3})), "-o", str(out)])
    assert result.exit_code == 2
    assert "layout.verl.rollout.tp: TP (3) must divide the 8 KV heads (query groups) of qwen3-8b" in result.stderr
    assert "Traceback" not in result.output + result.stderr and not out.exists()
