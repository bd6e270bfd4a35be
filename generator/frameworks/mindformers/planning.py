"""mindformers: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning)."""

from __future__ import annotations

import math

from ...api.notes import Note
from ...context import Context
from ...memory import MemoryBreakdown
from ...parallel import Parallel
from ...plan import FrameworkPlan, Layout, Plan, RunLength
from ...tables import Model
from .. import contract
from ..base import DefaultPlanning
from ..contract import MemoryInputs, PathDefault, RoleDef, RoleKind, SearchSpace, Settings
from . import predict


class Planning(DefaultPlanning):
    path_keys = ("mindformers_dir",)
    thinking_template = "MindFormers writes the Alpaca prompt"
    thinking_note = Note("mindformers.thinking_alpaca",
                         "its AlpacaInstructDataHandler writes samples in the Alpaca prompt, not Qwen3's chat "
                         "template (dataset/handler/alpaca_handler.py l. 36-51, MindFormers 2.1.0), so "
                         "train.enable_thinking applies to the other frameworks only")
    pretrain_weights = "MindFormers through pretrained_model_dir"
    # Seed 003's validated configs are MindFormers'; without one, the table's MindSpeed-LLM column (its row's
    # min_cards_from) stands in.
    presets_first = True
    min_cards_stand_in = Note("mindformers.min_cards_stand_in",
                              "minimum cards: no preset from MindFormers' Qwen3 guide for this case, so the "
                              "MindSpeed-LLM column of the minimum-card table stands in for MindFormers")
    preset_source = "MindFormers' Qwen3 guide"
    linear_decay_source = "MindFormers LinearWithWarmUpLR"
    whole_epochs_key = "runner_config.epochs"
    unshared_storage_refusal = ("MindFormers refuses to slice the weights (auto_trans_ckpt) into an output_dir that "
                                "not every node reads unless SHARED_PATHS names it (trainer/trainer.py l. 1487-1499)")

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return (RoleDef(RoleKind.SERVE),) if method == "predict" else super().roles(method)

    def space(self, role: RoleKind) -> SearchSpace:
        return predict.SPACE if role is RoleKind.SERVE else super().space(role)

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        return predict.memory(ctx, shape) if ctx.role_kind is RoleKind.SERVE else None

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> Settings | None:
        return predict.settings(plan, fp) if plan.method == "predict" else None

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        # Its facts for the model (frameworks.yaml): the recipe's context.max_device_memory caps what a card may use
        # (the plan then writes it); its parallel optimizer shards the states; it keeps DeepSeek-V3's MTP layers
        # from config.json, where MindSpeed-LLM's fine-tuning recipes leave them out.
        cap, optimizer = ctx.info.get("max_device_memory"), ctx.info.get("parallel_optimizer")
        return MemoryInputs(
            usable_cap_gb=cap["gb"] if cap else None,
            usable_cap_source=f"max_device_memory {cap['gb']:g}GB of upstream's {cap['source']}" if cap else "",
            optimizer_shard=None if optimizer is None else optimizer.get("optimizer_weight_shard_size", -1),
            mtp_layers=ctx.model.mtp_layers if ctx.info.get("trains_mtp") else 0)

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        return {"mindformers_dir": PathDefault("/path/to/mindformers")}

    def run_length(self, plan: Plan, fp: FrameworkPlan) -> RunLength | None:
        """How long MindFormers trains, in its own terms. `epochs` are whole passes (MindFormers counts in integers
        and turns them into steps, trainer/utils.py l. 191-214); `stop_step` ends the run at the plan's steps
        through the TrainCallBack callback (core/callback/callback.py l. 2781-2797; runner_config.stop_step is read
        but never added to the callbacks, trainer/base_trainer.py l. 1344-1347); `total_steps` -1 lets the schedule
        span the steps MindFormers counts in its data (base_trainer.py l. 700-708); `save_every_steps` is the
        checkpoint interval in those steps."""
        t, samples, save = plan.train, plan.samples_per_epoch, plan.train.save_every_steps
        if plan.method == "predict":  # inference runs no steps
            return None
        if plan.method == "pretrain":  # `sizes` = steps x global batch: one pass is the plan's steps
            return RunLength(1, t.steps, t.steps if t.steps is not None else -1, save,
                             "pretraining: one pass over steps x global batch samples, the plan's steps")
        if t.steps is None:
            return RunLength(max(1, int(t.epochs or 1)), None, -1, save,
                             "no step count: the plan's epochs, rounded down to whole ones, MindFormers' own count")
        epochs = t.epochs if t.origin.get("steps") != "given" else None  # the spec sized the run by epochs
        # Mcore fine-tuning packs samples into seq_len sequences (PackingHandler, seed 003): at fewest tokens /
        # seq_len of them per pass; the research layout keeps one padded sample per row.
        tokens = plan.tokens_per_epoch if fp.info["layout"] != "research" else None
        sequences = math.ceil(tokens / plan.seq_len) if tokens else samples
        if epochs is not None and tokens and sequences:
            return _packed_epochs(plan, sequences, epochs, t.steps)
        if epochs is not None and epochs == int(epochs):
            return RunLength(int(epochs), None, -1, save, "the plan's whole epochs, MindFormers' own count")
        if sequences:
            return RunLength(max(1, math.ceil(t.steps * t.global_batch_size / sequences)), t.steps, t.steps, save,
                             "the plan's steps: enough whole passes over the data, stopped at the plan's steps")
        return RunLength(t.steps, t.steps, t.steps, save,
                         "the plan's steps, with no data size: one pass per step at most, stopped at the plan's steps",
                         f"the spec gives no data size, so epochs {t.steps} is an upper bound (at least one step "
                         f"per pass)")


def _packed_epochs(plan: Plan, sequences: int, epochs: float, plan_steps: int) -> RunLength:
    """A fine-tune sized by epochs over packed data: MindFormers takes whole global batches of packed sequences
    (drop_remainder True) per pass, far fewer steps than the plan's count over samples. Whole epochs are left to its
    own count (packing may make a few more sequences than tokens / seq_len); a fraction of one stops at the share
    of that count. PLAN.md states the count, and the checkpoint interval keeps the plan's share of the run."""
    t = plan.train
    per_pass = max(1, sequences // t.global_batch_size)
    steps = max(1, math.ceil(epochs * per_pass))
    every = max(1, round(t.save_every_steps * steps / plan_steps))
    source = (f"packed data: ceil(tokens / seq_len) = {sequences} sequences, {per_pass} global batches per pass, "
              f"x {epochs:g} epochs; the checkpoint interval keeps the plan's {t.save_every_steps} of {plan_steps}")
    note = (f"MindFormers counts its steps over the packed data: at least {sequences} sequences of {plan.seq_len} "
            f"tokens per pass, {per_pass} steps of {t.global_batch_size}, so about {steps} steps for {epochs:g} "
            f"epochs where the other frameworks count {plan_steps} over unpacked samples; it saves a checkpoint "
            f"every {every} of them")
    if epochs == int(epochs):
        return RunLength(int(epochs), None, -1, every, source, note)
    return RunLength(math.ceil(epochs), steps, steps, every, source, note)


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name
