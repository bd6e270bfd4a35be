"""`gen-launch validate OUT/<job>`: check a rendered job folder with each framework's own rules.

One Result per file, in MANIFEST order:
- ok        every check that applies ran and passed;
- problem   a defect in the file (what is wrong, and the upstream rule it breaks);
- skipped   an optional check did not run because its package is not installed (the note says how to add it);
- env       a check could not run because the environment is broken (a package that does not import): this says
            nothing about the file.
MindSpeed-LLM command lines go through the parsers rebuilt from the pinned declarations and the start-up rules
(generator/checks/mindspeed_llm.py); MindFormers YAMLs through MindFormers' rules (checks/mindformers.py);
LLaMA-Factory through its argument list offline and its own parser when installed (checks/llama_factory.py).
No code from the job folder is run or imported.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .checks import llama_factory, mindformers, mindspeed_llm
from .checks.shell import assignment, bash_arrays, shell_problems
from .errors import UserError
from .render import MANIFEST
from .tables import load_tables

INSTALL_HINT = ("pip install torch==2.13.0 && pip install -c <(echo torch==2.13.0) 'gen-launch[validate]' "
                "(from a clone: -e '.[validate]')")


@dataclass(frozen=True)
class Result:
    path: str
    status: str  # ok | problem | skipped | env
    detail: str = ""


def _manifest(job_dir: Path) -> dict[str, str]:
    manifest = job_dir / MANIFEST
    if not manifest.is_file():
        raise UserError(f"{job_dir}: no {MANIFEST}; not a folder gen-launch render wrote")
    listed = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            digest, _, path = line.partition("  ")
            listed[path] = digest
    return listed


def validate(job_dir: Path, mindformers_python: str | None = None) -> list[Result]:
    """`mindformers_python`: an interpreter with mindformers and MindSpore, for MindFormers' own loader (opt-in)."""
    listed = _manifest(job_dir)
    plan = json.loads((job_dir / "plan.json").read_text(encoding="utf-8")) if "plan.json" in listed else {}
    results = []
    for path, digest in listed.items():
        file = job_dir / path
        if not file.is_file():
            results.append(Result(path, "problem", "missing"))
        elif hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            results.append(Result(path, "problem", "changed since gen-launch render wrote it"))
        else:
            results.append(_check(job_dir, path, plan, mindformers_python))
    return results


# ----------------------------------------------------------------------------------------------------------------
# MindSpeed-LLM scripts: the words of their bash arrays, as bash reads them


def _training_words(launch: str) -> tuple[str, list[str]]:
    """(entry script, its argument words) of a generated launch.sh: the arrays after DISTRIBUTED_ARGS, in order."""
    entry = re.search(r'^torchrun "\$\{DISTRIBUTED_ARGS\[@\]\}" (\S+)', launch, re.M)
    words = [w for name, ws in bash_arrays(launch).items() if name != "DISTRIBUTED_ARGS" for w in ws]
    return (entry.group(1) if entry else ""), words


def _mindspeed_problems(folder: Path, name: str, text: str) -> list[str]:
    if name == "launch.sh":
        entry, words = _training_words(text)
        world = int(assignment(text, "NPUS_PER_NODE") or 0) * int(assignment(text, "NNODES") or 0)
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": assignment(text, "CUDA_DEVICE_MAX_CONNECTIONS") or ""}
        return mindspeed_llm.command_problems(entry, words, world, env)
    if name == "preprocess_data.sh":
        return mindspeed_llm.command_problems("preprocess_data.py", bash_arrays(text).get("PREPROCESS_ARGS", []))
    if name == "convert_ckpt.sh":
        arrays = bash_arrays(text)
        problems = []
        _, train_words = _training_words((folder / "launch.sh").read_text(encoding="utf-8")) \
            if (folder / "launch.sh").is_file() else ("", [])
        for direction, program in re.findall(r'^\s+(\w+)\) python (\S+) "\$\{\w+\[@\]\}"', text, re.M):
            words = arrays.get(f"{direction.upper()}_ARGS", [])
            problems += [f"{direction}: {p}" for p in mindspeed_llm.command_problems(program, words)]
            if direction == "hf2mcore" and train_words:
                problems += [f"{direction}: {p}" for p in
                             mindspeed_llm.conversion_problems(train_words, program, words)]
        return problems
    return []


# ----------------------------------------------------------------------------------------------------------------
# One file


def _check(job_dir: Path, path: str, plan: dict, mindformers_python: str | None) -> Result:
    file = job_dir / path
    framework = path.split("/", 1)[0] if "/" in path else None
    notes: list[str] = []
    problems: list[str] = []
    if path.endswith(".sh"):
        found, skipped = shell_problems(file)
        problems += found
        notes += [skipped] if skipped else []
        if framework == "mindspeed-llm":
            problems += _mindspeed_problems(file.parent, file.name, file.read_text(encoding="utf-8"))
    elif path.endswith(".json"):
        try:
            json.loads(file.read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(f"not JSON: {exc}")
    elif path == "mindformers/train.yaml":
        return _mindformers(file, plan, mindformers_python)
    elif path == "llama-factory/train.yaml":
        return _llama_factory(file, plan)
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return Result(path, "ok", "; ".join(notes))


def _mindformers(file: Path, plan: dict, python: str | None) -> Result:
    path, cards = "mindformers/train.yaml", plan["frameworks"]["mindformers"]["cards"]
    problems = mindformers.mindformers_problems(yaml.safe_load(file.read_text(encoding="utf-8")), cards,
                                                load_tables().model(plan["model"]))
    if problems:
        return Result(path, "problem", "; ".join(problems))
    if python is None:
        return Result(path, "ok", "MindFormers' own loader not run (opt-in: --mindformers-python, see README)")
    status, detail = mindformers.loader_check(python, file, cards)
    if status == "problem":
        return Result(path, "problem", f"MindFormers' MindFormerConfig / check_rules reject it: {detail}")
    if status == "env":
        return Result(path, "env", f"MindFormers does not run in {python} ({detail}); its rules passed offline")
    return Result(path, "ok", "MindFormers' MindFormerConfig and check_rules accept it")


def _llama_factory(file: Path, plan: dict) -> Result:
    path = "llama-factory/train.yaml"
    train = yaml.safe_load(file.read_text(encoding="utf-8"))
    world = plan["frameworks"]["llama-factory"]["cards"]
    ds_name = train.get("deepspeed")
    ds = json.loads((file.parent / ds_name).read_text(encoding="utf-8")) if ds_name else None
    problems = llama_factory.llamafactory_problems(train, ds, world)
    if problems:
        return Result(path, "problem", "; ".join(problems))
    if not llama_factory.llamafactory_installed():
        return Result(path, "skipped", f"LLaMA-Factory's own parser and DeepSpeed's config class not installed "
                                       f"({INSTALL_HINT}); argument names, types and batch checked offline")
    status, detail = llama_factory.llamafactory_parser_check(file.parent, world)
    if status == "problem":
        return Result(path, "problem", f"LLaMA-Factory / DeepSpeed reject it: {detail}")
    if status == "env":
        return Result(path, "env", f"LLaMA-Factory is installed but does not run here ({detail}); the offline "
                                   f"checks passed. Reinstall with: {INSTALL_HINT}")
    return Result(path, "ok")
