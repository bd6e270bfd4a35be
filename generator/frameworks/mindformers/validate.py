"""MindFormers' checks of the files it wrote, for `gen-launch validate`: train.yaml through MindFormers' rules
(checks.py) and against launch.sh and preprocess_data.sh; opt-in, MindFormers' own loader in the interpreter the
user names (PYTHON_OPTION)."""

from __future__ import annotations

import re
from pathlib import Path

from ...api.output import CheckOption
from ...checks.job import NO_PLAN, Job, Result, text, yaml_mapping
from ...checks.plan_record import PlanRecord
from . import checks

NAME = "mindformers"
PYTHON_OPTION = CheckOption(
    "--mindformers-python", "GEN_LAUNCH_MINDFORMERS_PYTHON", "PYTHON",
    "An interpreter with mindformers and a MindSpore CPU build: also run MindFormers' own MindFormerConfig and "
    "check_rules on train.yaml (see README).")


def check(job: Job, path: str) -> Result | None:
    if path == f"{NAME}/predict.yaml":
        return _predict_yaml(job, path)
    return _train_yaml(job, path) if path == f"{NAME}/train.yaml" else None


def _msrun_world(launch: Path) -> int | None:
    """WORKER_NUM of the msrun_launcher.sh line in mindformers/launch.sh (1 for the one-card python line)."""
    script = text(launch)
    found = re.search(r'^  (\d+) (\d+) "\$MASTER_ADDR"', script, re.M)
    if found:
        return int(found.group(1))
    return 1 if re.search(r"^python run_mindformer\.py ", script, re.M) else None


def _data(doc: dict, plan: PlanRecord | None, folder: Path) -> str | None:
    """The data train.yaml must read: the spec's JSON file for HFDataLoader (Mcore fine-tuning), else what
    preprocess_data.sh writes."""
    loader = (doc.get("train_dataset") or {}).get("data_loader")
    if isinstance(loader, dict) and loader.get("type") == "HFDataLoader":
        dataset = plan.paths.get("dataset") if plan else None
        return dataset.value if dataset else None
    return checks.preprocessed_path(text(folder / "preprocess_data.sh"))


def _predict_yaml(job: Job, path: str) -> Result:
    """predict.yaml against upstream's keys and the inference rules, and launch.sh's worker count against it."""
    file, cards, model = job.folder / path, job.layout_value(NAME, "cards"), job.model
    doc, error = yaml_mapping(file)
    if doc is None or cards is None or model is None:
        return Result(path, "problem", error or NO_PLAN)
    problems = checks.predict_problems(doc, cards, model)
    launched = _msrun_world(file.parent / "launch.sh")
    if launched != cards:
        problems.append(f"launch.sh starts {launched} worker(s) for a {cards}-card YAML")
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return _own_loader(job, path, file, cards, "predict", ("MindFormers' MindFormerConfig rejects it",
                                                          "MindFormers' MindFormerConfig accepts it"))


def _own_loader(job: Job, path: str, file: Path, cards: int, mode: str, verdicts: tuple[str, str]) -> Result:
    """The opt-in tier: MindFormers' own loader on the file (`mode`: checks.loader_check's), in the interpreter the
    user names; `verdicts`: what a refusal and an acceptance say."""
    python = job.options.get(PYTHON_OPTION.dest)
    if python is None:
        return Result(path, "ok", f"MindFormers' own loader not run (opt-in: {PYTHON_OPTION.flag}, see README)")
    status, detail = checks.loader_check(python, file, cards, mode, job.model)
    if status == "problem":
        return Result(path, "problem", f"{verdicts[0]}: {detail}")
    if status == "env":
        return Result(path, "env", f"MindFormers does not run in {python} ({detail}); its rules passed offline")
    return Result(path, "ok", verdicts[1])


def _train_yaml(job: Job, path: str) -> Result:
    file, cards, model = job.folder / path, job.layout_value(NAME, "cards"), job.model
    doc, error = yaml_mapping(file)
    if doc is None or cards is None or model is None:
        return Result(path, "problem", error or NO_PLAN)
    problems = checks.mindformers_problems(doc, cards, model)
    problems += checks.data_loader_problems(doc, _data(doc, job.plan, file.parent))
    problems += checks.router_problems(doc, model)
    launched = _msrun_world(file.parent / "launch.sh")
    if launched != cards:
        problems.append(f"launch.sh starts {launched} worker(s) for a {cards}-card YAML")
    records = re.findall(r"--seq_length (\d+)", text(file.parent / "preprocess_data.sh"))
    seq = (doc.get("model") or {}).get("model_config", {}).get("seq_length")
    if records and {int(r) for r in records} != {seq}:
        problems.append(f"preprocess_data.sh builds MindRecord samples of {records[0]} tokens for seq_length {seq} "
                        f"(the legacy loader reads them as they are)")
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return _own_loader(job, path, file, cards, "train", ("MindFormers' MindFormerConfig / check_rules reject it",
                                                        "MindFormers' MindFormerConfig and check_rules accept it"))
