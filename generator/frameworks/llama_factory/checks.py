"""LLaMA-Factory 0.9.5: a train.yaml and its DeepSpeed JSON, offline (argument names, types, batch arithmetic) and
through LLaMA-Factory's own parser and DeepSpeed's config class when they are installed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from ...checks import run_isolated
from ...jobdir import read_regular
from ...resources import DATA_DIR
from ...tables import Framework


@lru_cache(maxsize=1)
def llamafactory_args() -> dict[str, str]:
    """name -> type text of LLaMA-Factory 0.9.5's training arguments."""
    lines = (DATA_DIR / "llamafactory_0.9.5_args.txt").read_text(encoding="utf-8").splitlines()
    return {row[0]: row[1] for row in (line.split("\t") for line in lines if line and not line.startswith("#"))}


# Enum-typed arguments: their dataclass takes any string and the value fails only when the model loads.
# LLaMA-Factory 0.9.5 src/llamafactory/extras/constants.py l.130-135 (AttentionFunction).
ENUMS = {"AttentionFunction": ("auto", "disabled", "sdpa", "fa2", "fa3")}


def _type_ok(value, kind: str) -> bool:
    if kind in ENUMS:
        return value in ENUMS[kind]
    if value is None:
        return "None" in kind
    if isinstance(value, bool):
        return "bool" in kind or kind.startswith("Literal")
    if isinstance(value, dict):
        return "dict" in kind  # lr_scheduler_kwargs: dict | str | None
    if kind.startswith("Literal") or "str" in kind:
        return isinstance(value, str)
    if "float" in kind:
        return isinstance(value, (int, float))
    if "int" in kind:
        return isinstance(value, int)
    return True


def llamafactory_problems(train: dict, deepspeed: dict | None, world: int, global_batch: int | None) -> list[str]:
    """Offline checks of a LLaMA-Factory train.yaml and its DeepSpeed JSON at the planned world size. A DeepSpeed
    batch or precision key is "auto" (transformers fills it from the YAML) or the value transformers would fill:
    any other value raises at start-up (transformers integrations/deepspeed.py, trainer_config_finalize)."""
    args = llamafactory_args()
    problems = [f"{key} is not a LLaMA-Factory 0.9.5 argument" for key in train if key not in args]
    problems += [f"{key}: {value!r} is not of type {args[key]}" for key, value in train.items()
                 if key in args and not _type_ok(value, args[key]) and args[key] not in ENUMS]
    problems += [f"{key}: {value!r} is not one of {', '.join(ENUMS[args[key]])}" for key, value in train.items()
                 if key in args and args[key] in ENUMS and not _type_ok(value, args[key])]
    if "max_samples" in train:
        problems.append("max_samples silently cuts the data set")
    if train.get("bf16") is not True or train.get("fp16"):
        problems.append("bf16 must be on (and fp16 off): the plan's memory and time count bf16 training")
    micro, accum = train.get("per_device_train_batch_size", 8), train.get("gradient_accumulation_steps", 1)
    if global_batch is not None and micro * accum * world != global_batch:
        problems.append(f"micro {micro} x accumulation {accum} x world {world} is not the plan's global batch "
                        f"{global_batch}")
    if deepspeed is not None:
        bf16 = bool(train.get("bf16"))
        filled = {"train_batch_size": micro * accum * world, "train_micro_batch_size_per_gpu": micro,
                  "gradient_accumulation_steps": accum, "gradient_clipping": train.get("max_grad_norm", 1.0),
                  "bf16.enabled": bf16, "fp16.enabled": bool(train.get("fp16"))}
        for key, expected in filled.items():
            node, _, leaf = key.rpartition(".")
            value = (deepspeed.get(node) or {}).get(leaf) if node else deepspeed.get(key)
            if value is not None and value != "auto" and value != expected:
                problems.append(f"DeepSpeed {key} {value!r} differs from the YAML's {expected!r} at world {world} "
                                f"(write \"auto\" as upstream does)")
        if not isinstance(deepspeed.get("zero_optimization", {}).get("stage"), int):
            problems.append("zero_optimization.stage must be an integer")
    return problems


