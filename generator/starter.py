"""`gen-launch init`: a commented starter spec for a model, method and hardware, with the recipe defaults and their
sources written as comments, and the schema line editors read."""

from __future__ import annotations

import jinja2

from .errors import SpecError
from .recipe import default_alpha, default_row
from .resources import resource_dir
from .tables import ADAPTER_KEYS, RecipeDefaults, Tables, trains_adapters

SEQ_LEN = 4096  # the starter's sequence length, lowered to what the model holds
# The recipe keys a starter shows, in the order README lists them.
TRAIN_KEYS = ("learning_rate", "lr_schedule", "warmup_ratio", "weight_decay")
COMMON_KEYS = ("keep_checkpoints", "resume", "seed")


def starter_spec(tables: Tables, env: jinja2.Environment, model_name: str, method: str, hardware: str) -> str:
    model = tables.model(model_name)
    hw = tables.hardware[hardware]
    defaults = tables.recipes[method]
    offered = [name for name in tables.frameworks if name in hw.frameworks and tables.supports(name, model.name)
               and method in tables.frameworks[name].methods]
    if not offered:
        raise SpecError.at("model", f"no framework trains {model.name} {method} on {hw.name}")
    seq_len = min(SEQ_LEN, model.max_positions // 256 * 256)
    rows = {name: _train_rows(defaults.for_framework(name), model) for name in offered}
    # A key whose default differs between the offered frameworks is listed per framework, not as one value: giving
    # it sets every framework alike.
    shared = [row for row in rows[offered[0]] if all(row in own for own in rows.values())]
    own = [(name, row) for name in offered for row in rows[name] if row not in shared]
    lora = [(key, _adapter_default(defaults, key), defaults.values[key]["source"])
            for key in ADAPTER_KEYS] if trains_adapters(method) else []
    return env.get_template("init.yaml.j2").render(
        schema=(resource_dir("schemas") / "job.schema.json").as_uri(), job=f"{model.name}-{method}-{hw.name}",
        model=model.name, hf_id=model.hf_id, method=method, quantization_bit=hw.quantization_bits[0]
        if method == "qlora" else None, seq_len=seq_len, hardware=hw.name, hardware_label=hw.label,
        frameworks=offered, train=shared, own=own, lora=lora)


def _train_rows(defaults: RecipeDefaults, model) -> list[tuple[str, object, str]]:
    """(key, value, source) of the recipe keys a starter shows, for one framework's defaults."""
    train = [(key, default_row(defaults, key, model)["value"], default_row(defaults, key, model)["source"])
             for key in TRAIN_KEYS]
    return train + [(key, defaults.common[key]["value"], defaults.common[key]["source"]) for key in COMMON_KEYS]



def _adapter_default(defaults: RecipeDefaults, key: str):
    """A LoRA default's value; the alpha at the default rank."""
    row = defaults.values[key]
    return default_alpha(row, defaults.values["rank"]["value"]) if key == "alpha" else row["value"]
