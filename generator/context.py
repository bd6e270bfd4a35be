"""What every step of one framework's resolution needs: the spec, the model and hardware rows, the framework."""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

from .api.contract import MemoryInputs, Planning, RoleKind, SearchSpace
from .api.frozen import frozen
from .frameworks import plugin_of
from .memory import MemoryJob
from .recipe import batch_target
from .spec import Pins, Spec
from .tables import Framework, Hardware, Model, RecipeDefaults, Tables
from .training import Adapter


@frozen
class Context:
    """What every step of one framework's resolution needs. Frozen: what it derives is computed once per context (a
    layout search reads it for every candidate)."""

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
    role: RoleKind | None = None  # the role being laid out; None: the first role the method runs (its plugin's)
    tables: Tables | None = None  # every table, for a plugin's question about another row (None: a bare context)

    @cached_property
    def planning(self) -> Planning:
        """The framework plugin's planning side (generator/frameworks/contract.py)."""
        return plugin_of(self.fw).planning

    @cached_property
    def fastest(self) -> dict:
        """{(cards, global batch): the fastest layout that fits there, or None}, each searched once for this context
        (scaling.py compares a plan's rate with the counts it halves to, for every count a budget search tries)."""
        return {}

    @cached_property
    def role_kind(self) -> RoleKind:
        return self.role or self.planning.roles(self.spec.method)[0].kind

    @cached_property
    def space(self) -> SearchSpace:
        """The search space of this role's layout."""
        return self.planning.space(self.role_kind)

    @cached_property
    def pins(self) -> Pins:
        """The pins of the role being laid out: its own (layout.<framework>.<role>), else the framework's."""
        pins = self.spec.layout.get(self.fw.name, Pins())
        own = dict(pins.roles).get(self.role_kind.value) if pins.roles else None
        return own if own is not None else replace(pins, roles=())

    @cached_property
    def pinned(self) -> bool:
        return self.pins != Pins()

    @cached_property
    def info(self) -> dict:
        """The framework's facts about this model (frameworks.yaml)."""
        return self.fw.model_info(self.model.name)

    @cached_property
    def activations(self) -> dict | None:
        """The measured activations of this model's decoder, for a framework that runs the HuggingFace code."""
        if self.fw.activations is None:
            return None
        return self.fw.activations[self.info["decoder"]]

    @cached_property
    def memory_inputs(self) -> MemoryInputs:
        """What the framework's upstream recipe for this model sets that the memory model reads (its plugin says)."""
        return self.planning.memory_inputs(self)

    @cached_property
    def usable_gb(self) -> float:
        """What a card may use: the hardware's usable memory, or less where the framework's upstream recipe for this
        model caps it (the plan then writes the cap)."""
        cap = self.memory_inputs.usable_cap_gb
        return self.hw.usable_gb if cap is None else min(self.hw.usable_gb, cap)

    @cached_property
    def usable_cap(self) -> str:
        """The upstream setting that caps usable_gb below the hardware's, in words; empty where none does."""
        inputs = self.memory_inputs
        if inputs.usable_cap_gb is not None and inputs.usable_cap_gb < self.hw.usable_gb:
            return inputs.usable_cap_source
        return ""

    @cached_property
    def optimizer_shard(self) -> int | None:
        """The optimizer-state shard size where the framework's recipe shards them; None where it does not."""
        return self.memory_inputs.optimizer_shard

    @cached_property
    def memory_job(self) -> MemoryJob:
        """The memory model's job for this role (frameworks.yaml `memory`): what it reads besides the layout."""
        return MemoryJob(model=self.model, method=self.spec.method, scheme=self.fw.memory, seq_len=self.spec.seq_len,
                         lora_rank=self.adapter.rank if self.adapter else 0, overhead_gb=self.fw.overhead_gb,
                         quant_bits=self.spec.quantization_bit, activations=self.activations,
                         kbit_fp32=self.fw.kbit_fp32, optimizer_shard=self.optimizer_shard,
                         trains=self.role_kind.trains, expert_tp=self.fw.expert_tp,
                         double_quant=self.memory_inputs.double_quant)

    @cached_property
    def batch_target(self) -> int:
        """The samples per step a defaulted global batch aims at (recipe.batch_target): a search tiles it at every
        setting it tries."""
        return batch_target(self.defaults, self.spec)[0]

    @cached_property
    def mtp_layers(self) -> int:
        """Multi-token-prediction layers this framework trains."""
        return self.memory_inputs.mtp_layers

    def pin_path(self, key: str) -> str:
        roles = dict(self.spec.layout.get(self.fw.name, Pins()).roles)
        own = f"{self.role_kind.value}." if self.role_kind.value in roles else ""
        return f"layout.{self.fw.name}.{own}{key}"
