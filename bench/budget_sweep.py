"""Time-budget jobs up to 4,096 cards: the cards gen-launch chooses, the fewest that meet the budget by brute force,
and the time each plan (or refusal) takes.

    python bench/budget_sweep.py [--quick]

For each job (MindSpeed-LLM on snt9b, where the step model times layouts; a pinned layout that never fits among
them) the plan's card count, layout and hours, and the seconds `resolve` took (CPU and wall). Then every count the
platform allows from the search's first up to the one chosen is laid out in turn with the search's own trials
(resolve._BudgetTrials: the same layout search and step model, no bisection), and `fewest` is the first that meets
the budget, with the same preference for a count that keeps the defaulted global batch; `ok` says whether the plan
took it. --quick leaves out the brute force above 1,024 cards.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.cards import auto_cards, valid_counts  # noqa: E402
from generator.context import Context  # noqa: E402
from generator.errors import SpecError  # noqa: E402
from generator.recipe import adapter  # noqa: E402
from generator.resolve import KEEP_BATCH_COUNTS, _BudgetTrials, resolve  # noqa: E402
from generator.spec import Pins, Spec  # noqa: E402
from generator.tables import load_tables  # noqa: E402

FRAMEWORK, HARDWARE, TOP = "mindspeed-llm", "snt9b", 4096
JOBS = [(model, method, tokens, budget, None)
        for model, tokens in (("qwen3-8b", 2e10), ("qwen3-32b", 2e10), ("llama3.1-70b", 5e10), ("qwen2.5-72b", 5e10))
        for method in ("full", "pretrain") for budget in (24, 72, 168)]
JOBS += [("qwen3_moe-235b_a22b", "full", tokens, 100, None) for tokens in (5e10, 1e11, 2e11, 4e11)]
JOBS += [("qwen3_moe-30b_a3b", "pretrain", tokens, 48, None) for tokens in (1e11, 4e11)]
JOBS += [("qwen2.5-14b", "full", 2e10, 48, Pins(tp=1, pp=1, recompute="none"))]  # never fits: refused


def spec(model: str, method: str, tokens: float, budget: float, pins: Pins | None) -> Spec:
    return Spec(job="b", model=model, method=method, seq_len=4096, hardware=HARDWARE, frameworks=(FRAMEWORK,),
                cards=None, sha256="", total_tokens=int(tokens), time_budget_hours=budget,
                layout={FRAMEWORK: pins} if pins else {})


def fewest(job: Spec, tables, fp, upto: int) -> int | None:
    """The fewest count from the search's first (`fp`'s minimum and budget count) to `upto` that meets the budget,
    by laying out every count in turn."""
    model, hw, fw = tables.model(job.model), tables.hardware[HARDWARE], tables.frameworks[FRAMEWORK]
    ctx = Context(job, model, hw, fw, False, adapter(job, tables.recipes[job.method]), tables.recipes[job.method])
    start = auto_cards(ctx, fp.min_cards, fp.estimate.budget_cards, [])
    counts = list(itertools.islice(valid_counts(hw, start), KEEP_BATCH_COUNTS + 1))  # where a kept batch may be
    counts += itertools.takewhile(lambda n: n <= upto, valid_counts(hw, counts[-1] + 1))
    trials = _BudgetTrials(ctx, tables, counts, job.train_tokens, job.time_budget_hours)
    first = next((i for i in range(len(counts)) if trials.meets(i)), None)
    return None if first is None else counts[trials.keeping_batch(first)]


def main() -> None:
    quick = "--quick" in sys.argv
    tables = load_tables()
    print(f"{'model':21} {'method':8} {'tokens':>6} {'h':>4} {'cards':>6} {'hours':>6} {'cpu_s':>6} {'wall_s':>6} "
          f"{'fewest':>6} ok  layout / refusal")
    for model, method, tokens, budget, pins in JOBS:
        job = spec(model, method, tokens, budget, pins)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            fp = resolve(job, tables).frameworks[FRAMEWORK]
        except SpecError as exc:
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{model:21} {method:8} {tokens:6.0e} {budget:4} {'-':>6} {'-':>6} {cpu:6.2f} {wall:6.2f} "
                  f"{'':>6} {'':2}  refused: {str(exc)[:150]}", flush=True)
            continue
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        lay, took = fp.layout, fp.estimate.time_hours
        best = None if quick and lay.cards > 1024 else fewest(job, tables, fp, lay.cards)
        ok = "-" if best is None else "y" if best == lay.cards else "N"
        print(f"{model:21} {method:8} {tokens:6.0e} {budget:4} {lay.cards:6} {took:6.1f} {cpu:6.2f} {wall:6.2f} "
              f"{best or '':>6} {ok:2}  {lay.describe()}", flush=True)


if __name__ == "__main__":
    main()
