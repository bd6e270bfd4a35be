"""The data tables under generator/data/, loaded once, with lookups by canonical name.

Derived numbers (head_dim, parameter counts) are computed here from each row's shape, so a row cannot
contradict itself. Nothing here reads the job spec.
"""

from __future__ import annotations

import contextlib
import csv
import marshal
import math
import re
from dataclasses import MISSING, field, fields
from functools import cached_property, lru_cache
from pathlib import Path

import yaml

from . import kept
from .api.frozen import frozen
from .errors import SpecError, TableError, show
from .facts import (
    Accelerator,
    Column,
    Confidence,
    EpDimension,
    MemoryScheme,
    Support,
    ThroughputModel,
    check_choice,
    check_share,
    is_number,
    parse_columns,
    typed,
)
from .resources import DATA_DIR

# Fine-tuning and pretraining methods, the reinforcement-learning methods a framework with roles (an actor, a
# rollout engine ...) offers, and the methods that train nothing (inference: no MFU share, no time).
TRAINING_METHODS = ("full", "lora", "qlora", "pretrain", "full_vision")
# A method that trains as another does, but for which modules: full_vision is full fine-tuning with a VL model's
# vision tower and projector unfrozen too, so it runs at full's MFU.
VARIANT_OF = {"full_vision": "full"}
RL_METHODS = ("grpo", "dapo", "ppo")
SERVING_METHODS = ("predict",)
METHODS = TRAINING_METHODS + RL_METHODS + SERVING_METHODS


def trains_adapters(method: str) -> bool:
    """LoRA and QLoRA train adapters on a frozen base."""
    return method in ("lora", "qlora")


@frozen
class Model:
    """One models.yaml row; its types, ranges and defaults are the file's `columns:` block."""

    name: str
    hf_id: str
    source: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    max_positions: int
    head_dim: int | None
    tied: bool
    qk_norm: bool
    qkv_bias: bool
    rope_base: float
    norm_eps: float
    experts: int
    topk: int
    moe_ffn: int
    shared_experts: int
    first_dense: int
    params_b: float | None
    vision_params_b: float
    gated_mlp: bool
    mtp_layers: int  # multi-token-prediction layers after the last decoder layer (num_nextn_predict_layers)

    @cached_property
    def kv_channels(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @cached_property
    def is_moe(self) -> bool:
        return self.experts > 0

    @cached_property
    def q_dim(self) -> int:
        return self.heads * self.kv_channels

    @cached_property
    def kv_dim(self) -> int:
        return self.kv_heads * self.kv_channels

    @cached_property
    def moe_layers(self) -> int:
        return self.layers - self.first_dense if self.is_moe else 0

    @cached_property
    def attention_params(self) -> int:
        """q, k, v, o projections (+ qkv bias, qk-norm weights) of one layer."""
        p = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        if self.qkv_bias:
            p += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            p += 2 * self.kv_channels
        return p

    @cached_property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2  # SwiGLU: gate, up, down; GELU: up, down

    @cached_property
    def dense_mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn

    @cached_property
    def expert_params_per_layer(self) -> int:
        """Routed experts of one MoE layer (sharded by EP)."""
        return self.experts * 3 * self.hidden * self.moe_ffn

    @cached_property
    def shared_params_per_moe_layer(self) -> int:
        """Router plus shared experts of one MoE layer (sharded like dense weights)."""
        return self.hidden * self.experts + self.shared_experts * 3 * self.hidden * self.moe_ffn

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @cached_property
    def expert_params(self) -> int:
        return self.moe_layers * self.expert_params_per_layer

    @cached_property
    def layer_params(self) -> int:
        """Non-expert parameters of one transformer layer, averaged over the layers (norms included)."""
        formula = self.layers * (self.attention_params + 2 * self.hidden) + (self.layers - self.moe_layers) * \
            self.dense_mlp_params + self.moe_layers * self.shared_params_per_moe_layer
        if self.params_b is not None:
            # The published total fixes the non-expert part where the shape formula does not apply (MLA).
            formula = int(self.params_b * 1e9) - self.expert_params - self._embeddings_total
        return formula // self.layers

    def layer_params_at(self, index: int) -> int:
        """Non-expert parameters of layer `index` (0-based; an MTP layer is index `layers`): the leading dense layers
        (first_dense) hold a full MLP, the MoE layers only their router and shared experts. layer_params averages
        them: DeepSeek-V3's 3 dense layers hold about 583 M each against the 251 M average."""
        moe = self.is_moe and index >= self.first_dense
        return self._layer_base + (self.shared_params_per_moe_layer if moe else self.dense_mlp_params)

    @cached_property
    def _layer_base(self) -> int:
        """A layer's non-expert parameters besides its MLP (attention, norms)."""
        mlps = (self.layers - self.moe_layers) * self.dense_mlp_params + \
            self.moe_layers * self.shared_params_per_moe_layer
        return (self.layers * self.layer_params - mlps) // self.layers

    @cached_property
    def _embeddings_total(self) -> int:
        return self.embedding_params * (1 if self.tied else 2) + self.hidden

    @cached_property
    def params(self) -> int:
        """All parameters of the language model plus the vision tower."""
        return self.layers * self.layer_params + self.expert_params + self._embeddings_total + self.vision_params

    @cached_property
    def vision_params(self) -> int:
        return int(self.vision_params_b * 1e9)

    @property
    def vision(self) -> bool:
        """A vision-language model (it has a vision tower)."""
        return self.vision_params_b > 0

    @cached_property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: top-k routed experts only)."""
        if not self.is_moe:
            return self.params
        routed_active = self.moe_layers * self.topk * 3 * self.hidden * self.moe_ffn
        return self.params - self.expert_params + routed_active

    @cached_property
    def matmul_params(self) -> int:
        """Parameters one token multiplies through: the active layers (and vision tower) and the output projection,
        tied or not. The input embedding is a lookup and the final norm no matrix."""
        return self.active_params - self._embeddings_total + self.embedding_params

    @property
    def largest_layer_params(self) -> int:
        """The largest single module DeepSpeed ZeRO-3 gathers at once: the embedding or a whole layer."""
        per_layer = self.layer_params + (self.expert_params_per_layer if self.is_moe else 0)
        return max(self.embedding_params, per_layer)

    def lora_params_per_layer(self, rank: int) -> int:
        """Adapters on linear_qkv, linear_proj, linear_fc1, linear_fc2 (dense MLP or shared part only)."""
        qkv = rank * (self.hidden + self.q_dim + 2 * self.kv_dim)
        proj = rank * (self.q_dim + self.hidden)
        mlp_ffn = self.ffn if not self.is_moe else self.moe_ffn * max(self.shared_experts, 1)
        mlp = rank * (self.hidden + (self.mlp_matrices - 1) * mlp_ffn) + rank * (mlp_ffn + self.hidden)
        return qkv + proj + mlp


@frozen
class Hardware:
    """One hardware.yaml row; its types, ranges and defaults are the file's `columns:` block."""

    name: str
    label: str
    cards_per_node: int
    parallel_unit: int
    memory_gb: float
    usable_gb: float
    peak_tflops_bf16: float
    accelerator: str
    frameworks: tuple[str, ...]
    quantization_bits: tuple[int, ...]
    source: str
    # Step-model inputs (generator/throughput.py); None on hardware planned with an MFU instead (GPUs).
    link_gb_s: float | None  # rate of a ring collective inside a node, per card
    scaleout_gb_s: float | None  # per card, between nodes
    attention_efficiency: dict | None  # fused attention forward: sequence length -> share of peak
    scaling_efficiency: float  # share of the estimated rate a multi-node job keeps (measured), with its source
    scaling_source: str
    scaling_measured_cards: int | None  # the largest count it was measured at; None: not measured on this row
    aliases: tuple[dict, ...]  # {name, source}: other names a spec may give for this row
    volcano_accelerator_type: str | None  # MindCluster's node label for the row (None: no node selector)
    volcano_super_pod: bool  # MindCluster schedules it as a SuperPoD (sp-block annotation)


