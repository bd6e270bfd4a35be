"""The iterations a MindSpeed-RL job runs over its data (Planning.run_steps): megatron_training.train_iters, each one
global batch of prompts. v2.3.0 builds its prompt dataset from whole passes over the rows until it holds
train_iters x global_batch_size prompts (cli/train_grpo.py l. 142-151, train_dapo.py l. 137-146, train_ppo.py
l. 168-177; mindspeed_rl/datasets/utils.py l. 128-139), and its trainer runs train_iters iterations of one loader
batch each (trainer/grpo_trainer_hybrid.py l. 163-166, ppo_trainer_hybrid.py l. 144): the batches run on across a
pass's end, so the rows x epochs make rows x epochs // global batch whole iterations, each row `epochs` times."""

from __future__ import annotations

import math

from ...errors import SpecError
from ...families.rl.run import RunSteps
from .examples import RELEASE

# Where upstream's data pipeline shows the count (the module docstring has the lines).
COUNTED = (f"{RELEASE} cli/train_grpo.py l. 142-151 builds train_iters x global_batch_size prompts from whole "
           f"passes over the rows, datasets/utils.py l. 128-139; its trainer runs train_iters batches, "
           f"trainer/grpo_trainer_hybrid.py l. 163-166")
# Prompts longer than rl_config.max_prompt_length leave the data before it is counted (datasets/indexed_dataset.py
# l. 34-41, the filter_length MindSpeed-RL passes: prompt_dataset.py l. 44-46): the plan counts
# the spec's rows, long ones included.
FILTERED = "prompts above max_prompt_length are dropped first (datasets/indexed_dataset.py l. 34-41)"
# DAPO's dynamic sampling draws another batch for an iteration whose groups it filters out, without counting it
# (trainer/dapo_trainer_hybrid.py l. 240-247); the data then runs on into the next pass.
DAPO = "DAPO's group filter may draw further batches for one iteration (trainer/dapo_trainer_hybrid.py l. 240-247)"


def iterations(rows: int, epochs: float, batch: int, dapo: bool) -> RunSteps:
    """train_iters for `rows` prompts over `epochs` at a global batch of `batch` prompts; refused where the data
    holds no whole batch. The resolver asks again with the epochs the count draws (resolve.py _context), so the
    product is rounded: the same rows x epochs give the same count."""
    steps = int(round(rows * epochs, 6) // batch)
    if steps < 1:
        raise SpecError.at("data.samples", f"{rows} rows x {epochs:g} epoch(s) make no whole global batch of {batch} "
                                           f"prompts, the least one MindSpeed-RL iteration draws ({COUNTED}); give "
                                           f"at least {math.ceil(batch / epochs)} rows, more epochs or a "
                                           f"smaller global_batch_size")
    why = (f"{rows} prompts x {epochs:.3g} epoch(s) // {batch} a step = {steps} train_iters ({COUNTED}; {FILTERED}"
           + (f"; {DAPO})" if dapo else ")"))
    return RunSteps(steps, batch, why)
