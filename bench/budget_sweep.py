"""Time-budget jobs: the cards gen-launch chooses, and whether any layout, pinned by hand, meets the budget on fewer.

    python bench/budget_sweep.py > budget.tsv

For each job (model x method x budget, MindSpeed-LLM on snt9b, where the step model times layouts) the plan's card
count and layout; then every card count the platform allows below it is searched with each TP x PP pinned (pins
lift the search's bubble rule) and every recompute and micro batch, timed with the tool's own step model. A row
whose `fewer` column is not empty is a job a pinned layout meets with fewer cards than the tool chose.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.cards import valid_counts  # noqa: E402
from generator.context import Context  # noqa: E402
from generator.errors import SpecError  # noqa: E402
from generator.layouts import candidates, rate  # noqa: E402
from generator.recipe import adapter  # noqa: E402
from generator.resolve import resolve  # noqa: E402
from generator.spec import Pins, Spec  # noqa: E402
from generator.tables import load_tables  # noqa: E402
from generator.throughput import hours  # noqa: E402

FRAMEWORK, HARDWARE = "mindspeed-llm", "snt9b"
JOBS = [(model, method, tokens, budget)
        for model, tokens in (("qwen3-8b", 2e10), ("llama3.1-8b", 2e10), ("qwen3-32b", 2e10), ("qwen2.5-32b", 2e10),
                              ("llama3.1-70b", 5e10), ("qwen2.5-72b", 5e10))
        for method in ("full", "pretrain") for budget in (24, 72, 168)]


def spec(model: str, method: str, tokens: float, budget: float) -> Spec:
    return Spec(job="b", model=model, method=method, seq_len=4096, hardware=HARDWARE, frameworks=(FRAMEWORK,),
                cards=None, sha256="", total_tokens=int(tokens), time_budget_hours=budget)


def fewest_pinned(job: Spec, tables, start: int, below: int) -> tuple[int, str, float] | None:
    """The fewest cards from `start` (the job's minimum) below `below` on which some pinned layout fits and meets
    the budget."""
    model, hw, fw = tables.model(job.model), tables.hardware[HARDWARE], tables.frameworks[FRAMEWORK]
    for cards in valid_counts(hw, start):
        if cards >= below:
            return None
        for tp in (1, 2, 4, 8):
            for pp in (p for p in range(1, model.layers + 1) if cards % (tp * p) == 0):
                pinned = replace(job, cards=cards, layout={FRAMEWORK: Pins(tp=tp, pp=pp)})
                ctx = Context(pinned, model, hw, fw, True, adapter(pinned, tables.recipes[job.method]),
                              tables.recipes[job.method])
                try:
                    fitting, _, _ = candidates(ctx, cards)
                except SpecError:
                    continue
                for layout in fitting:
                    took = hours(job.train_tokens, rate(ctx, layout).tokens_per_card_s, cards, job.scaling_efficiency)
                    if took <= job.time_budget_hours:
                        return cards, layout.describe(), took
    return None


def main() -> None:
    tables = load_tables()
    print("model\tmethod\ttokens\tbudget_h\tcards\tlayout\thours\tfewer")
    for model, method, tokens, budget in JOBS:
        job = spec(model, method, tokens, budget)
        try:
            fp = resolve(job, tables).frameworks[FRAMEWORK]
        except SpecError as exc:
            print(f"{model}\t{method}\t{tokens:g}\t{budget}\trefused\t{exc}\t\t")
            continue
        lay, took = fp.layout, fp.estimate.time_hours
        better = fewest_pinned(job, tables, fp.min_cards.value, lay.cards) if took <= budget * 1.0001 else None
        fewer = "" if better is None else f"{better[0]} cards: {better[1]} ({better[2]:.1f} h)"
        print(f"{model}\t{method}\t{tokens:g}\t{budget}\t{lay.cards}\t{lay.describe()}\t{took:.1f}\t{fewer}",
              flush=True)


if __name__ == "__main__":
    main()
