"""The contract every framework plugin meets: the core (spec, tables, resolve, render, validate, cli) asks a plugin
through these two parts and names no framework itself.

A plugin is one package under generator/frameworks/<name>/ (or any importable module a frameworks.yaml row names in
`plugin:`), exposing `PLUGIN: Plugin`. Its data are its frameworks.yaml row (typed when the tables load) and its
templates under templates/<name>/. `tests/test_registry.py` runs the contract test over every registered plugin.

- `Planning` is the resolver's side: the roles a method trains or serves with, the search space and rules of each
  role's layout, what the framework's pinned version cannot express (refusals with the spec key and the reason),
  and the notes and default paths the plan carries for it.
- `Output` is the files' side: plan -> {relative path: text} and its PLAN.md section, and the checks `validate`
  runs on the files it wrote (its own parsers and rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .frozen import frozen
from .notes import Note
from .roles import RoleDef, RoleKind

if TYPE_CHECKING:
    import jinja2

    from .output import CheckOption, Launcher
    from .starter import StarterSection

# The core's types the contract passes between the core and a plugin, named here and not imported: the contract
# imports nothing else from the package, so every module may import it (no import cycle, tests/test_imports.py).
# A plugin's own signatures name the real types: generator/context.py Context, plan.py Plan, FrameworkPlan, Layout,
# Rejected and RunLength, families/rl/run.py RunSteps, spec.py Spec, tables.py Model, Framework, Hardware and
# RecipeDefaults, training.py Training, errors.py Problem, memory.py MemoryBreakdown, parallel.py Parallel,
# throughput.py Throughput, checks/job.py Job and Result.
Context = Any
Plan = Any
FrameworkPlan = Any
Layout = Any
Rejected = Any
RunLength = Any
RunSteps = Any
Spec = Any
Model = Any
RecipeDefaults = Any
Framework = Any
Hardware = Any
Training = Any
Problem = Any
MemoryBreakdown = Any
Parallel = Any
Throughput = Any
Job = Any
Result = Any


@frozen
class Structure:
    """How one candidate layout splits the model, before micro batch and recompute: model-parallel sizes, or a
    ZeRO stage (zero_stage None with tp..ep 1: plain data parallel, or one card)."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    zero_stage: int | None = None
    offload: bool = False
    num_layer_list: tuple[int, ...] | None = None  # layers per pipeline stage (None: the core's even split)
    sequence_parallel: bool | None = None  # the framework's default where the spec pins none (None: on with TP > 1)


class SearchSpace(Protocol):
    """Which layouts a role's search tries: the structures the framework can express, in its order of preference,
    and the recompute settings."""

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        """Every structure to try at `cards` (the spec's pins kept)."""
        ...

    def recomputes(self, ctx: Context) -> list[str]:
        """Recompute settings to try, least recompute first."""
        ...

    def micro_batches(self, ctx: Context, cards: int) -> list[int] | None:
        """Micro batch sizes to try at `cards`, where the framework fixes them itself (None: the core's choices)."""
        ...

    def label(self, structure: Structure) -> str:
        """The structure as the rejected list names it."""
        ...

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> Note | None:
        """Why the search chose `best` over the lighter structures `rejected` holds, in the framework's words
        (None: the plan's rejected list says enough)."""
        ...


@frozen
class MemoryInputs:
    """What the framework's upstream recipe for a model sets that the memory model reads (the defaults: nothing)."""

    usable_cap_gb: float | None = None  # usable memory per card it caps below the hardware's (None: no cap)
    usable_cap_source: str = ""  # that cap's setting and upstream file, in words
    optimizer_shard: int | None = None  # the optimizer-state shard size where it shards them (-1: whole DP group)
    mtp_layers: int = 0  # multi-token-prediction layers it trains
    double_quant: bool = True  # a 4-bit base's quantization constants quantized again (bitsandbytes)


@frozen
class PathDefault:
    """A path the framework reads, as the plan writes it when the spec does not give it: a placeholder to edit, or
    derived from the spec's `derived_from` path when the spec gives that one."""

    value: str
    derived_from: str | None = None
    # A folder the job itself writes inside `derived_from`: left a placeholder, it is set through that path.
    set_through_source: bool = False


