"""What a framework plugin's planning side answers when the framework adds nothing of its own
(contract.py Planning): one `train` role on the model-parallel grid, no refusals, notes or paths of its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..api.notes import Note
from ..context import Context
from ..errors import Problem
from ..families.rl.run import RunSteps
from ..memory import MemoryBreakdown
from ..parallel import Parallel
from ..plan import FrameworkPlan, Layout, Plan, RunLength
from ..spaces import GridSpace
from ..spec import Spec
from ..tables import Framework, Hardware, Model, RecipeDefaults
from ..throughput import Throughput
from ..training import Training
from .contract import (
    MemoryInputs,
    PathDefault,
    RoleDef,
    RoleKind,
    SearchSpace,
    Settings,
)

if TYPE_CHECKING:
    from ..api.starter import StarterSection

GRID = GridSpace()


class DefaultPlanning:
    """A framework that trains one role on the model-parallel grid and adds nothing to the plan."""

    path_keys: tuple[str, ...] = ()
    moved_pins: Mapping[str, str] = {}
    chat_template_fact: str | None = None
    thinking_template: str = ""
    thinking_note: Note | None = None
    whole_nodes: str | None = None
    pretrain_weights: str = ""
    presets_first = False
    opt_in: str | None = None
    min_cards_stand_in: Note | None = None
    preset_source = ""
    linear_decay_source: str | None = None
    fixed_steps: str | None = None
    whole_epochs_key: str | None = None
    unshared_storage_refusal: str | None = None
    unshared_storage_note: Note | None = None

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return (RoleDef(RoleKind.TRAIN),)

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model, fw: Framework,
                        hw: Hardware | None = None) -> RecipeDefaults:
        return defaults

    def role_runs(self, ctx: Context, role: RoleKind) -> bool:
        return True

    def space(self, role: RoleKind) -> SearchSpace:
        return GRID

    def most_cards(self, ctx: Context) -> tuple[int, str] | None:
        return None

    def batch_unit(self, ctx: Context, layout: Layout) -> int:
        return 1

    def sequences_per_sample(self, ctx: Context) -> int:
        return 1

    def run_steps(self, ctx: Context, batch: int) -> RunSteps | None:
        return None

    def role_problems(self, ctx: Context) -> list[Problem]:
        return []

    def recipe_refusals(self, recipe: Training) -> list[Problem]:
        return []

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        return MemoryInputs()

    def layout_notes(self, ctx: Context, layout: Layout) -> list[Note]:
        return []

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> Note | None:
        return None

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        return {}

    def run_length(self, plan: Plan, fp: FrameworkPlan) -> RunLength | None:
        return None

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        return None

    def measured(self, ctx: Context, shape: Parallel) -> str:
        return ""

    def rate(self, ctx: Context, shape: Parallel | None) -> Throughput | None:
        return None

    def starter_section(self, method: str, model: Model, fw: Framework) -> StarterSection | None:
        return None

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> Settings | None:
        return None
