"""The training recipe: one set of hyperparameters for every framework, from the spec's `train:` and `lora:`
sections and the method's defaults (data/recipes.yaml). Pure functions; the plan carries the result and where each
value came from, and every renderer writes these values in its framework's own terms.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .api.notes import Note, warning
from .errors import SpecError
from .families.rl.run import RunSteps
from .spec import Spec
from .tables import PLACEHOLDER_KEYS, Model, RecipeDefaults, trains_adapters
from .training import Adapter, Training

SECONDS_PER_HOUR = 3600.0


def _pick(given: dict, key: str, default: dict, origin: dict, name: str | None = None):
    """The spec's value for `key`, else the default's, recording which."""
    name = name or key
    if key in given:
        origin[name] = "given"
        return given[key]
    origin[name] = f"default: {default['source']}"
    return default["value"]


def adapter(spec: Spec, defaults: RecipeDefaults, origin: dict | None = None) -> Adapter | None:
    """The LoRA shape (None for methods without adapters); the memory model needs the rank before any layout."""
    if not trains_adapters(spec.method):
        if spec.lora:
            raise SpecError.at("lora", f"is only used with method lora or qlora, not {spec.method}")
        return None
    origin = {} if origin is None else origin
    values = {k: _pick(spec.lora, k, defaults.values[k], origin, f"lora.{k}") for k in ("rank", "dropout", "targets")}
    if "alpha" in spec.lora:
        values["alpha"], origin["lora.alpha"] = spec.lora["alpha"], "given"
    else:
        row = defaults.values["alpha"]
        values["alpha"] = default_alpha(row, values["rank"])
        origin["lora.alpha"] = "default: " + (row["source"] if row.get("at_rank") == values["rank"] else
                                              f"{row['times_rank']:g} x rank ({row['source']})")
    return Adapter(**values)


def default_alpha(row: dict, rank: int) -> int:
    """The LoRA alpha a defaults row gives at `rank`: its value at the rank it was given with, else a multiple of
    the rank (LLaMA-Factory's lora_alpha = 2 x lora_rank), so a raised rank keeps the adapters' scale."""
    return row["value"] if row.get("at_rank") == rank else row["times_rank"] * rank


def default_row(defaults: RecipeDefaults, key: str, model: Model) -> dict:
    """A default value row; a list is banded by model size."""
    row = defaults.values[key]
    if isinstance(row, list):
        size_b = model.params / 1e9
        return next(band for band in row if size_b <= band.get("up_to_params_b", math.inf))
    return row


def training(spec: Spec, model: Model, defaults: RecipeDefaults, global_batch: int, samples: int | None,
             step_seconds: float | None, thinking_template: bool, accelerator: str,
             run: RunSteps | None = None) -> Training:
    """Resolve the recipe once the global batch and the slowest framework's step time are known; `thinking_template`:
    a planned framework applies Qwen3's chat template (the resolver refuses train.enable_thinking without one);
    `run`: the steps the framework's files run, where it counts them itself (Planning.run_steps)."""
    given, origin = spec.train, dict[str, str]()
    lr = _pick(given, "learning_rate", default_row(defaults, "learning_rate", model), origin)
    share = default_row(defaults, "min_learning_rate_share", model)
    if "min_learning_rate" in given:
        min_lr, origin["min_learning_rate"] = given["min_learning_rate"], "given"
    else:
        min_lr = float(f"{lr * share['value']:.12g}")  # 1.25e-7, not the product's 1.2500000000000002e-07
        origin["min_learning_rate"] = (f"default: {share['value']:g} x learning_rate" if share["value"] else
                                       "default: 0") + f" ({share['source']})"
    if min_lr > lr:
        raise SpecError.at("train.min_learning_rate", f"{min_lr:g} is above the peak learning_rate {lr:g}")
    schedule = _pick(given, "lr_schedule", default_row(defaults, "lr_schedule", model), origin)
    weight_decay = _pick(given, "weight_decay", default_row(defaults, "weight_decay", model), origin)
    target, why = batch_target(defaults, spec)
    if spec.global_batch_size:
        origin["global_batch_size"] = "given"
    elif global_batch == target:
        origin["global_batch_size"] = f"derived: {target} samples ({why}), which every planned layout tiles"
    else:
        origin["global_batch_size"] = f"derived: {target} samples ({why}) moved to {global_batch} (plan notes and " \
                                      f"warnings say why)"

    steps, epochs = _steps(spec, samples, global_batch, origin, defaults, run)

    if "warmup_steps" in given:
        warmup_steps, warmup_ratio, origin["warmup_steps"] = given["warmup_steps"], None, "given"
        if steps is not None and warmup_steps >= steps:
            raise SpecError.at("train.warmup_steps", f"{warmup_steps} is not below the {steps} training steps")
    else:
        warmup_ratio = _pick(given, "warmup_ratio", default_row(defaults, "warmup_ratio", model), origin)
        warmup_steps = None if steps is None else round(warmup_ratio * steps)
        if steps is not None:
            origin["warmup_steps"] = "derived: warmup_ratio x steps"

    save_every = _save_every(given, defaults, steps, step_seconds, origin)
    keep = _pick(given, "keep_checkpoints", defaults.common["keep_checkpoints"], origin)
    resume = _pick(given, "resume", defaults.common["resume"], origin)
    seed = _pick(given, "seed", defaults.common["seed"], origin)
    optimizer_row = defaults.values.get("optimizer", defaults.common["optimizer"])
    optimizer_row = optimizer_row.get(accelerator, optimizer_row)  # a row per accelerator (recipes.yaml qlora)
    optimizer = optimizer_row["value"]
    origin["optimizer"] = f"default: {optimizer_row['source']}"
    beta1, beta2 = (float(b) for b in _pick(given, "adam_betas", defaults.common["adam_betas"], origin))  # schema: 2
    clip = float(_pick(given, "max_grad_norm", defaults.common["max_grad_norm"], origin))
    if "enable_thinking" in given and spec.method == "pretrain":
        raise SpecError.at("train.enable_thinking", "pretraining reads plain text, no chat template; leave it out")
    thinking = None
    if thinking_template and spec.method != "pretrain":
        thinking = _pick(given, "enable_thinking", defaults.common["enable_thinking"], origin)
    lora = adapter(spec, defaults, origin)
    placeholders = {}
    for key in PLACEHOLDER_KEYS if steps is None else ():
        if key in defaults.values:
            placeholders[key] = defaults.values[key]["value"]
            origin[key] = (f"placeholder: the spec gives no data size and no train.steps "
                           f"({defaults.values[key]['source']})")
    return Training(learning_rate=float(lr), min_learning_rate=float(min_lr), lr_schedule=schedule,
                    warmup_ratio=None if warmup_ratio is None else float(warmup_ratio), warmup_steps=warmup_steps,
                    weight_decay=float(weight_decay), global_batch_size=global_batch, steps=steps,
                    epochs=None if epochs is None else float(epochs), save_every_steps=save_every,
                    keep_checkpoints=keep, resume=resume, seed=seed, optimizer=optimizer, adam_betas=(beta1, beta2),
                    max_grad_norm=clip, adapter=lora,
                    enable_thinking=thinking, origin=origin, placeholders=placeholders)


def _steps(spec: Spec, samples: int | None, global_batch: int, origin: dict[str, str], defaults: RecipeDefaults,
           run: RunSteps | None) -> tuple[int | None, float | None]:
    """The training steps and epochs, given or derived from the data size (None: unknown), with their origins. The
    epochs default to the method's row where it has one (RL: the followed example's), else 1; `run`, where the
    framework counts its steps itself, gives the steps."""
    given = spec.train
    row = defaults.values.get("epochs")
    if row is not None and not spec.epochs_given:
        spec = replace(spec, epochs=row["value"])
        default_epochs = f"default: {row['value']} ({row['source']})"
    else:
        default_epochs = "default: 1"
    if "steps" in given:
        steps, origin["steps"] = given["steps"], "given"
        epochs = None if samples is None else steps * global_batch / samples
        origin["epochs"] = "derived: steps x global batch / samples" if samples else "unknown: no data size"
    elif samples is not None:
        steps = max(1, math.ceil(samples * spec.epochs / global_batch)) if run is None else run.steps
        epochs = spec.epochs
        origin["steps"] = "derived: samples x epochs / global batch" if run is None else f"derived: {run.source}"
        origin["epochs"] = "given" if spec.epochs_given else default_epochs
    else:
        steps, epochs = None, spec.epochs
        origin["steps"] = "unknown: give data.samples (or total_tokens) or train.steps"
        origin["epochs"] = "given" if spec.epochs_given else default_epochs
    return steps, epochs


def _save_every(given: dict, defaults: RecipeDefaults, steps: int | None, step_seconds: float | None,
                origin: dict[str, str]) -> int:
    """The checkpoint interval in steps: given, about save_every_hours at the estimated step time, or a fixed one
    where no framework has a rate; never above the steps."""
    if "save_every_steps" in given:
        save_every, origin["save_every_steps"] = given["save_every_steps"], "given"
    elif step_seconds is None:  # no rate for any planned framework: a fixed interval
        row = defaults.common["save_every_steps_untimed"]
        save_every = row["value"] if steps is None else min(row["value"], steps)
        origin["save_every_steps"] = f"default: {row['source']}"
    else:
        hours = defaults.common["save_every_hours"]
        save_every = round_interval(hours["value"] * SECONDS_PER_HOUR / step_seconds)
        if steps is not None:
            save_every = min(save_every, steps)
        origin["save_every_steps"] = (f"derived: about {hours['value']:g} h at the estimated {step_seconds:.1f} s per "
                                      f"step ({hours['source']})")
    return save_every



def batch_target(defaults: RecipeDefaults, spec: Spec) -> tuple[int, str]:
    """The samples per step a defaulted global batch aims at, and why: the method's, smaller (except an algorithm
    batch, RL's) when the data's epochs
    would give fewer than min_steps steps (given train.steps set the length themselves)."""
    row, floor = defaults.values["global_batch_size"], defaults.common["min_steps"]
    if spec.samples_per_epoch is None or "steps" in spec.train or algorithm_batch(defaults):
        return row["value"], row["source"]
    samples = spec.samples_per_epoch * spec.epochs
    if samples / row["value"] >= floor["value"]:
        return row["value"], row["source"]
    # The power of two at or below samples / min_steps: the batch is rounded up from here.
    target = 1 << max(0, int(samples // floor["value"]).bit_length() - 1)
    return target, f"{samples:g} samples / {floor['value']} steps ({floor['source']})"


def algorithm_batch(defaults: RecipeDefaults) -> bool:
    """Whether the method's batch is an algorithm setting (RL: the prompts one policy update averages over), which
    no data size, step count or time budget moves (recipes.yaml algorithm_batch)."""
    return bool(defaults.values.get("algorithm_batch", {}).get("value"))


def round_interval(steps: float) -> int:
    """The largest 1-2-5 x 10^k number of steps not above `steps` (at least 1): intervals a person would pick."""
    if steps < 1:
        return 1
    power = 10 ** math.floor(math.log10(steps))
    return max(m * power for m in (1, 2, 5) if m * power <= steps)


def schedule_warnings(t: Training, defaults: RecipeDefaults) -> list[Note]:
    """Warnings on a schedule too short to warm up and decay: fewer than about min_steps steps, or a warmup that
    takes most of them."""
    floor = defaults.common["min_steps"]
    out = []
    if t.steps is not None and t.steps < floor["value"] and not algorithm_batch(defaults):
        out.append(warning("train.few_steps", f"{t.steps} optimizer steps at a global batch of {t.global_batch_size}: "
                                              f"fewer than about {floor['value']} ({floor['source']}); a smaller "
                                              f"global_batch_size, fewer cards, more data or more epochs give more"))
    if t.steps and t.warmup_steps is not None and t.warmup_steps * 2 > t.steps:
        out.append(warning("train.long_warmup", f"warmup covers {t.warmup_steps} of the {t.steps} steps: the learning "
                                                f"rate spends most of the run rising; lower train.warmup_steps (or "
                                                f"warmup_ratio) or train longer"))
    return out
