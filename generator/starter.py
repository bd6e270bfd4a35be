"""`gen-launch init`: a commented starter spec for a model, method and hardware, with the recipe defaults and their
sources written as comments, and the schema line editors read."""

from __future__ import annotations

import jinja2

from .dataset import default_format
from .errors import SpecError
from .recipe import default_row
from .tables import ADAPTER_KEYS, Model, Tables, trains_adapters

SEQ_LEN = 4096  # the starter's sequence length, lowered to what the model holds
# The recipe keys a starter shows, in the order README lists them.
TRAIN_KEYS = ("learning_rate", "lr_schedule", "warmup_ratio", "weight_decay")
COMMON_KEYS = ("keep_checkpoints", "resume", "seed")
# What a row of each fine-tuning data format holds (README, "The job spec": paths.dataset_format).
FORMAT_ROWS = {"alpaca": "instruction / input / output rows", "sharegpt": "conversations of from / value turns",
               "openai": "messages of role / content turns"}


def starter_spec(tables: Tables, env: jinja2.Environment, model_name: str, method: str, hardware: str,
                 schema: str) -> str:
    """`schema`: the reference to the JSON Schema the editor modeline names (relative to the spec)."""
    model = tables.model(model_name)
    hf_id = tables.weights(model_name)
    hw = tables.hardware_row(hardware)
    defaults = tables.recipes[method]
    offered = [name for name in tables.frameworks if name in hw.frameworks and tables.supports(name, model.name)
               and method in tables.frameworks[name].methods]
    if not offered:
        raise SpecError.at("model", f"no framework trains {model.name} {method} on {hw.name}")
    seq_len = min(SEQ_LEN, model.max_positions // 256 * 256)
    train = [(key, default_row(defaults, key, model)["value"], default_row(defaults, key, model)["source"])
             for key in TRAIN_KEYS]
    train += [(key, defaults.common[key]["value"], defaults.common[key]["source"]) for key in COMMON_KEYS]
    lora = [(key, defaults.values[key]["value"], defaults.values[key]["source"])
            for key in ADAPTER_KEYS] if trains_adapters(method) else []
    return env.get_template("init.yaml.j2").render(
        schema=schema, job=f"{model.name}-{method}-{hw.name}", model=hf_id if hf_id != model.hf_id else model.name,
        model_comment=_model_comment(tables, model, hf_id), hf_id=hf_id, method=method,
        quantization_bit=hw.quantization_bits[0] if method == "qlora" else None, seq_len=seq_len,
        hardware=hw.name, hardware_label=hw.label, frameworks=offered, train=train, lora=lora,
        formats=[] if method == "pretrain" else _formats(tables, offered), default_format=default_format(model))


def _model_comment(tables: Tables, model: Model, hf_id: str) -> str:
    """Which weights the spec trains: a base model's own (with its instruct row's shape), or the row's."""
    if hf_id != model.hf_id:
        return f"the base model: its own weights, with the {model.name} row's shape ({model.hf_id})"
    base = tables.base_of(model)
    return f"{hf_id} (instruct); for the base model's weights write {base}" if base else hf_id


def _formats(tables: Tables, offered: list[str]) -> list[tuple[str, str]]:
    """Each fine-tuning data format, what its rows hold and the offered frameworks that read it (a framework
    that cannot is left out of the plan)."""
    out = []
    for fmt, rows in FORMAT_ROWS.items():
        readers = [name for name in offered if fmt in tables.frameworks[name].dataset_formats]
        out.append((fmt, f"{rows} ({'read by ' + ', '.join(readers) if readers else 'no framework here reads it'})"))
    return out
