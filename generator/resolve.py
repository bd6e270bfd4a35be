"""Spec + tables -> Plan. Pure functions: no I/O, no clock.

Order of decisions, per framework:
1. minimum cards: the table row (or seed-003 preset for MindFormers), else the memory model;
2. time budget: N = Tok / (Time x TPS x eff), above 8 rounded up to a multiple of 8, never below the minimum;
3. card count: whole nodes above one node, die pairs on snt9b23; the memory model may raise it;
4. layout: a validated preset when one matches exactly, else a search over TP / PP / CP / EP, micro batch and
   recompute that keeps every layout satisfying the rules, prefers the least communication that fits
   (smaller TP, then smaller PP, CP, EP, then no recompute), and records every rejected candidate with its rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product

from . import __version__
from .errors import Problem, SpecError
from .memory import GIB, LayoutShape, estimate
from .plan import HEADROOM, Estimate, FrameworkPlan, Layout, MinCards, PathValue, Plan, Rejected
from .spec import FRAMEWORKS, Pins, Spec
from .tables import Framework, Hardware, Model, Preset, Tables, trains_adapters
from .throughput import cards_for_budget, hours, throughput

RECOMPUTE = ("none", "selective", "full")
TP_CHOICES = (1, 2, 4, 8, 16)
CP_SEQ_THRESHOLD = 8192  # context parallel is considered only above this sequence length
DEFAULT_GBS = {"full": 128, "lora": 128, "qlora": 128, "pretrain": 512}  # samples per step when neither spec nor preset sets it
DEFAULT_MASTER_PORT = 50001  # seed 003's example port; MindFormers suggests 50000-65535
MAX_SEARCH_CARDS = 65536
# Bytes per parameter of the model states that no layout can avoid, by (memory scheme, LoRA): a lower bound on cards.
STATE_BYTES = {("megatron-fp32", False): 16, ("megatron-fp32", True): 4, ("megatron-distopt", False): 6,
               ("megatron-distopt", True): 2, ("deepspeed", False): 0, ("deepspeed", True): 0}
MAX_RAISE = 4  # the memory model may raise the table's card count up to this factor before giving up
# 1F1B pipeline bubble = (PP - 1) / micro batches per step (Narayanan et al. 2021, "Efficient Large-Scale Language
# Model Training on GPU Clusters", section 2.2.1). The search rejects layouts that idle more than this share.
MAX_BUBBLE = 0.25
# Seed 001's rule of thumb for LoRA/SFT data set size, by model size (billions of parameters -> samples).
DATASET_ADVICE = ((10, 20_000, "7B"), (20, 40_000, "14B"), (50, 80_000, "32B"), (float("inf"), 150_000, "72B"))


@dataclass(frozen=True)
class Context:
    """What every step of one framework's resolution needs."""

    spec: Spec
    model: Model
    hw: Hardware
    fw: Framework
    force: bool

    @property
    def pins(self) -> Pins:
        return self.spec.layout.get(self.fw.name, Pins())

    @property
    def pinned(self) -> bool:
        return self.pins != Pins()

    def pin_path(self, key: str) -> str:
        return f"layout.{self.fw.name}.{key}"


# ----------------------------------------------------------------------------------------------------------------
# Entry point


def resolve(spec: Spec, tables: Tables, force: bool = False) -> Plan:
    model = tables.model(spec.model)
    hw = tables.hardware[spec.hardware]
    if spec.seq_len > model.max_positions:
        raise SpecError.at("seq_len", f"{spec.seq_len} exceeds the {model.max_positions} positions "
                                      f"(max_position_embeddings) of {model.name}")
    if spec.quantization_bit is not None and spec.quantization_bit not in hw.quantization_bits:
        raise SpecError.at("quantization_bit", f"{spec.quantization_bit}-bit bases are not offered on {hw.name}; "
                                               f"choose {' or '.join(map(str, hw.quantization_bits))} (seed 001: "
                                               f"int8 misbehaves on 910B; LLaMA-Factory's Ascend example is 4-bit)")
    names = _frameworks(spec, tables, model)
    notes: list[str] = []
    if spec.frameworks is None and not force:
        # Defaulted frameworks drop those the table marks '-' here; a named one is refused instead.
        refusals = {n: _dash_refusal(Context(spec, model, hw, tables.frameworks[n], force), tables) for n in names}
        if all(refusals.values()):
            raise SpecError.at("hardware", "; ".join(refusals.values()))
        notes.extend(f"{n} left out: {r}" for n, r in refusals.items() if r)
        names = [n for n in names if not refusals[n]]
    _check_layout_keys(spec, names)
    plans: dict[str, FrameworkPlan] = {}
    rejected: list[Rejected] = []
    warnings: list[str] = []
    for name in names:
        ctx = Context(spec, model, hw, tables.frameworks[name], force)
        fplan, fw_rejected, fw_notes, fw_warnings = _resolve_framework(ctx, tables)
        plans[name] = fplan
        rejected.extend(fw_rejected)
        notes.extend(f"{name}: {n}" for n in fw_notes)
        warnings.extend(f"{name}: {w}" for w in fw_warnings)
    notes.extend(_general_notes(spec, model, plans))
    paths = _paths(spec, model, plans)
    placeholders = sorted(k for k, v in paths.items() if v.placeholder)
    if placeholders:
        notes.append(f"paths not given in the spec, written as placeholders to edit before launch: "
                     f"{', '.join(placeholders)}")
    return Plan(job=spec.job, model=model.name, hf_id=model.hf_id, method=spec.method, seq_len=spec.seq_len,
                hardware=hw.name, hardware_label=hw.label, accelerator=hw.accelerator, cards_per_node=hw.cards_per_node,
                frameworks=plans,
                rejected=tuple(rejected), notes=tuple(notes), warnings=tuple(warnings), paths=paths,
                dataset_format=spec.dataset_format, master_addr=spec.master_addr,
                master_port=spec.master_port or DEFAULT_MASTER_PORT, spec_sha256=spec.sha256, shape=model,
                epochs=spec.epochs, samples_per_epoch=_samples_per_epoch(spec), quantization_bit=spec.quantization_bit,
                version=__version__)