def hardware_key(name: str) -> str:
    """How hardware names are matched: 'Atlas 800T A2', 'atlas-800t-a2' and 'ATLAS800TA2' are one name."""
    return re.sub(r"[\s_-]+", "", name).casefold()


def _known(name: str, names: dict[str, str], key, where: str, what: str, listing: str) -> str:
    """The canonical name `name` stands for (`names`: key(name) -> canonical name); unknown -> SpecError at `where`
    ("`name` is not `what`") with the closest name when one is close."""
    found = names.get(key(name))
    if found is not None:
        return found
    import difflib  # only an unknown name needs it (a millisecond of every start-up otherwise)

    close = _same_family(key(name), names) or _inside(key(name), names) \
        or difflib.get_close_matches(key(name), sorted(names), n=1, cutoff=0.6)
    hint = f"; did you mean {names[close[0]]}?" if close else ""
    raise SpecError.at(where, f"{show(name)} is not {what}{hint} ({listing})")


SIZED = re.compile(r"(.*?)(\d+(?:\.\d+)?)b")  # a model name ending in its size: qwen3-7b, llama3.1-70b


def _same_family(wanted: str, names: dict[str, str]) -> list[str]:
    """The known name of the same family whose size is nearest (qwen3-7b: qwen3-8b, not the closer-spelt
    qwen3-1.7b); [] when `wanted` names no size or no row shares its family."""
    found = SIZED.fullmatch(wanted)
    if found is None:
        return []
    sizes = {known: float(m[2]) for known in names
             if (m := SIZED.fullmatch(known)) and m[1] == found[1] and float(m[2])}
    target = float(found[2])
    return sorted(sizes, key=lambda known: (abs(math.log(sizes[known] / target)), known))[:1] if target else []


def _inside(wanted: str, names: dict[str, str]) -> list[str]:
    """The longest known name (3 characters or more) `wanted` ends in: a vendor's prefix before an alias
    (Ascend910B: 910B; NVIDIA-H100: h100)."""
    inside = sorted((known for known in names if len(known) >= 3 and wanted.endswith(known)),
                    key=lambda k: (-len(k), k))
    return inside[:1]


