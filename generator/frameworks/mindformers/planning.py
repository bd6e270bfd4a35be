"""mindformers: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning)."""

from __future__ import annotations

from ...context import Context
from ...plan import Layout
from ...tables import Model
from ..base import DefaultPlanning
from ..contract import MemoryInputs, PathDefault


class Planning(DefaultPlanning):
    path_keys = ("mindformers_dir",)
    thinking_template = "MindFormers writes the Alpaca prompt"
    thinking_note = ("its AlpacaInstructDataHandler writes samples in the Alpaca prompt, not Qwen3's chat template "
                     "(dataset/handler/alpaca_handler.py l. 36-51, MindFormers 2.1.0), so train.enable_thinking "
                     "applies to the other frameworks only")
    pretrain_weights = "MindFormers through pretrained_model_dir"
    # Seed 003's validated configs are MindFormers'; without one, the table's MindSpeed-LLM column (its row's
    # min_cards_from) stands in.
    presets_first = True
    min_cards_stand_in = ("minimum cards: no seed-003 preset for this case, so the MindSpeed-LLM column of the "
                          "minimum-card table stands in for MindFormers")
    preset_source = "seed-003 MindFormers config"
    linear_decay_source = "MindFormers LinearWithWarmUpLR"
    whole_epochs_key = "runner_config.epochs"
    unshared_storage_refusal = ("MindFormers refuses to slice the weights (auto_trans_ckpt) into an output_dir that "
                                "not every node reads unless SHARED_PATHS names it (trainer/trainer.py l. 1487-1499)")

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


PLANNING = Planning()