def _samples_per_epoch(spec: Spec) -> int | None:
    if spec.samples is not None:
        return spec.samples
    return None if spec.total_tokens is None else math.ceil(spec.total_tokens / spec.seq_len)


def _frameworks(spec: Spec, tables: Tables, model: Model) -> list[str]:
    supported = [name for name in FRAMEWORKS if tables.supports(name, model.name)]
    if spec.frameworks is None:
        chosen = [name for name in supported if _job_refusal(tables, name, model, spec) is None]
        if not chosen:
            reasons = "; ".join(_job_refusal(tables, n, model, spec) for n in supported) or \
                f"{model.name} is not supported by any framework in the tables"
            raise SpecError.at("model", reasons)
        return chosen
    problems = []
    for i, name in enumerate(spec.frameworks):
        if name not in supported:
            fw = tables.frameworks[name]
            own = f" (its models: {', '.join(m for m in fw.models if m != 'debug-tiny')})" \
                if fw.support == "listed" else ""
            problems.append(Problem(f"frameworks.{i}", f"{name} does not support {model.name}{own}; frameworks that "
                                                       f"do: {', '.join(supported) or 'none'}"))
        elif _job_refusal(tables, name, model, spec):
            problems.append(Problem(f"frameworks.{i}", _job_refusal(tables, name, model, spec)))
    if problems:
        raise SpecError(problems)
    return [name for name in FRAMEWORKS if name in spec.frameworks]


def _job_refusal(tables: Tables, name: str, model: Model, spec: Spec) -> str | None:
    """Why `name` cannot run this job although it supports the model; None when it can."""
    fw = tables.frameworks[name]
    hw = tables.hardware[spec.hardware]
    if name not in hw.frameworks:
        return f"{name} does not run on {hw.name} ({hw.label}); frameworks there: {', '.join(hw.frameworks)}"
    if spec.method not in fw.methods:
        return f"{name} does not offer method {spec.method} (it offers: {', '.join(fw.methods)})"
    offered = fw.methods_for(model.name)
    if offered is not None and spec.method not in offered:
        return (f"{name} has no upstream {spec.method} config to follow for {model.name} "
                f"(offered: {', '.join(offered)})")
    if name == "mindformers" and spec.dataset_format != "alpaca" and spec.method != "pretrain":
        # The upstream HFDataLoader recipes use AlpacaInstructDataHandler; there is no ShareGPT recipe to follow.
        return "mindformers fine-tuning data must be alpaca-format (paths.dataset_format: alpaca)"
    return None


def _check_layout_keys(spec: Spec, names: list[str]) -> None:
    stray = [Problem(f"layout.{fw}", f"pins a framework that is not planned (frameworks: {', '.join(names)})")
             for fw in spec.layout if fw not in names]
    if stray:
        raise SpecError(stray)


# ----------------------------------------------------------------------------------------------------------------
# One framework