@frozen
class Framework:
    """One framework's row of frameworks.yaml, typed when the tables load."""

    name: str
    plugin: str  # the module exposing its PLUGIN (generator/frameworks/contract.py)
    label: str
    memory: str
    methods: tuple[str, ...]
    dataset_formats: tuple[str, ...]  # fine-tuning data formats it reads
    overhead_gb: float
    throughput: dict  # {model: step, gemm_efficiency, source} or {model: mfu, mfu: {method: share}, source}
    min_cards_from: str
    support: str  # "listed": only `models`; "table": `models` plus every model with a row in its min_cards column
    models: dict  # model name -> framework-specific facts about it (may be empty)
    ep_divides: tuple[str, ...] = ()  # layout sizes whose product the expert-parallel size must divide (MoE)
    ep_rule: str = ""  # that rule's upstream source
    expert_tp: bool = True  # TP splits the routed experts too (expert TP = TP); False: EP alone splits them
    dense_stage_rule: str = ""  # source of the rule that no pipeline stage holds only leading dense layers
    one_card_accumulation: bool = True  # False: on one card the framework cannot accumulate gradients
    one_card_rule: str = ""  # why not, with its upstream source
    # The rule that a pipeline step needs at least PP micro batches, with its upstream source ("": the framework
    # runs fewer, with a larger bubble)
    pipeline_micro_rule: str = ""
    model_facts: tuple[str, ...] = ()  # keys every supported model's row must have (its renderer reads them)
    # The facts a model row may give (frameworks.yaml model_columns), typed; without it, rows are not typed
    model_columns: dict[str, Column] = field(default_factory=dict)
    templates: tuple[str, ...] | None = None  # chat templates the pinned version registers (every row's must be one)
    flash_attn: str | None = None  # the attention kernel setting written into its config (the memory model's)
    # decoder -> {"full"|"lora": {"none"|"full": coefficients}, "working": the same, "logit_bytes": {"bf16"|"fp32"}}:
    # measured in the real code (hf_activations.yaml); the memory model reads them for a framework that trains
    # HuggingFace models
    activations: dict | None = None
    # k-bit training upcasts the parameters left unquantized (embeddings, output head, norms) to fp32, and so the
    # loss (PEFT's prepare_model_for_kbit_training does); the memory model's deepspeed scheme reads it
    kbit_fp32: bool = False

    @property
    def deepspeed(self) -> bool:
        """Shards with DeepSpeed ZeRO (its layouts vary the ZeRO stage, not TP/PP/CP)."""
        return self.memory == MemoryScheme.DEEPSPEED

    def value_facts(self, column: str, value: str) -> dict:
        """The facts model_columns gives for one value of a closed column (a research family's data columns)."""
        values = self.model_columns[column].values
        assert isinstance(values, dict), f"{self.name} model_columns.{column} maps no values to facts"
        return values[value]

    def model_info(self, model: str) -> dict:
        """The framework's facts about `model` (its row; {} without one), with the facts of each closed column's
        value under `facts` (model_columns values: a research family's data columns), so that a renderer reads
        them off the plan rather than loading the tables again."""
        row = self.models.get(model) or {}
        facts = {name: self.value_facts(name, row[name]) for name, column in self.model_columns.items()
                 if isinstance(column.values, dict) and row.get(name) in column.values}
        facts_row = {**row, "facts": facts} if facts else row
        # A framework-wide fact its renderer writes (the HF-trainer family's attention kernel) rides along.
        return {**facts_row, "flash_attn": self.flash_attn} if self.flash_attn else facts_row

    def refusal(self, model: str) -> str | None:
        """Why the pinned version cannot train `model` (its row's `refuse`), or None."""
        return (self.models.get(model) or {}).get("refuse")

    def methods_for(self, model: str) -> tuple[str, ...] | None:
        """Methods this framework offers for `model` when its row limits them (None: all): its `methods` (those an
        upstream config exists for), or MindFormers' finetune / pretrain / predict columns."""
        info = self.models.get(model) or {}
        if "methods" in info:
            return tuple(info["methods"])
        if "finetune" not in info:
            return None
        offered = ("full", "lora") if info["finetune"] else ()
        return offered + tuple(method for method in ("pretrain", "predict") if info.get(method))


@frozen
class MinCardsRow:
    """One row of min_cards.csv; `line` is its line number in the file, for the plan's citation."""

    model: str
    methods: tuple[str, ...]
    seq_lens: tuple[int, ...]
    framework: str
    cards: dict  # hardware name -> int, or None for "-"
    confidence: str
    line: int

    def cite(self, hardware: str) -> str:
        value = self.cards[hardware]
        cell = "-" if value is None else value
        return (f"min_cards.csv line {self.line}: {self.model} {'/'.join(self.methods)} "
                f"{'/'.join(map(str, self.seq_lens))} {self.framework} {hardware}={cell} "
                f"(confidence {self.confidence})")


@frozen
class Preset:
    """One validated layout of presets.yaml: where it ran and the layout that ran."""

    framework: str
    model: str
    methods: tuple[str, ...]
    hardware: str
    seq_len: int
    cards: int
    dp: int
    tp: int
    pp: int
    micro_batch_num: int
    micro_batch_size: int
    recompute: bool
    sequence_parallel: dict  # method -> use_seq_parallel of the upstream config that method runs
    gradient_aggregation_group: int
    max_device_memory: str
    level: str
    num_layer_list: tuple[int, ...] | None = None


