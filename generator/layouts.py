"""Parallel layouts: a validated preset when one matches exactly, else a search over the structures the role's
search space offers (the framework plugin's: TP / PP / CP / EP, or ZeRO stages), micro batch and recompute that
keeps every layout satisfying the rules and prefers the least communication that fits; every rejected candidate
keeps the rule it broke."""

from __future__ import annotations

import heapq
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import fields, replace
from enum import Enum
from typing import NamedTuple

from . import memory as memory_model
from .api.contract import RoleKind, Structure
from .api.notes import Note, warning
from .calibration import measured
from .cards import MAX_SEARCH_CARDS, preset_for, round_up, valid_counts
from .context import Context
from .errors import Problem, SpecError
from .memory import GIB, MemoryBreakdown, MemoryJob, estimate
from .parallel import Parallel, split_layers
from .plan import HEADROOM, Layout, Rejected, fits
from .spaces import CP_SEQ_THRESHOLD
from .spec import Pins
from .tables import Preset, Tables, trains_adapters
from .throughput import Throughput, throughput

# Bytes per parameter of the model states that no layout can avoid, by (memory scheme, LoRA): a lower bound on cards.
STATE_BYTES = {("megatron-fp32", False): 16, ("megatron-fp32", True): 4, ("megatron-distopt", False): 6,
               ("megatron-distopt", True): 2, ("deepspeed", False): 0, ("deepspeed", True): 0}
FORWARD_BYTES = 2  # a role that does not train holds only its bf16 weights
NEAREST_TRIES = 8  # multiples of the layout's batch step tried each way for a batch a refusal names
MAX_RAISE = 4  # the memory model may raise the table's card count up to this factor before giving up
# 1F1B pipeline bubble = (PP - 1) / micro batches per step (Narayanan et al. 2021, "Efficient Large-Scale Language
# Model Training on GPU Clusters", section 2.2.1). The search rejects layouts that idle more than this share.
MAX_BUBBLE = 0.25


class Cause(Enum):
    """Why a structure's settings did not fit; the rejection shows the last message, but a memory message never
    replaces a batch one (the batch is the cause to fix first)."""

    BATCH = "batch"
    MEMORY = "memory"


class NoFit(SpecError):
    """No layout of one framework fits in memory. The resolver adds the way out (nofit.py) and leaves a framework
    the spec did not list out of the plan; `cards`: the count the plan tried, above which the way out looks."""

    def __init__(self, path: str, message: str, ctx: Context, cards: int):
        super().__init__([Problem(path, message)])
        self.ctx, self.cards = ctx, cards


def choose_layout(ctx: Context, tables: Tables, cards: int, notes: list[Note], warnings: list[Note],
                  searched: tuple[Layout | None, Layout | None, list[Rejected]] | None = None):
    """The layout for `cards`: a validated preset, else the search's best (`searched`: `search`'s result for these
    cards, where the caller has it), else the count raised or the batch moved as the rules allow."""
    preset = preset_for(ctx, tables, cards)
    if preset is not None and _pins_allow_preset(ctx.pins, preset):
        layout = _preset_layout(ctx, preset, cards)
        notes.append(Note("layout.preset", f"preset: validated config from {ctx.planning.preset_source} for "
                                           f"{preset.model} {ctx.spec.method} {preset.seq_len} on {preset.cards} x "
                                           f"{preset.hardware} (level {preset.level})"))
        if not layout.fits:
            notes.append(Note("layout.preset_over_budget",
                              f"the memory model estimates {layout.memory.total:.1f} GiB, above the "
                              f"{layout.budget_gb:.1f} GiB budget, for the validated preset; the preset is kept (it "
                              f"ran on real hardware)"))
        return layout, []

    _validate_pins(ctx, cards)
    best, closest, rejected = _search_at_target(ctx, cards, searched)
    if best is not None:
        note = ctx.space.choice_note(best, rejected)
        if note:
            notes.append(note)
        return best, rejected
    tried = cards  # the largest count searched
    if ctx.spec.cards is None and not ctx.pinned:
        for n in valid_counts(ctx.hw, cards + 1):
            if n > cards * MAX_RAISE:
                break
            tried = n
            raised, _, more = _search_at_target(ctx, n)
            if raised is not None:
                notes.append(Note("cards.raised_by_memory", f"the memory model raised the card count from {cards} "
                                                            f"to {n}: no layout fits on {cards} (see rejected)"))
                return raised, rejected + more
    if closest is not None and ctx.pinned and not ctx.force:
        _pinned_does_not_fit(ctx, cards, closest)
    if closest is not None and ctx.force:
        # The user forced it: keep the closest candidate and warn.
        warnings.append(warning("layout.forced_over_budget",
                                f"layout {closest.describe()} may not fit: estimated {closest.memory.total:.1f} GiB "
                                f"per card > {closest.budget_gb:.1f} GiB (usable {closest.usable_gb:g} GiB less "
                                f"{HEADROOM:.0%} headroom)"))
        return closest, rejected
    if ctx.spec.global_batch_size is not None:
        _untileable_batch(ctx, cards, ctx.spec.global_batch_size)
    detail = (f"; the smallest estimate is {closest.memory.total:.1f} GiB per card ({closest.describe()}) > "
              f"{closest.budget_gb:.1f} GiB budget" if closest is not None else "")
    counts = f"{cards} to {tried}" if tried > cards else f"{cards}"
    raise NoFit("cards" if ctx.spec.cards is not None else "model",
                f"no {ctx.fw.name} layout of {ctx.model.name} fits on {counts} cards of {ctx.hw.name}{detail}", ctx,
                tried)


