"""`gen-launch init`: a commented starter spec for a model, method and hardware, with the recipe defaults and their
sources written as comments, and the schema line editors read."""

from __future__ import annotations

import re

import jinja2

from .dataset import default_format
from .errors import SpecError
from .frameworks import plugin_of
from .recipe import default_alpha, default_row
from .scheduler import RUN_TIME
from .support import supported
from .tables import ADAPTER_KEYS, METHODS, SERVING_METHODS, Model, RecipeDefaults, Tables, trains_adapters

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
    offered = list(dict.fromkeys(r.framework for r in supported(tables, method=method, hardware=hw.name,
                                                                  model=model.name)))
    if not offered:
        raise SpecError.at("model", f"no framework plans {model.name} {method} on {hw.name}; "
                                    f"{alternatives(tables, model.name, method, hw.name)}")
    # A method a framework plans in its own terms (reinforcement learning) has a section of its own keys.
    planning = [plugin_of(tables.frameworks[name]).planning for name in offered]
    sections = [own.starter_section(method, model, tables.frameworks[name]) for name, own in zip(offered, planning)]
    # Where only opt-in frameworks plan the job, a spec without `frameworks:` plans nothing: the starter lists them.
    listed = None if any(own.opt_in is None for own in planning) else planning[0].opt_in
    section = next((found for found in sections if found is not None), None)
    seq_len = section.seq_len if section is not None else min(SEQ_LEN, model.max_positions // 256 * 256)
    rows = {name: _train_rows(defaults.for_framework(name), model) for name in offered}
    # A key whose default differs between the offered frameworks is listed per framework, not as one value: giving
    # it sets every framework alike.
    shared = [row for row in rows[offered[0]] if all(row in own for own in rows.values())]
    own = [(name, row) for name in offered for row in rows[name] if row not in shared]
    lora = [(key, _adapter_default(defaults, key), defaults.values[key]["source"])
            for key in ADAPTER_KEYS] if trains_adapters(method) else []
    return env.get_template("init.yaml.j2").render(
        schema=schema, job=job_name(model.name, method, hw.name), kind=_kind(method),
        section=section,
        schedulers=list(RUN_TIME), model=hf_id if hf_id != model.hf_id else model.name,
        model_comment=_model_comment(tables, model, hf_id), hf_id=hf_id, method=method,
        quantization_bit=hw.quantization_bits[0] if method == "qlora" else None, seq_len=seq_len,
        hardware=hw.name, hardware_label=hw.label, frameworks=offered, listed=listed, train=shared, own=own, lora=lora,
        formats=[] if method == "pretrain" else _formats(tables, offered), default_format=default_format(model))


def job_name(model: str, method: str, hardware: str) -> str:
    """`<model>-<method>-<hardware>` in the letters every scheduler takes: Volcano names pods by the job, and a
    Kubernetes DNS-1123 label holds lowercase letters, digits and '-' only (scheduler.check_names)."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{model}-{method}-{hardware}".lower())


def _kind(method: str) -> str:
    """Which starter a method gets: batch prediction (no training keys), or training."""
    return "predict" if method in SERVING_METHODS else "train"


def alternatives(tables: Tables, model: str, method: str, hardware: str) -> str:
    """What does run, in words: the model's other methods on the hardware, and the models the method runs there."""
    methods = sorted({r.method for r in supported(tables, model=model, hardware=hardware)}, key=METHODS.index)
    models = list(dict.fromkeys(r.model for r in supported(tables, method=method, hardware=hardware)))
    return (f"there {model} plans {', '.join(methods) if methods else 'nothing'}, and {method} plans "
            f"{', '.join(models) if models else 'no model'} "
            f"(gen-launch models --method {method} --hardware {hardware})")


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


def _train_rows(defaults: RecipeDefaults, model) -> list[tuple[str, object, str]]:
    """(key, value, source) of the recipe keys a starter shows, for one framework's defaults."""
    train = [(key, default_row(defaults, key, model)["value"], default_row(defaults, key, model)["source"])
             for key in TRAIN_KEYS]
    return train + [(key, defaults.common[key]["value"], defaults.common[key]["source"]) for key in COMMON_KEYS]


def _adapter_default(defaults: RecipeDefaults, key: str):
    """A LoRA default's value; the alpha at the default rank."""
    row = defaults.values[key]
    return default_alpha(row, defaults.values["rank"]["value"]) if key == "alpha" else row["value"]
