"""Spec + tables -> Plan. Pure functions: no I/O, no clock. This module orchestrates; cards.py holds the card
counts, layouts.py the layout search.

Order of decisions, per framework:
1. minimum cards: the table row (or a validated seed-003 preset, where the plugin puts them first), else the memory
   model;
2. time budget: N = Tok / (Time x TPS x eff), above 8 rounded up to a multiple of 8, never below the minimum;
3. card count: whole nodes above one node, die pairs on snt9b23; the memory model may raise it;
4. layout: a validated preset when one matches exactly, else a search over TP / PP / CP / EP, micro batch and
   recompute that keeps every layout satisfying the rules, prefers the least communication that fits
   (smaller TP, then smaller PP, CP, EP, then no recompute), and records every rejected candidate with its rule.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cached_property
from typing import NoReturn

from . import __version__
from .api.contract import PathDefault, Planning, RoleDef, RoleKind
from .api.frozen import frozen
from .api.notes import Note, warning
from .calibration import check as check_calibration
from .calibration import memory_warning
from .cards import (
    auto_cards,
    explicit_cards,
    first_holding,
    from_table,
    minimum_cards,
    preset_for,
    round_up,
    table_above_memory,
    trailing_zeros,
    valid_counts,
)
from .charts import plan_charts
from .context import Context
from .dataset import DataShape, data_format, data_shape
from .errors import Problem, SpecError
from .families.rl.run import RunSteps
from .frameworks import plugin_of
from .layouts import (
    MAX_BUBBLE,
    NoFit,
    as_role,
    candidates,
    choose_layout,
    fastest,
    fits_below,
    no_accumulation,
    rate,
    search,
    smallest_fit,
    tiles,
)
from .loopback import LOOPBACK_WHY, is_loopback
from .nofit import way_out
from .plan import Estimate, FrameworkPlan, Layout, MinCards, PathValue, Plan, Rejected, Role
from .recipe import adapter, algorithm_batch, batch_target, schedule_warnings, training
from .scaling import capped_rate
from .scheduler import (
    Scheduler,
    check_names,
    scheduler_notes,
    scheduler_of,
    super_pod_notes,
    time_limit,
    time_limit_warnings,
    volume_checks,
    with_super_pod_blocks,
)
from .spec import Pins, Spec
from .tables import RL_METHODS, Hardware, Model, RecipeDefaults, Tables
from .throughput import Throughput, cards_for_budget, hours, per_card, seconds_per_step
from .training import Adapter, Training

# The chat template (a plugin's chat_template_fact) that has the thinking switch, whichever framework applies it.
THINKING_TEMPLATE = "qwen3"
DEFAULT_MASTER_PORT = 50001  # seed 003's example port; MindFormers suggests 50000-65535
# Seed 001's rule of thumb for LoRA/SFT data set size, by model size (billions of parameters -> samples).
DATASET_ADVICE = ((10, 20_000, "7B"), (20, 40_000, "14B"), (50, 80_000, "32B"), (float("inf"), 150_000, "72B"))


# ----------------------------------------------------------------------------------------------------------------
# Entry point


def resolve(spec: Spec, tables: Tables, force: bool = False) -> Plan:
    """The plan, in named stages: the spec's own refusals, the frameworks, the layouts (cards, budget, the search
    and the roles, at one global batch), the recipe, the notes, the paths, the scheduler, the plan, and what each
    framework decides from the finished plan (its run length and settings)."""
    model = tables.model(spec.model)
    hw, alias = tables.hardware_row(spec.hardware), tables.hardware_alias(spec.hardware)
    spec = replace(spec, hardware=hw.name)  # an alias planned as its row
    _check_spec(spec, model, hw)
    names, notes = _frameworks(spec, tables, model)
    notes[:0] = [Note("hardware.alias", alias)] if alias else []
    hf_id = tables.weights(spec.model)
    if hf_id != model.hf_id:
        notes.append(Note("model.base_weights",
                          f"model: {hf_id} is the base model: trained from its own weights, planned with the "
                          f"{model.name} row's shape (that of {model.hf_id}, the same architecture); fine-tuning "
                          f"formats samples with the family's chat template, the one its instruct model was tuned "
                          f"with"))
    lora = adapter(spec, tables.recipes[spec.method])
    _check_layout_keys(spec, names)
    data = data_shape(spec, model)
    warnings: list[Note] = []
    contexts = {name: _context(spec, model, hw, tables, name, force, lora) for name in names}
    _check_roles(contexts)
    laid = _layouts(spec, tables, contexts, notes, warnings)
    plans, batch = laid.plans, laid.batch
    _check_master_addr(spec, plans)
    planning = {name: plugin_of(tables.frameworks[name]).planning for name in plans}
    recipe, recipes = _recipe(spec, model, tables, plans, planning, contexts, batch)
    if laid.batch_origin:  # the batch was not the recipe's round number: say what it is
        recipe = replace(recipe, origin={**recipe.origin, "global_batch_size": laid.batch_origin})
        recipes = {name: replace(own, origin={**own.origin, "global_batch_size": laid.batch_origin})
                   for name, own in recipes.items()}
    warnings.extend(schedule_warnings(recipe, tables.recipes[spec.method]))
    _recipe_notes(spec, model, tables, plans, planning, recipe, notes, warnings)
    paths = _paths(spec, model, hf_id, plans, planning, data)
    placeholders = sorted(k for k, v in paths.items() if v.placeholder)
    steps = sorted({own.placeholders["placeholder_steps"] for own in recipes.values()
                    if "placeholder_steps" in own.placeholders})
    if steps:  # a job that trains a made-up length must not pass --strict as if planned
        warnings.append(warning("train.placeholder_steps",
                                f"train.steps: the spec gives no data size and no train.steps, so the files train "
                                f"a placeholder of {' or '.join(map(str, steps))} steps; give data.samples (or "
                                f"data.total_tokens), or train.steps"))
        placeholders.append("train.steps")
    if placeholders:
        notes.append(Note("paths.placeholders", f"values not given in the spec, written as placeholders to edit "
                                                f"before launch: {', '.join(placeholders)}"))
    scheduler = _scheduler(spec, hw, plans, paths, notes, warnings)
    plan = Plan(job=spec.job, model=model.name, hf_id=hf_id, method=spec.method, seq_len=spec.seq_len,
                hardware=hw.name, hardware_label=hw.label, accelerator=hw.accelerator, cards_per_node=hw.cards_per_node,
                frameworks=plans,
                rejected=tuple(laid.rejected), notes=tuple(notes), warnings=tuple(warnings), paths=paths,
                data=data, master_addr=spec.master_addr, socket_ifname=spec.socket_ifname,
                master_port=spec.master_port or DEFAULT_MASTER_PORT, shared_storage=spec.shared_storage,
                spec_sha256=spec.sha256, shape=model,
                epochs=spec.epochs, samples_per_epoch=spec.samples_per_epoch, tokens_per_epoch=spec.tokens_per_epoch,
                quantization_bit=spec.quantization_bit,
                train=recipe, recipes=recipes, version=__version__,
                data_rows=spec.samples if spec.method != "pretrain" else None, rl=dict(spec.rl),
                scheduler=scheduler, time_budget_hours=spec.time_budget_hours, extra=_extra(spec, plans))
    plan = _settings(plan, planning, contexts)
    return replace(plan, charts=tuple(plan_charts(plan, tables)))


# ----------------------------------------------------------------------------------------------------------------
# Stages


def _check_spec(spec: Spec, model: Model, hw: Hardware) -> None:
    """What the spec asks that its model or hardware cannot do, refused before any search."""
    if spec.seq_len > model.max_positions:
        raise SpecError.at("seq_len", f"{spec.seq_len} exceeds the {model.max_positions} positions "
                                      f"(max_position_embeddings) of {model.name}")
    if spec.quantization_bit is not None and spec.quantization_bit not in hw.quantization_bits:
        raise SpecError.at("quantization_bit", f"{spec.quantization_bit}-bit bases are not offered on {hw.name}; "
                                               f"choose {' or '.join(map(str, hw.quantization_bits))} (the ZeRO-3 "
                                               f"field report: int8 misbehaves on 910B; the Ascend QLoRA example is "
                                               f"4-bit)")
    if spec.rl and spec.method not in RL_METHODS:
        raise SpecError.at("rl", f"is only used with a reinforcement-learning method ({', '.join(RL_METHODS)}), "
                                 f"not {spec.method}")


def _check_roles(contexts: dict[str, Context]) -> None:
    """What the spec asks of each framework's roles, before any search: a role's own pins name a role the method
    runs with a search of its own, and the constraints between its roles hold (Planning.role_problems)."""
    problems = []
    for name, ctx in contexts.items():
        defs = {role.kind.value: role for role in ctx.planning.roles(ctx.spec.method)}
        for role, _ in ctx.spec.layout.get(name, Pins()).roles:
            takes = defs[role].takes if role in defs else None
            if role not in defs:
                problems.append(Problem(f"layout.{name}.{role}", f"{name} runs no {role} role for "
                                                                  f"{ctx.spec.method}; its roles: {', '.join(defs)}"))
            elif takes is not None:
                problems.append(Problem(f"layout.{name}.{role}", f"{name}'s {role} takes the {takes.value}'s "
                                                                  f"layout; pin that one"))
        problems += ctx.planning.role_problems(ctx)
    if problems:
        raise SpecError(problems)


@frozen
class Laid:
    """The layouts stage's result: each framework's plan with every role laid out at the plan's global batch, the
    rejected candidates, and the batch with where it comes from (None: the method's target or the spec's)."""

    plans: dict[str, FrameworkPlan]
    rejected: list[Rejected]
    batch: int
    batch_origin: str | None


def _layouts(spec: Spec, tables: Tables, contexts: dict[str, Context], notes: list[Note],
             warnings: list[Note]) -> Laid:
    """Cards, time budget and the layout search of each framework's first role, one global batch for all, then the
    other roles at that batch."""
    results = _resolve_fitting(spec, tables, contexts, notes, warnings)
    contexts = {name: contexts[name] for name in results}
    batch, batch_origin = _common_global_batch(spec, tables, contexts, {name: r[0] for name, r in results.items()},
                                               notes, warnings)
    plans: dict[str, FrameworkPlan] = {}
    rejected: list[Rejected] = []
    for name, ctx in contexts.items():
        plans[name] = _at_batch(ctx, tables, results[name], batch, notes, warnings, rejected)
    return Laid(plans, rejected, batch, batch_origin)


def _at_batch(ctx: Context, tables: Tables, result: tuple, batch: int, notes: list[Note], warnings: list[Note],
              rejected: list[Rejected]) -> FrameworkPlan:
    """One framework's plan at the plan's global batch, with its notes, warnings, rejected candidates and roles."""
    spec, name = ctx.spec, ctx.fw.name
    first = result[0]
    lay = first.layout
    # Search again at this batch where another micro batch is needed, and where a time budget sized the cards at
    # another batch: its counts, notes and warnings then describe the batch the plan trains with.
    budgeted = first.estimate.budget_cards is not None and lay.global_batch_size != batch
    if batch % lay.batch_step or budgeted:
        result = _resolve_framework(replace(ctx, spec=replace(spec, global_batch_size=batch)), tables,
                                    lay.cards if budgeted else None)
    fplan, fw_rejected, fw_notes, fw_warnings = result
    if budgeted:  # the warning on the moved batch names the first search's counts: say where they went
        fw_notes = [*fw_notes, Note("budget.searched_again",
                                    f"time budget: searched again at the plan's global batch of {batch}: "
                                    f"{fplan.layout.cards} cards (the first search, at {lay.global_batch_size}, "
                                    f"took {lay.cards}); the budget notes above are at {batch}")]
    at_batch = replace(ctx, spec=replace(spec, global_batch_size=batch))
    fp = _with_choice(at_batch, _with_global_batch(ctx, fplan, batch))
    lay = fp.layout
    kept = "validated preset" if lay.preset_level else "pinned layout" if lay.source == "pinned" else None
    if kept and lay.pp > 1 and (lay.pp - 1) / lay.grad_accum > MAX_BUBBLE:
        notes.append(Note("layout.kept_bubble", f"the {kept}'s pipeline bubble is (pp - 1) / micro batches = "
                                                f"{lay.pp - 1}/{lay.grad_accum} = {(lay.pp - 1) / lay.grad_accum:.0%}, "
                                                f"above the {MAX_BUBBLE:.0%} the search allows; kept as given, a "
                                                f"larger global batch idles less", framework=name))
    rejected.extend(fw_rejected)
    notes.extend(n.about(name) for n in fw_notes)
    warnings.extend(w.about(name) for w in fw_warnings)
    fp = _with_roles(at_batch, tables, fp, notes, warnings, rejected)
    warnings.extend(w.about(name) for w in _over_budget(spec, fp))
    measured_memory = memory_warning(at_batch, fp.layout)
    if measured_memory is not None:
        warnings.append(measured_memory.about(name))
    return fp


def _recipe_notes(spec: Spec, model: Model, tables: Tables, plans: dict[str, FrameworkPlan],
                  planning: dict[str, Planning], recipe: Training, notes: list[Note], warnings: list[Note]) -> None:
    """The notes and warnings on the plan's recipe and frameworks: general ones, shared storage, Qwen3's thinking
    switch, fixed step counts, and what keeping checkpoints costs."""
    notes.extend(_general_notes(spec, model, tables, plans, planning))
    warnings.extend(_unshared_storage_warnings(spec, plans, planning))
    if recipe.enable_thinking is not None:
        notes.extend(own.thinking_note.about(name) for name, own in planning.items() if own.thinking_note)
    fixed = _fixed_steps_note(spec, planning, recipe)
    if fixed:
        notes.append(fixed)
    for own in planning.values():
        kept = own.checkpoint_note(spec, model, recipe)
        if kept:
            if "keep_checkpoints" in spec.train:  # the spec asked to keep them: what it costs is a warning
                warnings.append(replace(kept, kind="warning"))
            else:
                notes.append(kept)


def _scheduler(spec: Spec, hw: Hardware, plans: dict[str, FrameworkPlan], paths: dict[str, PathValue],
               notes: list[Note], warnings: list[Note]) -> Scheduler:
    """How the job is submitted, its names checked, with its notes, warnings on the volume and (Slurm) each
    framework's time limit."""
    scheduler = scheduler_of(spec, hw)
    check_names(scheduler, spec.job, {name: fp.layout.nodes for name, fp in plans.items()})
    scheduler = with_super_pod_blocks(scheduler, hw.volcano_super_pod,
                                      {name: fp.layout.local_cards for name, fp in plans.items()})
    notes += scheduler_notes(scheduler) + super_pod_notes(scheduler)
    warnings.extend(volume_checks(scheduler, {k: v.value for k, v in paths.items() if not v.placeholder},
                                  any(fp.layout.nodes > 1 for fp in plans.values())))
    if scheduler.kind == "slurm":
        scheduler = replace(scheduler, time_limits={name: time_limit(scheduler, fp.estimate.time_high_hours)
                                                    for name, fp in plans.items()})
        warnings.extend(time_limit_warnings(scheduler))
    return scheduler