RECIPE_KEYS = ("learning_rate", "min_learning_rate_share", "lr_schedule", "warmup_ratio", "weight_decay",
               "global_batch_size")
ADAPTER_KEYS = ("rank", "alpha", "dropout", "targets")
# A framework's own rows only: the length it writes when the spec gives no data size and no train.steps (the
# resolver puts it on the plan as a placeholder).
PLACEHOLDER_KEYS = ("placeholder_steps", "placeholder_samples")
COMMON_KEYS = ("seed", "keep_checkpoints", "resume", "save_every_hours", "save_every_steps_untimed", "optimizer",
               "adam_betas", "max_grad_norm", "min_steps", "enable_thinking")


@frozen
class RecipeDefaults:
    """One method's training defaults (recipes.yaml): key -> {value, source}, or a list of size bands."""

    method: str
    values: dict
    common: dict
    frameworks: dict = field(default_factory=dict)  # framework -> its own rows for this method (recipes.yaml)

    def for_framework(self, name: str) -> RecipeDefaults:
        """The defaults `name` trains with: its own rows over the method's."""
        own = self.frameworks.get(name, {})
        return RecipeDefaults(self.method, {**self.values, **{k: v for k, v in own.items() if k not in self.common}},
                              {**self.common, **{k: v for k, v in own.items() if k in self.common}})


ACCELERATORS = tuple(a.value for a in Accelerator)


def _check_recipe_row(where: str, row) -> None:
    if isinstance(row, dict) and set(row) == set(ACCELERATORS):  # one row per accelerator
        for accelerator in ACCELERATORS:
            _check_recipe_row(f"{where}.{accelerator}", row[accelerator])
        return
    bands = row if isinstance(row, list) else [row]
    for band in bands:
        # A LoRA alpha may be a multiple of the rank (times_rank) instead of a value.
        if not isinstance(band, dict) or not ({"value", "times_rank"} & set(band)) or not band.get("source"):
            raise TableError(f"recipes.yaml {where}: every default needs a value and a source")
    if isinstance(row, list) and "up_to_params_b" in row[-1]:
        raise TableError(f"recipes.yaml {where}: the last size band must have no up_to_params_b")


def _load_recipes() -> dict[str, RecipeDefaults]:
    doc = _load_yaml("recipes.yaml")
    common = doc["common"]
    for key in COMMON_KEYS:
        if key not in common:
            raise TableError(f"recipes.yaml common: {key} is missing")
        _check_recipe_row(f"common.{key}", common[key])
    recipes = {}
    for method in METHODS:
        values = doc["methods"].get(method)
        if values is None:
            raise TableError(f"recipes.yaml: method {method} has no defaults")
        needed = RECIPE_KEYS + (ADAPTER_KEYS if trains_adapters(method) else ())
        for key in needed:
            if key not in values:
                raise TableError(f"recipes.yaml {method}: {key} is missing")
        for key, row in values.items():
            _check_recipe_row(f"{method}.{key}", row)
        recipes[method] = RecipeDefaults(method, values, common, _framework_rows(doc.get("frameworks") or {}, method))
    return recipes


def _framework_rows(frameworks: dict, method: str) -> dict[str, dict]:
    """Each framework's own rows for `method`: its every_method rows, then its rows for the method."""
    out = {}
    for name, sections in frameworks.items():
        rows = {**(sections.get("every_method") or {}), **(sections.get(method) or {})}
        for key, row in rows.items():
            if key not in RECIPE_KEYS + COMMON_KEYS + PLACEHOLDER_KEYS:
                raise TableError(f"recipes.yaml frameworks.{name}: {key} is not a recipe key")
            _check_recipe_row(f"frameworks.{name}.{key}", row)
        out[name] = rows
    return out


