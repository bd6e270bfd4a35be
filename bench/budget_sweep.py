"""Time-budget jobs up to 4,096 cards: the cards gen-launch chooses, the fewest that meet the budget by brute force,
and the time each plan (or refusal) takes.

    python bench/budget_sweep.py [--quick]

For each job (MindSpeed-LLM on snt9b, where the step model times layouts; a pinned layout that never fits among
them) the plan's card count, global batch, layout and hours, and the CPU and wall seconds `resolve` took. Then the
brute force, which shares nothing with the budget search: every count the platform allows, from the framework's
minimum up to 4,096 cards, is planned as a spec with `cards` and the plan's `global_batch_size` would be (a count no
layout takes at that batch is passed over), and `fewest` is the first whose time meets the budget; `ok` says whether
the plan took it. Where the plan moved the batch off the method's target, `@target` is the fewest count up to the
plan's that meets the budget at the target (none is right: the search moves the batch only when no count does). A
refusal is checked the same way at the target: `fewest` must be empty. --quick stops each brute force at the plan's
count (all that the plan's claim needs).

The last lines give the slowest plan's CPU seconds and PASS or FAIL: every plan (and refusal) in under LIMIT_S CPU
seconds and every `ok` a y (issue 26); the exit status is 1 on FAIL. CPU seconds, not wall: the machine is shared.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.cards import valid_counts  # noqa: E402
from generator.errors import SpecError  # noqa: E402
from generator.resolve import resolve  # noqa: E402
from generator.spec import Pins, Spec  # noqa: E402
from generator.tables import load_tables  # noqa: E402

FRAMEWORK, HARDWARE, TOP = "mindspeed-llm", "snt9b", 4096
LIMIT_S = 2.0  # issue 26: each plan or refusal in under 2 s
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


def fewest(job: Spec, tables, start: int, upto: int, batch: int) -> int | None:
    """The fewest count from `start` to `upto` whose plan at `cards` and global batch `batch` meets the budget."""
    for n in valid_counts(tables.hardware[HARDWARE], start):
        if n > upto:
            return None
        try:
            fp = resolve(replace(job, cards=n, global_batch_size=batch), tables).frameworks[FRAMEWORK]
        except SpecError:
            continue
        if fp.estimate.time_hours <= job.time_budget_hours * 1.0001:
            return n
    return None


def main() -> None:
    quick = "--quick" in sys.argv
    tables = load_tables()
    print(f"{'model':21} {'method':8} {'tokens':>6} {'h':>4} {'cards':>6} {'batch':>5} {'hours':>6} {'cpu_s':>6} "
          f"{'wall_s':>6} {'fewest':>6} ok {'@target':>7}  layout / refusal")
    slowest, wrong = (0.0, ""), []
    for model, method, tokens, budget, pins in JOBS:
        name = f"{model} {method} {tokens:.0e} {budget} h"
        job = spec(model, method, tokens, budget, pins)
        target = tables.recipes[method].values["global_batch_size"]["value"]
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            plan = resolve(job, tables)
        except SpecError as exc:
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best = None if pins else fewest(job, tables, 1, TOP, target)
            print(f"{model:21} {method:8} {tokens:6.0e} {budget:4} {'-':>6} {'-':>5} {'-':>6} {cpu:6.2f} {wall:6.2f} "
                  f"{best or '':>6} {'y' if best is None else 'N':2} {'':>7}  refused: {str(exc)[:150]}", flush=True)
            slowest, wrong = max(slowest, (cpu, name)), wrong + ([name] if best is not None else [])
            continue
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        fp = plan.frameworks[FRAMEWORK]
        lay, took, batch = fp.layout, fp.estimate.time_hours, plan.train.global_batch_size
        best = fewest(job, tables, fp.min_cards.value, lay.cards if quick else TOP, batch)
        ok = "y" if best == lay.cards else "N"
        at_target = "" if batch == target else str(fewest(job, tables, fp.min_cards.value, lay.cards, target) or "none")
        print(f"{model:21} {method:8} {tokens:6.0e} {budget:4} {lay.cards:6} {batch:5} {took:6.1f} {cpu:6.2f} "
              f"{wall:6.2f} {best or '':>6} {ok:2} {at_target:>7}  {lay.describe()}", flush=True)
        right = ok == "y" and at_target in ("", "none")
        slowest, wrong = max(slowest, (cpu, name)), wrong + ([] if right else [name])
    print(f"slowest plan: {slowest[0]:.2f} CPU s ({slowest[1]}); limit {LIMIT_S:g} s")
    passed = slowest[0] < LIMIT_S and not wrong
    print(("PASS" if passed else "FAIL") + (f": not on the fewest cards: {', '.join(wrong)}" if wrong else ""))
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
