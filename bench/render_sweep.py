"""Render every bundled example and every bench/spec_sweep.py spec into one folder (not a test), so two versions of
gen-launch can be compared byte for byte: `python bench/render_sweep.py DIR` on each, then `diff -r DIR1 DIR2`.

Each job lands in DIR/out/<job>/ (render's own folder), its spec in DIR/specs/ (plan.json records the spec's path
from DIR/out, so the same DIR name gives the same bytes); a refused spec leaves DIR/out/<job>.refused with render's
message.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

from spec_sweep import REPO, SPECS, cli


def render_all(target: Path) -> int:
    """Render into `target`/out; the number of specs render refused."""
    specs, out = target / "specs", target / "out"
    specs.mkdir(parents=True, exist_ok=True)
    jobs = []
    for example in sorted((REPO / "examples").glob("*.yaml")):
        jobs.append((Path(shutil.copy(example, specs)), False))
    for job in SPECS:
        path = specs / f"{job['job']}.yaml"
        path.write_text(yaml.safe_dump({k: v for k, v in job.items() if k != "FORCE"}, sort_keys=False))
        jobs.append((path, bool(job.get("FORCE"))))
    refused = 0
    for path, force in jobs:
        done = cli("render", str(path), "-o", str(out), "--overwrite", *(["--force"] if force else []))
        if done.returncode != 0:
            refused += 1
            (out / f"{path.stem}.refused").write_text(done.stderr)
    return refused


if __name__ == "__main__":
    target = Path(sys.argv[1]).resolve()
    target.mkdir(parents=True, exist_ok=True)
    print(f"{render_all(target)} refused", flush=True)
