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

import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from .checks import commands, llama_factory, mindformers, mindspeed_llm
from .checks.shell import assignment, bash_arrays, shell_problems
from .errors import UserError, show_path
from .jobdir import (
    MANIFEST,
    MAX_READ,
    Manifest,
    parse_manifest,
    read_regular,
    safe_relative,
    scan,
)
from .tables import load_tables

INSTALL_HINT = "bash scripts/install.sh validate from a clone of gen-launch"


@dataclass(frozen=True)
class Result:
    path: str
    status: str  # ok | problem | skipped | env
    detail: str = ""


def validate(job_dir: Path, mindformers_python: str | None = None) -> Iterator[Result]:
    """Each file's Result as soon as its checks finish (the slow ones, LLaMA-Factory's own parser and MindFormers'
    loader, run in child interpreters); a folder that is not a job folder raises UserError before the first.
    `mindformers_python`: an interpreter with mindformers and MindSpore, for MindFormers' own loader (opt-in).

    Only regular files found by a walk of the folder are read (jobdir.scan: no link followed, no FIFO opened);
    MANIFEST's paths are compared with them, never opened."""
    if job_dir.is_symlink():
        raise UserError(f"{show_path(job_dir)} is a symbolic link; validate reads only a real job folder")
    if not job_dir.is_dir():
        raise UserError(f"{show_path(job_dir)} is not a folder (or does not exist); give a job folder render wrote")
    data = read_regular(job_dir / MANIFEST)
    if data is None:
        raise UserError(f"{show_path(job_dir)}: no {MANIFEST} (or not a regular file, or over {MAX_READ} bytes); "
                        f"not a folder gen-launch render wrote")
    return _results(job_dir, parse_manifest(data), mindformers_python)


def _results(job_dir: Path, manifest: Manifest, mindformers_python: str | None) -> Iterator[Result]:
    found = scan(job_dir, manifest.entries)
    plan = _plan(job_dir)
    model = _model(plan)
    # The MindSpeed-LLM files are checked against each other: all at once, when the first of them is reached.
    mindspeed = functools.cache(lambda: _mindspeed_job(job_dir / "mindspeed-llm", model))
    if not manifest.intact:
        yield Result(MANIFEST, "problem", "edited since gen-launch render wrote it (its last line's hash does not "
                                          "match)")
    for path, digest in manifest.entries.items():
        entry = found.get(path)
        if entry is None or entry.kind != "file":
            yield Result(path, "problem", "missing (or not a regular file)")
        elif entry.digest != digest:
            # Over MAX_READ the file is not read, so its checks cannot run either.
            yield _changed(_check(job_dir, path, plan, model, mindspeed, mindformers_python)) if entry.digest else \
                Result(path, "problem", f"{CHANGED} (over {MAX_READ} bytes: not read)")
        else:
            yield _check(job_dir, path, plan, model, mindspeed, mindformers_python)
    for path in sorted(p for p, e in found.items() if e.kind != "folder" and p != MANIFEST
                       and p not in manifest.entries):
        yield Result(path, "problem", UNREADABLE if found[path].kind == "unreadable" else
                     f"not listed in {MANIFEST}: gen-launch did not write it (or {MANIFEST} was edited), so "
                     f"nothing vouches for it")


CHANGED = "changed since gen-launch render wrote it"


def _changed(checked: Result) -> Result:
    """A file edited by hand is a problem (nothing vouches for it), and its checks still run: the detail says both,
    so a user sees whether the edit also breaks the framework's rules."""
    verdict = {"ok": "its checks pass", "skipped": "checked offline"}.get(checked.status, checked.status)
    return Result(checked.path, "problem", f"{CHANGED}; {verdict}" + (f": {checked.detail}" if checked.detail else ""))


def _text(file: Path) -> str:
    """A generated file's text; "" when it is missing or not a regular file (reported per file elsewhere)."""
    data = read_regular(file)
    return "" if data is None else data.decode("utf-8", "replace")


def _plan(job_dir: Path) -> dict | None:
    try:
        plan = json.loads(_text(job_dir / "plan.json"))
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


