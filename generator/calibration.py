"""How the plan uses a spec's `calibration:` block (calibration_block.py; what `gen-launch calibrate` measured).

The measured rate is the rate of the layout it ran: the plan takes it there, and on another layout scales it by the
step model (measured x step model there / step model at the measured layout), so layouts still rank by the model
and a time budget sizes its cards from the measurement. A framework whose rate model does not depend on the layout
(the MFU model) takes the measured rate as it is. The rate is in the unit of the spec's `tokens_per_card_s`
(training tokens per second per card; RL: the framework's own end-to-end figure, verl's perf/throughput or
MindSpeed-RL's e2e_tps, which its plugin converts as it converts the published rows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .api.frozen import frozen
from .api.notes import Note, warning
from .calibration_block import LAYOUT_KEYS, Calibration
from .errors import SpecError, show
from .parallel import Parallel
from .throughput import throughput, uses_step_model

if TYPE_CHECKING:
    from .context import Context
    from .plan import Layout

MEMORY_TOLERANCE = 0.15  # a measured peak further than this from the estimate is a warning


def layout_of(layout: Parallel) -> dict[str, Any]:
    return {key: getattr(layout, key) for key in LAYOUT_KEYS}


@frozen
class Measured:
    """A rate the spec measured (scaled to the layout where a calibration gave it) and its source."""

    tokens_per_card_s: float
    source: str


def measured(ctx: Context, layout: Parallel | None) -> Measured | None:
    """The spec's measured rate for `layout` of the role being planned (None: the spec measured none, or the role
    does not train): `tokens_per_card_s` as given, or the calibration's, scaled to `layout`."""
    if not ctx.role_kind.trains:
        return None
    if ctx.spec.tokens_per_card_s is not None:
        return Measured(ctx.spec.tokens_per_card_s, "measured (spec tokens_per_card_s)")
    cal = ctx.spec.calibration
    if cal is None or cal.framework != ctx.fw.name:
        return None
    head = f"measured: {cal.tokens_per_card_s:,.0f} tokens/s per card on {cal.describe()} ({cal.steps:,} " \
           f"steady steps of {cal.step_time_s:.3g} s, log sha256 {cal.log_sha256[0][:12]}, gen-launch " \
           f"{cal.gen_launch_version})"
    if not uses_step_model(ctx.fw, ctx.hw):
        return Measured(cal.tokens_per_card_s, f"{head}; {ctx.fw.name} on {ctx.hw.name} has no step model to "
                                               f"scale it by, so every layout takes it")
    at = _measured_shape(ctx, cal, layout)
    modelled_there = _modelled(ctx, at)
    if layout is not None and layout_of(layout) == cal.layout:
        return Measured(cal.tokens_per_card_s, f"{head}; modelled there: {modelled_there:,.0f} (the step model)")
    here = _modelled(ctx, None if layout is None else replace(layout, num_layer_list=None))
    factor = here / modelled_there
    return Measured(cal.tokens_per_card_s * factor,
                    f"{head} x {factor:.3f}: the step model here ({here:,.0f}) over the step model at the measured "
                    f"layout ({modelled_there:,.0f})")


def _measured_shape(ctx: Context, cal: Calibration, layout: Parallel | None) -> Parallel:
    """The measured layout as the step model takes it (the rest of `layout`'s choices where one is given)."""
    values = {key: cal.layout[key] for key in LAYOUT_KEYS}
    if layout is not None:
        return replace(layout, num_layer_list=None, **values)
    return Parallel(cards_per_node=ctx.hw.cards_per_node, **values)


def _modelled(ctx: Context, par: Parallel | None) -> float:
    return throughput(ctx.model, ctx.spec.method, ctx.spec.seq_len, ctx.fw, ctx.hw, None, par,
                      ctx.spec.scaling_given).tokens_per_card_s


def check(ctx: Context) -> None:
    """Refuse a calibration measured on another model, method, hardware or sequence length than the spec plans:
    its rate says nothing about this job."""
    cal = ctx.spec.calibration
    if cal is None or cal.framework != ctx.fw.name:
        return
    planned = {"model": ctx.model.name, "method": ctx.spec.method, "hardware": ctx.hw.name,
               "seq_len": ctx.spec.seq_len}
    for key, value in planned.items():
        if getattr(cal, key) != value:
            raise SpecError.at(f"calibration.{key}", f"the run was measured with {key} {show(getattr(cal, key))}, "
                                                     f"this spec plans {show(value)}: calibrate with a log of this "
                                                     f"job, or remove the calibration block")


def memory_warning(ctx: Context, layout: Layout) -> Note | None:
    """A warning where the calibration measured the peak memory of this layout and the estimate is more than
    MEMORY_TOLERANCE away from it."""
    cal = ctx.spec.calibration
    if cal is None or cal.framework != ctx.fw.name or cal.peak_memory_gib is None or not ctx.role_kind.trains \
            or layout_of(layout) != cal.layout:
        return None
    estimate = layout.memory.total
    off = (estimate - cal.peak_memory_gib) / cal.peak_memory_gib
    if abs(off) <= MEMORY_TOLERANCE:
        return None
    return warning("calibration.memory_off",
                   f"calibration.peak_memory_gib: the run peaked at {cal.peak_memory_gib:.1f} GiB per card where the "
                   f"memory model estimates {estimate:.1f} GiB ({off:+.0%}, more than {MEMORY_TOLERANCE:.0%} apart): "
                   f"the plan's fit check rests on the estimate")
