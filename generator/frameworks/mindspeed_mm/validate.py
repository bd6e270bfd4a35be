"""MindSpeed-MM's checks of the files it wrote, for `gen-launch validate` (the rules: checks.py)."""

from __future__ import annotations

from pathlib import PurePosixPath

from ...checks.job import NO_PLAN, Job, Result
from . import checks

NAME = "mindspeed-mm"


def check(job: Job, path: str) -> Result | None:
    name = PurePosixPath(path).name
    if name not in ("launch.sh", "convert_ckpt.sh", "model.json"):
        return None
    problems = job.once(NAME, lambda: checks.job_problems(job.folder / NAME, job.model)).get(name, [])
    if name == "launch.sh" and job.model is None:
        problems = [*problems, NO_PLAN]
    return Result(path, "problem", "; ".join(problems)) if problems else None