def _model(plan: dict | None):
    try:
        return load_tables().model(plan["model"]) if plan else None
    except (KeyError, TypeError, UserError):
        return None


def _cards(plan: dict | None, framework: str) -> int | None:
    return _layout_value(plan, framework, "cards")


def _layout_value(plan: dict | None, framework: str, key: str) -> int | None:
    if plan is None:
        return None
    try:
        return int(plan["frameworks"][framework][key])
    except (KeyError, TypeError, ValueError):
        return None


def _yaml(file: Path) -> tuple[dict | None, str]:
    try:
        doc = yaml.safe_load(_text(file))
    except yaml.YAMLError as exc:
        return None, f"not valid YAML: {str(exc).splitlines()[0]}"
    return (doc, "") if isinstance(doc, dict) else (None, "not a YAML mapping")


UNREADABLE = "a folder that cannot be read (permissions, or nested deeper than the system's path limit)"
NO_PLAN = "plan.json is missing or unreadable: the card count and model this file is checked against are unknown"


# ----------------------------------------------------------------------------------------------------------------
# MindSpeed-LLM scripts: the words of their bash arrays, as bash reads them, and the line that runs them


# The loading flags: launch.sh picks one array into CKPT_ARGS at run time (a first launch, or a relaunch that
# finds the job's own checkpoint).
LOADING = ("START_ARGS", "RESUME_ARGS")


def _launch_line(launch: str) -> tuple[str, list[list[str]], list[str]]:
    """(entry script, its argument words for each loading array, problems) of a generated launch.sh. The torchrun
    line must pass DISTRIBUTED_ARGS, the entry script, every other flag array in order and then CKPT_ARGS, and
    nothing else."""
    arrays = bash_arrays(launch)
    groups = [name for name in arrays if name != "DISTRIBUTED_ARGS" and name not in LOADING]
    found = re.search(r'^torchrun "\$\{DISTRIBUTED_ARGS\[@\]\}" (\S+) \\\n((?:  "\$\{\w+\[@\]\}" \\\n)*)'
                      r'  2>&1 \| tee ', launch, re.M)
    if not found:
        return "", [], ['the torchrun line is not `torchrun "${DISTRIBUTED_ARGS[@]}" ENTRY "${GROUP[@]}" ... '
                        '2>&1 | tee ...`: words outside the flag arrays are not checked']
    passed = re.findall(r'"\$\{(\w+)\[@\]\}"', found.group(2))
    problems = [] if passed == [*groups, "CKPT_ARGS"] else \
        [f"torchrun passes {passed} but the script defines {[*groups, 'CKPT_ARGS']}"]
    if "START_ARGS" not in arrays:
        problems.append("no START_ARGS array: nothing says what the first launch loads")
    common = [w for name in passed if name != "CKPT_ARGS" for w in arrays.get(name, [])]
    return found.group(1), [common + arrays[name] for name in LOADING if name in arrays], problems


def _python_lines(text: str) -> list[tuple[str, str, str]]:
    """(case label or "", script, array) of every `python SCRIPT "${ARRAY[@]}"` line; other python lines are
    returned with an empty array, so they are reported."""
    out = []
    for line in text.splitlines():
        if re.match(r"^\s*(\w+\)\s*)?python\b", line):
            found = re.match(r'^\s*(?:(\w+)\)\s*)?python (\S+) "\$\{(\w+)\[@\]\}"( ;;)?$', line)
            out.append((found.group(1) or "", found.group(2), found.group(3)) if found else ("", line.strip(), ""))
    return out


