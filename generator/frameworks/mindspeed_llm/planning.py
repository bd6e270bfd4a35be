"""mindspeed-llm: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning)."""

from __future__ import annotations

import math

from ...api.notes import Note
from ...errors import Problem
from ...plan import Layout
from ...spec import Spec
from ...tables import Model, trains_adapters
from ...training import Training
from .. import contract
from ..base import DefaultPlanning
from ..contract import PathDefault


def checkpoint_bytes_per_param(method: str) -> int:
    """Bytes per parameter of one MindSpeed-LLM checkpoint, for every method: bf16 weights, plus the distributed
    optimizer's fp32 master weights and two Adam moments when every weight trains; an adapter method saves the
    frozen model with its small adapters."""
    return 2 if trains_adapters(method) else 2 + 12


class Planning(DefaultPlanning):
    path_keys = ("mindspeed_llm_dir", "mcore_ckpt_dir")
    chat_template_fact = "prompt_type"
    thinking_template = "MindSpeed-LLM's prompt type qwen3"
    pretrain_weights = "MindSpeed-LLM after convert_ckpt.sh"
    fixed_steps = "MindSpeed-LLM --train-iters"
    unshared_storage_note = Note("mindspeed_llm.unshared_storage",
                                 "output_dir is not shared (cluster.shared_storage: false): --no-shared-storage has "
                                 "one rank per node build the dataset index (blended_megatron_dataset_builder.py l. "
                                 "26-35); every node needs the data and the converted weights at the same paths")

    def recipe_refusals(self, recipe: Training) -> list[Problem]:
        problems = []
        placeholder = recipe.placeholders.get("placeholder_steps")
        if placeholder is not None and (recipe.warmup_steps or 0) >= placeholder:
            problems.append(Problem("train.warmup_steps", f"{recipe.warmup_steps}: without a data size or train.steps, "
                                                          f"MindSpeed-LLM trains the placeholder {placeholder} "
                                                          f"iterations; give data.samples (or total_tokens) or "
                                                          f"train.steps"))
        if recipe.adapter is not None and recipe.adapter.dropout > 0:
            problems.append(Problem("lora.dropout", f"{recipe.adapter.dropout:g}: MindSpeed-LLM 2.2.0 builds its "
                                                    f"adapters with dropout 0 and has no flag for it; give 0, or "
                                                    f"leave mindspeed-llm out"))
        return problems

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> Note | None:
        """MindSpeed-LLM keeps every checkpoint it saves: Megatron core_v0.12.1 has no keep-N option (arguments.py
        _add_checkpointing_args, l. 1880-1991), so the disk a run fills is stated when it keeps more than
        train.keep_checkpoints."""
        if recipe.steps is None:
            return None
        count = math.ceil(recipe.steps / recipe.save_every_steps)  # and one at the end (training.py)
        if count <= recipe.keep_checkpoints:
            return None
        one = model.params * checkpoint_bytes_per_param(spec.method) / 2 ** 30
        return Note("mindspeed_llm.keeps_every_checkpoint",
                    f"mindspeed-llm keeps every checkpoint (Megatron has no keep-N option): {count} checkpoints of "
                    f"about {one:,.0f} GiB, {count * one / 1024:,.1f} TiB in all, in its save folder; "
                    f"train.keep_checkpoints ({recipe.keep_checkpoints}) limits the other frameworks only. Delete old "
                    f"iter_* folders as the run goes, or raise train.save_every_steps")

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        # The converted weights' per-rank layout must match training's TP/PP (and EP: expert shards are saved per
        # EP rank, mp_rank_TT_PPP_EEE), so the default folder names them.
        ep = f"_ep{layout.ep}" if model.is_moe else ""
        return {"mindspeed_llm_dir": PathDefault("/path/to/MindSpeed-LLM"),
                "mcore_ckpt_dir": PathDefault(f"{output_dir.rstrip('/')}/mcore_tp{layout.tp}_pp{layout.pp}{ep}",
                                              derived_from="output_dir")}


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name
