"""What a framework plugin's planning side answers when the framework adds nothing of its own
(contract.py Planning): one `train` role on the model-parallel grid, no refusals, notes or paths of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..errors import Problem, TableError
from ..memory import MemoryBreakdown
from ..parallel import Parallel
from ..plan import FrameworkPlan, Layout, Plan, RunLength
from ..spaces import GridSpace
from ..spec import Spec
from ..tables import Model, RecipeDefaults
from ..throughput import Throughput
from ..training import Training
from . import import_for
from .contract import (
    CheckOption,
    Launcher,
    MemoryInputs,
    Output,
    PathDefault,
    Planning,
    RoleDef,
    RoleKind,
    SearchSpace,
    Settings,
)

if TYPE_CHECKING:
    import jinja2

    from ..checks.job import Job, Result

GRID = GridSpace()


class DefaultPlanning:
    """A framework that trains one role on the model-parallel grid and adds nothing to the plan."""

    path_keys: tuple[str, ...] = ()
    moved_pins: Mapping[str, str] = {}
    chat_template_fact: str | None = None
    thinking_template: str = ""
    thinking_note: str | None = None
    pretrain_weights: str = ""
    presets_first = False
    min_cards_stand_in = ""
    preset_source = ""
    linear_decay_source: str | None = None
    fixed_steps: str | None = None
    whole_epochs_key: str | None = None
    unshared_storage_refusal: str | None = None
    unshared_storage_note: str | None = None

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return (RoleDef(RoleKind.TRAIN),)

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model) -> RecipeDefaults:
        return defaults

    def role_runs(self, ctx: Context, role: RoleKind) -> bool:
        return True

    def space(self, role: RoleKind) -> SearchSpace:
        return GRID

    def recipe_refusals(self, recipe: Training) -> list[Problem]:
        return []

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        return MemoryInputs()

    def layout_notes(self, ctx: Context, layout: Layout) -> list[str]:
        return []

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> str | None:
        return None

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        return {}

    def run_length(self, plan: Plan, fp: FrameworkPlan) -> RunLength | None:
        return None

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        return None

    def rate(self, ctx: Context, layout: Layout | None) -> Throughput | None:
        return None

    def settings(self, plan: Plan, fp: FrameworkPlan) -> Settings | None:
        return None


@dataclass(frozen=True)
class ModuleOutput:
    """An output side made of a plugin's module functions (contract.py Output): its renderer, its PLAN.md section,
    its per-file check, and the validate options and launchers it declares."""

    render: Callable
    plan_section: Callable
    check: Callable
    options: tuple[CheckOption, ...] = ()
    launchers: tuple[Launcher, ...] = ()  # none: its commands.txt runs gen-launch's launch.sh


class _Deferred:
    """A side of a plugin that its module `module` holds as `attribute`, imported on the first call of load(): the
    registry loads every plugin for every command, and a command needs the sides of few. A module that does not
    import, or lacks the attribute, is a table error (exit 5) then, named with the row."""

    attribute = ""

    def __init__(self, name: str, module: str):
        self.name = name
        self.module = module
        self._loaded: Any = None

    def _side(self) -> Any:
        if self._loaded is None:
            found = getattr(import_for(self.name, self.module), self.attribute, None)
            if found is None:
                raise TableError(f"frameworks.yaml {self.name}: plugin: {self.module} has no {self.attribute} "
                                 f"(generator/frameworks/contract.py)")
            self._loaded = found
        return self._loaded


class LazyPlanning(_Deferred):
    """A plugin's planning side (contract.py Planning) as its module's `PLANNING`, imported when a plan first asks
    it something: a plan uses the frameworks it lists, not all."""

    attribute = "PLANNING"

    def load(self) -> Planning:
        return self._side()

    @property
    def path_keys(self) -> tuple[str, ...]:
        return self.load().path_keys

    @property
    def moved_pins(self) -> Mapping[str, str]:
        return self.load().moved_pins

    @property
    def chat_template_fact(self) -> str | None:
        return self.load().chat_template_fact

    @property
    def thinking_template(self) -> str:
        return self.load().thinking_template

    @property
    def thinking_note(self) -> str | None:
        return self.load().thinking_note

    @property
    def pretrain_weights(self) -> str:
        return self.load().pretrain_weights

    @property
    def presets_first(self) -> bool:
        return self.load().presets_first

    @property
    def min_cards_stand_in(self) -> str:
        return self.load().min_cards_stand_in

    @property
    def preset_source(self) -> str:
        return self.load().preset_source

    @property
    def linear_decay_source(self) -> str | None:
        return self.load().linear_decay_source

    @property
    def fixed_steps(self) -> str | None:
        return self.load().fixed_steps

    @property
    def whole_epochs_key(self) -> str | None:
        return self.load().whole_epochs_key

    @property
    def unshared_storage_refusal(self) -> str | None:
        return self.load().unshared_storage_refusal

    @property
    def unshared_storage_note(self) -> str | None:
        return self.load().unshared_storage_note

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return self.load().roles(method)

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model) -> RecipeDefaults:
        return self.load().recipe_defaults(defaults, model)

    def role_runs(self, ctx: Context, role: RoleKind) -> bool:
        return self.load().role_runs(ctx, role)

    def space(self, role: RoleKind) -> SearchSpace:
        return self.load().space(role)

    def recipe_refusals(self, recipe: Training) -> list[Problem]:
        return self.load().recipe_refusals(recipe)

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        return self.load().memory_inputs(ctx)

    def layout_notes(self, ctx: Context, layout: Layout) -> list[str]:
        return self.load().layout_notes(ctx, layout)

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> str | None:
        return self.load().checkpoint_note(spec, model, recipe)

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        return self.load().path_defaults(output_dir, model, layout)

    def run_length(self, plan: Plan, fp: FrameworkPlan) -> RunLength | None:
        return self.load().run_length(plan, fp)

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        return self.load().memory(ctx, shape)

    def rate(self, ctx: Context, layout: Layout | None) -> Throughput | None:
        return self.load().rate(ctx, layout)

    def settings(self, plan: Plan, fp: FrameworkPlan) -> Settings | None:
        return self.load().settings(plan, fp)


class LazyOutput(_Deferred):
    """A plugin's output side (contract.py Output) as its module's `OUTPUT`, imported when first asked for: `plan`
    never renders or checks files, and the renderers, their helpers and the checks are most of a plugin's import
    time."""

    attribute = "OUTPUT"

    def load(self) -> Output:
        return self._side()

    @property
    def options(self) -> tuple[CheckOption, ...]:
        return self.load().options

    @property
    def launchers(self) -> tuple[Launcher, ...]:
        return self.load().launchers

    def render(self, plan: Plan, env: jinja2.Environment) -> dict[str, str]:
        return self.load().render(plan, env)

    def plan_section(self, plan: Plan, env: jinja2.Environment) -> str:
        return self.load().plan_section(plan, env)

    def check(self, job: Job, path: str) -> Result | None:
        return self.load().check(job, path)