def _mindspeed_job(folder: Path, model) -> dict[str, list[str]]:
    """Problems per MindSpeed-LLM file: each command through its pinned parser and rules, then the files
    against each other (conversion layout, data prefix and template) and against the model."""
    texts = {name: _text(folder / name) for name in ("launch.sh", "convert_ckpt.sh", "preprocess_data.sh")
             if read_regular(folder / name) is not None}
    problems: dict[str, list[str]] = {name: [] for name in texts}
    entry, loadings, launch_problems = _launch_line(texts.get("launch.sh", ""))
    train = loadings[0] if loadings else []  # the first launch's words
    if "launch.sh" in texts:
        text = texts["launch.sh"]
        world = int(assignment(text, "NPUS_PER_NODE") or 0) * int(assignment(text, "NNODES") or 0)
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": assignment(text, "CUDA_DEVICE_MAX_CONNECTIONS") or ""}
        problems["launch.sh"] += launch_problems
        for name, argv in zip(LOADING, loadings):
            found = mindspeed_llm.command_problems(entry, argv, world, env)
            problems["launch.sh"] += [f"{'relaunch: ' if name == 'RESUME_ARGS' else ''}{p}" for p in found]
        if entry and ("--is-instruction-dataset" in train) != (entry == "posttrain_gpt.py"):
            problems["launch.sh"].append(f"{entry} with{'out' if entry == 'posttrain_gpt.py' else ''} "
                                         f"instruction-dataset flags")
        if model is not None:
            problems["launch.sh"] += mindspeed_llm.model_problems(train, model)
    if "preprocess_data.sh" in texts:
        lines = _python_lines(texts["preprocess_data.sh"])
        words = bash_arrays(texts["preprocess_data.sh"]).get("PREPROCESS_ARGS", [])
        if [(script, array) for _, script, array in lines] != [("preprocess_data.py", "PREPROCESS_ARGS")]:
            problems["preprocess_data.sh"].append('expected one line `python preprocess_data.py '
                                                  '"${PREPROCESS_ARGS[@]}"`')
        problems["preprocess_data.sh"] += mindspeed_llm.command_problems("preprocess_data.py", words)
        if train:
            problems["launch.sh"] += mindspeed_llm.data_problems(train, words)
    if "convert_ckpt.sh" in texts:
        arrays = bash_arrays(texts["convert_ckpt.sh"])
        by_label = {label: (script, array) for label, script, array in _python_lines(texts["convert_ckpt.sh"])}
        for direction in ("hf2mcore", "mcore2hf"):
            script, array = by_label.get(direction, ("", ""))
            if array != f"{direction.upper()}_ARGS":
                problems["convert_ckpt.sh"].append(f'{direction}: expected `python SCRIPT "${{{direction.upper()}'
                                                   f'_ARGS[@]}}"`')
                continue
            words = arrays.get(array, [])
            found = mindspeed_llm.command_problems(script, words)
            if not found and train:
                found = (mindspeed_llm.conversion_problems(train, script, words) if direction == "hf2mcore"
                         else mindspeed_llm.export_problems(train, script, words))
            problems["convert_ckpt.sh"] += [f"{direction}: {p}" for p in found]
    return problems


# ----------------------------------------------------------------------------------------------------------------
# One file


def _check(job_dir: Path, path: str, plan: dict | None, model, mindspeed: Callable[[], dict[str, list[str]]],
           mindformers_python: str | None) -> Result:
    file = job_dir / path
    framework = path.split("/", 1)[0] if "/" in path else None
    notes: list[str] = []
    problems: list[str] = []
    if path.endswith(".sh"):
        found, skipped = shell_problems(file)
        problems += found
        notes += [skipped] if skipped else []
        if framework == "mindspeed-llm":
            problems += mindspeed().get(file.name, [])
        if framework == "mindspeed-llm" and file.name == "launch.sh" and model is None:
            problems.append(NO_PLAN)
    elif file.name == "commands.txt" and framework:
        nodes = _layout_value(plan, framework, "nodes")
        problems += commands.rank_problems(_text(file), nodes) if nodes else [NO_PLAN]
    elif path.endswith(".json"):
        try:
            doc = json.loads(_text(file))
        except ValueError as exc:
            problems.append(f"not JSON: {exc}")
        else:
            problems += llama_factory.columns_problems(doc) if path == "llama-factory/dataset_info.json" else []
    elif path == "mindformers/train.yaml":
        return _mindformers(file, plan, model, mindformers_python)
    elif path == "llama-factory/train.yaml":
        return _llama_factory(file, plan)
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return Result(path, "ok", "; ".join(notes))