def _search_at_target(ctx: Context, cards: int, searched: tuple[Layout | None, Layout | None, list[Rejected]] | None
                      = None) -> tuple[Layout | None, Layout | None, list[Rejected]]:
    """`search` at the global batch the training asks for (the spec's, else the method's target). Only when no
    layout that fits tiles a defaulted target does the batch move: to the layout that needs the smallest batch
    (the fastest among equals); the plan warns with the old and new values (resolve._common_global_batch)."""
    best, closest, rejected = searched or search(ctx, cards)
    if best is not None or ctx.spec.global_batch_size is not None or ctx.free_batch:
        return best, closest, rejected
    moved = smallest_batch(ctx, cards)
    if moved is not None or closest is not None:
        return moved, closest, rejected
    return None, candidates(replace(ctx, free_batch=True), cards)[1], rejected


def _pinned_does_not_fit(ctx: Context, cards: int, closest: Layout) -> None:
    """A pinned layout the memory model says does not fit is refused, with its breakdown and the layout that fits
    on the same cards without the pins."""
    parts = ", ".join(f"{name} {gib:.1f}" for name, gib in closest.memory.items() if gib >= 0.05)
    free, _, _ = _search_at_target(replace(ctx, spec=replace(ctx.spec, layout={})), cards)
    nearest = (f"without the pins, {free.describe()} fits on {cards} cards ({free.memory.total:.1f} GiB)"
               if free is not None else f"no layout fits on {cards} cards")
    raise SpecError.at(f"layout.{ctx.fw.name}",
                       f"{closest.describe()} needs {closest.memory.total:.1f} GiB per card ({parts}) > "
                       f"{closest.budget_gb:.1f} GiB budget (usable {closest.usable_gb:g} GiB less {HEADROOM:.0%} "
                       f"headroom); {nearest}. Change the pins, or --force to keep them")


def _untileable_batch(ctx: Context, cards: int, wanted: int) -> None:
    """When a layout fits `cards` but not the spec's global batch (`wanted`), say which global batches that layout
    takes."""
    free, _, _ = search(replace(ctx, spec=replace(ctx.spec, global_batch_size=None), free_batch=True), cards)
    if free is None:
        return
    step = free.batch_step
    least = step * (free.pp if free.pp > 1 else 1)
    near = [n for n in (_nearest_tiled(ctx, cards, wanted, -step, least),
                        _nearest_tiled(ctx, cards, wanted, step, least)) if n is not None]
    per = (f"{step} samples per micro step" if free.sequences_per_sample == 1 else
           f"{free.micro_batch_size * free.dp} sequences per micro step, {free.sequences_per_sample} a sample")
    raise SpecError.at("global_batch_size", f"{wanted} samples cannot be split over the layout that fits on {cards} "
                                            f"cards ({free.describe()}: micro batch x DP = {per}); nearest that "
                                            f"work: {' or '.join(map(str, near)) or 'none'}")