@frozen
class Tables:
    """Every data table, typed and checked when loaded."""

    models: dict[str, Model]
    hardware: dict[str, Hardware]
    frameworks: dict[str, Framework]
    min_cards: tuple[MinCardsRow, ...]
    presets: tuple[Preset, ...]
    recipes: dict[str, RecipeDefaults] = field(default_factory=dict)  # method -> its training defaults
    aliases: dict[str, str] = field(default_factory=dict)
    base_ids: dict[str, str] = field(default_factory=dict)  # a base model's HF id, lowercased -> as published

    def weights(self, name: str) -> str:
        """The HuggingFace id a spec's `model:` trains from: a base model's own id when it names one (planned with
        its instruct row's shape), else the row's hf_id."""
        return self.base_ids.get(name.lower()) or self.model(name).hf_id

    def base_of(self, model: Model) -> str | None:
        """The HF id of `model`'s base (the instruct row's pretrained weights), where the tables know one."""
        return next((base for base in self.base_ids.values() if self.aliases[base.lower()] == model.name), None)
    hardware_names: dict[str, str] = field(default_factory=dict)  # hardware_key of a row's name or alias -> row
    unplanned_hardware: dict[str, str] = field(default_factory=dict)  # hardware_key -> why no row plans it

    def model(self, name: str) -> Model:
        """Look a model up by canonical name or HF id (case-insensitive); unknown -> SpecError at `model`."""
        if name.lower() not in self.aliases:
            self._refuse_base(name)
        return self.models[_known(name, self.aliases, str.lower, "model", "a known model",
                                  "gen-launch models lists them")]

    def _refuse_base(self, name: str) -> None:
        """A '-Base' id without a row (Qwen3's, DeepSeek-V3's) is refused in its own words: a did-you-mean would
        point at the post-trained row, whose weights are others, and whose config.json the base's is not known to
        match (the Qwen2/2.5 and Llama 3.x bases planned from their -Instruct rows are in base_ids)."""
        if not name.lower().endswith("-base"):
            return
        stem = name.lower().removesuffix("-base")
        if stem in self.base_ids:  # Qwen2/2.5 and Llama 3.x publish their bases without the suffix
            raise SpecError.at("model", f"{show(name)} is not a known model; did you mean {self.base_ids[stem]} "
                                        f"(the base model's id)?")
        row = self.aliases.get(stem)
        what = f"the base model of {row} ({self.models[row].hf_id})" if row else "a base model"
        raise SpecError.at("model", f"{show(name)} is {what}; gen-launch has no row for it and does not plan it "
                                    f"from a post-trained row, whose weights differ and whose config.json may too "
                                    f"(add a row with the base's config.json to generator/data/models.yaml; "
                                    f"gen-launch models lists the rows)")

    def hardware_row(self, name: str) -> Hardware:
        """Look hardware up by platform id or alias (hardware_key); unknown or unplanned -> SpecError at
        `hardware`."""
        why = self.unplanned_hardware.get(hardware_key(name))
        if why is not None:
            raise SpecError.at("hardware", f"{show(name)} is not planned: {why}")
        return self.hardware[_known(name, self.hardware_names, hardware_key, "hardware",
                                    "a known hardware row or alias",
                                    f"rows: {', '.join(self.hardware)}; aliases: generator/data/hardware.yaml")]

    def hardware_alias(self, name: str) -> str | None:
        """How a spec's hardware name that is not the row's own maps to it, for the plan's notes."""
        hw = self.hardware_row(name)
        if name == hw.name:
            return None
        source = next((a["source"] for a in hw.aliases if hardware_key(a["name"]) == hardware_key(name)), None)
        return f"hardware {show(name)} is {hw.name} ({hw.label})" + (f": {source}" if source else "")

    def supports(self, framework: str, model: str) -> bool:
        fw = self.frameworks[framework]
        if model in fw.models:
            return True
        # A row with '-' cells still names the model: '-' gives no count, it does not refuse (min_cards_notes.md).
        return fw.support == Support.TABLE and any(r.model == model and r.framework == framework
                                                   for r in self.min_cards)

    def rows_for(self, model: str, framework: str) -> list[MinCardsRow]:
        return [r for r in self.min_cards if r.model == model and r.framework == framework]


def _check_preset(preset: Preset, number: int, models: dict, hardware: dict, frameworks: dict) -> Preset:
    """A preset names a framework, model, methods and hardware row the tables hold: one naming another would never
    match a job, and be dropped without a word."""
    where = f"presets.yaml preset {number} ({preset.model} {'/'.join(preset.methods)})"
    check_choice(where, "framework", preset.framework, frameworks)
    check_choice(where, "model", preset.model, models)
    check_choice(where, "hardware", preset.hardware, hardware)
    for method in preset.methods:
        check_choice(where, "methods", method, frameworks[preset.framework].methods)
    return preset


def _typed_row(cls, row: dict, where: str):
    names = {f.name for f in fields(cls)}
    unknown = set(row) - names
    if unknown:
        raise TableError(f"{where}: unknown column(s) {sorted(unknown)}")
    missing = sorted(f.name for f in fields(cls) if f.name not in row and f.default is MISSING
                     and f.default_factory is MISSING)
    if missing:
        raise TableError(f"{where}: missing {', '.join(missing)}")
    return cls(**row)


ACTIVATION_TERMS = ("hidden", "q", "kv", "ffn", "heads", "const", "scores_per_head")


def _has_activations(activations: dict, decoder: str) -> bool:
    """Coefficients of what each layer keeps and of the step's working set, for full and LoRA training, with and
    without gradient checkpointing, and the loss's bytes per logit in bf16 and in fp32."""
    sets = activations.get(decoder) or {}
    return all(set(ACTIVATION_TERMS) <= set((group.get(method) or {}).get(recompute) or {})
               for group in (sets, sets.get("working") or {})
               for method in ("full", "lora") for recompute in ("none", "full")) \
        and {"bf16", "fp32"} <= set(sets.get("logit_bytes") or {})


