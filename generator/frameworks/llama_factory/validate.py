"""LLaMA-Factory's checks of the files it wrote, for `gen-launch validate`: train.yaml and its DeepSpeed file through
its argument list offline and, when installed, its own parser (checks.py); dataset_info.json's columns against the
data file."""

from __future__ import annotations

import json

from ...checks.job import NO_PLAN, Job, Result, text, yaml_mapping
from ...jobdir import safe_relative
from . import checks

NAME = "llama-factory"
INSTALL_HINT = "bash scripts/install.sh validate from a clone of gen-launch"


def check(job: Job, path: str) -> Result | None:
    if path == f"{NAME}/train.yaml":
        return _train_yaml(job, path)
    if path == f"{NAME}/dataset_info.json":
        try:
            doc = json.loads(text(job.folder / path))
        except ValueError:
            return None  # validate reports the syntax
        problems = checks.columns_problems(doc)
        return Result(path, "problem", "; ".join(problems)) if problems else None
    return None


def _train_yaml(job: Job, path: str) -> Result:
    file, world, model = job.folder / path, job.layout_value(NAME, "cards"), job.model
    train, error = yaml_mapping(file)
    if train is None or world is None or model is None:
        return Result(path, "problem", error or NO_PLAN)
    batch = job.layout_value(NAME, "global_batch_size")
    ds_name = train.get("deepspeed")
    try:
        if ds_name is not None and not (isinstance(ds_name, str) and safe_relative(ds_name)):
            raise ValueError("not a path inside the job folder")
        ds = json.loads(text(file.parent / ds_name)) if ds_name else None
    except ValueError as exc:
        return Result(path, "problem", f"its deepspeed file {ds_name!r} cannot be read: {exc}")
    problems = checks.llamafactory_problems(train, ds, world, batch)
    template = checks.template_problem(train.get("template"), model.name, job.framework(NAME))
    problems += [template] if template else []
    problems += checks.lora_target_problems(train.get("lora_target"), model.name, job.framework(NAME))
    try:
        info = json.loads(text(file.parent / "dataset_info.json"))
    except ValueError:
        info = None
    rows = checks.rows_problem(info, job.plan.data_rows if job.plan else None)
    problems += [rows] if rows else []
    if problems:
        return Result(path, "problem", "; ".join(problems))
    if not checks.llamafactory_installed():
        return Result(path, "skipped", f"LLaMA-Factory's own parser and DeepSpeed's config class not installed "
                                       f"({INSTALL_HINT}); argument names, types and batch checked offline")
    status, detail = checks.llamafactory_parser_check(file.parent, world, model.hidden, batch or 0)
    if status == "problem":
        return Result(path, "problem", f"LLaMA-Factory / transformers / DeepSpeed reject it: {detail}")
    if status == "env":
        return Result(path, "env", f"LLaMA-Factory's own check could not run here ({detail}); the offline checks "
                                   f"passed. If a package does not import, reinstall with: {INSTALL_HINT}")
    return Result(path, "ok")