@runtime_checkable
class Planning(Protocol):
    """The resolver's side of a framework. `DefaultPlanning` answers for a framework with nothing to add; a plugin
    subclasses it and states what its framework does differently, each rule with its upstream source."""

    # Facts, read-only: a plugin states them as class attributes (DefaultPlanning gives the defaults).
    @property
    def path_keys(self) -> tuple[str, ...]:
        """Paths.<key> the framework reads beyond the core's (the schema lists them)."""
        ...

    @property
    def moved_pins(self) -> Mapping[str, str]:
        """Layout.<framework>.<key> an earlier version read -> where it lives now."""
        ...

    @property
    def chat_template_fact(self) -> str | None:
        """Its model fact naming the chat template (Qwen3's "qwen3" has a thinking switch)."""
        ...

    @property
    def thinking_template(self) -> str:
        """How it formats Qwen3's samples, for the refusal of train.enable_thinking."""
        ...

    @property
    def thinking_note(self) -> Note | None:
        """Why train.enable_thinking does not apply to it, when it does not."""
        ...

    @property
    def whole_nodes(self) -> str | None:
        """Why the plan's own card counts are whole nodes (each count it chooses, not a spec's cards); None: any
        count the platform allows."""
        ...

    @property
    def pretrain_weights(self) -> str:
        """How its continued pretraining loads the HuggingFace weights."""
        ...

    @property
    def opt_in(self) -> str | None:
        """Why a spec without `frameworks:` leaves it out (it is planned only when listed); None: planned by
        default wherever it can run the job."""
        ...

    @property
    def presets_first(self) -> bool:
        """Validated presets (from its preset_source) set its minimum cards before the minimum-card table."""
        ...

    @property
    def min_cards_stand_in(self) -> Note | None:
        """The note when no preset matches and its row's min_cards_from column stands in."""
        ...

    @property
    def preset_source(self) -> str:
        """The source of its validated presets, by what it is (the plan names it so)."""
        ...

    @property
    def linear_decay_source(self) -> str | None:
        """Its linear schedule decays to 0 (the upstream scheduler): a floor is refused."""
        ...

    @property
    def fixed_steps(self) -> str | None:
        """The setting that stops it at the plan's step count whatever the data holds."""
        ...

    @property
    def whole_epochs_key(self) -> str | None:
        """The setting that counts whole epochs only (a fraction is rounded up)."""
        ...

    @property
    def unshared_storage_refusal(self) -> str | None:
        """Why it cannot run across nodes without shared storage (a warning)."""
        ...

    @property
    def unshared_storage_note(self) -> Note | None:
        """What it does across nodes without shared storage (a note)."""
        ...

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        """The roles `method` runs with, in the order the plan shows them; the first is the one the recipe's
        global batch and the framework's files follow."""
        ...

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model, fw: Framework,
                        hw: Hardware | None = None) -> RecipeDefaults:
        """The method's training defaults for `model` as the framework's upstream recipe for it sets them (the
        default: recipes.yaml's unchanged); `fw` is the framework's row of the tables the resolver loaded, `hw` the
        job's hardware (an upstream recipe may differ by accelerator)."""
        ...

    def role_runs(self, ctx: Context, role: RoleKind) -> bool:
        """Whether the framework builds `role` (one of roles()) for this job: a role may depend on the recipe."""
        ...

    def space(self, role: RoleKind) -> SearchSpace:
        """The search space of `role`'s layout."""
        ...

    def most_cards(self, ctx: Context) -> tuple[int, str] | None:
        """The most cards the job's batch can use, and why (a time budget needing more is refused); None: no limit."""
        ...

    def batch_unit(self, ctx: Context, layout: Layout) -> int:
        """The prompts the global batch must be a multiple of on `layout` beyond its own tiling (its other roles'
        and nodes' rules), so that a refusal names only batches that plan; 1: none."""
        ...

    def sequences_per_sample(self, ctx: Context) -> int:
        """The sequences one sample of the global batch becomes in the update (RL: the responses to a prompt), so
        the batch tiles in sequences over micro batch x DP (Parallel.batch_step); 1 elsewhere."""
        ...

    def run_steps(self, ctx: Context, batch: int) -> RunSteps | None:
        """The steps its files run over the spec's data at global batch `batch`, and the prompts a step draws,
        where it counts them itself (RL: whole loader batches of its train rows, families/rl/run.py); the plan's
        steps and its step time then are these. None: samples x epochs / global batch."""
        ...

    def role_problems(self, ctx: Context) -> list[Problem]:
        """What the spec asks of the roles together that they cannot do (a constraint between roles, as the rollout
        world dividing the actor's), at the spec key with values that work; checked before any search."""
        ...

    def recipe_refusals(self, recipe: Training) -> list[Problem]:
        """What the pinned version cannot express of `recipe` (the recipe it trains with), at the spec key."""
        ...

    def memory_inputs(self, ctx: Context) -> MemoryInputs:
        """What its upstream recipe for ctx.model sets that the memory model reads (from its facts, ctx.info)."""
        ...

    def layout_notes(self, ctx: Context, layout: Layout) -> list[Note]:
        """Notes on the chosen layout of the role that sets the cards."""
        ...

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> Note | None:
        """What keeping its checkpoints costs where it does not honour train.keep_checkpoints (None: it does)."""
        ...

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        """Its paths beyond the core's, as written when the spec leaves them out (`path_keys`, in that order)."""
        ...

    def run_length(self, plan: Plan, fp: FrameworkPlan) -> RunLength | None:
        """How long it trains in its own terms, where it counts them itself (None: the plan's steps as they are);
        `plan` is as plan.for_framework(<name>) gives it. The resolver keeps it on `fp.run`."""
        ...

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        """Memory per card of ctx.role_kind's phase at `shape`, where the plugin models it itself (a rollout
        engine's KV cache, an offloaded reference); None: the core's scheme (frameworks.yaml memory)."""
        ...

    def measured(self, ctx: Context, shape: Parallel) -> str:
        """Where upstream published a run of `shape` for this job (its source), so it is a candidate that fits
        whatever the memory model estimates; "": none."""
        ...

    def rate(self, ctx: Context, shape: Parallel | None) -> Throughput | None:
        """Tokens/s per card of ctx.role_kind at `shape` (None: before a layout is chosen) where the plugin has its
        own figure (a published measurement; a Throughput of 0 says none is published, and the plan then gives no
        time); None: the core's rate model. It reads the shape alone: the search ranks settings before it estimates
        their memory."""
        ...

    def starter_section(self, method: str, model: Model, fw: Framework) -> StarterSection | None:
        """The section `init` writes for `method` on `model` (its keys with the values the plan would use, each
        with its source), or None: the core's training keys say it all."""
        ...

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> Settings | None:
        """The values its files hold beyond the core's layout and recipe, each with its source, decided from the
        finished plan (as plan.for_framework(<name>) gives it) and the tables' rows on `ctx`; None: none. The
        resolver keeps them on `fp.settings` (plan.json frameworks.<name>.settings); a value the spec asks for that
        the framework would refuse raises SpecError at the spec's key."""
        ...