def _settings(plan: Plan, planning: dict[str, Planning], contexts: dict[str, Context]) -> Plan:
    """What each framework decides from the finished plan it renders: its run in its own terms where it counts them
    itself, then the values its files hold of their own (Planning.run_length, Planning.settings)."""
    plans = {name: replace(fp, run=planning[name].run_length(plan.for_framework(name), fp))
             for name, fp in plan.frameworks.items()}
    plan = replace(plan, frameworks=plans)
    return replace(plan, frameworks={
        name: replace(fp, settings=planning[name].settings(contexts[name], plan.for_framework(name), fp))
        for name, fp in plans.items()})


def _resolve_fitting(spec: Spec, tables: Tables, contexts: dict[str, Context], notes: list[Note],
                     warnings: list[Note]) -> dict:
    """Each framework resolved. One that no layout fits is refused with the way out (nofit.py), naming the
    frameworks that plan without it; when the spec did not list the frameworks it is left out instead, with a
    note and a warning, as long as another one fits."""
    results, unfit = {}, {}
    for name, ctx in contexts.items():
        try:
            results[name] = _resolve_framework(ctx, tables)
        except NoFit as error:
            problem = error.problems[0]
            unfit[name] = Problem(problem.path, f"{problem.message}. {way_out(error.ctx, tables, error.cards)}")
    if not unfit:
        return results
    if spec.frameworks is None and results:
        notes.extend(Note("frameworks.no_fit_reason", f"{name} left out: {problem.message}")
                     for name, problem in unfit.items())
        warnings.extend(warning("frameworks.left_out_no_fit", f"{name} left out: no layout fits in memory (the notes "
                                                              f"say what would); list it in frameworks: to have the "
                                                              f"plan refused instead") for name in unfit)
        return results
    others = (f"; or leave {' and '.join(unfit)} out of frameworks: ({', '.join(results)} "
              f"{'plans' if len(results) == 1 else 'plan'} without {'it' if len(unfit) == 1 else 'them'})") \
        if results else ""
    raise SpecError([replace(problem, message=problem.message + others) for problem in unfit.values()])