def _check_registry(tables: Tables) -> None:
    """What a renderer or the resolver would otherwise find missing at render time: every model a framework
    supports (its own rows, or a min_cards.csv row) has the facts that framework needs about it, every min_cards
    row names a known model and framework, and every hardware row has what its frameworks' time model reads."""
    for row in tables.min_cards:
        if row.model not in tables.models:
            raise TableError(f"min_cards.csv line {row.line}: model {row.model!r} has no row in models.yaml")
        if row.framework not in tables.frameworks:
            raise TableError(f"min_cards.csv line {row.line}: unknown framework {row.framework!r}")
    stray = sorted({name for recipe in tables.recipes.values() for name in recipe.frameworks} - set(tables.frameworks))
    if stray:
        raise TableError(f"recipes.yaml frameworks: {', '.join(stray)} is not a framework of frameworks.yaml")
    for fw in tables.frameworks.values():
        if fw.deepspeed and fw.activations is None:
            raise TableError(f"frameworks.yaml {fw.name}: the deepspeed memory scheme counts measured activations; "
                             f"give activations_file")
        if fw.memory not in tuple(MemoryScheme):
            raise TableError(f"frameworks.yaml {fw.name}: memory {fw.memory!r} is not a scheme the memory model "
                             f"knows ({', '.join(MemoryScheme)})")
        # A column of the minimum-card table (a plugin may put validated presets first: its presets_first)
        sources = {r.framework for r in tables.min_cards}
        check_choice(f"frameworks.yaml {fw.name}", "min_cards_from", fw.min_cards_from, sorted(sources))
        _check_model_facts(tables, fw)
    for hw in tables.hardware.values():
        for name in hw.frameworks:
            listed = tables.frameworks.get(name)
            if listed is None:
                raise TableError(f"hardware.yaml {hw.name}: unknown framework {name!r}")
            step_inputs = (hw.link_gb_s, hw.scaleout_gb_s, hw.attention_efficiency)
            if listed.throughput["model"] == ThroughputModel.STEP and None in step_inputs:
                raise TableError(f"hardware.yaml {hw.name}: {name} times jobs with the step model, which needs "
                                 f"link_gb_s, scaleout_gb_s and attention_efficiency")


def _check_model_facts(tables: Tables, fw: Framework) -> None:
    """Every model `fw` supports has the facts it reads (model_facts) and, where it counts measured activations,
    its decoder's."""
    for model in tables.models:
        if not tables.supports(fw.name, model) or fw.refusal(model):
            continue
        info = fw.models.get(model) or {}
        missing = [key for key in fw.model_facts if key not in info]
        if not missing and fw.activations is not None and not _has_activations(fw.activations, info["decoder"]):
            raise TableError(f"frameworks.yaml {fw.name}: {model}'s decoder {info['decoder']!r} has no measured "
                             f"activations in hf_activations.yaml (run bench/calibrate_activations.py)")
        if missing:
            raise TableError(f"frameworks.yaml {fw.name}: {model} is supported (a min_cards.csv row or its own "
                             f"row) but its row lacks {', '.join(missing)}; add them, or a `refuse` reason")


def _hardware_names(hardware: dict[str, Hardware]) -> dict[str, str]:
    """hardware_key of every row's name and alias -> the row; two rows claiming one name is a table error."""
    names: dict[str, str] = {}
    for hw in hardware.values():
        for name in (hw.name, *(alias["name"] for alias in hw.aliases)):
            if names.setdefault(hardware_key(name), hw.name) != hw.name:
                raise TableError(f"hardware.yaml {hw.name}: the name {name!r} is {names[hardware_key(name)]}'s too")
    return names


def _unplanned(rows, hardware: dict[str, Hardware]) -> dict[str, str]:
    """hardware_key -> why no row plans it; a name that is also a row's is a table error."""
    unplanned = {hardware_key(row["name"]): row["reason"] for row in rows}
    clash = sorted(set(unplanned) & set(_hardware_names(hardware)))
    if clash:
        raise TableError(f"hardware.yaml unplanned: {', '.join(clash)} also name a row")
    return unplanned


# PyYAML's C loader (libyaml) where it is built in: the same safe constructors and resolvers as yaml.SafeLoader at
# about a sixth of the parse time, which is most of every command's start-up (tests/test_tables.py checks each table
# reads the same with both). The spec keeps its own pure-Python loader (spec.py), whose checks run in the composer.
TABLE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# The parsed tables are kept as Python keeps bytecode (kept.py), under a key of each file's text and of what parses
# it. Even the C loader builds each object in Python (yaml/constructor.py): 25-40 ms of every command's start-up,
# against about 1 ms to read the kept result. marshal stores exactly the plain types the safe loader builds (int keys
# and bool stay themselves; a type it cannot store, a date, leaves the file unkept), so a hit is the parse itself;
# every row is still typed and checked on it (load_tables).
CACHE_TAG = f"{TABLE_LOADER.__module__}.{TABLE_LOADER.__name__} {yaml.__version__} marshal {marshal.version}"


def _load_yaml(name: str):
    path = DATA_DIR / name
    text = path.read_text(encoding="utf-8")
    key, entry = f"{CACHE_TAG}\n{text}".encode(), kept.entry(path.parent, path.name, "marshal")
    payload = kept.read(entry, key)
    if payload is not None:
        with contextlib.suppress(ValueError, EOFError, TypeError):
            return marshal.loads(payload)
    data = yaml.load(text, Loader=TABLE_LOADER)
    with contextlib.suppress(ValueError):  # a type marshal cannot hold: parsed each time
        kept.write(entry, key, marshal.dumps(data), path)
    return data


def load_data(name: str):
    """A YAML file under generator/data/ (`name`: its path there), parsed and kept as the tables are: a plugin's or a
    family's own data (verl's upstream examples cost a tenth of `gen-launch plan` parsed each time)."""
    return _load_yaml(name)


# min_cards.csv's columns besides one per hardware row (the header names those, and hardware.yaml must know them)
MIN_CARDS_KEYS = ("model", "strategy", "seq_len", "framework", "confidence")