def _nearest_tiled(ctx: Context, cards: int, wanted: int, step: int, least: int) -> int | None:
    """The nearest multiple of `step` past `wanted` (downwards for a negative step) at which a layout fits `cards`:
    a multiple of the free layout's step can still fail the other roles' or the framework's batch rules, and the
    refusal must name only values that work, each once."""
    size = abs(step)
    batch = max((wanted // size + 1) * size, least) if step > 0 else (wanted - 1) // size * size
    for _ in range(NEAREST_TRIES):
        if batch < least:
            return None
        found = search(replace(ctx, spec=replace(ctx.spec, global_batch_size=batch)), cards)[0]
        if found is not None and batch % ctx.planning.batch_unit(ctx, found) == 0:
            return batch
        batch += step
    return None


def _pins_allow_preset(pins: Pins, preset: Preset) -> bool:
    pinned = {"tp": pins.tp, "pp": pins.pp, "cp": pins.cp, "ep": pins.ep, "micro_batch_size": pins.micro_batch_size,
              "recompute": pins.recompute}
    wanted = {"tp": preset.tp, "pp": preset.pp, "cp": 1, "ep": 1, "micro_batch_size": preset.micro_batch_size,
              "recompute": "full" if preset.recompute else "none"}
    return all(v is None or v == wanted[k] for k, v in pinned.items())


def _preset_layout(ctx: Context, preset: Preset, cards: int) -> Layout:
    gbs = ctx.spec.global_batch_size or preset.micro_batch_size * preset.micro_batch_num * preset.dp
    layers = preset.num_layer_list or split_layers(ctx.model.layers, preset.pp, ctx.mtp_layers)
    sp = ctx.pins.sequence_parallel
    sp = preset.sequence_parallel[ctx.spec.method] if sp is None else sp
    shape = Parallel(cards=cards, cards_per_node=ctx.hw.cards_per_node, tp=preset.tp, pp=preset.pp,
                     micro_batch_size=preset.micro_batch_size, global_batch_size=gbs,
                     recompute="full" if preset.recompute else "none", sequence_parallel=sp and preset.tp > 1,
                     num_layer_list=layers, mtp_layers=ctx.mtp_layers)
    layout = _layout(ctx, shape, source=f"preset: validated ({ctx.planning.preset_source}, level {preset.level})")
    return replace(layout, preset_level=preset.level)


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
    if pins.sequence_parallel and (pins.tp or 1) == 1:
        problems.append(Problem(ctx.pin_path("sequence_parallel"), "sequence parallel splits the tensor-parallel "
                                                                   "group's activations: it needs a pinned tp > 1"))
    if problems:
        raise SpecError(problems)


def _sequence_parallel(pinned: bool | None, structure: Structure) -> bool:
    """The spec's pin, else the framework's default for the structure, else on wherever TP splits the layers."""
    if pinned is not None:
        return pinned
    return structure.tp > 1 if structure.sequence_parallel is None else structure.sequence_parallel


def _structure_problems(ctx: Context, cards: int, tp: int, pp: int, cp: int, ep: int) -> list[tuple[str, str]]:
    """Every rule a (tp, pp, cp, ep) breaks, as (pin key, sentence)."""
    model, hw = ctx.model, ctx.hw
    # A server splits the model over all its cards, across nodes too, and replicates a KV head where TP exceeds them
    # (its framework's plugin checks its own split: MindFormers predict.py).
    serving = ctx.role_kind is RoleKind.SERVE
    out = []
    if tp > hw.cards_per_node and not serving:
        out.append(("tp", f"TP ({tp}) must stay within one node ({hw.cards_per_node} cards on {hw.name})"))
    if model.heads % tp:
        out.append(("tp", f"TP ({tp}) must divide the {model.heads} attention heads of {model.name}"))
    if model.kv_heads % tp and not (serving and tp % model.kv_heads == 0):
        out.append(("tp", f"TP ({tp}) must divide the {model.kv_heads} KV heads (query groups) of {model.name}"))
    out += _split_problems(ctx, pp, cp, ep)
    if tp and model.ffn % tp:
        out.append(("tp", f"TP ({tp}) must divide the MLP size {model.ffn} of {model.name} (column/row-parallel "
                          f"linear layers split it)"))
    if model.is_moe and model.moe_ffn % tp:
        out.append(("tp", f"TP ({tp}) must divide the expert MLP size {model.moe_ffn} of {model.name}"))
    if model.vocab % tp:
        out.append(("tp", f"TP ({tp}) must divide the vocabulary {model.vocab} of {model.name} (vocab-parallel "
                          f"embedding)"))
    product_ = tp * pp * cp
    if ep > 1 and cards % product_ == 0:
        sizes = {"dp": cards // product_, "tp": tp, "cp": cp}
        group = math.prod(sizes[d] for d in ctx.fw.ep_divides)
        if group % ep:
            names = " x ".join(f"{d.upper()} {sizes[d]}" for d in ctx.fw.ep_divides)
            out.append(("ep", f"EP ({ep}) must divide {names} = {group} ({ctx.fw.ep_rule})"))
    if cards % product_:
        key = "cp" if cp > 1 else ("pp" if pp > 1 else "tp")
        out.append((key, f"TP ({tp}) x PP ({pp}) x CP ({cp}) = {product_} must divide the {cards} cards"))
    return out


def _split_problems(ctx: Context, pp: int, cp: int, ep: int) -> list[tuple[str, str]]:
    """The rules of the pipeline, context-parallel and expert split a (pp, cp, ep) breaks, as (pin key, sentence)."""
    model, seq = ctx.model, ctx.spec.seq_len
    out = []
    if pp > model.layers:
        out.append(("pp", f"PP ({pp}) exceeds the {model.layers} layers of {model.name}"))
    if ctx.fw.dense_stage_rule and model.first_dense and pp > 1 and model.first_dense >= model.layers // pp:
        out.append(("pp", f"PP ({pp}) leaves a stage of only the first {model.first_dense} dense layers of "
                          f"{model.name} ({model.layers} // {pp} = {model.layers // pp} per stage; "
                          f"{ctx.fw.dense_stage_rule})"))
    if cp > 1 and seq % (2 * cp):
        out.append(("cp", f"CP ({cp}) needs seq_len divisible by 2 x CP = {2 * cp}; {seq} is not"))
    if cp > 1 and seq <= CP_SEQ_THRESHOLD:
        out.append(("cp", f"CP ({cp}) is for long sequences (> {CP_SEQ_THRESHOLD}); seq_len is {seq}"))
    if ep > 1 and not model.is_moe:
        out.append(("ep", f"EP ({ep}) applies to MoE models; {model.name} is dense"))
    if model.is_moe and model.experts % ep:
        out.append(("ep", f"EP ({ep}) must divide the {model.experts} experts of {model.name}"))
    return out


def search(ctx: Context, cards: int) -> tuple[Layout | None, Layout | None, list[Rejected]]:
    """All structural candidates at `cards`: (the best that fits, the one with the least memory, the rejected)."""
    fitting, closest, rejected = candidates(ctx, cards)
    return (fitting[0] if fitting else None), closest, rejected


# _speed_key rounds a rate to 6 decimals; a setting not yet rated is queued this far ahead of the one before it in its
# chain, which it can pass only by rounding (fastest's docstring): two rounding steps, so that the float sum of the
# bound never lands behind the key it bounds.
UNRATED_LEAD = 2e-6


def fastest(ctx: Context, cards: int) -> Layout | None:
    """`search(ctx, cards)[0]` (the fastest layout that fits) where the caller needs nothing else: memory estimated
    in `_speed_key`'s order only until one fits, and a setting rated only when it may come next (a budget search asks
    this at some 25 counts; the full search estimates and rates every setting, for the closest layout and the
    reasons). A structure's settings at one micro batch are a chain, least recompute first, and a setting runs no
    faster than the one before it: the step model adds the forward run again, and what a longer backward hides of the
    gradient sync can offset it exactly (one stage, one micro batch), so that full recompute ties with none and may
    round one step faster; a rate that is not the step model's is one figure for the chain, or the step model's
    scaled (a calibration). So each chain enters the queue at its first setting, and each setting after it at the
    rate of the one before plus UNRATED_LEAD, rated when that bound comes up; a chain that holds upstream's own
    measured layout (a published rate for that setting alone) is rated whole."""
    source = "pinned" if ctx.pinned else "search"
    chains = _chains(ctx, cards)
    # (speed key or a bound of it, whether rated, chain, place): every setting's key is its own, so no entries tie
    queue: list[tuple[tuple, bool, int, int]] = []

    def enter(i: int, at: int, then: bool) -> None:
        """Rate chains[i][at] into the queue, and (`then`) the bound of the setting after it."""
        key = _speed_key(ctx, chains[i][at][1], chains[i][at][0])
        heapq.heappush(queue, (key, True, i, at))
        if then and at + 1 < len(chains[i]):
            heapq.heappush(queue, ((key[0] - UNRATED_LEAD, chains[i][at + 1][0]), False, i, at + 1))

    for i, chain in enumerate(chains):
        if any(ctx.planning.measured(ctx, shape) for _, shape in chain):
            for at in range(len(chain)):
                enter(i, at, then=False)
        else:
            enter(i, 0, then=True)
    while queue:
        _, known, i, at = heapq.heappop(queue)
        if not known:
            enter(i, at, then=True)
            continue
        shape = chains[i][at][1]
        memory = _memory(ctx, shape)
        if fits(memory, ctx.usable_gb, ctx.planning.measured(ctx, shape)):  # a layout is built for this one alone
            return _layout(ctx, shape, source, memory)
    return None


def candidates(ctx: Context, cards: int) -> tuple[list[Layout], Layout | None, list[Rejected]]:
    """(every layout that fits at `cards`, fastest first; the one with the least memory; the rejected)."""
    fitting: list[tuple[tuple, Layout]] = []
    rejected: list[Rejected] = []
    closest: Layout | None = None
    for structure, broken, settings in _grid(ctx, cards):
        label = ctx.space.label(structure)
        if broken:
            rejected.append(Rejected(ctx.fw.name, label, broken[0][1]))
            continue
        best_here: Layout | None = None
        reason: tuple[Cause, str] | None = None  # the last setting's, except that memory never hides a batch cause
        for setting in settings:
            if setting.shape is None:
                reason = Cause.BATCH, setting.why
                continue
            layout = _layout(ctx, setting.shape, source="pinned" if ctx.pinned else "search")
            if closest is None or layout.memory.total < closest.memory.total:
                closest = layout
            if layout.fits:
                fitting.append((setting.key, layout))
                best_here = best_here or layout
            elif reason is None or reason[0] is Cause.MEMORY:
                reason = Cause.MEMORY, (f"memory: {layout.memory.total:.1f} GiB per card > "
                                        f"{layout.budget_gb:.1f} GiB budget (usable {layout.usable_gb:g} less "
                                        f"{HEADROOM:.0%}; tried up to recompute={setting.shape.recompute}, "
                                        f"mbs={setting.shape.micro_batch_size})")
        if best_here is None:
            rejected.append(Rejected(ctx.fw.name, label, reason[1] if reason else "no setting fits"))
    ranked = sorted(fitting, key=lambda item: _speed_key(ctx, item[1], item[0]))
    return [layout for _, layout in ranked], closest, rejected


def _speed_key(ctx: Context, shape: Parallel, key: tuple) -> tuple:
    """The search's order: fastest first by the framework's rate model (the step model's time per sample at these
    cards); ties (the MFU model, a measured rate) by less communication: smaller TP, PP, CP, EP, then CPU offload
    last, less recompute, larger micro batch (`key`: _Setting.key). A rate counts at the least it may be (over its
    `spread`), so an estimate displaces a measured rate only when it is faster by more than its error."""
    own = rate(ctx, shape, described=False)
    return -round(own.tokens_per_card_s / own.spread, 6), key


class _Setting(NamedTuple):
    """One setting of a structure the search lays out: its shape (None where `why` says how the batch breaks a rule)
    and its place in the search's order among equally fast layouts. A tuple: a budget search makes a thousand."""

    key: tuple
    shape: Parallel | None
    why: str = ""


# What _grid yields for each structure: it, the rules it breaks and its settings.
_Grid = Iterator[tuple[Structure, list[tuple[str, str]], Iterator[_Setting]]]


def _grid(ctx: Context, cards: int, explain: bool = True) -> _Grid:
    """Each structure of the role's space at `cards`, in the space's order: (it, the rules it breaks, its settings,
    recompute by micro batch; none for a structure that breaks a rule; `explain` False: only those with a shape)."""
    structures = ctx.space.structures(ctx, cards)
    recomputes, mbs_options = _recomputes(ctx), _micro_batches(ctx, cards)
    for order, structure in enumerate(structures):
        broken = _structure_problems(ctx, cards, structure.tp, structure.pp, structure.cp, structure.ep)
        settings = iter(()) if broken else _settings(ctx, cards, order, structure, recomputes, mbs_options, explain)
        yield structure, broken, settings


def _chains(ctx: Context, cards: int) -> list[list[tuple[tuple, Parallel]]]:
    """The settings of each structure that breaks no rule, (its key, its shape), a chain per micro batch whose batch
    tiles, least recompute first."""
    chains: list[list[tuple[tuple, Parallel]]] = []
    for _, _, settings in _grid(ctx, cards, explain=False):
        by_mbs: dict[int, list[tuple[tuple, Parallel]]] = {}
        for setting in settings:
            if setting.shape is not None:
                by_mbs.setdefault(setting.shape.micro_batch_size, []).append((setting.key, setting.shape))
        chains.extend(by_mbs.values())
    return chains


def _recomputes(ctx: Context) -> list[str]:
    """The recompute settings the search tries, least first: a role that only runs forward has no backward to
    recompute for."""
    return ctx.space.recomputes(ctx) if ctx.role_kind.trains else ["none"]


def _settings(ctx: Context, cards: int, order: int, structure: Structure, recomputes: list[str],
              mbs_options: list[int], explain: bool = True) -> Iterator[_Setting]:
    """The settings of `structure` (the `order`th of its space), recompute by micro batch; `explain` False: only
    those with a shape (the settings whose batch breaks a rule are most of a budget search's)."""
    tp, pp, cp, ep = structure.tp, structure.pp, structure.cp, structure.ep
    dp = cards // (tp * pp * cp)
    batches = {mbs: _global_batch(ctx, mbs, dp, pp, cards) for mbs in mbs_options}  # recompute does not change them
    if not explain and all(why for _, why in batches.values()):
        return
    sequences = ctx.planning.sequences_per_sample(ctx)
    sequence_parallel = _sequence_parallel(ctx.pins.sequence_parallel, structure)
    layers = structure.num_layer_list or split_layers(ctx.model.layers, pp, ctx.mtp_layers)
    for rc_rank, recompute in enumerate(recomputes):
        for mbs in mbs_options:
            # CPU offload last; then less recompute before a lighter DeepSpeed stage (ZeRO-2 and -3 cost far less
            # than running the forward twice); Megatron's structures differ in tp..ep already.
            key = (tp, pp, cp, ep, structure.offload, rc_rank, order, -mbs)
            gbs, why = batches[mbs]
            if why:
                if explain:
                    yield _Setting(key, None, why)
                continue
            yield _Setting(key, Parallel(
                cards=cards, cards_per_node=ctx.hw.cards_per_node, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch_size=mbs,
                global_batch_size=gbs, recompute=recompute, mtp_layers=ctx.mtp_layers,
                sequences_per_sample=sequences, sequence_parallel=sequence_parallel, num_layer_list=layers,
                zero_stage=structure.zero_stage, offload=structure.offload))


def _micro_batches(ctx: Context, cards: int) -> list[int]:
    """The micro batches the search tries at `cards`."""
    pins, seq = ctx.pins, ctx.spec.seq_len
    if ctx.role_kind is RoleKind.SERVE and not pins.micro_batch_size:  # a server takes its whole batch at once
        return [ctx.spec.global_batch_size or ctx.batch_target]
    if no_accumulation(ctx, cards) and ctx.spec.global_batch_size and not pins.micro_batch_size:
        return [ctx.spec.global_batch_size]  # the whole step in one micro batch
    if pins.micro_batch_size:
        return [pins.micro_batch_size]
    return ctx.space.micro_batches(ctx, cards) or [m for m in (4, 2, 1) if m * seq <= 4096] or [1]


def tiles(ctx: Context, cards: int) -> bool:
    """Whether some structure of the space at `cards` takes a micro batch that tiles the global batch: a layout the
    search finds needs one (its other rules and memory aside), so where none does the search finds nothing."""
    mbs_options = _micro_batches(ctx, cards)
    # The batch rules read a structure's DP and PP alone: each pair once (a pinned one that does not divide the cards
    # breaks a rule of its own).
    splits = {(structure.tp * structure.pp * structure.cp, structure.pp)
              for structure in ctx.space.structures(ctx, cards)}
    return any(_global_batch(ctx, mbs, cards // group, pp, cards)[1] is None for group, pp in splits
               if cards % group == 0 for mbs in mbs_options)


def smallest_batch(ctx: Context, cards: int) -> Layout | None:
    """The layout that fits at `cards` with the global batch free and needs the smallest batch, the fastest among
    equals: the first of candidates(free)'s fitting layouts with the least batch. A setting's batch is known before
    its memory, so only the settings at the smallest batch that still may fit are laid out and rated."""
    free = replace(ctx, free_batch=True)
    by_batch: dict[int, list[_Setting]] = {}
    for _, _, settings in _grid(free, cards):
        for setting in settings:
            if setting.shape is not None:
                by_batch.setdefault(setting.shape.global_batch_size, []).append(setting)
    for batch in sorted(by_batch):
        source = "pinned" if free.pinned else "search"
        laid = [(setting.key, _layout(free, setting.shape, source=source)) for setting in by_batch[batch]
                if setting.shape is not None]
        fitting = [(key, layout) for key, layout in laid if layout.fits]
        if fitting:
            return min(fitting, key=lambda item: _speed_key(free, item[1], item[0]))[1]
    return None


def rate(ctx: Context, layout: Parallel | None, described: bool = True) -> Throughput:
    """Tokens/s per card of `layout` (None: before a layout is chosen) by the framework's rate model. A role that
    does not train has none (0: communication alone ranks its layouts). `described` False: the step model's number
    without its source (what the search ranks by; throughput.py)."""
    own = ctx.planning.rate(ctx, layout)
    if own is not None:
        return own
    if not ctx.role_kind.trains:
        return Throughput(0.0, f"not estimated: {ctx.role_kind.value} does not train; gen-launch has no "
                               f"generation-rate model yet", is_estimate=True)
    found = measured(ctx, layout)
    if found is not None:
        return Throughput(found.tokens_per_card_s, found.source, False)
    return throughput(ctx.model, ctx.spec.method, ctx.spec.seq_len, ctx.fw, ctx.hw, None, layout,
                      ctx.spec.scaling_given, described)


def no_accumulation(ctx: Context, cards: int) -> bool:
    """One card with a framework that cannot accumulate gradients there (MindFormers stand-alone)."""
    return cards == 1 and not ctx.fw.one_card_accumulation


def _global_batch(ctx: Context, mbs: int, dp: int, pp: int, cards: int) -> tuple[int, str | None]:
    """The global batch for this layout and, if it breaks a rule, why.

    The spec's global batch, else the method's target (recipes.yaml, recipe.batch_target): the layout must tile it.
    With `free_batch` (memory-only searches, and the fallback when nothing tiles the target) the layout takes the
    smallest multiple of MBS x DP that is at least the target and gives at least PP and (PP - 1) / MAX_BUBBLE micro
    batches per step. Without gradient accumulation (one card, MindFormers) the global batch is the micro batch."""
    if no_accumulation(ctx, cards):
        gbs = ctx.spec.global_batch_size or mbs
        if gbs != mbs:
            return gbs, f"global_batch_size {gbs} needs micro batch {gbs} on one card ({ctx.fw.one_card_rule})"
        return gbs, None
    step = mbs * dp
    # The batch tiles in sequences (RL: a prompt's n responses): `unit` samples are the fewest that fill micro steps.
    sequences = ctx.planning.sequences_per_sample(ctx)
    unit = step // math.gcd(step, sequences)
    if ctx.spec.global_batch_size is not None or not ctx.free_batch:
        gbs = ctx.spec.global_batch_size or ctx.batch_target
        if gbs % unit:
            name = "global_batch_size" if ctx.spec.global_batch_size else "global batch"
            each = f" x {sequences} sequences each" if sequences > 1 else ""
            return gbs, f"{name} {gbs}{each} is not divisible by micro batch {mbs} x DP {dp} = {step}"
    else:
        # At least PP micro batches, and enough that the pipeline bubble stays within MAX_BUBBLE.
        micro = max(math.ceil(ctx.batch_target / unit), pp, math.ceil((pp - 1) / MAX_BUBBLE))
        gbs = micro * unit
    micro_batches = gbs * sequences // step
    if pp > 1 and micro_batches < pp and ctx.fw.pipeline_micro_rule:
        return gbs, (f"PP ({pp}) needs at least {pp} micro batches per step; global batch {gbs} / (MBS {mbs} x "
                     f"DP {dp}) = {micro_batches} ({ctx.fw.pipeline_micro_rule})")
    if (pp - 1) / micro_batches > MAX_BUBBLE and not ctx.pinned:
        return gbs, (f"pipeline bubble (PP-1)/micro batches = {pp - 1}/{micro_batches} = "
                     f"{(pp - 1) / micro_batches:.0%} > {MAX_BUBBLE:.0%}")
    return gbs, None


def as_role(ctx: Context, taken: Layout, role: str) -> Layout:
    """`taken` (the layout of `role`) as ctx.role_kind runs it: the same shape, this role's memory."""
    shape = Parallel(**{f.name: getattr(taken, f.name) for f in fields(Parallel)})
    return _layout(ctx, shape, source=f"the {role} role's")


def core_memory(ctx: Context, shape: Parallel) -> MemoryBreakdown:
    """The core's estimate of `shape` for ctx's role (frameworks.yaml `memory`), which a plugin's memory hook may
    adjust for a setting of its own."""
    return _estimate_once(ctx.memory_job, shape)


# A layout is its shape's fields and the plan's own: the names once, not per layout laid out.
_SHAPE_FIELDS = tuple(f.name for f in fields(Parallel))


def _memory(ctx: Context, shape: Parallel) -> MemoryBreakdown:
    """`shape`'s memory for ctx's role: the plugin's where it models the role itself, else the core's."""
    return ctx.planning.memory(ctx, shape) or core_memory(ctx, shape)


def _layout(ctx: Context, shape: Parallel, source: str, memory: MemoryBreakdown | None = None) -> Layout:
    """`shape` with its memory estimate (`memory`: the one already made), as the plan states it."""
    memory = memory or _memory(ctx, shape)
    return Layout(**{name: getattr(shape, name) for name in _SHAPE_FIELDS}, framework=ctx.fw.name, memory=memory,
                  usable_gb=ctx.usable_gb, usable_cap=ctx.usable_cap, optimizer_shard=ctx.optimizer_shard,
                  expert_tp=ctx.fw.expert_tp, deepspeed=ctx.fw.deepspeed, source=source,
                  measured=ctx.planning.measured(ctx, shape),
                  pinned_at=ctx.pin_path("")[:-1] if source == "pinned" else None)


# estimate's results by (job, shape, memory_model.TERMS): a plan lays out the same shape many times (at the target batch
# and with it free, for the choice's runner-up, at each count a budget search tries). Cleared when full.
_ESTIMATES: dict[tuple, MemoryBreakdown] = {}
MAX_ESTIMATES = 1 << 16


def _estimate_once(job: MemoryJob, shape: Parallel) -> MemoryBreakdown:
    """memory.estimate, once per distinct job and shape. The job's measured activations are a dict (unhashable):
    the key holds them as sorted JSON (a job without them, every Megatron one, is its own key: the copy and the
    JSON were a tenth of a budget search)."""
    measured = job.activations
    key = (job, "null", shape, memory_model.TERMS) if measured is None else \
        (replace(job, activations=None), json.dumps(measured, sort_keys=True), shape, memory_model.TERMS)
    found = _ESTIMATES.get(key)
    if found is None:
        if len(_ESTIMATES) >= MAX_ESTIMATES:
            _ESTIMATES.clear()
        found = _ESTIMATES[key] = estimate(job, shape)
    return found


def smallest_fit(ctx: Context) -> int:
    """The smallest card count with an unpinned layout that fits. Starts from the count at which the model states
    alone, perfectly sharded, fill the budget (nothing smaller can fit)."""
    # Memory alone decides here: no pins, and no global batch that a card count may not divide.
    free = replace(ctx, spec=replace(ctx.spec, layout={}, global_batch_size=None), free_batch=True)
    if ctx.role_kind is RoleKind.SERVE:
        # A server splits the model over all its cards (no data parallelism), which not every count can: each count
        # up to one card per attention head is tried, the fewest that fits kept.
        counts = itertools.takewhile(lambda n: n <= ctx.model.heads, valid_counts(ctx.hw, 1))
        fewest = next((n for n in counts if search(free, n)[0] is not None), None)
        if fewest is None:
            raise NoFit("model", f"no {ctx.fw.name} layout serves {ctx.model.name} at seq_len {ctx.spec.seq_len} "
                                 f"on {ctx.hw.name}", ctx, ctx.model.heads)
        return fewest
    # Activations, logits and runtime do not shrink with more cards: if the largest job cannot fit, none can.
    largest = round_up(ctx.hw, MAX_SEARCH_CARDS)
    found = search(free, largest)[0]
    if found is None:
        raise NoFit("model", f"no {ctx.fw.name} layout fits {ctx.model.name} {ctx.spec.method} at seq_len "
                             f"{ctx.spec.seq_len} on {ctx.hw.name}", ctx, largest)
    floor = _states_floor(ctx)
    if found.offload:  # nothing fits on the device alone: the fewest cards with CPU offload
        return _fewest(free, floor, largest)
    # CPU offload moves the states to host memory at a large cost in speed: the fewest cards that hold them.
    on_device = replace(free, spec=replace(free.spec, layout={ctx.fw.name: Pins(offload=False)})) \
        if ctx.fw.deepspeed else free
    return _fewest(on_device, floor, largest)


def _states_floor(ctx: Context) -> int:
    """The card count at which the model states alone, perfectly sharded, fill the budget: nothing smaller fits."""
    budget = ctx.usable_gb * (1.0 - HEADROOM) * GIB
    state_bytes = STATE_BYTES[(ctx.fw.memory, trains_adapters(ctx.spec.method))] if ctx.role_kind.trains else \
        FORWARD_BYTES
    return math.ceil(ctx.model.params * state_bytes / budget)


def fits_below(ctx: Context, cards: int) -> Layout | None:
    """The fastest layout on the fewest cards below `cards` that fits, with the spec's pins and any global batch
    (CPU offload only where pinned); None when none does."""
    free = replace(ctx, spec=replace(ctx.spec, global_batch_size=None), free_batch=True)
    if ctx.fw.deepspeed and ctx.pins.offload is None:
        free = replace(free, spec=replace(free.spec, layout={**ctx.spec.layout,
                                                              ctx.fw.name: replace(ctx.pins, offload=False)}))
    for n in valid_counts(ctx.hw, max(_states_floor(ctx), 1)):
        if n >= cards:
            return None
        found = search(free, n)[0]
        if found is not None:
            return found
    return None


def _fewest(ctx: Context, floor: int, largest: int) -> int:
    """The fewest cards from `floor` up where a layout fits under `ctx` (`largest` is known to fit)."""
    for n in valid_counts(ctx.hw, max(floor, 1)):
        if search(ctx, n)[0] is not None:
            return n
    return largest
