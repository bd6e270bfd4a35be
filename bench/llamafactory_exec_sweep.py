"""The execution tier over every LLaMA-Factory model row x method (not a test; CI runs the covering subset in
tests/test_llamafactory_exec.py): render each job, run its launch.sh unchanged with the real llamafactory-cli on a
tiny model of the row's family for two steps, then `gen-launch validate` the files. Prints the counts the closing
notes give: jobs, refused by gen-launch (with the reason), not runnable on this machine (with the reason), run,
trained (exit 0, two steps, finite loss, validate ok), failed (with the log's tail).

Needs the test extra (README). `python bench/llamafactory_exec_sweep.py [ROW-METHOD ...]`; about 25 minutes for
all jobs on 2 cores.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import llamafactory_exec as X  # noqa: E402


def trained(result: X.Result) -> bool:
    state = result.trainer_state
    losses = [entry["loss"] for entry in state.get("log_history", []) if "loss" in entry]
    return (result.returncode == 0 and state.get("global_step") == 2 and len(losses) == 2
            and all(math.isfinite(loss) for loss in losses) and result.validate.returncode == 0)


def main(names: list[str]) -> int:
    jobs = [job for job in X.all_jobs() if not names or job.name in names]
    refused = [job for job in jobs if job.refusal]
    elsewhere = [job for job in jobs if job.runnable and not job.refusal]
    todo = [job for job in jobs if not (job.refusal or job.runnable)]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        X.write_models(todo, root / "models")
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda i: X.run(todo[i], root / todo[i].name, 29800 + i, root / "models",
                                                    validate=True), range(len(todo))))
        ok = [r for r in results if trained(r)]  # reads the outputs, before the folder goes
    failed = [r for r in results if r not in ok]
    print(f"LLaMA-Factory rows x methods: {len(jobs)}; refused by gen-launch: {len(refused)}; not runnable here: "
          f"{len(elsewhere)}; run: {len(results)}; trained two steps and validated: {len(ok)}; "
          f"failed: {len(results) - len(ok)}  ({time.monotonic() - start:.0f} s)")
    for reason, count in Counter(job.refusal for job in refused).items():
        print(f"  refused x{count}: {reason}")
    for reason, count in Counter(job.runnable for job in elsewhere).items():
        print(f"  not runnable here x{count}: {reason}")
    for result in failed:
        print(f"  FAILED {result.job.name} (exit {result.returncode}):\n    "
              + "\n    ".join((result.log + result.validate.stdout).splitlines()[-15:]))
    for result in sorted(results, key=lambda r: -r.seconds)[:5]:
        print(f"  slowest: {result.job.name} {result.seconds:.0f} s")
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