def _load_min_cards(path: Path, hardware: dict[str, Hardware]) -> tuple[MinCardsRow, ...]:
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        lines = [(n, line) for n, line in enumerate(handle, start=1) if not line.startswith("#")]
    reader = csv.DictReader(line for _, line in lines)
    header, where = list(reader.fieldnames or ()), f"min_cards.csv line {lines[0][0] if lines else 1}"
    missing = [key for key in MIN_CARDS_KEYS if key not in header]
    if missing:
        raise TableError(f"{where}: the header lacks {', '.join(missing)}")
    columns = [name for name in header if name not in MIN_CARDS_KEYS]
    for name in columns:
        check_choice(where, "hardware column", name, hardware)
    for (number, _), rec in zip(lines[1:], reader):
        where = f"min_cards.csv line {number}"
        cards = {hw: (None if (rec[hw] or "").strip() == "-" else _count(where, hw, rec[hw])) for hw in columns}
        methods = tuple(rec["strategy"].split("/"))
        for method in methods:
            check_choice(where, "strategy", method, METHODS)
        check_choice(where, "confidence", rec["confidence"], Confidence)
        rows.append(MinCardsRow(
            model=rec["model"], methods=methods,
            seq_lens=tuple(_count(where, "seq_len", s) for s in rec["seq_len"].split("/")), framework=rec["framework"],
            cards=cards, confidence=rec["confidence"], line=number))
    return tuple(rows)


def _count(where: str, key: str, cell: str | None) -> int:
    """A card count or a sequence length: a positive integer."""
    text = (cell or "").strip()
    if not text.isdigit() or int(text) == 0:
        raise TableError(f"{where}: {key} {cell!r} must be a positive integer" + (" or -" if key != "seq_len" else ""))
    return int(text)


def _load_names(name: str) -> tuple[str, ...]:
    """The first column of a data TSV (comment lines start with #)."""
    lines = (DATA_DIR / name).read_text(encoding="utf-8").splitlines()
    return tuple(line.split("\t")[0] for line in lines if line and not line.startswith("#"))


def _check_templates(fw: Framework) -> None:
    """Every model row names a template the pinned version registers, or says why the framework refuses it."""
    if fw.templates is None:
        return
    for model, info in fw.models.items():
        info = info or {}
        if fw.refusal(model) is None and info.get("template") not in fw.templates:
            raise TableError(f"frameworks.yaml {fw.name} {model}: template {info.get('template')!r} is not registered "
                             f"by the pinned version (and the row gives no `refuse` reason)")


def _check_model(where: str, model: Model) -> None:
    """What the resolver relies on beyond each column's range: GQA groups whole heads, head_dim = hidden / heads
    where no head_dim is given, and a MoE row routes to at least one of its experts with a sized expert MLP."""
    if model.heads % model.kv_heads:
        raise TableError(f"{where}: heads {model.heads} must be a multiple of kv_heads {model.kv_heads}")
    if model.head_dim is None and model.hidden % model.heads:
        raise TableError(f"{where}: hidden {model.hidden} must be a multiple of heads {model.heads}, or give head_dim")
    if model.is_moe and not (0 < model.topk <= model.experts and model.moe_ffn > 0):
        raise TableError(f"{where}: a MoE row (experts {model.experts}) needs 0 < topk <= experts and moe_ffn > 0")
    if not model.is_moe and (model.topk or model.moe_ffn or model.shared_experts or model.first_dense):
        raise TableError(f"{where}: topk, moe_ffn, shared_experts and first_dense need experts > 0")
    if model.first_dense >= model.layers:
        raise TableError(f"{where}: first_dense {model.first_dense} must be below layers {model.layers}")


def _check_hardware(where: str, hw: Hardware) -> None:
    """A process cannot use more than the card holds; attention shares are fractions of the peak (the step model
    divides by them)."""
    if hw.usable_gb > hw.memory_gb:
        raise TableError(f"{where}: usable_gb {hw.usable_gb} must be at most memory_gb {hw.memory_gb}")
    for length, share in (hw.attention_efficiency or {}).items():
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            raise TableError(f"{where}: attention_efficiency key {length!r} must be a positive sequence length")
        check_share(where, f"attention_efficiency[{length}]", share)


# throughput.mfu's keys: one share per training method (an RL framework models its rate itself), and `moe` for
# full training and pretraining of MoE models (throughput.py picks it there)
MFU_KEYS = (*(method for method in TRAINING_METHODS if method not in VARIANT_OF), "moe")


def _check_throughput(where: str, throughput) -> None:
    """The time model's inputs (throughput.py): the step model's matmul efficiency, or an MFU per MFU_KEYS; each a
    share of the peak, with its source."""
    if not isinstance(throughput, dict):
        raise TableError(f"{where}: throughput must be a mapping (model, source and its numbers)")
    check_choice(where, "throughput.model", throughput.get("model"), ThroughputModel)
    step = throughput["model"] == ThroughputModel.STEP
    keys = ["model", "gemm_efficiency" if step else "mfu", "source"]
    if set(throughput) != set(keys):
        raise TableError(f"{where}: throughput model {throughput['model']} takes {', '.join(keys)}, not "
                         f"{', '.join(throughput)}")
    if not isinstance(throughput["source"], str) or not throughput["source"]:
        raise TableError(f"{where}: throughput.source must name where its numbers come from")
    if step:
        check_share(where, "throughput.gemm_efficiency", throughput["gemm_efficiency"])
        return
    mfu = throughput["mfu"]
    if not isinstance(mfu, dict) or set(mfu) != set(MFU_KEYS):
        raise TableError(f"{where}: throughput.mfu needs a share for each of {', '.join(MFU_KEYS)}, and no other")
    for key, share in mfu.items():
        check_share(where, f"throughput.mfu.{key}", share)


