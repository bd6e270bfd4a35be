"""What a verl job's files hold beyond the core's layout and recipe, as the resolver decides it (planning.py) and the
renderer writes it (render.py): every Hydra override with its source, the environment the launch exports, and the
data-preparation and model-merge steps. One value, one source: a value the files hold is one of these, shown on
plan.json (frameworks.verl.settings) and PLAN.md."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from ...api import provenance
from ...api.frozen import frozen

Scalar = bool | int | float | str | None
Value = Scalar | tuple[Scalar, ...]
Setting = provenance.Setting[Value]  # a value as verl's readers take it (Hydra, the environment, argparse)
GROUPS = ("overrides", "environment", "prepare", "merge")  # the settings lists, in the order VerlSettings holds them


@frozen
class VerlSettings:
    """The values of one verl job's files (contract.py Planning.settings)."""

    entry: str  # the module `python3 -m` runs: verl.trainer.main_ppo, or DAPO's recipe.dapo.main_dapo
    config: str  # the config it composes: a key of checks.ENTRIES ("ppo": ppo_trainer, "dapo": dapo_trainer)
    upstream: str  # the upstream example script the overrides follow, with its commit
    overrides: tuple[Setting, ...]  # every Hydra override, in upstream's order
    environment: tuple[Setting, ...]  # the variables launch exports on every node
    prepare: tuple[Setting, ...]  # the data-preparation step's options (prepare_data.py)
    merge: tuple[Setting, ...]  # the model-merge step's options (verl.model_merger)
    nnodes: int
    gpus_per_node: int
    # The interface launch.sh reads each node's address from for `ray start --node-ip-address` (planning.node_ifname);
    # None: Ray uses the address of the node's host name.
    node_ifname: str | None = None

    def override_lines(self) -> list[str]:
        """The overrides as Hydra reads them on the command line: `key=value`, one a line."""
        return [f"{item.key}={hydra_value(item.value)}" for item in self.overrides]

    def value(self, key: str) -> Value:
        """The value of one override (KeyError: the plan has no such override)."""
        return next(item.value for item in self.overrides if item.key.lstrip("+") == key.lstrip("+"))

    def to_json(self) -> dict:
        return {"entry": self.entry, "config": self.config, "upstream": self.upstream,
                "nnodes": self.nnodes, "gpus_per_node": self.gpus_per_node, "node_ifname": self.node_ifname,
                **{name: [item.to_json() for item in getattr(self, name)] for name in GROUPS}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerlSettings:
        """plan.json's form read back (validate reads it so); ValueError where it is not what to_json writes."""
        texts = all(isinstance(data.get(key), str) for key in ("entry", "config", "upstream"))
        counts = all(type(data.get(key)) is int for key in ("nnodes", "gpus_per_node"))  # JSON's bool is not one
        if not (texts and counts and all(isinstance(data.get(name), list) for name in GROUPS)
                and isinstance(data.get("node_ifname"), str | None)):
            raise ValueError("frameworks.verl.settings: not what gen-launch writes")
        groups = {name: tuple(Setting.from_json(item) for item in data[name]) for name in GROUPS}
        return cls(entry=data["entry"], config=data["config"], upstream=data["upstream"], nnodes=data["nnodes"],
                   gpus_per_node=data["gpus_per_node"], node_ifname=data["node_ifname"], **groups)

    def rows(self) -> list[tuple[str, str, str]]:
        """(key, value as written, source) of every override, for PLAN.md."""
        return [(item.key, hydra_value(item.value), item.source) for item in self.overrides]


def hydra_value(value: Value) -> str:
    """`value` in Hydra 1.3's override grammar, read back by verl as the same value and type: True/False, integers,
    floats, null, lists, and every string quoted (so "1e-6", "true" or "null" stay strings). A string passes two
    readers, so it is escaped for each, innermost first:
    - OmegaConf reads `${` as an interpolation (its grammar: `\\${` is a literal `${`, and the backslashes right
      before it are escaped in pairs; others are literal). verl resolves the config once (main_ppo.py l.275,
      recipe/dapo/main_dapo.py l.83, OmegaConf.resolve, which stores the unescaped text back) and reads it again
      after, so that escape is applied twice;
    - Hydra's quoted value (hydra/grammar/OverrideLexer.g4 QUOTED_VALUE; core/override_parser/overrides_visitor.py
      _unescape_quoted_string) unescapes backslashes only before a quote or the closing quote: a quote becomes
      `\\'` and a run of backslashes there is doubled; a backslash anywhere else is literal.
    A string holding a control character (a line break, a tab) is refused: overrides.txt holds one override a line,
    and launch.sh refuses a line with one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a Hydra override takes finite numbers, not {value!r}")
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    if any(unicodedata.category(char) == "Cc" for char in value):
        raise ValueError(f"a Hydra override is one line without control characters: {value!r}")
    return "'" + _QUOTED.sub(_double_then_quote, _omegaconf_escape(_omegaconf_escape(value))) + "'"


_INTERPOLATION = re.compile(r"(\\*)\$\{")
_QUOTED = re.compile(r"(\\*)('|$)")


def _omegaconf_escape(text: str) -> str:
    return _INTERPOLATION.sub(lambda found: found.group(1) * 2 + "\\${", text)


def _double_then_quote(found: re.Match) -> str:
    return found.group(1) * 2 + ("\\'" if found.group(2) else "")