def _msrun_world(launch: Path) -> int | None:
    """WORKER_NUM of the msrun_launcher.sh line in mindformers/launch.sh (1 for the one-card python line)."""
    text = _text(launch)
    found = re.search(r'^  (\d+) (\d+) "\$MASTER_ADDR"', text, re.M)
    if found:
        return int(found.group(1))
    return 1 if re.search(r"^python run_mindformer\.py ", text, re.M) else None


def _mindformers_data(doc: dict, plan: dict | None, folder: Path) -> str | None:
    """The data train.yaml must read: the spec's JSON file for HFDataLoader (Mcore fine-tuning), else what
    preprocess_data.sh writes."""
    loader = (doc.get("train_dataset") or {}).get("data_loader")
    if isinstance(loader, dict) and loader.get("type") == "HFDataLoader":
        return (((plan or {}).get("paths") or {}).get("dataset") or {}).get("value")
    return mindformers.preprocessed_path(_text(folder / "preprocess_data.sh"))


def _mindformers(file: Path, plan: dict | None, model, python: str | None) -> Result:
    path, cards = "mindformers/train.yaml", _cards(plan, "mindformers")
    doc, error = _yaml(file)
    if doc is None or cards is None or model is None:
        return Result(path, "problem", error or NO_PLAN)
    problems = mindformers.mindformers_problems(doc, cards, model)
    problems += mindformers.data_loader_problems(doc, _mindformers_data(doc, plan, file.parent))
    problems += mindformers.router_problems(doc, model)
    launched = _msrun_world(file.parent / "launch.sh")
    if launched != cards:
        problems.append(f"launch.sh starts {launched} worker(s) for a {cards}-card YAML")
    pre = file.parent / "preprocess_data.sh"
    records = re.findall(r"--seq_length (\d+)", _text(pre))
    seq = (doc.get("model") or {}).get("model_config", {}).get("seq_length")
    if records and {int(r) for r in records} != {seq}:
        problems.append(f"preprocess_data.sh builds MindRecord samples of {records[0]} tokens for seq_length {seq} "
                        f"(the legacy loader reads them as they are)")
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


def _llama_factory(file: Path, plan: dict | None) -> Result:
    path, world, model = "llama-factory/train.yaml", _cards(plan, "llama-factory"), _model(plan)
    train, error = _yaml(file)
    if train is None or world is None or model is None:
        return Result(path, "problem", error or NO_PLAN)
    batch = _layout_value(plan, "llama-factory", "global_batch_size")
    ds_name = train.get("deepspeed")
    try:
        if ds_name is not None and not (isinstance(ds_name, str) and safe_relative(ds_name)):
            raise ValueError("not a path inside the job folder")
        ds = json.loads(_text(file.parent / ds_name)) if ds_name else None
    except ValueError as exc:
        return Result(path, "problem", f"its deepspeed file {ds_name!r} cannot be read: {exc}")
    problems = llama_factory.llamafactory_problems(train, ds, world, batch)
    template = llama_factory.template_problem(train.get("template"), model.name)
    problems += [template] if template else []
    problems += llama_factory.lora_target_problems(train.get("lora_target"), model.name)
    try:
        info = json.loads(_text(file.parent / "dataset_info.json"))
    except ValueError:
        info = None
    rows = llama_factory.rows_problem(info, ((plan or {}).get("data") or {}).get("rows"))
    problems += [rows] if rows else []
    if problems:
        return Result(path, "problem", "; ".join(problems))
    if not llama_factory.llamafactory_installed():
        return Result(path, "skipped", f"LLaMA-Factory's own parser and DeepSpeed's config class not installed "
                                       f"({INSTALL_HINT}); argument names, types and batch checked offline")
    status, detail = llama_factory.llamafactory_parser_check(file.parent, world, model.hidden, batch or 0)
    if status == "problem":
        return Result(path, "problem", f"LLaMA-Factory / transformers / DeepSpeed reject it: {detail}")
    if status == "env":
        return Result(path, "env", f"LLaMA-Factory's own check could not run here ({detail}); the offline checks "
                                   f"passed. If a package does not import, reinstall with: {INSTALL_HINT}")
    return Result(path, "ok")
