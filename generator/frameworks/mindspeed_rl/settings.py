"""What a MindSpeed-RL job's files hold, as the resolver decides it (planning.py) and the renderer writes it
(render.py): the Hydra config's values by `section.key`, the dataset YAML's, the converter's options, each with its
source, shown on plan.json (frameworks.mindspeed-rl.settings) and PLAN.md."""

from __future__ import annotations

from ...api import provenance
from ...api.frozen import frozen

Scalar = bool | int | float | str | None
Value = Scalar | tuple[Scalar, ...] | dict
Setting = provenance.Setting[Value]


@frozen
class MsrlSettings:
    """The values of one MindSpeed-RL job's files (contract.py Planning.settings)."""

    entry: str  # the method's entry script (cli/train_grpo.py, cli/train_dapo.py, cli/train_ppo.py)
    config_name: str  # the Hydra config's name (the launch's --config-name)
    upstream: str  # the upstream config followed
    model_yaml: str  # configs/model/<name>.yaml its defaults list names
    config: tuple[Setting, ...]  # every value of the Hydra config, key `section.key[.sub]` (None: left out)
    dataset: tuple[Setting, ...]  # configs/datasets/<config_name>.yaml's keys
    # MindSpeed-LLM's converter options per checkpoint (the actor's; PPO's critic), in order (flag, its word or None:
    # a switch)
    convert: tuple[tuple[Setting, ...], ...]
    converter: str  # MindSpeed-LLM's converter script (convert_ckpt.py, convert_ckpt_v2.py)
    resume: tuple[Setting, ...]  # the keys a resumed run changes (reference mindspeed_rl.md s4.4)
    nnodes: int
    npus_per_node: int
    feature_frozen: str  # upstream's maintenance status, with its source
    alternative: str  # the framework the status points to
    alternative_plans: bool  # whether gen-launch plans this model with it

    def value(self, key: str) -> Value:
        return next(item.value for item in self.config if item.key == key)

    def nested(self, items: tuple[Setting, ...] | None = None) -> dict:
        """The config as the YAML's nested sections (a value None: upstream's key the plan leaves out)."""
        out: dict = {}
        for item in self.config if items is None else items:
            if item.value is None:
                continue
            *parents, last = item.key.split(".")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = list(item.value) if isinstance(item.value, tuple) else item.value
        return out

    def to_json(self) -> dict:
        return {"entry": self.entry, "config_name": self.config_name, "upstream": self.upstream,
                "model_yaml": self.model_yaml,
                "converter": self.converter, "nnodes": self.nnodes, "npus_per_node": self.npus_per_node,
                "feature_frozen": self.feature_frozen, "alternative": self.alternative,
                "alternative_plans": self.alternative_plans,
                "convert": [[item.to_json() for item in command] for command in self.convert],
                **{name: [item.to_json() for item in getattr(self, name)] for name in ("config", "dataset", "resume")}}

    def rows(self) -> list[tuple[str, str, str]]:
        return [(item.key, "(not written)" if item.value is None else str(item.value), item.source)
                for item in self.config]