def _resolve_framework(ctx: Context, tables: Tables):
    notes: list[str] = []
    warnings: list[str] = []
    minimum, forced = _minimum(ctx, tables, notes)
    if minimum is None:  # no usable table cell: the smallest card count where an unpinned layout fits
        minimum = MinCards(_smallest_fit(ctx), "memory model: the smallest card count with a layout that fits",
                           "memory model (--force on a '-' cell)" if forced else "memory model (no table row)")
    tput = throughput(ctx.model, ctx.spec.method, ctx.spec.seq_len, ctx.fw, ctx.hw, ctx.spec.tokens_per_card_s)
    tokens = ctx.spec.train_tokens
    budget_cards = None
    if ctx.spec.time_budget_hours is not None and tokens is not None:
        budget_cards = cards_for_budget(tokens, ctx.spec.time_budget_hours, tput.tokens_per_card_s,
                                        ctx.spec.scaling_efficiency)

    if ctx.spec.cards is not None:
        cards = _explicit_cards(ctx, minimum, notes)
        forced = forced or cards < minimum.value
    else:
        cards = _auto_cards(ctx, minimum, budget_cards, notes)

    layout, rejected = _choose_layout(ctx, tables, cards, notes, warnings)
    if ctx.hw.accelerator == "npu" and layout.cards < ctx.hw.cards_per_node and layout.cards == minimum.value:
        notes.append(f"{layout.cards} card(s) is below one node; seed 000: one node ({ctx.hw.cards_per_node}) is "
                     f"normally used below 8 cards (set cards: {ctx.hw.cards_per_node} to do so)")
    est = Estimate(total_tokens=tokens, tokens_per_card_s=tput.tokens_per_card_s, tps_source=tput.source,
                   is_estimate=tput.is_estimate,
                   time_hours=None if tokens is None else hours(tokens, tput.tokens_per_card_s, layout.cards,
                                                                ctx.spec.scaling_efficiency),
                   budget_cards=budget_cards)
    if est.time_hours is not None and ctx.spec.time_budget_hours is not None \
            and est.time_hours > ctx.spec.time_budget_hours * 1.0001:
        warnings.append(f"predicted {est.time_hours:.1f} h exceeds the {ctx.spec.time_budget_hours:g} h budget "
                        f"on {layout.cards} cards")
    info = ctx.fw.models.get(ctx.model.name) or {}
    upstream = info.get("pretrain" if ctx.spec.method == "pretrain" else "finetune")
    if ctx.fw.memory == "deepspeed" and ctx.hw.accelerator == "npu":  # seed 001 ran LLaMA-Factory on 910B
        unsharded = ctx.model.params * 2 / GIB
        how = "without DeepSpeed" if layout.zero_stage is None else \
            f"ZeRO-{layout.zero_stage}{' + offload' if layout.offload else ''} over {layout.cards} card(s)"
        notes.append(f"seed 001 check: the bf16 weights alone need {unsharded:.1f} GiB on one card without sharding "
                     f"({'over' if unsharded > ctx.hw.usable_gb else 'within'} the {ctx.hw.usable_gb:g} GiB usable); "
                     f"{how} needs {layout.memory.total:.1f} GiB per card, "
                     f"{layout.memory.total / ctx.hw.usable_gb:.0%} of it")
    fplan = FrameworkPlan(name=ctx.fw.name, label=ctx.fw.label, layout=layout, min_cards=minimum, estimate=est,
                          forced=forced, info=info, upstream=upstream)
    return fplan, rejected, notes, warnings


# ----------------------------------------------------------------------------------------------------------------
# Cards


def _table_row(ctx: Context, tables: Tables):
    """(row, case) of the minimum-card table for this job in the framework's own column, or None."""
    spec = ctx.spec
    row_method = {"pretrain": "full", "qlora": "lora"}.get(spec.method, spec.method)
    column = "mindspeed-llm" if ctx.fw.min_cards_from == "presets-then-mindspeed-llm" else ctx.fw.min_cards_from
    rows = [r for r in tables.rows_for(ctx.model.name, column) if row_method in r.methods]
    if not rows or ctx.hw.name not in rows[0].cards:  # the table has Ascend columns only
        return None
    exact = [r for r in rows if spec.seq_len in r.seq_lens]
    larger = sorted((r for r in rows if max(r.seq_lens) >= spec.seq_len),
                    key=lambda r: min(s for s in r.seq_lens if s >= spec.seq_len))
    if exact:
        row, case = exact[0], "exact row"
    elif larger:
        row, case = larger[0], "next larger seq_len row"
    else:
        row, case = max(rows, key=lambda r: max(r.seq_lens)), "largest seq_len row"
    if spec.method in ("pretrain", "qlora"):
        case = f"{spec.method} uses the {row_method} row; {case}"
    return row, case


def _dash_refusal(ctx: Context, tables: Tables) -> str | None:
    """The refusal for a '-' cell in the framework's own column (MindFormers only borrows a column: never)."""
    found = _table_row(ctx, tables)
    if found is None or ctx.fw.min_cards_from != found[0].framework or found[0].cards[ctx.hw.name] is not None:
        return None
    row, hw = found[0], ctx.hw
    elsewhere = [f"{h} ({row.cards[h]} cards)" for h in sorted(row.cards) if row.cards[h] is not None]
    return (f"{ctx.fw.name} is not supported for {ctx.model.name} {'/'.join(row.methods)} on {hw.name} by the "
            f"minimum-card table ({row.cite(hw.name)}); supported on: {', '.join(elsewhere) or 'no platform'}. "
            f"Use --force to let the memory model decide")


