"""The plan in pictures: Mermaid charts PLAN.md shows (GitHub and GitLab draw them), and `plan --candidates
--mermaid` prints.

- memory per card of each framework and role against the search budget (usable less the headroom);
- the pipeline split: which stage holds the embedding, how many layers, the output layer;
- time against cards for the chosen layout: its tp / pp / cp kept, data-parallel ranks added, each count timed by
  the planner's throughput model (throughput.py, the multi-node scaling efficiency included) and the time formula,
  with the time budget as a line;
- candidates (`plan --candidates`): memory per card against tokens/s per card, as a quadrant chart.

Each function returns the chart's Mermaid source, or None where the plan has nothing to draw. Numbers are written
rounded, so the text is byte-stable."""

from __future__ import annotations

import math
from dataclasses import replace

from .api.frozen import frozen
from .plan import FrameworkPlan, Layout, Plan
from .tables import TRAINING_METHODS, Tables
from .throughput import hours, throughput

MAX_POINTS = 9  # card counts on a time chart
# mermaid 12.3.0's default theme fills quadrant points with hsl(240, 100%, NaN%): nothing is drawn.
QUADRANT_COLOURS = '%%{init: {"themeVariables": {"quadrantPointFill": "#4e79a7"}}}%%'
# Two series a reader tells apart (the default palette draws the first line in a pale lilac): the plan, the limit.
XY_COLOURS = '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#4e79a7, #e15759"}}}}%%'
MAX_CANDIDATES = 6  # points on a candidates chart
SPAN = 8  # a time chart's counts: from the plan's / SPAN to the plan's x SPAN


@frozen
class Chart:
    """One chart of the plan: its kind, its title and its Mermaid source."""

    kind: str  # memory | pipeline | time | candidates
    title: str
    source: str  # Mermaid


def _labels(names: list[str]) -> str:
    return "[" + ", ".join(f'"{name}"' for name in names) + "]"


def _numbers(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.1f}" for v in values) + "]"


def memory_chart(plan: Plan) -> Chart:
    """A bar per framework and role: GiB per card on its most loaded stage; a line: the budget it must stay under."""
    names, used, budget = [], [], []
    for name, fp in plan.frameworks.items():
        for kind, role in fp.roles.items():
            names.append(name if len(fp.roles) == 1 else f"{name} {kind}")
            used.append(role.layout.memory.total)
            budget.append(role.layout.budget_gb)
    top = math.ceil(max(*used, *budget, max(r.layout.usable_gb for fp in plan.frameworks.values()
                                            for r in fp.roles.values())) / 8) * 8
    title = "Memory per card (GiB): bars, the plan; line, the budget (usable less headroom)"
    return Chart("memory", title, "\n".join([
        XY_COLOURS, "xychart-beta", '  title "Memory per card (GiB)"', f"  x-axis {_labels(names)}",
        f'  y-axis "GiB per card" 0 --> {top}', f"  bar {_numbers(used)}", f"  line {_numbers(budget)}"]))


def pipeline_chart(name: str, fp: FrameworkPlan) -> Chart | None:
    """The stages of a pipeline-parallel layout, left to right, with what each holds."""
    lay = fp.layout
    if lay.pp <= 1 or not lay.num_layer_list:
        return None
    nodes = []
    for stage, layers in enumerate(lay.num_layer_list):
        held = (["embedding"] if stage == 0 else []) + [f"{layers} layers"] + \
            ([f"{lay.mtp_layers} MTP layer(s)"] if stage == lay.pp - 1 and lay.mtp_layers else []) + \
            (["output layer"] if stage == lay.pp - 1 else [])
        nodes.append(f'  s{stage}["stage {stage}: {" + ".join(held)}"]')
    links = " --> ".join(f"s{stage}" for stage in range(lay.pp))
    title = (f"{name}: pipeline of {lay.pp} stages, tp {lay.tp} x cp {lay.cp} x dp {lay.dp} cards each "
             f"({lay.cards} in all)")
    return Chart("pipeline", title, "\n".join(["flowchart LR", *nodes, f"  {links}"]))


def time_chart(plan: Plan, tables: Tables, name: str) -> Chart | None:
    """Estimated hours at other card counts for the chosen layout (more or fewer data-parallel ranks), with the
    time budget."""
    fp = plan.frameworks[name]
    points = time_points(plan, tables, name)
    if not points:
        return None
    counts = [c for c, _ in points]
    title = f"{name}: estimated hours against cards (tp {fp.layout.tp} x pp {fp.layout.pp} x cp {fp.layout.cp} kept)"
    lines = [XY_COLOURS, "xychart-beta", f'  title "{name}: hours by cards"',
             f'  x-axis "cards" {_labels([str(c) for c in counts])}',
             f'  y-axis "hours" 0 --> {math.ceil(max(max(h for _, h in points), plan.time_budget_hours or 0) * 1.1)}',
             f"  line {_numbers([h for _, h in points])}"]
    if plan.time_budget_hours is not None:
        lines.append(f"  line {_numbers([plan.time_budget_hours] * len(points))}")
    return Chart("time", title + ("; flat line: the time budget" if plan.time_budget_hours is not None else ""),
                 "\n".join(lines))