def data_rows(data: bytes) -> int | None:
    """Rows of a data file as LLaMA-Factory's JSON loader reads it (datasets' json builder): a JSON array's items,
    else JSON lines (blank lines skipped); None when it is neither."""
    try:
        if data.lstrip()[:1] == b"[":
            rows = json.loads(data)
            return len(rows) if isinstance(rows, list) else None
        return sum(1 for line in data.splitlines() if line.strip() and json.loads(line) is not None)
    except ValueError:
        return None


def data_file(dataset_info) -> tuple[dict, str] | None:
    """(the registered data set's entry, its absolute file_name) when dataset_info.json names a file on this machine
    (a regular file: no link followed); None otherwise (a cluster path, a placeholder)."""
    entry = next(iter(dataset_info.values()), None) if isinstance(dataset_info, dict) else None
    if not isinstance(entry, dict):
        return None
    name = entry.get("file_name")
    if not isinstance(name, str) or not os.path.isabs(name) or not os.path.isfile(name) or os.path.islink(name):
        return None
    return entry, name


def rows_problem(dataset_info: dict, planned: int | None) -> str | None:
    """The data file registered in dataset_info.json, where it is on this machine, against the rows the plan's
    steps were sized for (data.samples): max_steps is fixed, so other rows train more or fewer epochs."""
    found = data_file(dataset_info)
    data = read_regular(Path(found[1])) if found else None
    if found is None or data is None or not planned:
        return None
    name, rows = found[1], data_rows(data)
    if rows is None:
        return f"the data file {name} is neither a JSON array nor JSON lines"
    if rows != planned:
        return (f"the data file {name} has {rows} rows, but the plan's steps are sized for {planned} (data.samples): "
                f"max_steps trains {planned / rows:.2g}x the epochs planned; set data.samples: {rows} and render again")
    return None


# The columns check reads at most this many rows, from at most this many bytes of the file's start.
SAMPLE_ROWS = 200
SAMPLE_BYTES = 8 << 20


def first_rows(name: str, rows: int = SAMPLE_ROWS, limit: int = SAMPLE_BYTES) -> list | None:
    """Up to `rows` rows from the start of a data file (a JSON array's items, else JSON lines), reading at most
    `limit` bytes, so a huge file is never read whole; None when the start is neither. A row cut off by the limit
    is left out."""
    with open(name, "rb") as handle:
        text = handle.read(limit).decode("utf-8", "replace")
    out: list = []
    decoder = json.JSONDecoder()
    if text.lstrip()[:1] == "[":
        at = text.index("[") + 1
        while len(out) < rows:
            at = len(text) - len(text[at:].lstrip(" \t\r\n,"))
            if at >= len(text) or text[at] == "]":
                break
            try:
                row, at = decoder.raw_decode(text, at)
            except ValueError:
                break  # cut off by the limit (or broken: rows_problem says so)
            out.append(row)
        return out
    for line in text.splitlines()[:rows]:
        try:
            out.append(json.loads(line)) if line.strip() else None
        except ValueError:
            return out or None  # the last line may be cut off by the limit
    return out


# LLaMA-Factory 0.9.5's default sharegpt tags (data/parser.py l. 58-64, DatasetAttr); dataset_info.json's "tags"
# replace them.
SHAREGPT_TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}


def _message_problem(messages, tags: dict) -> str | None:
    """Why SharegptDatasetConverter (data/converter.py l. 139-180) cannot read one row's messages: a message without
    the role or content key fails the loading; a role out of turn (after an optional first system message, user or
    observation, then assistant or function, alternating) or an odd number of turns skips the row with a warning."""
    if not isinstance(messages, list):
        return "its messages are not a list"
    role, content = tags["role_tag"], tags["content_tag"]
    bad = next((m for m in messages if not isinstance(m, dict) or role not in m or content not in m), None)
    if bad is not None:
        return f"a message lacks {role!r} or {content!r} (role_tag / content_tag): {json.dumps(bad)[:80]}"
    turns = messages[1:] if messages and messages[0][role] == tags["system_tag"] else messages
    accept = ((tags["user_tag"], tags["observation_tag"]), (tags["assistant_tag"], tags["function_tag"]))
    for i, message in enumerate(turns):
        if message[role] not in accept[i % 2]:
            return (f"turn {i + 1}'s {role} {message[role]!r} is not one of {list(accept[i % 2])} (user_tag / "
                    f"assistant_tag ...), so LLaMA-Factory skips the row")
    return "an odd number of turns, so LLaMA-Factory skips the row" if len(turns) % 2 else None