def _minimum(ctx: Context, tables: Tables, notes: list[str]) -> tuple[MinCards | None, bool]:
    """The table's minimum for this framework; None when only the memory model can say. Second: forced."""
    spec, hw = ctx.spec, ctx.hw
    if ctx.fw.min_cards_from == "presets-then-mindspeed-llm":
        preset = _preset_for(ctx, tables, cards=None)
        if preset is not None:
            return MinCards(preset.cards, f"seed 003 validated config ({preset.model} {spec.method} "
                                          f"{preset.seq_len} on {preset.hardware}, level {preset.level})",
                            "preset"), False
        notes.append("minimum cards: no seed-003 preset for this case, so the MindSpeed-LLM column of the "
                     "minimum-card table stands in for MindFormers")
    found = _table_row(ctx, tables)
    if found is None:
        notes.append(f"minimum cards: the table has no row for {ctx.model.name} {spec.method}; "
                     f"the memory model decides")
        return None, False
    row, case = found
    value = row.cards[hw.name]
    if value is None:
        refusal = _dash_refusal(ctx, tables)
        if refusal is None:  # MindFormers borrowing MindSpeed-LLM's column: not a refusal
            notes.append(f"minimum cards: the borrowed {row.framework} cell is '-' on {hw.name}; "
                         f"the memory model decides")
            return None, False
        if not ctx.force:
            raise SpecError.at("hardware", refusal)
        notes.append(f"FORCED: the table has '-' for {hw.name} ({row.cite(hw.name)}); the memory model decides")
        return None, True
    if value % hw.parallel_unit:
        notes.append(f"minimum cards: table value {value} raised to {value + 1}: {hw.name} uses dies in pairs")
        value += hw.parallel_unit - value % hw.parallel_unit
    return MinCards(value, row.cite(hw.name), case), False


def _valid_counts(hw: Hardware, start: int):
    """Card counts the platform allows, from `start` up: multiples of the parallel unit up to one node,
    whole nodes beyond."""
    n = max(start, hw.parallel_unit)
    while n <= MAX_SEARCH_CARDS:
        if n <= hw.cards_per_node:
            if n % hw.parallel_unit == 0:
                yield n
            n += 1
        else:
            if n % hw.cards_per_node == 0:
                yield n
                n += hw.cards_per_node
            else:
                n += hw.cards_per_node - n % hw.cards_per_node


def _round_up(hw: Hardware, n: int) -> int:
    return next(_valid_counts(hw, n))


def _explicit_cards(ctx: Context, minimum: MinCards, notes: list[str]) -> int:
    cards, hw = ctx.spec.cards, ctx.hw
    if cards % hw.parallel_unit:
        raise SpecError.at("cards", f"{cards} is odd: {hw.name} uses dies in pairs (2 dies is the smallest "
                                    f"parallel unit); use {cards + 1}")
    if cards > hw.cards_per_node and cards % hw.cards_per_node:
        lower = cards - cards % hw.cards_per_node
        raise SpecError.at("cards", f"{cards} is not a whole number of {hw.name} nodes ({hw.cards_per_node} "
                                    f"cards each): a job larger than one node uses whole nodes; use {lower} or "
                                    f"{lower + hw.cards_per_node}")
    if cards < minimum.value:
        if not ctx.force:
            raise SpecError.at("cards", f"{cards} is below the minimum of {minimum.value} for {ctx.model.name} "
                                        f"{ctx.spec.method} {ctx.spec.seq_len} with {ctx.fw.name} on {hw.name} "
                                        f"({minimum.source}); use --force to try anyway")
        notes.append(f"FORCED: {cards} cards is below the table minimum {minimum.value} ({minimum.source})")
    return cards


def _auto_cards(ctx: Context, minimum: MinCards, budget_cards: int | None, notes: list[str]) -> int:
    cards = minimum.value
    if budget_cards is not None:
        wanted = budget_cards
        if wanted > 8:  # seed 000: above 8 cards, a multiple of 8
            wanted = math.ceil(wanted / 8) * 8
        rounded = _round_up(ctx.hw, wanted)
        notes.append(f"time budget {ctx.spec.time_budget_hours:g} h: N = Tok / (Time x TPS x eff) = {budget_cards} "
                     f"card(s), rounded to {rounded} (multiple of 8 above 8, whole nodes on {ctx.hw.name})")
        if rounded > cards:
            cards = rounded
        else:
            notes.append(f"time budget: the minimum {cards} cards already meets it")
    return _round_up(ctx.hw, cards)


