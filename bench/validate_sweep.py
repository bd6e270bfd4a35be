"""The sweep behind the closing notes (not a test): for every framework, render every job the tables offer (each
model x method x seq_len row x platform it runs on) into a temporary folder, run `gen-launch validate`'s checks on
it, and count what comes out: generated (every file accepted), with a problem, or refused (with the reasons).

Run `python bench/validate_sweep.py [framework ...]`; it prints one block per framework. A few minutes on 2 cores
(bash -n and shellcheck run on every script).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

from generator.errors import UserError
from generator.render import render_files, write
from generator.resolve import resolve
from generator.spec import parse_spec
from generator.tables import load_tables
from generator.validate import validate


def cases(framework: str) -> list[dict]:
    tables = load_tables()
    fw = tables.frameworks[framework]
    found = set()
    for row in tables.min_cards:
        if row.framework == (framework if framework != "mindformers" else "mindspeed-llm"):
            methods = set(row.methods) | ({"pretrain"} if "full" in row.methods else set())
            for hw in tables.hardware.values():
                if framework in hw.frameworks:
                    found |= {(row.model, m, s, hw.name) for m in methods for s in row.seq_lens}
    for model in fw.models:
        for method in fw.methods_for(model) or fw.methods:
            for hw in tables.hardware.values():
                if framework in hw.frameworks:
                    found.add((model, method, 4096, hw.name))
    out = []
    for model, method, seq, hw in sorted(found):
        if model == "debug-tiny" or not tables.supports(framework, model) or method not in fw.methods:
            continue
        spec = {"job": "sweep", "model": model, "method": method, "seq_len": seq, "hardware": hw,
                "frameworks": [framework], "cluster": {"master_addr": "10.0.0.1"}}
        if method == "qlora":
            spec["quantization_bit"] = 4
        out.append(spec)
    return out


def run(framework: str) -> None:
    import yaml

    counts: Counter = Counter()
    refused: Counter = Counter()
    problems: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for spec in cases(framework):
            try:
                plan = resolve(parse_spec(yaml.safe_dump(spec).encode()), load_tables())
            except UserError as error:
                counts["refused"] += 1
                refused[str(error).split(": ", 1)[-1][:110]] += 1
                continue
            write(render_files(plan), Path(tmp), plan.job, overwrite=True)
            results = validate(Path(tmp) / plan.job)
            bad = [r for r in results if r.status == "problem"]
            counts["generated"] += 1
            counts["accepted" if not bad else "problem"] += 1
            counts.update(f"files {r.status}" for r in results)
            for r in bad:
                problems[f"{r.path}: {r.detail[:110]}"] += 1
    print(f"== {framework}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for reason, n in refused.most_common():
        print(f"  refused x{n}: {reason}")
    for problem, n in problems.most_common(20):
        print(f"  problem x{n}: {problem}")


if __name__ == "__main__":
    for name in sys.argv[1:] or load_tables().frameworks:
        run(name)