def _load_framework(r: dict) -> Framework:
    """One frameworks.yaml row: its closed vocabularies and numbers checked, its model rows typed by its
    model_columns (whose required columns are the facts every supported model's row must give)."""
    where = f"frameworks.yaml {r.get('name')}"
    r = dict(r)
    templates = _load_names(r.pop("templates_file")) if "templates_file" in r else None
    activations = _load_yaml(r.pop("activations_file"))["decoders"] if "activations_file" in r else None
    columns = parse_columns(f"{where} model_columns", r.pop("model_columns")) if "model_columns" in r else {}
    if columns and "model_facts" in r:
        raise TableError(f"{where}: give model_facts or model_columns (whose required columns are the facts), "
                         f"not both")
    facts = tuple(c.name for c in columns.values() if c.required) if columns else tuple(r.get("model_facts", ()))
    check_choice(where, "support", r.get("support"), Support)
    for method in r.get("methods", ()):
        check_choice(where, "methods", method, METHODS)
    for size in r.get("ep_divides", ()):
        check_choice(where, "ep_divides", size, EpDimension)
    _check_throughput(where, r.get("throughput"))
    if not isinstance(r.get("expert_tp", True), bool):
        raise TableError(f"{where}: expert_tp {r['expert_tp']!r} must be true or false")
    if not is_number(r.get("overhead_gb")) or r["overhead_gb"] < 0:
        raise TableError(f"{where}: overhead_gb {r.get('overhead_gb')!r} must be a number >= 0")
    for model, info in (r.get("models") or {}).items():
        if columns:
            typed(f"{where} {model}", info or {}, columns, defaults=False, complete=not (info or {}).get("refuse"))
    return _typed_row(Framework, {**r, "methods": tuple(r["methods"]), "dataset_formats": tuple(r["dataset_formats"]),
                                  "ep_divides": tuple(r.get("ep_divides", ())), "model_facts": facts,
                                  "model_columns": columns, "templates": templates, "activations": activations},
                      where)


@lru_cache(maxsize=1)
def load_tables() -> Tables:
    models_doc = _load_yaml("models.yaml")
    model_columns = parse_columns("models.yaml columns", models_doc.get("columns"))
    models = {}
    for row in models_doc["models"]:
        where = f"models.yaml {row.get('name')}"
        model = _typed_row(Model, typed(where, row, model_columns), where)
        _check_model(where, model)
        models[model.name] = model
    aliases, base_ids = {}, {}
    for model in models.values():
        aliases[model.name.lower()] = model.name
        aliases[model.hf_id.lower()] = model.name
        # Meta (Llama 3.x) and Qwen (Qwen2 / 2.5) publish each -Instruct model's base under the same name without
        # the suffix, with the same architecture; a spec naming the base trains from the base's weights.
        if model.hf_id.endswith("-Instruct") and not model.vision:
            base = model.hf_id.removesuffix("-Instruct")
            aliases[base.lower()] = model.name
            base_ids[base.lower()] = base
    hardware_doc = _load_yaml("hardware.yaml")
    hardware_columns = parse_columns("hardware.yaml columns", hardware_doc.get("columns"))
    hardware = {}
    for r in hardware_doc["hardware"]:
        where = f"hardware.yaml {r.get('name')}"
        r = typed(where, r, hardware_columns)
        hw = _typed_row(Hardware, {**r, "frameworks": tuple(r["frameworks"]),
                                   "quantization_bits": tuple(r["quantization_bits"]),
                                   "aliases": tuple(r["aliases"])}, where)
        _check_hardware(where, hw)
        hardware[hw.name] = hw
    frameworks = {}
    for r in _load_yaml("frameworks.yaml")["frameworks"]:
        fw = _load_framework(r)
        _check_templates(fw)
        frameworks[fw.name] = fw
    presets_doc = _load_yaml("presets.yaml")
    presets = tuple(
        _check_preset(_typed_row(Preset, {**presets_doc["defaults"], **p, "methods": tuple(p["methods"]),
                                          "num_layer_list": tuple(p["num_layer_list"]) if p.get("num_layer_list")
                                          else None}, "presets.yaml"), number, models, hardware, frameworks)
        for number, p in enumerate(presets_doc["presets"], start=1))
    tables = Tables(models=models, hardware=hardware, frameworks=frameworks,
                    min_cards=_load_min_cards(DATA_DIR / "min_cards.csv", hardware), presets=presets,
                    recipes=_load_recipes(),
                    aliases=aliases, base_ids=base_ids, hardware_names=_hardware_names(hardware),
                    unplanned_hardware=_unplanned(hardware_doc.get("unplanned", ()), hardware))
    _check_registry(tables)
    return tables
