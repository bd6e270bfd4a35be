"""Start-up: `gen-launch plan` on the bundled example against `python -c "import click, jinja2, yaml"` (the
libraries every command needs), measured side by side in one run: the two alternate, several repetitions, and the
medians of wall and CPU seconds (CPU: user + system of the child, less disturbed by other load on the machine).

    python bench/startup.py [REPEAT]

Bytecode is cached as an installed package has it: the children run without PYTHONDONTWRITEBYTECODE after one
warm-up run each, which also keeps the templates' compiled code (generator/render `_CompiledTemplates`). Target
(issue 26): plan at most 2x the bare imports.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/qwen3-32b-full-snt9b-16c.yaml"
COMMANDS = {
    "bare imports": [sys.executable, "-c", "import click, jinja2, yaml"],
    "gen-launch plan": [sys.executable, "-m", "generator", "plan", EXAMPLE],
}


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
    for args in COMMANDS.values():
        run(args, env)  # warm-up: bytecode written, files in the page cache
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(repeat):
        for name, args in COMMANDS.items():
            times[name].append(run(args, env))
    wall = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    bare = "bare imports"
    for name in COMMANDS:
        print(f"{name:16} wall {wall[name] * 1000:5.0f} ms ({wall[name] / wall[bare]:.2f}x)   "
              f"CPU {cpu[name] * 1000:5.0f} ms ({cpu[name] / cpu[bare]:.2f}x)")
    print(f"median of {repeat}, alternating; plan / bare imports: {wall['gen-launch plan'] / wall[bare]:.2f}x wall, "
          f"{cpu['gen-launch plan'] / cpu[bare]:.2f}x CPU")


if __name__ == "__main__":
    main()
