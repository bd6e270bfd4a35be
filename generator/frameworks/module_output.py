"""A plugin's files side made of its module's functions (contract.py Output), apart from its planning side's
defaults (base.py): a plan never loads it."""

from __future__ import annotations

from collections.abc import Callable

from ..api.frozen import frozen
from ..api.output import CheckOption, Launcher


@frozen
class ModuleOutput:
    """An output side made of a plugin's module functions (contract.py Output): its renderer, its PLAN.md section,
    its per-file check, and the validate options and launchers it declares."""

    render: Callable
    plan_section: Callable
    check: Callable
    options: tuple[CheckOption, ...] = ()
    launchers: tuple[Launcher, ...] = ()  # none: its commands.txt runs gen-launch's launch.sh
