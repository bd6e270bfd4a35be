"""MindSpeed-LLM's checks of the files it wrote, for `gen-launch validate`: the words of their bash arrays, as bash
reads them, and the line that runs them; each command through its pinned parser and start-up rules (checks.py), then
the files against each other (conversion layout, data prefix and template) and against the model."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from ...checks.job import NO_PLAN, Job, Result, text
from ...checks.shell import assignment, bash_arrays
from ...families.megatron.launch import LOADING, launch_line
from ...jobdir import read_regular
from ...tables import Model
from . import checks

NAME = "mindspeed-llm"


def check(job: Job, path: str) -> Result | None:
    """Each script's problems, from the check of all of them together (made once per run)."""
    if not path.endswith(".sh"):
        return None
    name = PurePosixPath(path).name
    problems = job.once(NAME, lambda: job_problems(job.folder / NAME, job.model)).get(name, [])
    if name == "launch.sh" and job.model is None:
        problems = [*problems, NO_PLAN]
    return Result(path, "problem", "; ".join(problems)) if problems else None


def _python_lines(script: str) -> list[tuple[str, str, str]]:
    """(case label or "", script, array) of every `python SCRIPT "${ARRAY[@]}"` line; other python lines are
    returned with an empty array, so they are reported."""
    out = []
    for line in script.splitlines():
        if re.match(r"^\s*(\w+\)\s*)?python\b", line):
            found = re.match(r'^\s*(?:(\w+)\)\s*)?python (\S+) "\$\{(\w+)\[@\]\}"( ;;)?$', line)
            out.append((found.group(1) or "", found.group(2), found.group(3)) if found else ("", line.strip(), ""))
    return out


def job_problems(folder: Path, model: Model | None) -> dict[str, list[str]]:
    """Problems per MindSpeed-LLM file: each command through its pinned parser and rules, then the files
    against each other (conversion layout, data prefix and template) and against the model."""
    texts = {name: text(folder / name) for name in ("launch.sh", "convert_ckpt.sh", "preprocess_data.sh")
             if read_regular(folder / name) is not None}
    problems: dict[str, list[str]] = {name: [] for name in texts}
    entry, loadings, launch_problems = launch_line(texts.get("launch.sh", ""))
    train = loadings[0] if loadings else []  # the first launch's words
    if "launch.sh" in texts:
        launch = texts["launch.sh"]
        world = int(assignment(launch, "NPUS_PER_NODE") or 0) * int(assignment(launch, "NNODES") or 0)
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": assignment(launch, "CUDA_DEVICE_MAX_CONNECTIONS") or ""}
        problems["launch.sh"] += launch_problems
        for name, argv in zip(LOADING, loadings):
            found = checks.command_problems(entry, argv, world, env)
            problems["launch.sh"] += [f"{'relaunch: ' if name == 'RESUME_ARGS' else ''}{p}" for p in found]
        if entry and ("--is-instruction-dataset" in train) != (entry == "posttrain_gpt.py"):
            problems["launch.sh"].append(f"{entry} with{'out' if entry == 'posttrain_gpt.py' else ''} "
                                         f"instruction-dataset flags")
        if model is not None:
            problems["launch.sh"] += checks.model_problems(train, model)
    if "preprocess_data.sh" in texts:
        lines = _python_lines(texts["preprocess_data.sh"])
        words = bash_arrays(texts["preprocess_data.sh"]).get("PREPROCESS_ARGS", [])
        if [(script, array) for _, script, array in lines] != [("preprocess_data.py", "PREPROCESS_ARGS")]:
            problems["preprocess_data.sh"].append('expected one line `python preprocess_data.py '
                                                  '"${PREPROCESS_ARGS[@]}"`')
        problems["preprocess_data.sh"] += checks.command_problems("preprocess_data.py", words)
        if train:
            problems["launch.sh"] += checks.data_problems(train, words)
    if "convert_ckpt.sh" in texts:
        problems["convert_ckpt.sh"] += _conversion_problems(texts["convert_ckpt.sh"], train)
    return problems


def _conversion_problems(script_text: str, train: list[str]) -> list[str]:
    """convert_ckpt.sh's two conversions, each through its converter's parser, then against the training layout."""
    out: list[str] = []
    arrays = bash_arrays(script_text)
    calls = {label: (script, array) for label, script, array in _python_lines(script_text)}
    for direction in ("hf2mcore", "mcore2hf"):
        script, array = calls.get(direction, ("", ""))
        if array != f"{direction.upper()}_ARGS":
            out.append(f'{direction}: expected `python SCRIPT "${{{direction.upper()}_ARGS[@]}}"`')
            continue
        words = arrays.get(array, [])
        found = checks.command_problems(script, words)
        if not found and train:
            found = (checks.conversion_problems(train, script, words) if direction == "hf2mcore"
                     else checks.export_problems(train, script, words))
        out += [f"{direction}: {p}" for p in found]
    return out
