"""`validate` for a MindSpeed-RL job: the Hydra config on disk against v2.3.0's config keys (examples.config_keys,
from its config classes; BaseConfig rejects any other: mindspeed_rl/config_cls/base_config.py l. 24-33) and its
sections (cli/train_grpo.py l. 191-244 reads only these; ref_config / reward_config are refused with the integrated
worker, l. 202-211), then rules.py's rules at the plan's node count and model."""

from __future__ import annotations

from ...checks.job import NO_PLAN, Job, Result, yaml_mapping
from .examples import RELEASE, config_keys, facts
from .planning import NAME, shape_from
from .rules import broken

# critic_config: PPO's critic, a MegatronConfig too (cli/train_ppo.py l. 246-247)
SECTIONS = {"megatron_training": "megatron", "actor_config": "megatron", "rl_config": "rl_config",
            "generate_config": "generate_config", "critic_config": "megatron"}
TOP = ("defaults", *SECTIONS)
# rl_config.actor_resource (and PPO's critic_resource) takes num_npus alone (rl_config.py l. 175-179);
# sampling_config these (generate_config.py l. 104-119).
NESTED = {"actor_resource": ("num_npus",), "critic_resource": ("num_npus",),
          "integrated_mode_config": ("ref_model_load_path",),
          "sampling_config": ("logprobs", "max_tokens", "top_p", "top_k", "min_p", "temperature", "detokenize",
                              "seed")}


def key_problems(config: dict) -> list[str]:
    """Sections and keys v2.3.0 does not take, as `section.key: why`."""
    out = [f"{top}: not a section {RELEASE} reads (cli/train_grpo.py l. 191-244)" for top in config
           if top not in TOP]
    keys = config_keys()
    for section, cls in SECTIONS.items():
        for key, value in (config.get(section) or {}).items():
            # `model` names the configs/model/ entry BaseConfig.update merges (base_config.py l. 17-22)
            if key.replace("-", "_") not in keys[cls] and not (cls == "megatron" and key == "model"):
                out.append(f"{section}.{key}: not a key of {RELEASE}'s {cls} config (base_config.py l. 24-33)")
            elif key in NESTED and isinstance(value, dict):
                out += [f"{section}.{key}.{sub}: {key} takes only {', '.join(NESTED[key])}"
                        for sub in value if sub not in NESTED[key]]
    return out


def check(job: Job, path: str) -> Result | None:
    if not (path.startswith(f"{NAME}/config/") and path.endswith(".yaml")):
        return None
    nodes = job.layout_value(NAME, "nodes")
    if job.model is None or nodes is None:
        return Result(path, "problem", NO_PLAN)
    config, why = yaml_mapping(job.folder / path)
    if config is None:
        return Result(path, "problem", why)
    problems = key_problems(config)
    if not problems:
        dataset, _ = yaml_mapping(job.folder / NAME / "dataset.yaml")
        prompt_type = (dataset or {}).get("prompt_type")
        template = next((tuple(row["verifiers"]) for row in facts()["datasets"].values()
                         if row["prompt_type"] == prompt_type), ())
        try:
            shape = shape_from(config, nodes, job.model, template)
        except (KeyError, TypeError, ValueError) as exc:
            return Result(path, "problem", f"a value the rules read is missing or not a number: {exc}")
        problems = [f"{b.config_key}: {b.message}" for b in broken(shape)]
    if problems:
        return Result(path, "problem", "; ".join(problems))
    return Result(path, "ok", f"{RELEASE}'s config keys and the run-time rules at {nodes} node(s)")
