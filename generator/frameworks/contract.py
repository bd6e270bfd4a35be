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

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import jinja2

    from ..checks.job import Job, Result
    from ..plan import Plan


class RoleKind(str, Enum):
    """What a role of a framework's plan does. Training frameworks have one `train` role; RL frameworks an actor,
    a rollout engine, a frozen reference and (PPO) a critic; inference a `serve` role."""

    TRAIN = "train"
    ACTOR = "actor"
    ROLLOUT = "rollout"
    REFERENCE = "reference"
    CRITIC = "critic"
    SERVE = "serve"


@dataclass(frozen=True)
class RoleDef:
    """One role a method runs: its kind, and whether it shares the framework's cards with the other roles in turns
    (colocated: the job's cards are the peak over the phases, not the sum)."""

    kind: RoleKind
    colocated: bool = True


class Planning(Protocol):
    """The resolver's side of a framework (filled in by the plugin; see the module docstring)."""

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        """The roles `method` runs with, in the order the plan shows them."""
        ...


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


@dataclass(frozen=True)
class CheckOption:
    """An option of `gen-launch validate` a plugin's checks take, as the user types it: the flag, the environment
    variable that may stand for it, the word its help shows for the value, and the help."""

    flag: str
    envvar: str
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        """The key of Job.options that carries its value."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Launcher:
    """A launcher script a commands.txt line may run, and where its node rank is: the `rank_at`-th word after the
    script's name (`source`: the upstream file that fixes its arguments)."""

    script: str
    rank_at: int
    source: str


@dataclass(frozen=True)
class Plugin:
    """One framework behind the contract: its name (the frameworks.yaml row and templates/<name>/) and its two
    sides."""

    name: str
    planning: Planning
    output: Output
