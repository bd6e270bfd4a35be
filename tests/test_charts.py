"""PLAN.md's charts (generator/charts.py, issue 40 item 5): their numbers are the plan's, and every chart of the
bundled examples and of bench/spec_sweep.py's specs draws in a real browser (Debian's chromium, mermaid from the npm
registry: `bash scripts/install.sh charts`, which CI runs; skipped where either is missing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import mermaid_draw
import spec_sweep
from generator.charts import candidates_chart, time_points
from generator.cli import _tables
from generator.resolve import candidate_layouts, resolve
from generator.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def tables():
    return _tables()


def _sweep_plans(tables, folder: Path) -> list:
    plans = []
    for job in spec_sweep.SPECS:
        job = dict(job)
        force = job.pop("FORCE", False)
        path = folder / f"{job['job']}.yaml"
        path.write_text(yaml.safe_dump(job), encoding="utf-8")
        plans.append(resolve(load_spec(str(path), ()), tables, force=force))
    return plans


def test_the_time_chart_holds_the_plans_own_estimate_and_efficiency_never_rises(tables):
    spec = load_spec(str(REPO / "examples" / "llama3.1-70b-pretrain-budget.yaml"), ())
    plan = resolve(spec, tables)
    fp = plan.frameworks["mindspeed-llm"]
    points = dict(time_points(plan, tables, "mindspeed-llm"))
    assert points[fp.cards] == pytest.approx(fp.estimate.time_hours, abs=0.01)
    counts = sorted(points)
    assert len(counts) >= 4 and counts[0] < fp.cards < counts[-1]
    # card-hours (the inverse of per-card efficiency) never fall as cards are added
    card_hours = [c * points[c] for c in counts]
    assert all(later >= earlier * 0.9999 for earlier, later in zip(card_hours, card_hours[1:]))
    chart = next(c for c in plan.charts if c.kind == "time")
    assert "line [72.0, 72.0" in chart.source  # the budget
    assert f"{fp.estimate.time_hours:.1f}" in chart.source


def test_the_memory_and_pipeline_charts_hold_the_plans_numbers(tables):
    plan = resolve(load_spec(str(REPO / "examples" / "qwen3-8b-grpo-verl-snt9b.yaml"), ()), tables)
    memory = next(c for c in plan.charts if c.kind == "memory")
    roles = plan.frameworks["verl"].roles
    assert '"verl actor", "verl rollout", "verl reference"' in memory.source
    assert "bar [" + ", ".join(f"{r.layout.memory.total:.1f}" for r in roles.values()) + "]" in memory.source
    assert not [c for c in plan.charts if c.kind == "time"]  # RL rates are not the throughput model's
    plan = resolve(load_spec(str(REPO / "examples" / "qwen3-32b-full-snt9b-16c.yaml"), ()), tables)
    stages = next(c for c in plan.charts if c.kind == "pipeline" and c.title.startswith("mindspeed-llm"))
    assert stages.source.count('"stage ') == plan.frameworks["mindspeed-llm"].layout.pp == 4
    assert '"stage 0: embedding + 16 layers"' in stages.source and "16 layers + output layer" in stages.source


def test_plan_md_opens_with_the_answer_and_holds_the_charts(tmp_path):
    from click.testing import CliRunner

    from generator.cli import main
    result = CliRunner().invoke(main, ["render", str(REPO / "examples" / "llama3.1-70b-pretrain-budget.yaml"), "-o",
                                       str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "llama3.1-70b-pretrain-72h" / "PLAN.md").read_text()
    order = [text.index(h) for h in ("## Answer", "**Run it.**", "Order:", "## Pictures", "## How the plan was made",
                                     "**Memory per card**", "## Notes")]
    assert order == sorted(order)
    assert "| mindspeed-llm | 320 | 40 | 67.4 h | met (72 h) | 49.9 of 58 |" in text
    assert text.count("```mermaid") == 3  # memory, pipeline, time


needs_browser = pytest.mark.skipif(mermaid_draw.browser() is None or not mermaid_draw.MERMAID.is_file(),
                                   reason="chromium or mermaid missing: bash scripts/install.sh charts")


@needs_browser
def test_the_browser_check_fails_a_chart_that_does_not_draw(tmp_path):
    drawn = mermaid_draw.draw(["xychart-beta\n  bar [1, oops", "flowchart LR\n  a --> b",
                               "quadrantChart\n  title t\n  A: [0.3, 0.6]"], tmp_path)
    assert [d["ok"] for d in drawn] == [False, True, False]  # a syntax error; mermaid 12.3.0's NaN point colour


@needs_browser
def test_every_chart_of_the_examples_and_the_sweep_draws_in_a_browser(tables, tmp_path):
    charts = []
    for example in EXAMPLES:
        spec = load_spec(str(example), ())
        plan = resolve(spec, tables)
        charts += [(example.name, c) for c in plan.charts]
        for name, rows in candidate_layouts(spec, tables, plan).items():
            chart = candidates_chart(name, rows, plan.frameworks[name].layout.usable_gb)
            charts += [(f"{example.name} --candidates", chart)] if chart is not None else []
    charts += [(plan.job, c) for plan in _sweep_plans(tables, tmp_path) for c in plan.charts]
    assert {c.kind for _, c in charts} == {"memory", "pipeline", "time", "candidates"} and len(charts) > 150
    drawn = mermaid_draw.draw([c.source for _, c in charts], tmp_path)
    failed = [(where, c.kind, d.get("error")) for (where, c), d in zip(charts, drawn) if not d["ok"]]
    assert len(drawn) == len(charts) and not failed, failed