def _context(spec: Spec, model: Model, hw: Hardware, tables: Tables, name: str, force: bool,
             lora: Adapter | None) -> Context:
    """One framework's context. An algorithm batch (RL's, recipes.yaml algorithm_batch) is held in the search as a
    given one: a card count it does not tile is passed over and a time budget cannot move it (the plan's recipe
    still shows it as the default it is). A framework that runs whole nodes (Planning.whole_nodes) counts in nodes."""
    fw, defaults = tables.frameworks[name], _defaults(tables, name, spec.method, model, hw)
    if spec.global_batch_size is None and algorithm_batch(defaults):
        spec = replace(spec, global_batch_size=batch_target(defaults, spec)[0])
    if plugin_of(fw).planning.whole_nodes:  # the counts it chooses: whole nodes (cards.valid_counts)
        hw = replace(hw, parallel_unit=hw.cards_per_node)
    ctx = Context(spec, model, hw, fw, force, lora, defaults, tables=tables)
    run = None if spec.global_batch_size is None or spec.samples_per_epoch is None else \
        ctx.planning.run_steps(ctx, spec.global_batch_size)
    # Where a framework counts its own steps (RL), the run estimate times the data they draw: its epochs are that
    # share of the data, so the estimate is the run's steps at one step's time.
    return ctx if run is None else \
        replace(ctx, spec=replace(spec, epochs=run.steps * run.draw / spec.samples_per_epoch))