def _smallest_fit(ctx: Context) -> int:
    """The smallest card count with an unpinned layout that fits. Starts from the count at which the model states
    alone, perfectly sharded, fill the budget (nothing smaller can fit)."""
    # Memory alone decides here: no pins, and no global batch that a card count may not divide.
    free = replace(ctx, spec=replace(ctx.spec, layout={}, global_batch_size=None))
    # Activations, logits and runtime do not shrink with more cards: if the largest job cannot fit, none can.
    largest = _round_up(ctx.hw, MAX_SEARCH_CARDS)
    found, closest, _ = _search(free, largest)
    if found is None:
        detail = f"; even on {largest} cards the smallest estimate is {closest.memory.total:.1f} GiB per card " \
                 f"({closest.describe()}) > {closest.budget_gb:.1f} GiB" if closest else ""
        raise SpecError.at("model", f"no {ctx.fw.name} layout fits {ctx.model.name} {ctx.spec.method} at seq_len "
                                    f"{ctx.spec.seq_len} on {ctx.hw.name}{detail}")
    budget = ctx.hw.usable_gb * (1.0 - HEADROOM) * GIB
    floor = math.ceil(ctx.model.params * STATE_BYTES[(ctx.fw.memory, trains_adapters(ctx.spec.method))] / budget)
    for n in _valid_counts(ctx.hw, max(floor, 1)):
        found, _, _ = _search(free, n)
        if found is not None:
            return n
    return largest


# ----------------------------------------------------------------------------------------------------------------
# Layout


def _choose_layout(ctx: Context, tables: Tables, cards: int, notes: list[str], warnings: list[str]):
    preset = _preset_for(ctx, tables, cards)
    if preset is not None and _pins_allow_preset(ctx.pins, preset):
        layout = _preset_layout(ctx, preset, cards)
        notes.append(f"preset: validated seed-003 MindFormers config for {preset.model} {ctx.spec.method} "
                     f"{preset.seq_len} on {preset.cards} x {preset.hardware} (level {preset.level})")
        if not layout.fits:
            notes.append(f"the memory model estimates {layout.memory.total:.1f} GiB, above the {layout.budget_gb:.1f} "
                         f"GiB budget, for the validated preset; the preset is kept (it ran on real hardware)")
        return layout, []

    _validate_pins(ctx, cards)
    best, closest, rejected = _search(ctx, cards)
    if best is not None:
        return best, rejected
    if ctx.spec.cards is None and not ctx.pinned:
        for n in _valid_counts(ctx.hw, cards + 1):
            if n > cards * MAX_RAISE:
                break
            raised, _, more = _search(ctx, n)
            if raised is not None:
                notes.append(f"the memory model raised the card count from {cards} to {n}: no layout fits on "
                             f"{cards} (see rejected)")
                return raised, rejected + more
    if closest is not None and (ctx.pinned or ctx.force):
        # The user chose the layout or forced the card count: keep the closest candidate and warn.
        warnings.append(f"layout {closest.describe()} may not fit: estimated {closest.memory.total:.1f} GiB per card "
                        f"> {closest.budget_gb:.1f} GiB (usable {closest.usable_gb:g} GiB less {HEADROOM:.0%} "
                        f"headroom)")
        return closest, rejected
    detail = (f"; the smallest estimate is {closest.memory.total:.1f} GiB per card ({closest.describe()}) > "
              f"{closest.budget_gb:.1f} GiB budget" if closest is not None else "")
    raise SpecError.at("cards" if ctx.spec.cards is not None else "model",
                       f"no {ctx.fw.name} layout of {ctx.model.name} fits on {cards} cards of {ctx.hw.name}{detail}")


def _preset_for(ctx: Context, tables: Tables, cards: int | None) -> Preset | None:
    for p in tables.presets:
        if (p.framework == ctx.fw.name and p.model == ctx.model.name and ctx.spec.method in p.methods
                and p.hardware == ctx.hw.name and p.seq_len == ctx.spec.seq_len
                and (cards is None or p.cards == cards)):
            return p
    return None


def _pins_allow_preset(pins: Pins, preset: Preset) -> bool:
    pinned = {"tp": pins.tp, "pp": pins.pp, "cp": pins.cp, "ep": pins.ep, "micro_batch_size": pins.micro_batch_size,
              "recompute": pins.recompute}
    wanted = {"tp": preset.tp, "pp": preset.pp, "cp": 1, "ep": 1, "micro_batch_size": preset.micro_batch_size,
              "recompute": "full" if preset.recompute else "none"}
    return all(v is None or v == wanted[k] for k, v in pinned.items())


def _preset_layout(ctx: Context, preset: Preset, cards: int) -> Layout:
    gbs = ctx.spec.global_batch_size or preset.micro_batch_size * preset.micro_batch_num * preset.dp
    layers = preset.num_layer_list or _split_layers(ctx.model.layers, preset.pp)
    shape = LayoutShape(cards=cards, tp=preset.tp, pp=preset.pp, cp=1, ep=1, micro_batch_size=preset.micro_batch_size,
                        recompute="full" if preset.recompute else "none", sequence_parallel=preset.sequence_parallel,
                        layers_per_stage=layers)
    layout = _layout(ctx, shape, gbs, source=f"preset: validated (seed 003, level {preset.level})")
    return replace(layout, preset_level=preset.level)


