"""Benchmarks (not tests): plan every row of the minimum-card table for every framework and hardware, and render
one 512-card job, in-process and as a fresh `gen-launch render` process against the bare import start-up.
Run `python bench/bench.py`; it prints wall times (medians of repeated runs for the processes).

Targets on the 2-core CI machine: the whole sweep well under 10 s; a 512-card render process under 3x the bare
`python -c "import click, jinja2, yaml, jsonschema"` start-up.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from generator.errors import SpecError
from generator.render import render_files, write
from generator.resolve import resolve
from generator.spec import Spec
from generator.tables import load_tables

REPO = Path(__file__).resolve().parent.parent
SPEC_512 = """job: deepseek-v3-full-snt9b-512c
model: deepseek-v3
method: full
seq_len: 4096
hardware: snt9b
frameworks: [mindformers, mindspeed-llm]
cards: 512
cluster: {master_addr: 10.0.0.1}
"""


def sweep() -> tuple[int, int, float]:
    """Every (model, method, seq_len) of the table on every hardware, for every framework serving the model."""
    tables = load_tables()
    cases = {(r.model, m, s, hw) for r in tables.min_cards for m in r.methods for s in r.seq_lens
             for hw in tables.hardware}
    planned = refused = 0
    start = time.perf_counter()
    for model, method, seq, hw in sorted(cases):
        for framework in tables.frameworks:
            if not tables.supports(framework, model) or framework not in tables.hardware[hw].frameworks:
                continue
            spec = Spec(job="bench", model=model, method=method, seq_len=seq, hardware=hw, frameworks=(framework,),
                        cards=None, sha256="0" * 64)
            try:
                resolve(spec, tables)
                planned += 1
            except SpecError:
                refused += 1  # a '-' cell: refused without --force, as the table says
    return planned, refused, time.perf_counter() - start


def render_in_process(spec_path: Path) -> tuple[float, int]:
    from generator.spec import load_spec
    start = time.perf_counter()
    plan = resolve(load_spec(spec_path), load_tables())
    files = render_files(plan)
    with tempfile.TemporaryDirectory() as out:
        write(files, Path(out), plan.job, overwrite=False)
    return time.perf_counter() - start, plan.cards


def process_seconds(args: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, cwd=REPO)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    load_tables()  # the one-time table load is start-up, not planning
    planned, refused, seconds = sweep()
    print(f"sweep: {planned} plans + {refused} refused '-' cells in {seconds:.2f} s "
          f"({1000 * seconds / (planned + refused):.1f} ms each)")
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "job.yaml"
        spec.write_text(SPEC_512, encoding="utf-8")
        seconds, cards = render_in_process(spec)
        print(f"render in process: one {cards}-card job (DeepSeek-V3 full, MindFormers + MindSpeed-LLM) "
              f"in {seconds * 1000:.0f} ms")
        bare = process_seconds([sys.executable, "-c", "import click, jinja2, yaml, jsonschema"])
        full = process_seconds([sys.executable, "-m", "generator", "render", str(spec), "-o", str(Path(tmp) / "o"),
                                "--force"])
    print(f"processes (median of 5): bare imports {bare * 1000:.0f} ms; gen-launch render of the 512-card job "
          f"{full * 1000:.0f} ms; ratio {full / bare:.1f}x")
