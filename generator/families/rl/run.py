"""How long an RL job runs, in the steps its files run: the followed example's epochs (an algorithm setting, like its
batch), whole batches of the prompts a step draws from the data (DAPO: its generation batch), capped where the
example caps its steps. Every RL plugin reads it, so PLAN.md, plan.json, the run estimate, the checkpoint interval
and the files state one count."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...api.frozen import frozen
from ...tables import RecipeDefaults


@frozen
class RunSteps:
    """The steps an RL job's files run and where the count comes from; `draw`: the prompts one step draws from the
    data (the global batch, or DAPO's generation batch), which one step's time counts."""

    steps: int
    draw: int
    source: str


def example_defaults(defaults: RecipeDefaults, batch: tuple[Any, str] | None,
                     epochs: tuple[Any, str] | None) -> RecipeDefaults:
    """`defaults` with the followed example's global batch (prompts) and epochs, each (value, its source), where it
    sets them: a spec's data.epochs or train.steps still wins (recipe.training)."""
    values = dict(defaults.values)
    if batch is not None:
        values["global_batch_size"] = {"value": int(batch[0]), "source": f"{batch[1]}: data.train_batch_size "
                                                                         f"(prompts)"}
    if epochs is not None:
        values["epochs"] = {"value": int(epochs[0]), "source": epochs[1]}
    return replace(defaults, values=values)


def loader_steps(train_rows: int, loader: int, epochs: int, cap: tuple[int, str] | None) -> tuple[int, str]:
    """Whole batches of `loader` prompts of the rows trained on (a loader drops the partial one), times `epochs`,
    capped at the example's own step count where it sets one (the trainer stops at whichever comes first); and why."""
    per_epoch = train_rows // loader
    steps = per_epoch * epochs
    why = f"{train_rows} train rows // {loader} prompts a step = {per_epoch} an epoch, x {epochs} epoch(s)"
    if cap is not None and cap[0] < steps:
        return cap[0], f"{why} = {steps}, capped at the example's {cap[0]} ({cap[1]})"
    return steps, why