def columns_problems(dataset_info) -> list[str]:
    """The columns dataset_info.json registers against the keys of the data file's first rows, where the file is on
    this machine: LLaMA-Factory's converter reads every registered column from every row (data/converter.py
    l. 88-129 alpaca, l. 139-180 sharegpt), and a key the file lacks fails the data loading."""
    found = data_file(dataset_info)
    rows = first_rows(found[1]) if found else None
    if not found or not rows:
        return []
    entry, name = found
    columns: dict = entry["columns"] if isinstance(entry.get("columns"), dict) else {}
    problems = []
    for column, key in columns.items():
        lacking = [i for i, row in enumerate(rows) if not isinstance(row, dict) or key not in row]
        if lacking:
            problems.append(f"columns.{column}: {key!r} is not a key of row {lacking[0] + 1} of {name} (of the first "
                            f"{len(rows)} read)")
    if entry.get("formatting") == "sharegpt" and not problems:
        tags = {**SHAREGPT_TAGS, **(entry.get("tags") or {})}
        key = columns.get("messages", "conversations")
        for i, row in enumerate(rows):
            why = _message_problem(row.get(key) if isinstance(row, dict) else None, tags)
            if why:
                problems.append(f"row {i + 1} of {name}: {why}")
                break
    return problems


def template_problem(template, model: str, fw: Framework) -> str | None:
    """train.yaml's chat template: one LLaMA-Factory 0.9.5 registers (data/template.py register_template; else
    "Template ... does not exist" when the data loads) and the model's own (frameworks.yaml llama-factory), since
    another template trains the model on a prompt format it is not served with."""
    own = (fw.models.get(model) or {}).get("template")
    if template is None:
        return f"template: none given, so LLaMA-Factory picks one from the tokenizer; {model}'s is {own!r}"
    if template not in (fw.templates or ()):
        return (f"template: {template!r} is not a chat template LLaMA-Factory 0.9.5 registers (its data/template.py); "
                f"{model}'s is {own!r}")
    if own is not None and template != own:
        return f"template: {template!r} is not {model}'s chat template {own!r} (frameworks.yaml llama-factory)"
    return None


@lru_cache(maxsize=1)
def lora_modules() -> dict[str, dict]:
    """decoder -> {"modules": linear module names, "source"} (lora_modules.yaml)."""
    return yaml.safe_load((DATA_DIR / "lora_modules.yaml").read_text(encoding="utf-8"))["decoders"]


def lora_target_problems(lora_target, model: str, fw: Framework) -> list[str]:
    """Each lora_target name must be `all` or the last part of a linear module's name in the model's decoder
    (lora_modules.yaml): PEFT adapts only the modules a target names, and one matching none adapts nothing."""
    if lora_target is None:
        return []
    decoder = (fw.models.get(model) or {}).get("decoder")
    row = lora_modules().get(decoder) if isinstance(decoder, str) else None
    if row is None:
        return []
    targets = [t.strip() for t in str(lora_target).split(",")]
    if targets == ["all"]:
        return []
    return [f"lora_target: {target!r} matches no module of {model} ({decoder}: {', '.join(row['modules'])}; "
            f"{row['source']})" for target in targets if target.rsplit(".", 1)[-1] not in row["modules"]]