def _split_layers(layers: int, pp: int) -> tuple[int, ...]:
    """Even split; otherwise the remainder goes to the last stages, which hold fewer micro batches in flight."""
    base, extra = divmod(layers, pp)
    return tuple(base + (1 if stage >= pp - extra else 0) for stage in range(pp))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _validate_pins(ctx: Context, cards: int) -> None:
    """A pinned value that breaks a rule is an error naming the rule, at the pin's key."""
    pins = ctx.pins
    problems = []
    if pins.offload and ctx.spec.quantization_bit:
        problems.append(Problem(ctx.pin_path("offload"), "ZeRO-3 offload is for bf16 weights; a quantized (qlora) "
                                                         "base stays on the device"))
    for key, reason in _structure_problems(ctx, cards, pins.tp or 1, pins.pp or 1, pins.cp or 1, pins.ep or 1):
        if getattr(pins, key) is not None:
            problems.append(Problem(ctx.pin_path(key), reason))
    if problems:
        raise SpecError(problems)


def _structure_problems(ctx: Context, cards: int, tp: int, pp: int, cp: int, ep: int) -> list[tuple[str, str]]:
    """Every rule a (tp, pp, cp, ep) breaks, as (pin key, sentence)."""
    model, hw, seq = ctx.model, ctx.hw, ctx.spec.seq_len
    out = []
    if tp > hw.cards_per_node:
        out.append(("tp", f"TP ({tp}) must stay within one node ({hw.cards_per_node} cards on {hw.name})"))
    if model.heads % tp:
        out.append(("tp", f"TP ({tp}) must divide the {model.heads} attention heads of {model.name}"))
    if model.kv_heads % tp:
        out.append(("tp", f"TP ({tp}) must divide the {model.kv_heads} KV heads (query groups) of {model.name}"))
    if pp > model.layers:
        out.append(("pp", f"PP ({pp}) exceeds the {model.layers} layers of {model.name}"))
    if cp > 1 and seq % (2 * cp):
        out.append(("cp", f"CP ({cp}) needs seq_len divisible by 2 x CP = {2 * cp}; {seq} is not"))
    if cp > 1 and seq <= CP_SEQ_THRESHOLD:
        out.append(("cp", f"CP ({cp}) is for long sequences (> {CP_SEQ_THRESHOLD}); seq_len is {seq}"))
    if ep > 1 and not model.is_moe:
        out.append(("ep", f"EP ({ep}) applies to MoE models; {model.name} is dense"))
    if model.is_moe and model.experts % ep:
        out.append(("ep", f"EP ({ep}) must divide the {model.experts} experts of {model.name}"))
    if (cards // pp if cards % pp == 0 else 0) % ep:
        out.append(("ep", f"EP ({ep}) must divide cards / PP = {cards // pp} (expert tensor parallel 1: "
                          f"EP x expert-DP = world / PP, Megatron core_v0.12.1 parallel_state)"))
    product_ = tp * pp * cp
    if cards % product_:
        key = "cp" if cp > 1 else ("pp" if pp > 1 else "tp")
        out.append((key, f"TP ({tp}) x PP ({pp}) x CP ({cp}) = {product_} must divide the {cards} cards"))
    return out


def _search(ctx: Context, cards: int) -> tuple[Layout | None, Layout | None, list[Rejected]]:
    """All structural candidates at `cards`: (the best that fits, the one with the least memory, the rejected)."""
    pins, model, seq = ctx.pins, ctx.model, ctx.spec.seq_len
    if ctx.fw.memory == "deepspeed":
        structures = [(1, 1, 1, 1, stage) for stage in _deepspeed_stages(ctx, cards)]
        recomputes = [pins.recompute] if pins.recompute else ["none", "full"]
    else:
        tps = [pins.tp] if pins.tp else [t for t in TP_CHOICES if t <= ctx.hw.cards_per_node and t <= cards]
        pps = [pins.pp] if pins.pp else [p for p in _divisors(cards) if p <= model.layers]
        cps = [pins.cp] if pins.cp else ([1] if seq <= CP_SEQ_THRESHOLD else [1, 2, 4, 8, 16])
        eps = [pins.ep] if pins.ep else ([1] if not model.is_moe else
                                         [e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256) if e <= cards])
        structures = [(tp, pp, cp, ep, False) for tp, pp, cp, ep in product(tps, pps, cps, eps)]
        recomputes = [pins.recompute] if pins.recompute else list(RECOMPUTE)
    mbs_options = [pins.micro_batch_size] if pins.micro_batch_size else \
        ([m for m in (4, 2, 1) if m * seq <= 4096] or [1])
    fitting: list[tuple[tuple, Layout]] = []
    rejected: list[Rejected] = []
    closest: Layout | None = None
    for order, (tp, pp, cp, ep, stage) in enumerate(structures):
        zero_stage, offload = stage if ctx.fw.memory == "deepspeed" else (None, False)
        label = _label(ctx, tp, pp, cp, ep, stage)
        broken = _structure_problems(ctx, cards, tp, pp, cp, ep)
        if broken:
            rejected.append(Rejected(ctx.fw.name, label, broken[0][1]))
            continue
        dp = cards // (tp * pp * cp)
        best_here: Layout | None = None
        reason = None
        for rc_rank, recompute in enumerate(recomputes):
            for mbs in mbs_options:
                gbs, why = _global_batch(ctx, mbs, dp, pp)
                if why:
                    reason = why
                    continue
                shape = LayoutShape(cards=cards, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch_size=mbs,
                                    recompute=recompute, sequence_parallel=tp > 1,
                                    layers_per_stage=_split_layers(model.layers, pp),
                                    zero_stage=zero_stage, offload=offload)
                layout = _layout(ctx, shape, gbs, source="pinned" if ctx.pinned else "search")
                if closest is None or layout.memory.total < closest.memory.total:
                    closest = layout
                if layout.fits:
                    key = (tp, pp, cp, ep, order, rc_rank, -mbs)
                    fitting.append((key, layout))
                    best_here = best_here or layout
                elif reason is None or "memory" in reason:
                    reason = (f"memory: {layout.memory.total:.1f} GiB per card > {layout.budget_gb:.1f} GiB budget "
                              f"(usable {layout.usable_gb:g} less {HEADROOM:.0%}; tried up to recompute={recompute}, "
                              f"mbs={mbs})")
        if best_here is None:
            rejected.append(Rejected(ctx.fw.name, label, reason or "no setting fits"))
    best = min(fitting, key=lambda item: item[0])[1] if fitting else None
    return best, closest, rejected


