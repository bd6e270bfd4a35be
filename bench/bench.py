"""Benchmarks (not tests): plan every row of the minimum-card table for every framework and hardware, and render
one 512-card job. Prints wall times; run `python bench/bench.py`.

Targets: the whole sweep well under 10 s on the 2-core CI machine; a 512-card render under 1 s after start-up.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generator.errors import SpecError
from generator.render import render_files, write
from generator.resolve import resolve
from generator.spec import FRAMEWORKS, Spec
from generator.tables import load_tables

REPO = Path(__file__).resolve().parent.parent


def sweep() -> tuple[int, int, float]:
    tables = load_tables()
    cases = {(r.model, m, s, hw) for r in tables.min_cards for m in r.methods for s in r.seq_lens
             for hw in ("snt9b", "snt9b23")}
    planned = refused = 0
    start = time.perf_counter()
    for model, method, seq, hw in sorted(cases):
        for framework in FRAMEWORKS:
            if not tables.supports(framework, model):
                continue
            spec = Spec(job="bench", model=model, method=method, seq_len=seq, hardware=hw, frameworks=(framework,),
                        cards=None, sha256="0" * 64)
            try:
                resolve(spec, tables)
                planned += 1
            except SpecError:
                refused += 1  # a '-' cell: refused without --force, as the table says
    return planned, refused, time.perf_counter() - start


def render_512() -> tuple[float, int]:
    spec = Spec(job="deepseek-v3-512", model="deepseek-v3", method="full", seq_len=4096, hardware="snt9b",
                frameworks=("mindspeed-llm", "mindformers"), cards=512, sha256="0" * 64)
    start = time.perf_counter()
    plan = resolve(spec, load_tables())
    files = render_files(plan)
    with tempfile.TemporaryDirectory() as out:
        write(files, Path(out), plan.job, force=False)
    return time.perf_counter() - start, plan.cards


def cli_seconds(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


if __name__ == "__main__":
    load_tables()  # the one-time table load is start-up, not planning
    planned, refused, seconds = sweep()
    print(f"sweep: {planned} plans + {refused} refused '-' cells in {seconds:.2f} s "
          f"({1000 * seconds / (planned + refused):.1f} ms each)")
    seconds, cards = render_512()
    print(f"render: one {cards}-card job (DeepSeek-V3 full, MindSpeed-LLM + MindFormers) in {seconds * 1000:.0f} ms")
    bare = cli_seconds([sys.executable, "-c", "import click, jinja2, yaml, jsonschema"])
    with tempfile.TemporaryDirectory() as out:
        example = "examples/qwen3-32b-full-snt9b-16c.yaml"
        full = cli_seconds([sys.executable, "-m", "generator", "render", example, "-o", out])
    print(f"start-up: bare imports {bare * 1000:.0f} ms; `gen-launch render` of the example end to end "
          f"{full * 1000:.0f} ms")