# Runs in a child interpreter started with -I: the job folder is its working directory (LLaMA-Factory resolves the
# DeepSpeed file and dataset_dir against it) but never on sys.path, so no file in the folder is imported. The first
# step only imports: a failure there is the environment's, not the file's.
LLAMAFACTORY_CHECK = """
import json, sys
world, hidden, batch = (int(a) for a in sys.argv[1:4])
try:
    import transformers.training_args as t
    import llamafactory.hparams.parser as p
    import deepspeed.comm, deepspeed.comm.torch, deepspeed.runtime.config as c
except Exception as exc:
    print(json.dumps({"status": "env", "detail": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
# DeepSpeed's CPU shared-memory collectives are compiled on first use (a minute), and a lock left in
# ~/.cache/torch_extensions by a killed build blocks every later start forever; parsing never reduces. (By
# sys.modules: the attribute deepspeed.comm.torch is the torch package.)
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
t.is_torch_bf16_gpu_available = lambda *a, **k: True  # the target NPU / GPU supports bf16; this host may not
p.is_torch_bf16_gpu_available = t.is_torch_bf16_gpu_available
sys.argv = ["llamafactory-cli", "train.yaml"]
try:
    model_args, data_args, training_args, finetuning_args, generating_args = p.get_train_args(p.read_args())
    if training_args.deepspeed:
        from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
        class AtWorld:  # the parsed arguments as the planned world's ranks see them
            world_size = world
            def __getattr__(self, name):
                return getattr(training_args, name)
        class Model:
            class config:
                hidden_size = hidden
        ds = HfTrainerDeepSpeedConfig(json.load(open(training_args.deepspeed)))
        ds.trainer_config_process(AtWorld())
        ds.trainer_config_finalize(AtWorld(), Model(), 1000)
        left = [k for k, v in ds.config.items() if v == "auto"]
        left += [f"{k}.{i}" for k, v in ds.config.items() if isinstance(v, dict) for i, w in v.items() if w == "auto"]
        if left:
            raise ValueError(f"transformers leaves {left} unfilled")
        if ds.config["train_batch_size"] != batch:
            raise ValueError(f"train_batch_size at world {world} is {ds.config['train_batch_size']}, the plan's "
                             f"global batch is {batch}")
        deepspeed.comm.get_rank = lambda: 0
        class Mpu:
            def get_data_parallel_world_size(self):
                return world
        c.DeepSpeedConfig(ds.config, mpu=Mpu())
except Exception as exc:
    import torch.distributed as dist  # a rendezvous that cannot open (port taken) is the host's problem, not the file's
    status = "env" if isinstance(exc, dist.DistError) else "problem"
    print(json.dumps({"status": status, "detail": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}))
    sys.exit(0)
print(json.dumps({"status": "ok", "detail": ""}))
"""


def llamafactory_parser_check(folder: Path, world: int, hidden: int, global_batch: int) -> tuple[str, str]:
    """Run LLaMA-Factory's get_train_args on train.yaml (single rank on loopback), then fill its DeepSpeed JSON with
    transformers' HfTrainerDeepSpeedConfig as the `world` ranks of the planned job would (a model of `hidden`
    size), require its train_batch_size to be the plan's `global_batch` and pass the result to DeepSpeed's own
    DeepSpeedConfig (reference llamafactory_deepspeed.md s1.3, s3.3): ("ok" | "problem" | "env", detail). "env":
    the packages are there but do not import or run here (a broken install), which says nothing about the file.
    A verdict on the same bytes by the same check and interpreter is reused within a process (a child takes
    seconds)."""
    key = (sys.executable, LLAMAFACTORY_CHECK, _digest(folder), world, hidden, global_batch)
    if key in _VERDICTS:
        return _VERDICTS[key]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DS_ACCELERATOR": "cpu", "LOCAL_RANK": "0", "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    verdict = run_isolated(sys.executable, LLAMAFACTORY_CHECK, [str(world), str(hidden), str(global_batch)], folder,
                           env)
    if verdict[0] != "env":  # a broken environment may be repaired
        _VERDICTS[key] = verdict
    return verdict


_VERDICTS: dict[tuple, tuple[str, str]] = {}


def _digest(folder: Path) -> str:
    """The bytes the check reads: train.yaml and the JSON files beside it (the DeepSpeed file it names)."""
    digest = hashlib.sha256()
    for path in [folder / "train.yaml", *sorted(folder.glob("*.json"))]:
        digest.update(path.name.encode() + b"\0" + (read_regular(path) or b"") + b"\0")
    return digest.hexdigest()


def _free_port() -> int:
    """A loopback port nothing listens on now: the single-rank rendezvous LLaMA-Factory's parser opens for DeepSpeed
    (hparams/parser.py l.353) must not meet another validate or a running job."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def llamafactory_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("llamafactory", "deepspeed"))
