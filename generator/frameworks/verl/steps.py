"""verl's steps before and after training: prepare_data.py (the spec's data -> the parquet files verl reads) and
merge.sh (the actor's FSDP checkpoint -> a HuggingFace model), from the plan's VerlSettings.prepare and .merge."""

from __future__ import annotations

import json

import jinja2

from ...plan import Plan
from .settings import VerlSettings

NAME = "verl"
# The paths the steps read or write: a placeholder among them is refused before anything runs.
PREPARE_PATHS = ("dataset", "output_dir")
MERGE_PATHS = ("output_dir",)
# The settings each step reads (prepare_data.py's SETTINGS, merge.sh's --flags): any other set is a planning bug.
PREPARE_KEYS = {"data_source", "ability", "format", "columns", "image_column", "val_share", "input", "output",
                "prompt_prefix", "prompt_suffix", "answer_rule", "answer_column", "rows", "literal_reward"}
MERGE_KEYS = {"backend", "checkpoints", "target_dir"}


def step_files(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    """{"verl/prepare_data.py", "verl/merge.sh"}: their text from the plan's settings."""
    settings = plan.frameworks[NAME].settings
    if not isinstance(settings, VerlSettings):
        raise TypeError(f"the verl plan holds no VerlSettings: {settings!r}")
    prepare = {item.key: item.to_json()["value"] for item in settings.prepare}
    merge = {item.key: str(item.value) for item in settings.merge}
    for step, keys, expected in (("prepare", set(prepare), PREPARE_KEYS), ("merge", set(merge), MERGE_KEYS)):
        if keys != expected:
            raise ValueError(f"verl's {step} settings hold {sorted(keys)}, the step reads {sorted(expected)}")
    placeholders = {key: plan.paths[key].value for key in PREPARE_PATHS if plan.paths[key].placeholder}
    # The settings reach the script as JSON text in a Python string literal (repr of an ASCII str is always one):
    # json.loads reads them back, nothing in them is ever code.
    literal = repr(json.dumps({**prepare, "placeholders": placeholders}, sort_keys=True))
    return {
        f"{NAME}/prepare_data.py": env.get_template(f"{NAME}/prepare_data.py.j2").render(
            job=plan.job, format=prepare["format"], settings=literal),
        f"{NAME}/merge.sh": env.get_template(f"{NAME}/merge.sh.j2").render(
            job=plan.job, backend=merge["backend"], checkpoints=merge["checkpoints"], target_dir=merge["target_dir"],
            used_paths=[(key, plan.paths[key].value) for key in MERGE_PATHS]),
    }
