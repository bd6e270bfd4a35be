"""The training recipe as the plan carries it: the values every framework trains with, where each came from, and
their JSON form and PLAN.md rows. generator/recipe.py resolves them; the plan and the renderers read them here.
"""

from __future__ import annotations

from dataclasses import field

from .api.frozen import frozen


@frozen
class Adapter:
    """The LoRA shape every framework trains."""

    rank: int
    alpha: float
    dropout: float
    targets: str  # "all" (attention and MLP linear layers) | "attention"

    @property
    def scale(self) -> float:
        return self.alpha / self.rank


@frozen
class Training:
    """The training recipe the files hold: the optimizer, the schedule, the batch, the steps and the checkpoints."""

    learning_rate: float
    min_learning_rate: float
    lr_schedule: str  # "cosine" | "linear" | "constant"
    warmup_ratio: float | None  # the share, when the warmup was given (or defaulted) as one
    warmup_steps: int | None  # exact steps; None when the step count is unknown (the ratio then applies)
    weight_decay: float
    global_batch_size: int
    steps: int | None  # optimizer steps; None without a data size or train.steps
    epochs: float | None  # passes over the data; None when steps were given without a data size
    save_every_steps: int
    keep_checkpoints: int
    resume: bool
    seed: int
    optimizer: str  # "adamw" | "paged_adamw_32bit"
    adam_betas: tuple[float, float]
    max_grad_norm: float  # gradient clipping
    adapter: Adapter | None
    enable_thinking: bool | None  # Qwen3 chat template only
    origin: dict[str, str] = field(default_factory=dict)  # key -> "given" | "default: <source>" | "derived: <how>"
    # What a framework that must write a length is given when the run's length is unknown (steps None): key (one of
    # PLACEHOLDER_KEYS) -> value; origin says why and where it came from.
    placeholders: dict[str, int] = field(default_factory=dict)

    @property
    def steps_written(self) -> int:
        """The step count a framework that must write one writes: the plan's, else the placeholder its recipe row
        gives (placeholder_steps; plan.json says which)."""
        return self.steps if self.steps is not None else self.placeholders["placeholder_steps"]

    def to_json(self) -> dict:
        values = {k: getattr(self, k) for k in ("learning_rate", "min_learning_rate", "lr_schedule", "warmup_ratio",
                                                 "warmup_steps", "weight_decay", "global_batch_size", "steps",
                                                 "epochs", "save_every_steps", "keep_checkpoints", "resume", "seed",
                                                 "optimizer", "adam_betas", "max_grad_norm", "enable_thinking")}
        values["adam_betas"] = list(self.adam_betas)
        if self.adapter is not None:
            values["lora"] = {"rank": self.adapter.rank, "alpha": self.adapter.alpha,
                              "dropout": self.adapter.dropout, "targets": self.adapter.targets}
        return {**values, **self.placeholders, "origin": dict(sorted(self.origin.items()))}


LABELS = {"learning_rate": "learning rate (peak)", "min_learning_rate": "min learning rate",
          "lr_schedule": "schedule", "warmup_ratio": "warmup ratio", "warmup_steps": "warmup steps",
          "weight_decay": "weight decay", "global_batch_size": "global batch (samples)", "steps": "steps",
          "epochs": "epochs", "save_every_steps": "checkpoint every (steps)", "keep_checkpoints": "checkpoints kept",
          "resume": "resume on relaunch", "seed": "seed", "optimizer": "optimizer", "adam_betas": "Adam betas",
          "max_grad_norm": "gradient clipping", "enable_thinking": "Qwen3 thinking",
          "lora.rank": "LoRA rank", "lora.alpha": "LoRA alpha", "lora.dropout": "LoRA dropout",
          "lora.targets": "LoRA targets", "placeholder_steps": "steps written (placeholder)",
          "placeholder_samples": "training samples written (placeholder)"}
LABEL_WIDTH = max(len(label) for label in LABELS.values())  # the plan text's label column: every label fits


def _stated(t: Training) -> dict[str, tuple[str, str]]:
    """key -> (value as the plan writes it, where it came from), for every value the plan states."""
    values = t.to_json()
    lora = values.pop("lora", {})
    flat = {**values, **{f"lora.{k}": v for k, v in lora.items()}}
    out = {}
    for key in LABELS:
        value = flat.get(key)
        if value is None and key not in t.origin:
            continue
        text = "unknown" if value is None else (f"{value:g}" if isinstance(value, float) else str(value).lower()
                                                 if isinstance(value, bool) else str(value))
        out[key] = (text, t.origin.get(key, ""))
    return out


def rows(recipes: dict[str, Training]) -> list[tuple[str, str, str]]:
    """(label, value, where it came from) for every value the plan states, in a fixed order: one row where every
    framework trains with the same value, else one per value, its source naming the frameworks that use it (also a
    value only some frameworks have, as a placeholder)."""
    stated = {name: _stated(t) for name, t in recipes.items()}
    out = []
    for key, label in LABELS.items():
        groups: dict[tuple[str, str], list[str]] = {}
        for name, values in stated.items():
            if key in values:
                groups.setdefault(values[key], []).append(name)
        for i, ((text, origin), names) in enumerate(groups.items()):
            everyone = len(groups) == 1 and len(names) == len(stated)
            out.append(("" if i else label, text, origin if everyone else f"{', '.join(names)}: {origin}"))
    return out


def plan_json(recipes: dict[str, Training]) -> dict:
    """plan.json's recipe: the values every framework trains with, and under by_framework each framework's own
    where they differ (with their origins)."""
    each = {name: t.to_json() for name, t in recipes.items()}
    origins = {name: values.pop("origin") for name, values in each.items()}
    first, first_origin = next(iter(each.values())), next(iter(origins.values()))
    shared = {k: v for k, v in first.items() if all(values.get(k) == v for values in each.values())}
    shared_origin = {k: v for k, v in first_origin.items() if all(o.get(k) == v for o in origins.values())}
    by_framework = {name: {**{k: v for k, v in values.items() if k not in shared},
                           "origin": {k: v for k, v in origins[name].items() if k not in shared_origin}}
                    for name, values in each.items()}
    return {**shared, "origin": shared_origin,
            "by_framework": {name: own for name, own in by_framework.items() if len(own) > 1 or own["origin"]}}