def _common_global_batch(spec: Spec, tables: Tables, contexts: dict[str, Context],
                         plans: dict[str, FrameworkPlan], notes: list[Note],
                         warnings: list[Note]) -> tuple[int, str | None]:
    """One global batch for every framework, so each takes the same steps over the same data: the spec's, a
    validated preset's when every other layout tiles it, else the method's target, which the layout search tiled
    wherever it could. Where a layout could not, the batch moves to the least multiple of every layout's micro batch
    x DP that each layout takes, and the plan warns with the old value, the new one and why. With it, where it comes
    from when it is not the method's target (for the plan's recipe table)."""
    layouts = [fp.layout for fp in plans.values()]
    if spec.global_batch_size is not None:
        return spec.global_batch_size, None
    steps = [lay.batch_step for lay in layouts]
    fixed = [fp for name, fp in plans.items() if no_accumulation(contexts[name], fp.layout.cards)]
    if fixed:  # one card without accumulation: the global batch is that card's micro batch
        return fixed[0].layout.global_batch_size, (f"derived: {fixed[0].name} on one card has no gradient "
                                                   f"accumulation, so the global batch is its micro batch")
    preset = next((lay for lay in layouts if lay.preset_level), None)
    if preset is not None and all(preset.global_batch_size % step == 0 for step in steps):
        guide = contexts[preset.framework].planning.preset_source
        return preset.global_batch_size, (f"derived: the global batch of the validated preset from {guide} (micro "
                                          f"batch {preset.micro_batch_size} x micro batches {preset.grad_accum} x DP "
                                          f"{preset.dp}), which every planned layout tiles; give global_batch_size "
                                          f"for another")
    target, _ = batch_target(next(iter(contexts.values())).defaults, spec)
    searched = [lay for lay in layouts if not lay.preset_level]
    untiled = [fp for fp in plans.values() if target % fp.layout.batch_step
               or (not fp.layout.preset_level and fp.layout.global_batch_size != target)]
    batch = target
    if untiled:
        # The smallest move: the least multiple of every layout's micro batch x DP that each layout takes.
        unit = math.lcm(*steps)
        batch = -(-max([target] + [lay.global_batch_size for lay in searched]) // unit) * unit
        warnings.append(warning("batch.moved", f"global batch moved from {target} to {batch} samples: "
                                               f"{'; '.join(_why_not_tiled(fp, target) for fp in untiled)}. Steps "
                                               f"and warmup follow the batch; set global_batch_size, cards or the "
                                               f"layout to keep {target}"))
    if preset is not None:
        notes.append(Note("batch.preset_not_tiled", f"the validated preset's global batch {preset.global_batch_size} "
                                                    f"is not tiled by every planned framework; all use {batch} "
                                                    f"(micro_batch_num follows)", framework=preset.framework))
    return batch, None


def _over_budget(spec: Spec, fp: FrameworkPlan) -> list[Note]:
    """The budget warning, from the framework's final layout and estimate (at the plan's global batch)."""
    took, budget = fp.estimate.time_hours, spec.time_budget_hours
    if took is None or budget is None or took <= budget * 1.0001:
        return []
    return [warning("budget.exceeded", f"predicted {took:.1f} h exceeds the {budget:g} h budget on "
                                       f"{fp.layout.cards} cards")]


def _why_not_tiled(fp: FrameworkPlan, target: int) -> str:
    """Why `fp`'s layout does not take `target` samples per step."""
    lay = fp.layout
    step = lay.micro_batch_size * lay.dp
    if fp.estimate.budget_cards is not None and not lay.preset_level:  # the budget search moved it (its notes)
        return (f"at {target} no {lay.framework} card count tried (roundest first, from the budget's count up to "
                f"the largest) meets the time budget; the first found that meets it takes {lay.global_batch_size}")
    if lay.preset_level:
        return f"{lay.framework}'s validated preset splits a step into micro batch x DP = {step} samples"
    return (f"no {lay.framework} layout that fits on {lay.cards} cards tiles {target} (micro batch x DP dividing "
            f"it, at least PP micro batches, pipeline bubble (PP-1)/micro batches <= {MAX_BUBBLE:.0%}); the one "
            f"needing the fewest samples, {lay.describe()}, takes {lay.global_batch_size}")


def _with_global_batch(ctx: Context, fp: FrameworkPlan, batch: int) -> FrameworkPlan:
    """`fp` at the plan's global batch, its rate and time estimated again (the pipeline bubble depends on it)."""
    if fp.layout.global_batch_size == batch:
        return fp
    layout = replace(fp.layout, global_batch_size=batch)
    return fp.with_primary(layout=layout, estimate=_estimate(ctx, layout, fp.estimate.budget_cards))


def _with_choice(ctx: Context, fp: FrameworkPlan) -> FrameworkPlan:
    """`fp` with why its first role's layout was chosen."""
    return fp.with_primary(choice=_choice(ctx, fp.layout, fp.estimate))


def _choice(ctx: Context, lay: Layout, est: Estimate) -> str:
    """Why `lay` was chosen: against the runner-up among the layouts that fit at its cards and global batch (the
    search's ranking), or what the search would have chosen instead of a preset or pins."""
    fitting = candidates(ctx, lay.cards)[0] if not ctx.pinned else []
    speed = est.tokens_per_card_s
    others = [other for other in fitting if other.describe() != lay.describe()]
    if lay.source == "pinned":
        return "Pinned in the spec's layout section."
    if lay.preset_level:
        text = f"The validated preset from {ctx.planning.preset_source}, kept because it ran on real hardware."
        if fitting and fitting[0].describe() != lay.describe():
            text += (f" The search's fastest at these cards would be {fitting[0].describe()} "
                     f"({rate(ctx, fitting[0]).tokens_per_card_s:.0f} against {speed:.0f} tokens/s per card).")
        return text
    if not others:
        return f"The only layout that fits on {lay.cards} card(s)."
    runner = others[0]
    if not ctx.role_kind.trains or speed <= 0:  # no rate to rank by: a role that does not train, or none published
        why = "a role that does not train has no rate model" if not ctx.role_kind.trains else \
            "the plan has no rate for it"
        return (f"{len(fitting)} layouts fit on {lay.cards} card(s); this one communicates least ({why}). "
                f"Runner-up: {runner.describe()} ({runner.memory.total:.1f} GiB per card).")
    runner_rate = rate(ctx, runner).tokens_per_card_s
    if runner_rate >= speed * 0.9999:
        return (f"{len(fitting)} layouts fit on {lay.cards} card(s) at the same estimated rate "
                f"({per_card(speed)} tokens/s per card); this one communicates and recomputes least. "
                f"Runner-up: {runner.describe()} ({runner.memory.total:.1f} GiB per card).")
    return (f"The fastest of {len(fitting)} layouts that fit on {lay.cards} card(s) by the step "
            f"model: {speed:.0f} tokens/s per card. Runner-up: {runner.describe()}, "
            f"{runner_rate:.0f} tokens/s per card ({1 - runner_rate / speed:.0%} slower, "
            f"{runner.memory.total:.1f} GiB per card).")


def _with_roles(ctx: Context, tables: Tables, fp: FrameworkPlan, notes: list[Note], warnings: list[Note],
                rejected: list[Rejected]) -> FrameworkPlan:
    """`fp` (its first role planned) with the other roles its plugin runs the method with, each laid out in its
    own search space at the plan's global batch: a colocated role on the framework's cards (when one needs more,
    every colocated role moves to the peak), a role of its own on the fewest cards where it fits."""
    defs = [role for role in ctx.planning.roles(ctx.spec.method)[1:] if ctx.planning.role_runs(ctx, role.kind)]
    if not defs:
        return fp
    name = ctx.fw.name

    def laid_out(role: RoleDef, cards: int | None) -> tuple[Layout, Estimate]:
        at = replace(ctx, role=role.kind)
        cards = cards or smallest_fit(at)
        at = replace(at, spec=replace(at.spec, cards=cards))
        own_notes: list[Note] = []
        own_warnings: list[Note] = []
        layout, own_rejected = choose_layout(at, tables, cards, own_notes, own_warnings)
        notes.extend(note.about(name, role.kind.value) for note in own_notes)
        warnings.extend(warned.about(name, role.kind.value) for warned in own_warnings)
        rejected.extend(replace(r, layout=f"{role.kind.value}: {r.layout}") for r in own_rejected)
        return layout, _estimate(at, layout, None)

    needs = {role.kind.value: smallest_fit(replace(ctx, role=role.kind)) for role in defs
             if role.colocated and role.takes is None}
    peak = max([fp.layout.cards, *needs.values()])
    if peak > fp.layout.cards and ctx.spec.cards is not None:  # the spec's count: refused, or kept under --force
        largest = max(needs, key=lambda kind: needs[kind])
        if not ctx.force:
            raise SpecError.at("cards", f"{ctx.spec.cards} cards: {name}'s {largest} role shares them with "
                                        f"{fp.primary.kind.value} and fits on no fewer than {peak}; use {peak}, or "
                                        f"--force to try anyway")
        peak = fp.layout.cards
    if peak > fp.layout.cards:  # the first role moves to the cards the largest colocated role needs
        notes.append(Note("roles.peak_cards", f"{peak} cards, the peak its colocated roles need ({fp.layout.cards} "
                                              f"for {fp.primary.kind.value})", framework=name))
        layout, estimate = laid_out(RoleDef(fp.primary.kind), peak)
        fp = fp.with_primary(layout=layout, estimate=estimate,
                             choice=_choice(replace(ctx, spec=replace(ctx.spec, cards=peak)), layout, estimate))
    roles = dict(fp.roles)
    for role in defs:
        if role.takes is not None:  # the earlier role's layout, with this role's memory and time
            at = replace(ctx, role=role.kind)
            layout = as_role(at, roles[role.takes.value].layout, role.takes.value)
            roles[role.kind.value] = Role(role.kind, layout, _estimate(at, layout, None), role.colocated,
                                          f"The {role.takes.value} role's layout, on its cards.")
            continue
        layout, estimate = laid_out(role, peak if role.colocated else None)
        roles[role.kind.value] = Role(role.kind, layout, estimate, role.colocated,
                                      _choice(replace(ctx, role=role.kind), layout, estimate))
    return replace(fp, roles=roles)


def _step_seconds(spec: Spec, plans: dict[str, FrameworkPlan], runs: dict[str, RunSteps | None],
                  batch: int) -> float | None:
    """The slowest framework's step time (None: no planned framework has a rate). A step's time counts the prompts
    it draws from the data (DAPO: its generation batch), so the run's steps at that time make the run estimate."""
    draws = {name: batch if run is None else run.draw for name, run in runs.items()}
    timed = [seconds_per_step(draws[name], spec.sample_tokens, fp.estimate.tokens_per_card_s, fp.layout.cards,
                              spec.scaling_efficiency) for name, fp in plans.items()
             if fp.estimate.tokens_per_card_s > 0]
    return max(timed) if timed else None


def _recipe(spec: Spec, model: Model, tables: Tables, plans: dict[str, FrameworkPlan],
            planning: dict[str, Planning], contexts: dict[str, Context],
            batch: int) -> tuple[Training, dict[str, Training]]:
    """The method's training recipe and the one each framework trains with (its own defaults where recipes.yaml
    gives them), with checkpoint intervals timed on the slowest framework's step."""
    runs = {name: planning[name].run_steps(contexts[name], batch) for name in plans}
    step_seconds = _step_seconds(spec, plans, runs, batch)
    thinking = any(own.chat_template_fact and plans[name].info.get(own.chat_template_fact) == THINKING_TEMPLATE
                   for name, own in planning.items())
    if "enable_thinking" in spec.train and spec.method != "pretrain" and not thinking:
        how = "; ".join(own.thinking_template for own in planning.values() if own.thinking_template)
        raise SpecError.at("train.enable_thinking", f"applies to Qwen3's chat template only, which no planned "
                                                    f"framework applies to {model.name}"
                                                    f"{f' ({how})' if how else ''}; leave it out")
    defaults = tables.recipes[spec.method]

    def resolved(chosen: RecipeDefaults, name: str) -> Training:
        return training(spec, model, chosen, batch, spec.samples_per_epoch, step_seconds, thinking,
                        tables.hardware[spec.hardware].accelerator, runs[name])

    hw = tables.hardware[spec.hardware]
    recipes = {name: resolved(planning[name].recipe_defaults(defaults.for_framework(name), model,
                                                             tables.frameworks[name], hw), name) for name in plans}
    # What a framework's pinned version cannot express, refused rather than written differently.
    floorless = sorted(name for name, r in recipes.items() if planning[name].linear_decay_source
                       and r.lr_schedule == "linear" and r.min_learning_rate > 0)
    if floorless:
        sources = ", ".join(planning[name].linear_decay_source or "" for name in floorless)
        raise SpecError.at("train.min_learning_rate", f"{', '.join(floorless)}' linear schedule decays to 0 "
                                                      f"({sources}); give 0, or lr_schedule cosine")
    problems = [problem for name, own in recipes.items() for problem in planning[name].recipe_refusals(own)]
    if problems:
        raise SpecError(problems)
    first = next(iter(plans))
    return resolved(planning[first].recipe_defaults(defaults, model, tables.frameworks[first], hw), first), recipes


def _extra(spec: Spec, plans: dict[str, FrameworkPlan]) -> dict[str, dict]:
    """The spec's `extra:` options of planned frameworks (each framework's renderer checks and writes its own)."""
    unplanned = sorted(set(spec.extra) - set(plans))
    if unplanned:
        raise SpecError([Problem(f"extra.{name}", f"{name} is not planned for this job (planned: "
                                                  f"{', '.join(plans)}); leave it out") for name in unplanned])
    return {name: options for name, options in spec.extra.items() if options}


def _defaults(tables: Tables, name: str, method: str, model: Model, hw: Hardware) -> RecipeDefaults:
    """`method`'s training defaults as framework `name` trains `model` on `hw` with them (its plugin's
    recipe_defaults)."""
    fw = tables.frameworks[name]
    return plugin_of(fw).planning.recipe_defaults(tables.recipes[method], model, fw, hw)


def _frameworks(spec: Spec, tables: Tables, model: Model) -> tuple[list[str], list[Note]]:
    """The frameworks to plan, and notes on those a defaulted list left out (and why)."""
    supported = [name for name in tables.frameworks if tables.supports(name, model.name)]
    if spec.frameworks is None:
        return _defaulted_frameworks(spec, tables, model, supported)
    problems = []
    for i, name in enumerate(spec.frameworks):
        if name not in supported:
            fw = tables.frameworks[name]
            own = f" (its models: {', '.join(m for m in fw.models if m != 'debug-tiny')})" \
                if fw.support == "listed" else ""
            # Name only the frameworks that would plan this job (method, hardware), not every one with the model.
            able = [other for other in supported if _job_refusal(tables, other, model, spec) is None]
            problems.append(Problem(f"frameworks.{i}", f"{name} does not support {model.name}{own}; frameworks that "
                                                       f"plan {model.name} {spec.method} on {spec.hardware}: "
                                                       f"{', '.join(able) or 'none'}"))
        elif refusal := _job_refusal(tables, name, model, spec):
            problems.append(Problem(f"frameworks.{i}", refusal))
    if problems:
        raise SpecError(problems)
    return [name for name in tables.frameworks if name in spec.frameworks], []


def _defaulted_frameworks(spec: Spec, tables: Tables, model: Model,
                          supported: list[str]) -> tuple[list[str], list[Note]]:
    """The frameworks a spec without `frameworks:` plans: every one supporting the model that can run the job."""
    # Reinforcement learning and training are planned by different frameworks: a defaulted list considers only
    # those offering the method's kind, and says nothing about the others.
    rl = spec.method in RL_METHODS
    kind = [name for name in supported if any((m in RL_METHODS) == rl for m in tables.frameworks[name].methods)]
    if rl and not kind:
        raise SpecError.at("model", f"no framework plans {spec.method} for {model.name}; "
                                    f"{_rl_models(tables, spec.method)}")
    refusals = {name: _job_refusal(tables, name, model, spec) or plugin_of(tables.frameworks[name]).planning.opt_in
                for name in kind}
    chosen = [name for name, refusal in refusals.items() if refusal is None]
    if not chosen:
        reasons = "; ".join(refusal for refusal in refusals.values() if refusal) or \
            f"{model.name} is not supported by any framework in the tables"
        raise SpecError.at("model", reasons)
    return chosen, [Note("frameworks.left_out", f"{name} left out: {refusal}")
                    for name, refusal in refusals.items() if refusal]


def _rl_models(tables: Tables, method: str) -> str:
    """The models each framework offering `method` plans it for, in words."""
    offering = [fw for fw in tables.frameworks.values() if method in fw.methods]
    return "; ".join(f"{fw.name} plans it for {', '.join(m for m in tables.models if tables.supports(fw.name, m))}"
                     for fw in offering) or f"no framework in the tables offers {method}"


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
        return (f"gen-launch follows no upstream {name} {spec.method} config for {model.name} yet, so it writes "
                f"none (offered: {', '.join(offered)})")
    if fw.refusal(model.name):
        return f"{name} cannot train {model.name}: {fw.refusal(model.name)}"
    fmt = data_format(spec, model)
    if spec.method != "pretrain" and fmt not in fw.dataset_formats:
        return f"{name} fine-tuning reads {' or '.join(fw.dataset_formats)} data, not {fmt} (paths.dataset_format)"
    return None


def _check_layout_keys(spec: Spec, names: list[str]) -> None:
    stray = [Problem(f"layout.{fw}", f"pins a framework that is not planned (frameworks: {', '.join(names)})")
             for fw in spec.layout if fw not in names]
    if stray:
        raise SpecError(stray)


# ----------------------------------------------------------------------------------------------------------------
# One framework


# Counts laid out one by one below a count that meets the budget: at a fixed global batch the time is not monotone
# in the count (a count's factors decide its layouts: 8 x a prime offers few, and slow ones; a count whose layouts
# cannot tile the batch is passed over), so only a scan finds the fewest. 512 counts reach 4,096 cards on 8-card
# nodes; above that the scan covers the 512 counts below the one found, and the note says from where.
SCAN_COUNTS = 512


def _fewest_cards_for_budget(ctx: Context, tables: Tables, minimum: MinCards, ideal: int, tokens: float,
                             budget: float, notes: list[Note], warnings: list[Note],
                             known: int | None = None) -> tuple[Layout, list[Rejected]]:
    """The fewest cards whose fastest layout meets the time budget at the training's own global batch (the spec's,
    else the method's target), from the count the ideal rate needs (at least the minimum) up to the largest the
    planner considers. A count that meets it is found in O(log) counts (cards.first_holding over the counts the
    platform allows, roundest first; `known`: a count expected to meet it, tried first), then every count below it
    is laid out in turn (SCAN_COUNTS at most), so the note's "fewest" is checked. Where no count tried meets the
    budget at that batch (a defaulted one), the batch moves: each count is laid out at the smallest batch its layouts
    take, the first found to meet the budget sets the batch, and the scan runs at that batch. A budget no count meets
    is refused."""
    start = auto_cards(ctx, minimum, ideal, notes)
    counts = list(valid_counts(ctx.hw, start))
    most = ctx.planning.most_cards(ctx)
    if most is not None:  # counts past what the batch can use are none (an RL batch is not moved to fill them)
        counts = [n for n in counts if n <= most[0]]
        if not counts:
            raise SpecError.at("time_budget_hours", f"{budget:g} h needs at least {start:,} cards, more than the "
                                                    f"{most[0]:,} the global batch can use ({most[1]}); allow more "
                                                    f"time or train on fewer tokens")
    forced = _forced_pins_that_never_fit(ctx, counts)
    target = ctx.spec.global_batch_size or batch_target(ctx.defaults, ctx.spec)[0]
    trials = _BudgetTrials(ctx, tables, counts, tokens, budget, target, forced)
    high = trials.meeting(known)
    if high is None:
        free = _BudgetTrials(ctx, tables, counts, tokens, budget, None, forced)
        probe = None if ctx.spec.global_batch_size is not None else free.meeting(None)
        if probe is None:
            trials.refuse(free)
        moved = free.trial(probe)
        assert moved is not None  # it meets the budget
        notes.append(Note("budget.batch_moved",
                          f"time budget: no count tried from {start:,} to {counts[-1]:,} cards (roundest first) "
                          f"meets {budget:g} h at the global batch of {target}; {moved.layout.cards:,} cards meet it "
                          f"with {moved.layout.describe()} at {moved.layout.global_batch_size}, the smallest batch a "
                          f"layout there takes, so the search is at that batch"))
        trials = _BudgetTrials(ctx, tables, counts, tokens, budget, moved.layout.global_batch_size, forced)
        high = probe
    found, low = trials.scan(high)
    chosen = trials.trial(found, whole=True)
    assert chosen is not None  # it meets the budget
    notes.extend(chosen.notes)
    warnings.extend(chosen.warnings)
    notes.extend(trials.scan_notes(found, low))
    return chosen.layout, chosen.rejected


def _forced_pins_that_never_fit(ctx: Context, counts: list[int]) -> bool:
    """Whether the pinned layout fits on no count, judged at the largest count its pins tile: with TP, PP and CP
    pinned, more cards only add data-parallel ranks, which shrink (sharded states) or keep every term of the memory
    model, so what does not fit there fits nowhere. Such pins are refused at once; under --force they are kept (True),
    and the budget search times the closest layout on every count alike."""
    if not ctx.pinned:
        return False
    group = (ctx.pins.tp or 1) * (ctx.pins.pp or 1) * (ctx.pins.cp or 1)
    top = next((n for n in reversed(counts) if n % group == 0), None)
    if top is None:
        return False
    free = replace(ctx, spec=replace(ctx.spec, cards=top, global_batch_size=None), free_batch=True)
    best, closest, _ = search(free, top)
    if best is not None or closest is None:
        return False
    if ctx.force:
        return True
    raise SpecError.at(f"layout.{ctx.fw.name}",
                       f"the pinned layout fits on no card count: even on {top:,} cards {closest.describe()} needs "
                       f"{closest.memory.total:.1f} GiB per card > {closest.budget_gb:.1f} GiB budget, and more cards "
                       f"do not shrink it further; change the pins (or --force to keep them)")


@frozen
class _Trial:
    """The fastest layout at one count of the budget search, what the layout search said about it, its hours."""

    layout: Layout
    rejected: list[Rejected]
    notes: list[Note]
    warnings: list[Note]
    at: Context  # the framework's context (a layout's rate does not depend on the batch the search tried)
    tokens: float
    partial: bool = False  # the layout alone: no rejected layouts or notes (_BudgetTrials.trial)

    @cached_property
    def own_hours(self) -> float:
        """At the layout's own rate: never more than `hours` (the cap only lowers a rate)."""
        return hours(self.tokens, rate(self.at, self.layout).tokens_per_card_s, self.layout.cards,
                     self.at.spec.scaling_efficiency)

    @cached_property
    def hours(self) -> float:
        """At the rate the plan claims (scaling.py); the search asks only where own_hours leaves it open."""
        return hours(self.tokens, capped_rate(self.at, self.layout)[0].tokens_per_card_s, self.layout.cards,
                     self.at.spec.scaling_efficiency)


class _BudgetTrials:
    """The budget search's counts at one global batch (None: each count at the smallest batch its layouts take),
    each laid out at most once: trials[i] is counts[i]'s (None: no layout there fits and tiles the batch). `forced`:
    --force keeps pins that fit on no count, so the closest layout is timed on every count alike; otherwise a layout
    that does not fit is never chosen (--force only adds permissions: it never trades a layout that fits for one
    that does not)."""

    def __init__(self, ctx: Context, tables: Tables, counts: list[int], tokens: float, budget: float,
                 batch: int | None, forced: bool):
        self.ctx, self.tables, self.counts, self.tokens, self.budget = ctx, tables, counts, tokens, budget
        self.batch = batch
        # The defaulted target is what the layout search tiles already (its rules then name no spec key); another
        # batch is searched as if the spec gave it.
        defaulted = ctx.spec.global_batch_size is None and batch == batch_target(ctx.defaults, ctx.spec)[0]
        self.at = ctx if batch is None or defaulted else replace(ctx, spec=replace(ctx.spec, global_batch_size=batch))
        self.trials: dict[int, _Trial | None] = {}
        self.forced = forced

    def trial(self, i: int, whole: bool = False) -> _Trial | None:
        """counts[i]'s trial. At a fixed batch the layout alone is laid out (`layouts.fastest`: all that a count
        tried and not chosen shows); `whole`: with the search's rejected layouts and notes, as the chosen count's."""
        if i not in self.trials or (whole and (found := self.trials[i]) is not None and found.partial):
            self.trials[i] = self._lay_out(self.counts[i], whole)
        return self.trials[i]

    def _lay_out(self, cards: int, whole: bool) -> _Trial | None:
        found_notes: list[Note] = []
        found_warnings: list[Note] = []
        at = replace(self.at, spec=replace(self.at.spec, cards=cards))
        # At a fixed batch, a count no layout tiles is known from the search alone (choose_layout would also
        # search every layout at any batch to say why).
        searched = None
        if self.batch is not None and preset_for(at, self.tables, cards) is None:
            # Most counts of a scan tile no batch at all: known without laying anything out.
            if not tiles(at, cards):
                return None
            if not (whole or self.forced):
                best = fastest(at, cards)
                return None if best is None else _Trial(best, [], [], [], self.ctx, self.tokens, partial=True)
            searched = search(at, cards)
            if searched[0] is None and not self.forced:
                return None
        try:
            layout, rejected = choose_layout(at, self.tables, cards, found_notes, found_warnings, searched)
        except SpecError:
            return None
        if not (layout.fits or layout.source.startswith("preset") or self.forced):
            return None  # --force kept the closest layout at this count, though others fit
        return _Trial(layout, rejected, found_notes, found_warnings, self.ctx, self.tokens)

    def meets(self, i: int) -> bool:
        found = self.trial(i)
        limit = self.budget * 1.0001
        return found is not None and found.own_hours <= limit and found.hours <= limit

    def meeting(self, known: int | None) -> int | None:
        """A count that meets the budget: `known`'s index where it does, else one found in O(log) counts."""
        if known is not None and known in self.counts and self.meets(self.counts.index(known)):
            return self.counts.index(known)
        counts = self.counts
        return first_holding(len(counts), self.meets, 0, lambda i: trailing_zeros(counts[i]))

    def scan(self, high: int) -> tuple[int, int]:
        """The first count that meets the budget among the SCAN_COUNTS below `high` (which meets it), each laid out
        in turn, and where the scan began."""
        low = max(0, high - SCAN_COUNTS)
        return next((i for i in range(low, high) if self.meets(i)), high), low

    def scan_notes(self, found: int, low: int) -> list[Note]:
        """What the scan below `found` saw: the count just below that fell short, the counts passed over, and
        from where the chosen count is the fewest."""
        chosen = self.trials[found]
        assert chosen is not None
        batch = chosen.layout.global_batch_size
        short = next((self.trials[i] for i in range(found - 1, low - 1, -1) if self.trials[i] is not None), None)
        fewest = "the fewest" + (f" from {self.counts[low]:,} cards up" if low else "")
        if short is None:
            out = [Note("budget.fewest", f"time budget: {chosen.layout.cards} cards are {fewest} that meet it at "
                                         f"the global batch of {batch} ({chosen.hours:.2f} h <= {self.budget:g} h)")]
        else:
            out = [Note("budget.fell_short",
                        f"time budget: {short.layout.cards} cards fall short (fastest layout "
                        f"{short.layout.describe()}, {short.hours:.2f} h > {self.budget:g} h); "
                        f"{chosen.layout.cards} cards are {fewest} that meet it at the global batch of {batch}")]
        passed = [self.counts[i] for i in range(low, found) if self.trials[i] is None]
        if passed:
            listed = ", ".join(map(str, passed[:12])) + (f" and {len(passed) - 12} more" if len(passed) > 12 else "")
            out.append(Note("budget.passed_over", f"time budget: {listed} cards passed over: no layout there tiles "
                                                  f"the global batch of {batch}"))
        return out

    def refuse(self, other: _BudgetTrials) -> NoReturn:
        """No count meets the budget: NoFit where nothing fits on any count tried, else the fastest tried."""
        ctx, start = self.ctx, self.counts[0]
        tried = [found for found in [*self.trials.values(), *other.trials.values()] if found is not None]
        if not tried:
            raise NoFit("time_budget_hours", f"no {ctx.fw.name} layout fits from {start} cards up", ctx, start)
        fastest = min(tried, key=lambda found: (found.hours, found.layout.cards))
        raise SpecError.at("time_budget_hours", f"no count from {start:,} to {self.counts[-1]:,} cards meets "
                                                f"{self.budget:g} h with {ctx.fw.name}: the fastest tried, "
                                                f"{fastest.layout.describe()} on {fastest.layout.cards:,} cards, "
                                                f"takes {fastest.hours:.2f} h; allow more time or train on fewer "
                                                f"tokens")


def _estimate(ctx: Context, layout: Layout, budget_cards: int | None) -> Estimate:
    tokens = ctx.spec.train_tokens if ctx.role_kind.trains else None  # a role that does not train has no time
    tput, share = capped_rate(ctx, layout)
    # A rate of 0: nothing is published for the role (its plugin says so), and the plan gives no time.
    timed = tokens if tput.tokens_per_card_s > 0 else None
    took = None if timed is None else hours(timed, tput.tokens_per_card_s, layout.cards, ctx.spec.scaling_efficiency)
    return Estimate(total_tokens=tokens, tokens_per_card_s=tput.tokens_per_card_s, tps_source=tput.source,
                    is_estimate=tput.is_estimate, mfu=tput.mfu, time_hours=took, budget_cards=budget_cards,
                    time_high_hours=None if took is None else took / tput.slow_share, rate_share=share)


def _resolve_framework(ctx: Context, tables: Tables, known: int | None = None):
    """One framework's plan; `known`: a card count a time budget's search tries first (resolve's second search, at
    the plan's global batch, starts from the first search's count)."""
    notes: list[Note] = []
    warnings: list[Note] = []
    check_calibration(ctx)
    minimum, why = minimum_cards(ctx, tables, notes)
    if minimum is None:  # no table count: the smallest card count where an unpinned layout fits
        minimum = MinCards(smallest_fit(ctx), "memory model: the smallest card count with a layout that fits", why)
    forced = False
    tokens = ctx.spec.train_tokens
    budget = ctx.spec.time_budget_hours if tokens is not None and ctx.spec.cards is None else None
    if budget is not None and rate(ctx, None).tokens_per_card_s <= 0:  # no rate: no card count meets a budget
        warnings.append(warning("budget.no_rate", f"time_budget_hours: {rate(ctx, None).source}, so no card count "
                                                  f"can be sized for the budget; the cards follow memory alone"))
        budget = None
    budget_cards = None
    if ctx.spec.cards is not None:
        cards = explicit_cards(ctx, ctx.spec.cards, minimum, notes)
        forced = cards < minimum.value
        layout, rejected = choose_layout(ctx, tables, cards, notes, warnings)
    elif tokens is None or budget is None:  # (budget is None whenever tokens is)
        layout, rejected = choose_layout(ctx, tables, auto_cards(ctx, minimum, None, notes), notes, warnings)
    else:
        # The fewest cards whose fastest layout meets the budget. One card's compute-bound rate sizes the first
        # count (no layout is faster per card); communication and the pipeline bubble can only add cards.
        budget_cards = cards_for_budget(tokens, budget, rate(ctx, None).tokens_per_card_s,
                                        ctx.spec.scaling_efficiency)
        layout, rejected = _fewest_cards_for_budget(ctx, tables, minimum, budget_cards, tokens, budget, notes,
                                                    warnings, known)
    notes.extend(_card_notes(ctx, minimum, layout))
    est = _estimate(ctx, layout, budget_cards)
    info = ctx.info
    # The upstream file the method follows: its own column (pretrain, predict), else the fine-tuning one.
    upstream = info.get(ctx.spec.method if ctx.spec.method in info else "finetune")
    # What upstream's file sets that this plan does not follow, and why (frameworks.yaml).
    notes.extend(Note("upstream.departure", f"upstream {upstream} {text}") for text in info.get("departures", ()))
    notes.extend(ctx.planning.layout_notes(ctx, layout))
    first = ctx.planning.roles(ctx.spec.method)[0]
    fplan = FrameworkPlan(name=ctx.fw.name, label=ctx.fw.label,
                          roles={first.kind.value: Role(first.kind, layout, est, first.colocated)},
                          min_cards=minimum,
                          forced=forced, info=info, upstream=upstream)
    return fplan, rejected, notes, warnings


def _card_notes(ctx: Context, minimum: MinCards, layout: Layout) -> list[Note]:
    """Notes on the card count and layout a framework's first role took: the table's count above what memory
    needs, one card's missing accumulation, a preset's sequence parallel, a count below one node."""
    notes: list[Note] = []
    # The table's count where it set the plan's (a time budget that the minimum already meets included: the budget
    # search starts at the table's count); a minimum within one node is seed 000's usual whole node (below 8 cards
    # one normally uses 8), so only whole nodes are named.
    if ctx.spec.cards is None and from_table(minimum) \
            and ctx.hw.cards_per_node < layout.cards == round_up(ctx.hw, minimum.value):
        fewer = fits_below(ctx, layout.cards)
        if fewer is not None:
            notes.append(table_above_memory(minimum, fewer))
    if layout.cards == 1 and not ctx.fw.one_card_accumulation and ctx.role_kind.trains:
        notes.append(Note("cards.one_card", f"one card: no gradient accumulation ({ctx.fw.one_card_rule}), so the "
                                            f"global batch is the micro batch, {layout.global_batch_size}"))
    if layout.preset_level and layout.sequence_parallel and ctx.pins.sequence_parallel is None:
        notes.append(Note("layout.preset_sequence_parallel",
                          f"sequence parallel on: {ctx.planning.preset_source}'s validated commands run the upstream "
                          f"fine-tuning config unchanged on use_seq_parallel, and configs/qwen3/finetune_qwen3.yaml "
                          f"sets it True, although the guide's config table says False; the activation memory counts "
                          f"it. Pin layout.{ctx.fw.name}.sequence_parallel: false for the table's value"))
    if ctx.hw.accelerator == "npu" and ctx.role_kind.trains and layout.cards < 8 and layout.cards == minimum.value:
        notes.append(Note("cards.below_node", f"{layout.cards} card(s) is below one node; the Huawei card table: "
                                              f"below 8 cards one normally uses 8 (set cards: 8 to do so)"))
    return notes


# ----------------------------------------------------------------------------------------------------------------
# Plan-wide notes and paths


def _general_notes(spec: Spec, model: Model, tables: Tables, plans: dict[str, FrameworkPlan],
                   planning: dict[str, Planning]) -> list[Note]:
    notes = []
    if spec.samples is not None and spec.method not in ("pretrain", *RL_METHODS):  # seed 001's advice is for SFT
        size_b = model.params / 1e9
        for limit, advice, label in DATASET_ADVICE:
            if size_b <= limit:
                ratio = spec.samples / advice
                more = "; quality matters more than count" if ratio > 2 else ""
                notes.append(Note("data.size_advice", f"data: {spec.samples} samples; the ZeRO-3 field report's rule "
                                                      f"of thumb for a ~{label} model is about {advice} good samples "
                                                      f"({ratio:.1f}x that){more}"))
                break
    if spec.epochs != int(spec.epochs) and spec.samples_per_epoch is None:
        notes.extend(Note("train.whole_epochs", f"{name} counts whole epochs: {own.whole_epochs_key} is "
                                                f"{math.ceil(spec.epochs)} for the spec's {spec.epochs:g}")
                     for name, own in planning.items() if own.whole_epochs_key)
    if spec.method == "pretrain":
        starts = ", ".join(own.pretrain_weights for own in planning.values() if own.pretrain_weights)
        notes.append(Note("pretrain.from_weights",
                          f"continued pretraining: every framework starts from the HuggingFace weights in "
                          f"paths.model_dir{f' ({starts})' if starts else ''}, so the recipe's defaults "
                          f"are each framework's continued-pretraining ones; gen-launch does not plan pretraining "
                          f"from random weights"))
    multi = [name for name, fp in plans.items() if fp.layout.nodes > 1]
    notes.extend(_master_notes(spec, multi))
    if multi and spec.shared_storage:
        notes.append(Note("storage.shared", "multi-node: output_dir must be on storage shared by every node "
                                            "(cluster.shared_storage: true, the default this plan assumes; set it "
                                            "false where each node has its own disk)"))
    elif multi:
        notes.extend(own.about(name) for name in multi if (own := planning[name].unshared_storage_note))
    return notes


def _master_notes(spec: Spec, multi: list[str]) -> list[Note]:
    """Where a multi-node job's launch scripts take node 0's address from when the spec gives none."""
    if not multi or spec.master_addr is not None:
        return []
    if spec.scheduler == "none":
        return [Note("multinode.master_addr_given", f"multi-node ({', '.join(multi)}) without cluster.master_addr: "
                                                    f"the launch scripts take MASTER_ADDR from the second argument or "
                                                    f"the environment and refuse to start without it")]
    return [Note("multinode.master_addr_scheduler", f"multi-node ({', '.join(multi)}) under {spec.scheduler}: started "
                                                    f"without arguments, the launch scripts take node 0's address "
                                                    f"from {spec.scheduler}'s variables (its first host)")]

def _check_master_addr(spec: Spec, plans: dict[str, FrameworkPlan]) -> None:
    """A loopback cluster.master_addr is refused where a framework runs on more than one node, whichever it is."""
    multi = {name: fp.layout.nodes for name, fp in plans.items() if fp.layout.nodes > 1}
    if multi and spec.master_addr is not None and is_loopback(spec.master_addr):
        nodes = ", ".join(f"{name} on {count} nodes" for name, count in multi.items())
        raise SpecError.at("cluster.master_addr", f"{spec.master_addr} {LOOPBACK_WHY} ({nodes})")


def _fixed_steps_note(spec: Spec, planning: dict[str, Planning], recipe: Training) -> Note | None:
    """Steps derived from the spec's data size are written as a count, not as epochs: a data file of another size
    then trains more or fewer passes, silently. A plugin's fixed_steps names the setting that takes the count."""
    fixed = [own.fixed_steps for own in planning.values() if own.fixed_steps]
    if not fixed or not recipe.origin.get("steps", "").startswith("derived"):
        return None
    rows = spec.samples is not None and spec.method != "pretrain"
    return Note("train.fixed_steps",
                f"steps: {recipe.steps} from the spec's data size, written as a step count ({', '.join(fixed)}): a "
                f"data file of another size trains more or fewer than {recipe.epochs:g} epoch(s)"
                + ("; gen-launch validate counts the file's rows where it is there" if rows else ""))


def _unshared_storage_warnings(spec: Spec, plans: dict[str, FrameworkPlan],
                               planning: dict[str, Planning]) -> list[Note]:
    """Frameworks that cannot run across nodes without shared storage (cluster.shared_storage: false)."""
    if spec.shared_storage:
        return []
    return [warning("storage.unshared_refused", f"cluster.shared_storage is false: {refusal}").about(name)
            for name, fp in plans.items() if fp.layout.nodes > 1
            and (refusal := planning[name].unshared_storage_refusal)]


def _paths(spec: Spec, model: Model, hf_id: str, plans: dict[str, FrameworkPlan], planning: dict[str, Planning],
           data: DataShape) -> dict[str, PathValue]:
    given = spec.paths
    output = given.get("output_dir", f"/path/to/output/{spec.job}")
    defaults = {
        "model_dir": PathDefault(f"/path/to/{hf_id.split('/')[-1]}"),
        # Every framework reads the raw file: JSON lines with a "text" field for pretraining (each framework's
        # preprocessing tokenises it), the fine-tuning format otherwise.
        "dataset": PathDefault(f"/path/to/data/train.{'jsonl' if data.format in ('text', 'sharegpt') else 'json'}"),
        "output_dir": PathDefault(output),
    }
    for name, own in planning.items():
        defaults.update(own.path_defaults(output, model, plans[name].layout))
    if "images" in data.columns:
        # Upstream keeps the images beside the data file (data/mllm_demo.json -> data/mllm_demo_data/).
        defaults["media_dir"] = PathDefault(given.get("dataset", defaults["dataset"].value).rsplit("/", 1)[0] or "/",
                                            derived_from="dataset")
    elif "media_dir" in given:
        raise SpecError.at("paths.media_dir", "the data has no images column (paths.dataset_columns), so no "
                                              "framework reads media_dir")
    paths = {}
    for key, default in defaults.items():
        if key in given:
            paths[key] = PathValue(given[key], False)
        else:
            placeholder = default.derived_from is None or default.derived_from not in given
            paths[key] = PathValue(default.value, placeholder,
                                   default.derived_from if placeholder and default.set_through_source else None)
    return paths


@frozen
class Candidate:
    """A layout that fits one role at the plan's card count, its estimated rate, and whether the plan chose it."""

    layout: Layout
    rate: Throughput
    chosen: bool
    role: str = RoleKind.TRAIN.value

    def to_json(self) -> dict:
        return {"layout": self.layout.describe(), "memory_per_card_gib": round(self.layout.memory.total, 2),
                "tokens_per_card_s": round(self.rate.tokens_per_card_s, 1), "chosen": self.chosen, "role": self.role}


def candidate_layouts(spec: Spec, tables: Tables, plan: Plan) -> dict[str, list[Candidate]]:
    """Every layout that fits each role of each planned framework at the role's card count and the plan's global
    batch, role by role in the search's order of preference (the plan's own first, unless a preset chose it),
    with its estimated rate."""
    model, hw = tables.model(spec.model), tables.hardware_row(spec.hardware)
    at_batch = replace(spec, global_batch_size=plan.train.global_batch_size)
    out: dict[str, list[Candidate]] = {}
    for name, fp in plan.frameworks.items():
        ctx = Context(at_batch, model, hw, tables.frameworks[name], False, adapter(spec, tables.recipes[spec.method]),
                      _defaults(tables, name, spec.method, model, hw))
        out[name] = []
        for kind, role in fp.roles.items():
            at = replace(ctx, role=RoleKind(kind))
            fitting, _, _ = candidates(at, role.layout.cards)
            out[name].extend(Candidate(layout, rate(at, layout), layout.describe() == role.layout.describe(), kind)
                             for layout in fitting)
    return out


def minimum_table(tables: Tables, seq_len: int) -> list[dict]:
    """Minimum cards per model, framework, method and hardware at `seq_len`, for `gen-launch models`.
    A cell is a count, "-" (the framework's pinned version cannot train the model) or "mem" (the table gives no
    count: the memory model decides)."""
    rows = []
    for model in tables.models.values():
        for name in tables.frameworks:
            # The table's columns are full and LoRA training: a framework offering neither has no row.
            if not tables.supports(name, model.name) or not {"full", "lora"} & set(tables.frameworks[name].methods):
                continue
            cells: dict[str, int | str] = {}
            fw = tables.frameworks[name]
            refused = fw.refusal(model.name) is not None  # the pinned version cannot train it
            for method in ("full", "lora"):
                # a method the framework does not offer for the model is refused as a job would be (_job_refusal)
                offered = method in fw.methods and method in (fw.methods_for(model.name) or fw.methods)
                for hw in (h for h in tables.hardware.values() if h.accelerator == "npu"):
                    if refused or not offered:
                        cells[f"{method}/{hw.name}"] = "-"
                        continue
                    spec = Spec(job="models", model=model.name, method=method, seq_len=seq_len, hardware=hw.name,
                                frameworks=(name,), cards=None, sha256="")
                    ctx = Context(spec, model, hw, tables.frameworks[name], False,
                                  adapter(spec, tables.recipes[method]), tables.recipes[method])
                    found, _ = minimum_cards(ctx, tables, [])
                    cells[f"{method}/{hw.name}"] = found.value if found else "mem"
            rows.append({"model": model.name, "params_b": round(model.params / 1e9, 2), "framework": name, **cells})
    return rows