class Settings(Protocol):
    """A plugin's own values on the plan (Planning.settings)."""

    def to_json(self) -> dict:
        """Its plan.json form."""
        ...

    def rows(self) -> list[tuple[str, str, str]]:
        """(key, value as its file writes it, source) for PLAN.md."""
        ...


@runtime_checkable
class Output(Protocol):
    """The files' side of a framework (see the module docstring)."""

    @property
    def options(self) -> tuple[CheckOption, ...]:
        """The options of `gen-launch validate` its checks take (cli.py adds them to the command)."""
        ...

    @property
    def launchers(self) -> tuple[Launcher, ...]:
        """Its own launchers a commands.txt line may run, besides gen-launch's `launch.sh N` and `NODE_RANK=N`."""
        ...

    def render(self, plan: Plan, env: jinja2.Environment) -> dict[str, str]:
        """Its files, {path under <name>/: text}, from the plan as plan.for_framework(<name>) gives it; templates
        come from `env` (templates/<name>/)."""
        ...

    def plan_section(self, plan: Plan, env: jinja2.Environment) -> str:
        """Its section of PLAN.md (its files and how to launch them), Markdown."""
        ...

    def check(self, job: Job, path: str) -> Result | None:
        """Its own checks of one file it wrote (`path` relative to the job folder, under <name>/): a Result, or None
        when it has none for that file. validate runs the generic checks (bash -n and shellcheck, JSON syntax,
        node ranks of commands.txt) itself and reports a problem from either side."""
        ...