def _label(ctx: Context, tp: int, pp: int, cp: int, ep: int, stage) -> str:
    if ctx.fw.memory == "deepspeed":
        zero, offload = stage
        return "no DeepSpeed" if zero is None else f"ZeRO-{zero}{' + offload' if offload else ''}"
    parts = [f"tp={tp}", f"pp={pp}"]
    if cp > 1:
        parts.append(f"cp={cp}")
    if ep > 1:
        parts.append(f"ep={ep}")
    return " ".join(parts)


def _deepspeed_stages(ctx: Context, cards: int) -> list[tuple[int | None, bool]]:
    """LLaMA-Factory's DeepSpeed choices, least communication first: one card trains adapters without DeepSpeed
    (as seed 002's single-GPU LoRA runs did); a quantized base shards only the adapters' states (ZeRO-2), or the
    whole model with 4-bit (LLaMA-Factory refuses an 8-bit base under ZeRO-3); bf16 weights use ZeRO-3, with CPU
    offload only when nothing else fits. A pinned `offload` keeps only the matching choices."""
    method, bits, pinned = ctx.spec.method, ctx.spec.quantization_bit, ctx.pins.offload
    stages: list[tuple[int | None, bool]] = []
    if trains_adapters(method) and cards == 1:
        stages.append((None, False))
    if method == "qlora":
        if cards > 1:
            stages.append((2, False))
            if bits == 4:
                stages.append((3, False))
    else:
        stages += [(3, False), (3, True)]
    return [s for s in stages if pinned is None or s[1] == pinned]


def _global_batch(ctx: Context, mbs: int, dp: int, pp: int) -> tuple[int, str | None]:
    """The global batch for this layout and, if it breaks a rule, why.

    Default rule (no spec value): the smallest multiple of MBS x DP that is at least DEFAULT_GBS[method] samples
    and gives at least PP and at least (PP - 1) / MAX_BUBBLE micro batches per step."""
    step = mbs * dp
    if ctx.spec.global_batch_size is not None:
        gbs = ctx.spec.global_batch_size
        if gbs % step:
            return gbs, f"global_batch_size {gbs} is not divisible by micro batch {mbs} x DP {dp} = {step}"
    else:
        # At least PP micro batches, and enough that the pipeline bubble stays within MAX_BUBBLE.
        micro = max(math.ceil(DEFAULT_GBS[ctx.spec.method] / step), pp, math.ceil((pp - 1) / MAX_BUBBLE))
        gbs = micro * step
    micro_batches = gbs // step
    if pp > 1 and micro_batches < pp:
        return gbs, (f"PP ({pp}) needs at least {pp} micro batches per step; global batch {gbs} / (MBS {mbs} x "
                     f"DP {dp}) = {micro_batches} (pipeline micro_batch_num >= stages)")
    if (pp - 1) / micro_batches > MAX_BUBBLE and not ctx.pinned:
        return gbs, (f"pipeline bubble (PP-1)/micro batches = {pp - 1}/{micro_batches} = "
                     f"{(pp - 1) / micro_batches:.0%} > {MAX_BUBBLE:.0%}")
    return gbs, None


