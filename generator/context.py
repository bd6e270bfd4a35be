"""What every step of one framework's resolution needs: the spec, the model and hardware rows, the framework."""

from __future__ import annotations

from dataclasses import dataclass

from .spec import Pins, Spec
from .tables import Framework, Hardware, Model, RecipeDefaults
from .training import Adapter


@dataclass(frozen=True)
class Context:
    """What every step of one framework's resolution needs."""

    spec: Spec
    model: Model
    hw: Hardware
    fw: Framework
    force: bool
    adapter: Adapter | None  # the LoRA shape the memory model counts (None: no adapters)
    defaults: RecipeDefaults  # the method's training defaults (the global batch target)
    # Without a spec global batch, layouts must tile the method's target (recipe.batch_target); free_batch lets each
    # layout take its own smallest batch instead (memory-only searches, and the fallback when nothing tiles it).
    free_batch: bool = False

    @property
    def pins(self) -> Pins:
        return self.spec.layout.get(self.fw.name, Pins())

    @property
    def pinned(self) -> bool:
        return self.pins != Pins()

    @property
    def info(self) -> dict:
        """The framework's facts about this model (frameworks.yaml)."""
        return self.fw.models.get(self.model.name) or {}

    @property
    def activations(self) -> dict | None:
        """The measured activations of this model's decoder, for a framework that runs the HuggingFace code."""
        if self.fw.activations is None:
            return None
        return self.fw.activations[self.info["decoder"]]

    @property
    def usable_gb(self) -> float:
        """What a card may use: the hardware's usable memory, or less where the framework's upstream config for this
        model caps it (MindFormers' context.max_device_memory, which the plan then writes)."""
        cap = self.info.get("max_device_memory")
        return min(self.hw.usable_gb, cap["gb"]) if cap else self.hw.usable_gb

    @property
    def usable_cap(self) -> str:
        """The upstream setting that caps usable_gb below the hardware's, in words; empty where none does."""
        cap = self.info.get("max_device_memory")
        if cap and cap["gb"] < self.hw.usable_gb:
            return f"max_device_memory {cap['gb']:g}GB of upstream's {cap['source']}"
        return ""

    @property
    def optimizer_shard(self) -> int | None:
        """MindSpore's optimizer_weight_shard_size where the model's upstream recipe turns the parallel optimizer on
        (-1: each parameter's whole data-parallel group); None where it stays off."""
        config = self.info.get("parallel_optimizer")
        return None if config is None else config.get("optimizer_weight_shard_size", -1)

    @property
    def mtp_layers(self) -> int:
        """Multi-token-prediction layers this framework trains (MindFormers keeps DeepSeek-V3's from its
        config.json; MindSpeed-LLM's fine-tuning recipes leave them out)."""
        return self.model.mtp_layers if self.info.get("trains_mtp") else 0

    def pin_path(self, key: str) -> str:
        return f"layout.{self.fw.name}.{key}"