def time_points(plan: Plan, tables: Tables, name: str) -> list[tuple[int, float]]:
    """(cards, hours) for the chosen layout at the data-parallel sizes that tile its global batch, in whole nodes
    above one node, within a factor SPAN of the plan's count, at most MAX_POINTS (its own included). Empty
    without a time estimate."""
    fp = plan.frameworks[name]
    lay, est = fp.layout, fp.estimate
    # RL rates are the plugin's own (published throughput), not the throughput model's: no curve for them yet.
    if plan.method not in TRAINING_METHODS or not fp.primary.trains or est.time_hours is None \
            or est.total_tokens is None or est.tokens_per_card_s <= 0:
        return []
    per_rank = lay.tp * lay.pp * lay.cp
    counts = [per_rank * dp for dp in range(1, lay.global_batch_size // lay.micro_batch_size + 1)
              if lay.global_batch_size % (lay.micro_batch_size * dp) == 0]
    counts = [c for c in counts if (c <= plan.cards_per_node or c % plan.cards_per_node == 0)
              and lay.cards / SPAN <= c <= lay.cards * SPAN]
    counts = _around(counts, lay.cards)
    fw, hw = tables.frameworks[name], tables.hardware[plan.hardware]
    measured = None if est.is_estimate else est.tokens_per_card_s
    # The time formula divides by the spec's scaling efficiency where it gave one (then the rate has none): the
    # plan's own numbers say which, and how much. Where the plan capped its layout's rate (scaling.py: per-card
    # efficiency does not rise with scale), every count keeps the same share of the layout's own rate.
    efficiency = est.total_tokens / (est.tokens_per_card_s * lay.cards * est.time_hours * 3600.0)
    own = est.tokens_per_card_s / est.rate_share
    given = not math.isclose(_rate(plan, fw, hw, lay, measured, False), own, rel_tol=1e-9)
    return [(c, round(hours(est.total_tokens, _rate(plan, fw, hw, replace(lay, cards=c), measured, given)
                            * est.rate_share, c, efficiency), 2)) for c in counts]


def _rate(plan: Plan, fw, hw, lay: Layout, measured: float | None, given: bool) -> float:
    return throughput(plan.shape, plan.method, plan.seq_len, fw, hw, measured, lay, given).tokens_per_card_s


def _around(counts: list[int], chosen: int) -> list[int]:
    """At most MAX_POINTS counts, geometrically spread, the chosen one among them."""
    if len(counts) <= MAX_POINTS:
        return counts
    step = (len(counts) - 1) / (MAX_POINTS - 1)
    picked = {counts[round(i * step)] for i in range(MAX_POINTS - 1)} | {chosen}
    return sorted(picked)


def candidates_chart(name: str, rows: list, usable_gb: float) -> Chart | None:
    """Each layout that fits: memory per card (share of the usable memory) across, tokens/s per card (share of the
    fastest) up. `rows`: resolve.Candidate of one framework."""
    rated = [r for r in rows if r.rate.tokens_per_card_s > 0]
    if not rated:
        return None
    # The fastest few and the plan's own: more labels overlap past reading (the JSON lists them all).
    kept = sorted(rated, key=lambda r: -r.rate.tokens_per_card_s)[:MAX_CANDIDATES]
    rated = [r for r in rated if r in kept or r.chosen]
    fastest = max(r.rate.tokens_per_card_s for r in rated)
    title = f"{name}: layouts that fit, memory against speed"
    points = [f"  {_short(r.layout)}{' plan' if r.chosen else ''}: "
              f"[{_unit(r.layout.memory.total / usable_gb)}, {_unit(r.rate.tokens_per_card_s / fastest)}]"
              for r in rated]
    return Chart("candidates", title, "\n".join([
        QUADRANT_COLOURS, "quadrantChart", f"  title {name} layouts that fit",
        f"  x-axis Less memory per card --> All {usable_gb:g} GiB usable",
        "  y-axis Slower --> Fastest tokens per card", "  quadrant-1 fast, little headroom",
        "  quadrant-2 fast, room to spare", "  quadrant-3 slow, room to spare", "  quadrant-4 slow, little headroom",
        *points]))


def _unit(share: float) -> str:
    """A share in [0, 1] as a quadrant chart's coordinate, kept off the edges (where the quadrant labels are)."""
    return f"{0.05 + 0.9 * min(max(share, 0.0), 1.0):.3f}"


def _short(lay: Layout) -> str:
    """A layout as a quadrant chart's point label takes it (letters, digits and spaces), sizes of 1 left out."""
    sizes = [f"tp{lay.tp}", f"pp{lay.pp}"] + [f"{key}{value}" for key, value in (
        ("cp", lay.cp), ("ep", lay.ep), ("mbs", lay.micro_batch_size)) if value > 1]
    return " ".join([*sizes, *([lay.recompute] if lay.recompute != "none" else []),
                     *([f"zero{lay.zero_stage}"] if lay.zero_stage is not None else []),
                     *(["offload"] if lay.offload else [])])


def plan_charts(plan: Plan, tables: Tables) -> list[Chart]:
    """Every chart PLAN.md shows for `plan`, in its order."""
    charts = [memory_chart(plan)]
    for name, fp in plan.frameworks.items():
        charts += [c for c in (pipeline_chart(name, fp), time_chart(plan, tables, name)) if c is not None]
    return charts


def markdown(chart: Chart) -> str:
    """A chart as a fenced Mermaid block with its title in words above it (for readers that do not draw)."""
    return f"{chart.title}:\n\n```mermaid\n{chart.source}\n```\n"