def _layout(ctx: Context, shape: LayoutShape, gbs: int, source: str) -> Layout:
    # A pinned rank keeps LLaMA-Factory's own alpha default, 2 x rank.
    rank = ctx.pins.lora_rank or ctx.fw.lora["rank"]
    alpha = 2 * rank if ctx.pins.lora_rank else ctx.fw.lora["alpha"]
    lora = {"rank": rank, "alpha": alpha} if trains_adapters(ctx.spec.method) else {}
    memory = estimate(ctx.model, ctx.spec.method, ctx.fw.memory, shape, ctx.spec.seq_len, rank,
                      ctx.fw.overhead_gb, ctx.spec.quantization_bit)
    return Layout(framework=ctx.fw.name, cards=shape.cards, cards_per_node=ctx.hw.cards_per_node, tp=shape.tp,
                  pp=shape.pp, cp=shape.cp, ep=shape.ep, micro_batch_size=shape.micro_batch_size,
                  global_batch_size=gbs, recompute=shape.recompute, sequence_parallel=shape.sequence_parallel,
                  num_layer_list=shape.layers_per_stage, memory=memory, usable_gb=ctx.hw.usable_gb,
                  zero_stage=shape.zero_stage, offload=shape.offload, source=source,
                  cp_algo="megatron_cp_algo" if shape.cp > 1 else None,
                  lora_rank=lora.get("rank"), lora_alpha=lora.get("alpha"))


# ----------------------------------------------------------------------------------------------------------------
# Plan-wide notes and paths


def _general_notes(spec: Spec, model: Model, plans: dict[str, FrameworkPlan]) -> list[str]:
    notes = []
    if spec.samples is not None and spec.method != "pretrain":
        size_b = model.params / 1e9
        for limit, advice, label in DATASET_ADVICE:
            if size_b <= limit:
                ratio = spec.samples / advice
                notes.append(f"data: {spec.samples} samples; seed 001's rule of thumb for a ~{label} model is about "
                             f"{advice} good samples ({ratio:.1f}x that){'; quality matters more than count' if ratio > 2 else ''}")
                break
    multi = [name for name, fp in plans.items() if fp.layout.nodes > 1]
    if multi and spec.master_addr is None:
        notes.append(f"multi-node ({', '.join(multi)}) without cluster.master_addr: the launch scripts take "
                     f"MASTER_ADDR from the environment and refuse to start without it")
    if multi:
        notes.append("multi-node: output_dir must be on storage shared by every node")
    return notes


def _paths(spec: Spec, model: Model, plans: dict[str, FrameworkPlan]) -> dict[str, PathValue]:
    given = spec.paths
    output = given.get("output_dir", f"/path/to/output/{spec.job}")
    defaults = {
        "model_dir": f"/path/to/{model.hf_id.split('/')[-1]}",
        "dataset": "/path/to/data/pretrain_text_document" if spec.method == "pretrain" else
                   f"/path/to/data/train.{'json' if spec.dataset_format == 'alpaca' else 'jsonl'}",
        "output_dir": output,
    }
    if "mindformers" in plans:
        defaults["mindformers_dir"] = "/path/to/mindformers"
    if "mindspeed-llm" in plans:
        lay = plans["mindspeed-llm"].layout
        defaults["mindspeed_llm_dir"] = "/path/to/MindSpeed-LLM"
        # The converted weights' per-rank layout must match training's TP/PP, so the default folder names them.
        defaults["mcore_ckpt_dir"] = f"{output.rstrip('/')}/mcore_tp{lay.tp}_pp{lay.pp}"
    paths = {}
    for key, default in defaults.items():
        if key in given:
            paths[key] = PathValue(given[key], False)
        else:
            derived = key == "mcore_ckpt_dir" and "output_dir" in given
            paths[key] = PathValue(default, not derived)
    return paths



def minimum_table(tables: Tables, seq_len: int) -> list[dict]:
    """Minimum cards per model, framework, method and hardware at `seq_len`, for `gen-launch models`.
    A cell is a count, "-" (the table says unsupported there) or "mem" (no row: the memory model decides)."""
    rows = []
    for model in tables.models.values():
        for name in FRAMEWORKS:
            if not tables.supports(name, model.name):
                continue
            cells = {}
            for method in ("full", "lora"):
                for hw in (h for h in tables.hardware.values() if h.accelerator == "npu"):
                    spec = Spec(job="models", model=model.name, method=method, seq_len=seq_len, hardware=hw.name,
                                frameworks=(name,), cards=None, sha256="")
                    try:
                        found, _ = _minimum(Context(spec, model, hw, tables.frameworks[name], False), tables, [])
                    except SpecError:
                        cells[f"{method}/{hw.name}"] = "-"
                        continue
                    cells[f"{method}/{hw.name}"] = found.value if found else "mem"
            rows.append({"model": model.name, "params_b": round(model.params / 1e9, 2), "framework": name, **cells})
    return rows
