"""The MindSpeed-RL v2.3.0 facts the plan follows (generator/data/mindspeed_rl_2.3.0/): the upstream config for a
method and model, each value with its line, the dataset YAMLs and verifiers, and v2.3.0's config keys."""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from ...api.frozen import frozen
from ...resources import DATA_DIR
from ...tables import TABLE_LOADER  # libyaml's loader where PyYAML has it

FOLDER = DATA_DIR / "mindspeed_rl_2.3.0"
RELEASE = "MindSpeed-RL v2.3.0 (4b30d034)"


@frozen
class Example:
    """One upstream config: its name, facts from examples.yaml, and every value by `section.key` with its line."""

    name: str
    model_yaml: str
    converter: dict  # over MindSpeed-LLM's converter row for the model (examples.yaml `converter`)
    dataset: str
    values: dict[str, tuple[object, int]]

    def get(self, key: str) -> Any:  # a YAML scalar or list, as upstream's config holds it
        return self.values[key][0]

    def find(self, key: str, default: Any = None) -> Any:  # a key some of upstream's configs leave out
        return self.values[key][0] if key in self.values else default

    def source(self, key: str) -> str:
        return f"upstream {RELEASE} configs/{self.name}.yaml l. {self.values[key][1]}"


def _flatten(node: yaml.Node, prefix: str, out: dict[str, tuple[object, int]]) -> None:
    """`section.key` -> (value, line) of a composed YAML mapping, nested mappings flattened (sampling_config.x)."""
    for key_node, value_node in node.value:
        key = f"{prefix}{key_node.value}"
        if isinstance(value_node, yaml.MappingNode):
            _flatten(value_node, key + ".", out)
        else:
            out[key] = (yaml.safe_load(yaml.serialize(value_node)), value_node.start_mark.line + 1)


@cache
def facts() -> dict:
    return yaml.load((FOLDER / "examples.yaml").read_text(encoding="utf-8"), Loader=TABLE_LOADER)


@cache
def example(method: str, model: str, hardware: str | None = None) -> Example | None:
    """The config a plan of `method` for `model` follows on `hardware` (None: the row's own)."""
    row = facts().get(method, {}).get(model)
    if row is None:
        return None
    name = row.get("by_hardware", {}).get(hardware, row["config"])
    text = (FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    values: dict[str, tuple[object, int]] = {}
    root = yaml.compose(text)
    if root is None:
        raise ValueError(f"{name}.yaml is empty")
    _flatten(root, "", values)
    return Example(name, row["model_yaml"], row.get("converter", {}), row["dataset"], values)


@cache
def config_keys() -> dict[str, dict[str, str]]:
    """v2.3.0's keys by config class section (megatron, rl_config, generate_config) -> key -> its source line."""
    found: dict[str, dict[str, str]] = {}
    lines = [line for line in (FOLDER / "keys.tsv").read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    for line in lines[1:]:
        section, key, source = line.split("\t")
        found.setdefault(section, {})[key] = f"upstream {RELEASE} {source}"
    return found
