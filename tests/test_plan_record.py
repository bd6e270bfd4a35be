"""What validate reads of plan.json is typed (issue 35): PlanRecord.from_json holds the model, paths, data rows and each
framework's counts as render wrote them, verl's settings read back as VerlSettings, and a plan.json whose values are
not of the types render writes is unreadable (the checks then say the plan is unknown) rather than coerced."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import sweep_plans
from test_validate import EXAMPLE, JOB, rewrite

from generator.checks.job import NO_PLAN
from generator.checks.plan_record import PlanRecord
from generator.cli import main
from generator.frameworks.verl.settings import VerlSettings


def test_the_record_holds_what_each_plan_says():
    for job, plan in sweep_plans().items():
        record = PlanRecord.from_json(json.loads(json.dumps(plan.to_json())))
        assert record.model == plan.model and dict(record.paths) == plan.paths, job
        assert record.data_rows == plan.data_rows, job
        assert {name: (fw.cards, fw.nodes, fw.global_batch_size) for name, fw in record.frameworks.items()} == \
            {name: (fp.cards, fp.nodes, fp.layout.global_batch_size) for name, fp in plan.frameworks.items()}, job


def test_verl_settings_read_back_as_the_plan_decided_them():
    plan = sweep_plans()["qwen3-8b-grpo-verl-snt9b"]
    settings = plan.frameworks["verl"].settings
    assert isinstance(settings, VerlSettings) and settings.prepare
    record = PlanRecord.from_json(json.loads(json.dumps(plan.to_json())))
    assert VerlSettings.from_json(record.frameworks["verl"].settings) == settings


@pytest.mark.parametrize("edit", [
    lambda p: p["frameworks"]["mindformers"].update(cards="16"),  # read as 16 before
    lambda p: p["paths"]["dataset"].update(placeholder="false"),
    lambda p: p["data"].update(rows=True),
    lambda p: p.update(model=["qwen3-32b"]),
])
def test_values_of_another_type_than_render_writes_are_not_read(edit):
    data = sweep_plans()["qwen3-32b-full-snt9b-16c"].to_json()
    PlanRecord.from_json(data)
    edit(data)
    with pytest.raises(ValueError):
        PlanRecord.from_json(data)


def test_validate_does_not_coerce_a_hand_edited_count(tmp_path):
    assert CliRunner().invoke(main, ["render", str(EXAMPLE), "-o", str(tmp_path)]).exit_code == 0
    job = tmp_path / JOB
    plan = json.loads((job / "plan.json").read_text())
    plan["frameworks"]["mindformers"]["cards"] = str(plan["frameworks"]["mindformers"]["cards"])
    rewrite(job, "plan.json", json.dumps(plan))
    result = CliRunner().invoke(main, ["validate", str(job)])
    assert result.exit_code == 1
    assert f"problem  mindformers/train.yaml  {NO_PLAN}" in result.output, result.output
