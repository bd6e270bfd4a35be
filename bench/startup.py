"""Start-up: `gen-launch plan` on every bundled example, and `render` of a 512-card MindSpeed-LLM job, against
`python -c "import click, jinja2, yaml"` (the libraries every command needs), measured side by side in one run: the
commands alternate, several repetitions, and the medians of wall and CPU seconds (CPU: user + system of the child,
less disturbed by other load on the machine), and the least CPU seconds of each (other load only adds to a run's
time, so on a busy shared machine the least is the steadier figure, as `timeit` advises).

    python bench/startup.py [REPEAT]

Bytecode is cached as an installed package has it: the children run without PYTHONDONTWRITEBYTECODE after one
warm-up run each, which also keeps the templates' compiled code (generator/templating.py `_CompiledTemplates`). Targets
(issues 26, 35): plan at most 2x the bare imports on every example, render of the 512-card job at most 3x.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(path.relative_to(REPO).as_posix() for path in (REPO / "examples").glob("*.yaml"))
BARE = "bare imports"
# The 512-card MindSpeed-LLM job: the 70B pretraining example on 64 nodes, rendered into a temporary folder.
RENDER = ["render", "examples/llama3.1-70b-pretrain-budget.yaml", "--set", "cards=512", "--overwrite", "-o"]


def commands(out: str) -> dict[str, list[str]]:
    generator = [sys.executable, "-m", "generator"]
    return {BARE: [sys.executable, "-c", "import click, jinja2, yaml"],
            **{f"plan {Path(example).stem}": [*generator, "plan", example] for example in EXAMPLES},
            "render 512-card mindspeed-llm": [*generator, *RENDER, out]}


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `args`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, cwd=REPO, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as out:
        todo = commands(out)
        for args in todo.values():
            run(args, env)  # warm-up: bytecode written, files in the page cache
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
        for _ in range(repeat):
            for name, args in todo.items():
                times[name].append(run(args, env))
    wall = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    least = {name: min(t[1] for t in runs) for name, runs in times.items()}
    for name in todo:
        print(f"{name:42} wall {wall[name] * 1000:5.0f} ms ({wall[name] / wall[BARE]:.2f}x)   "
              f"CPU {cpu[name] * 1000:5.0f} ms ({cpu[name] / cpu[BARE]:.2f}x)   "
              f"least CPU {least[name] * 1000:5.0f} ms ({least[name] / least[BARE]:.2f}x)")
    print(f"median of {repeat}, alternating; least: the run the machine's other load disturbed least")


if __name__ == "__main__":
    main()
