"""verl 0.7.0's own config code on a set of Hydra overrides, run in its own interpreter (.venv-verl/, built by
`bash scripts/install.sh verl`), CPU only: no device, no model weights, no network.

What runs is what `python3 -m verl.trainer.main_ppo OVERRIDES` does before it starts a worker (verl 0.7.0
verl/trainer/main_ppo.py l.35 @hydra.main, l.275 OmegaConf.resolve, l.292-296 validate_config), then the rollout
config dataclass its workers build:
- Hydra composes the overrides onto verl's config (a misspelt key: "Key ... is not in struct", since only `+key=`
  adds one);
- verl/utils/config.py validate_config (l.74-200): train_batch_size x rollout.n divisible by the device count
  without dynamic batch (l.88-113), ref / rollout log-prob micro batches (l.117-181), the actor's dataclass
  (l.151-152; workers/config/actor.py l.172-234: loss_agg_mode, mini batch <= train batch, micro batches; FSDP
  l.296-303: ulysses SP > 1 needs model.use_remove_padding), the critic's where there is one (l.184-186,
  workers/config/critic.py), sampling at validation needs a temperature > 0 (l.196-199);
- verl/workers/config/rollout.py RolloutConfig (pipeline_model_parallel_size > 1 is not implemented for vllm /
  sglang, l.243-246).
DAPO's recipe (recipe/dapo/main_dapo.py at v0.7.0) composes dapo_trainer.yaml and builds the same workers but does
not call validate_config itself: its overrides get the same checks here, since the worker configs are the same.

A critic (PPO, `algorithm.adv_estimator=gae`) is built from its model folder: verl's HFModelConfig reads config.json
and the tokenizer from critic.model.path (and the tokenizer from actor_rollout_ref.model.path), so those must name a
folder on this machine for the check to pass."""

from __future__ import annotations

import ast
import json
import os
import tempfile
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ...api.output import CheckOption
from ...checks import child_answer
from ...checks.job import NO_PLAN, Job, Result, text
from ...resources import DATA_DIR
from ...tables import Model
from .settings import VerlSettings, hydra_value

# entry -> the config folder (None: verl's own verl/trainer/config) and the config name its main composes
# (verl/trainer/main_ppo.py l.35; recipe/dapo/main_dapo.py l.32, its config copied into generator/data).
ENTRIES: dict[str, tuple[Path | None, str]] = {
    "ppo": (None, "ppo_trainer"),
    "dapo": (DATA_DIR / "verl_0.7.0", "dapo_trainer"),
}

# Runs in the verl interpreter, started with -I. Standard input: a JSON list of {"folder" (null: verl's own
# verl/trainer/config), "name", "overrides"}; overrides are data (Hydra's override grammar parses them), never
# evaluated as Python. The first step only imports: a failure there is the environment's, not the overrides'.
VERL_CHECK = """
import json, os, sys
try:
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import omega_conf_to_dataclass, validate_config
except Exception as exc:
    print(json.dumps({"status": "env", "detail": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
root = os.path.dirname(os.path.dirname(os.path.abspath(verl.__file__)))
os.chdir(root)  # dapo_trainer.yaml's searchpath file://verl/trainer/config is relative, as in verl's clone


def check(folder, name, overrides, read):
    with initialize_config_dir(config_dir=folder or os.path.join(root, "verl", "trainer", "config"),
                               version_base=None):
        config = compose(config_name=name, overrides=overrides)
    OmegaConf.resolve(config)
    # Read as verl's workers read them: after the one resolve main_ppo.py l.275 makes (a read resolves again).
    values = {}
    for key in read:
        value = OmegaConf.select(config, key, default=None)
        values[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    critic = need_critic(config)
    found[:] = [values, critic]
    # main_ppo.py l.138 / l.252 (main_dapo.py l.148): the reference policy is a worker when KL is used;
    # need_reference_policy (ppo/utils.py l.72-76) asks that worker mapping.
    use_ref = bool(config.algorithm.use_kl_in_reward or config.actor_rollout_ref.actor.use_kl_loss)
    validate_config(config, use_reference_policy=use_ref, use_critic=critic)
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)


def why(exc):
    while exc.__cause__ is not None:  # Hydra wraps the config's own error (InstantiationException, override errors)
        exc = exc.__cause__
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


verdicts = []
for case in json.load(sys.stdin):
    found = [{}, False]
    try:
        check(case["folder"], case["name"], case["overrides"], case["read"])
        verdicts.append(["ok", ""] + found)
    except Exception as exc:
        verdicts.append(["problem", why(exc)] + found)
print(json.dumps({"status": "ok", "detail": "", "verdicts": verdicts}))
"""

MISSING = "verl's environment is not installed: bash scripts/install.sh verl (or set GEN_LAUNCH_VERL_PYTHON)"
# verl's messages can carry a whole config section; a verdict keeps this many characters.
DETAIL_CHARS = 400


def verl_python() -> str | None:
    """The interpreter with verl 0.7.0's config code: GEN_LAUNCH_VERL_PYTHON, else this clone's .venv-verl/ where
    `bash scripts/install.sh verl` built it; None when neither is there."""
    named = os.environ.get("GEN_LAUNCH_VERL_PYTHON")
    if named:
        return named
    built = Path(__file__).resolve().parents[3] / ".venv-verl" / "bin" / "python"
    return str(built) if built.is_file() else None


class Composed(NamedTuple):
    """verl's verdict on one case: status "ok" | "problem" | "env", detail (verl's or Hydra's error text, one line,
    no traceback), the values of the keys asked for as verl reads them (after its OmegaConf.resolve; {} where the
    overrides do not compose), and whether verl builds a critic (trainer/ppo/utils.py need_critic)."""

    status: str
    detail: str
    values: dict
    critic: bool


def verl_compose(cases: list[tuple[str, list[str], Sequence[str]]], python: str | None = None) -> list[Composed]:
    """verl's own verdict on each (entry, overrides, keys to read back) case. All cases run in one child, so its
    start (verl's imports, ~20 s on two cores) is paid once and each case adds about a second. "env": the verl
    interpreter is missing or does not import, which says nothing about the overrides."""
    for entry, overrides, read in cases:
        if entry not in ENTRIES or not all(isinstance(item, str) for item in [*overrides, *read]):
            raise ValueError(f"a verl check takes an entry of {sorted(ENTRIES)} and override strings: {entry!r}")
    python = python or verl_python()
    if python is None:
        return [Composed("env", MISSING, {}, False)] * len(cases)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    configs = [ENTRIES[entry] for entry, _, _ in cases]
    stdin = json.dumps([{"folder": None if folder is None else str(folder), "name": name, "overrides": overrides,
                         "read": list(read)}
                        for (folder, name), (_, overrides, read) in zip(configs, cases, strict=True)])
    with tempfile.TemporaryDirectory() as scratch:
        answer = child_answer(python, VERL_CHECK, [], Path(scratch), env, timeout=120 + 30 * len(cases), stdin=stdin)
    if isinstance(answer, str):
        return [Composed("env", answer, {}, False)] * len(cases)
    verdicts = answer.get("verdicts")
    if answer.get("status") != "ok" or not isinstance(verdicts, list) or len(verdicts) != len(cases):
        return [Composed("env", str(answer.get("detail") or "the verl check answered no verdicts"), {}, False)] \
            * len(cases)
    return [Composed(status, _shorten(detail), values, critic) for status, detail, values, critic in verdicts]


def verl_checks(cases: list[tuple[str, list[str]]], python: str | None = None) -> list[tuple[str, str]]:
    """verl_compose's (status, detail) on each (entry, overrides) case."""
    return [(found.status, found.detail) for found in verl_compose([(entry, items, ()) for entry, items in cases],
                                                                   python)]


def verl_check(overrides: list[str], entry: str = "ppo", python: str | None = None) -> tuple[str, str]:
    """verl_checks for one set of overrides."""
    return verl_checks([(entry, overrides)], python)[0]


def _shorten(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"


# What the validate check reads back from verl's composed config for the rules verl makes only in its workers.
ACTOR, ROLLOUT = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
BATCH_KEYS = ("ppo_mini_batch_size", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu",
              "ulysses_sequence_parallel_size")
RUNTIME_KEYS = ("trainer.nnodes", "trainer.n_gpus_per_node", f"{ROLLOUT}n", f"{ROLLOUT}tensor_model_parallel_size",
                f"{ROLLOUT}data_parallel_size", f"{ROLLOUT}pipeline_model_parallel_size",
                *(ACTOR + key for key in BATCH_KEYS), *("critic." + key for key in BATCH_KEYS), "critic.rollout_n")
# The overrides naming the model folder HFModelConfig reads (workers/config/model.py l.100-131): a critic's
# (critic.model.path defaults to the actor's, ppo_trainer.yaml) and the actor's tokenizer.
MODEL_PATH_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "critic.model.tokenizer_path")


def runtime_problems(values: dict, critic: bool, heads: int, kv_heads: int, cards: int) -> list[str]:
    """The rules verl 0.7.0 checks only once its workers start (verl/workers/fsdp_workers.py at f9c855f7), on the
    values verl composed, and its world against the plan's `cards`: gen-launch's own check of them, each with its
    line."""
    world = values["trainer.nnodes"] * values["trainer.n_gpus_per_node"]
    problems = [] if world == cards else [f"trainer.nnodes x n_gpus_per_node = {world} devices, but the plan has "
                                          f"{cards}"]
    tp, dp, pp = (values[ROLLOUT + key] for key in ("tensor_model_parallel_size", "data_parallel_size",
                                                     "pipeline_model_parallel_size"))
    if world % (tp * dp * pp):
        problems.append(f"rollout TP {tp} x DP {dp} x PP {pp} does not divide the world of {world} devices "
                        f"(fsdp_workers.py l.614-620)")
    roles = [("actor", ACTOR, values[ROLLOUT + "n"], "l.241-263", "l.171-176")]
    if critic:
        roles.append(("critic", "critic.", values["critic.rollout_n"], "l.1234-1255", "l.1212-1217"))
    for role, prefix, n, lines, mesh in roles:
        mini, micro, per_gpu, sp = (values[prefix + key] for key in BATCH_KEYS)
        if world % sp:
            problems.append(f"{role} ulysses SP {sp} does not divide the world of {world} devices "
                            f"(fsdp_workers.py {mesh}: a (world / SP, SP) device mesh)")
            continue
        if sp > 1 and (heads % sp or (kv_heads % sp and sp % kv_heads)):
            problems.append(f"{role} ulysses SP {sp} must divide the model's {heads} attention heads, and its "
                            f"{kv_heads} KV heads divide it or it them (models/transformers/monkey_patch.py "
                            f"l.291-298)")
        normalized = mini * n // (world // sp)
        if micro is not None:
            per_gpu = micro // (world // sp)
        if normalized <= 0 or (per_gpu and (normalized % per_gpu or normalized // per_gpu <= 0)):
            problems.append(f"{role} mini batch {mini} x n {n} / (world {world} / SP {sp}) = {normalized} per "
                            f"device is not a positive multiple of the micro batch {per_gpu} (fsdp_workers.py "
                            f"{lines})")
    return problems


# A stand-in's architecture by the model's family: the `architectures` and `model_type` of each family's
# config.json on the Hugging Face hub (Qwen/Qwen3-8B, Qwen/Qwen2.5-32B, Qwen/Qwen2.5-VL-7B-Instruct), longest
# prefix first.
FAMILIES = (("qwen2.5_vl", "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"),
            ("qwen3", "Qwen3ForCausalLM", "qwen3"), ("qwen2", "Qwen2ForCausalLM", "qwen2"))


def stand_in_model(folder: Path, model: Model) -> Path:
    """What verl's HFModelConfig reads from a model folder (workers/config/model.py l.100-131: config.json, the
    tokenizer; no weights): `model`'s shape as its config.json, and a three-word tokenizer."""
    architecture, model_type = next(((arch, kind) for prefix, arch, kind in FAMILIES if model.name.startswith(prefix)),
                                    ("LlamaForCausalLM", "llama"))
    folder.mkdir()
    config = {"architectures": [architecture], "model_type": model_type, "hidden_size": model.hidden,
              "intermediate_size": model.ffn, "num_hidden_layers": model.layers,
              "num_attention_heads": model.heads, "num_key_value_heads": model.kv_heads,
              "head_dim": model.kv_channels, "vocab_size": model.vocab, "max_position_embeddings": model.max_positions}
    tokenizer: dict = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                 "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
                 "model": {"type": "WordLevel", "vocab": {"<unk>": 0, "<pad>": 1, "<eos>": 2}, "unk_token": "<unk>"}}
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "pad_token": "<pad>",
                "eos_token": "<eos>"}
    for name, data in (("config.json", config), ("tokenizer.json", tokenizer), ("tokenizer_config.json", settings)):
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    return folder


def with_model(overrides: list[str], folder: Path) -> list[str]:
    """`overrides` with every model folder verl reads pointed at `folder`."""
    return [f"{item.split('=', 1)[0]}={hydra_value(str(folder))}" if item.split("=", 1)[0].lstrip("+")
            in MODEL_PATH_KEYS else item for item in overrides]


NAME = "verl"
PYTHON_OPTION = CheckOption(
    "--verl-python", "GEN_LAUNCH_VERL_PYTHON", "PYTHON",
    "The interpreter with verl 0.7.0 (`bash scripts/install.sh verl` builds .venv-verl/, used when this is not "
    "given): run verl's own Hydra compose, validate_config and rollout config on verl/overrides.txt.")


def check(job: Job, path: str) -> Result | None:
    """verl/overrides.txt through verl's own config code (the entry's config the plan names), then the rules verl
    checks only in its workers (runtime_problems), against the plan's world and model; prepare_data.py compiles
    (never run) and holds the plan's data-preparation settings."""
    if path == f"{NAME}/prepare_data.py":
        return _prepare_data(job, path)
    if path != f"{NAME}/overrides.txt":
        return None
    settings = _settings(job)
    entry, model, cards = settings and settings.config, job.model, job.layout_value(NAME, "cards")
    if entry not in ENTRIES or model is None or cards is None:
        return Result(path, "problem", NO_PLAN)
    python = job.options.get(PYTHON_OPTION.dest) or verl_python()
    if python is None:
        return Result(path, "skipped", f"verl's own config code not run: {MISSING}, or give {PYTHON_OPTION.flag}")
    # As launch.sh reads it (mapfile -t: one override a line; empty lines and # comments skipped).
    overrides = [line for line in text(job.folder / path).split("\n") if line and not line.startswith("#")]
    broken = [line for line in overrides if any(unicodedata.category(char) == "Cc" for char in line)]
    if broken:
        return Result(path, "problem", f"launch.sh refuses an override with a control character: {broken[0]!r}")
    with tempfile.TemporaryDirectory() as scratch:
        stand_in = stand_in_model(Path(scratch) / "model", model)
        found = verl_compose([(entry, with_model(overrides, stand_in), RUNTIME_KEYS)], python)[0]
    if found.status == "env":
        return Result(path, "env", f"verl's own check could not run here ({found.detail}); reinstall with: "
                                   f"bash scripts/install.sh verl")
    problems = [f"verl 0.7.0 refuses it: {found.detail}"] if found.status == "problem" else []
    if found.values:
        problems += runtime_problems(found.values, found.critic, model.heads, model.kv_heads, cards)
    if problems:
        return Result(path, "problem", "; ".join(problems))
    note = (f"; the critic's model folder is a stand-in here ({model.name}'s config.json and a three-word "
            f"tokenizer, no weights), as verl's HFModelConfig reads it") if found.critic else ""
    return Result(path, "ok", f"verl 0.7.0's compose, validate_config and rollout config accept it, and the rules "
                              f"its workers check at start-up hold{note}")


def _settings(job: Job) -> VerlSettings | None:
    """verl's settings on plan.json, typed; None where the plan has none or they are not what render writes."""
    planned = job.planned(NAME)
    try:
        return VerlSettings.from_json(planned.settings) if planned and planned.settings is not None else None
    except ValueError:
        return None


def _prepare_data(job: Job, path: str) -> Result:
    source = text(job.folder / path)
    try:
        tree = ast.parse(source, path)
    except SyntaxError as exc:
        return Result(path, "problem", f"not Python: {exc}")
    # SETTINGS = json.loads(<a string literal>), as steps.py writes it.
    literal = next((node.value.args[0] for node in tree.body if isinstance(node, ast.Assign)
                    and [getattr(target, "id", None) for target in node.targets] == ["SETTINGS"]
                    and isinstance(node.value, ast.Call) and len(node.value.args) == 1
                    and isinstance(node.value.args[0], ast.Constant)), None)
    planned = _settings(job)
    if literal is None or not isinstance(literal.value, str):
        return Result(path, "problem", "its SETTINGS are not the JSON text gen-launch writes")
    try:
        settings = json.loads(literal.value)
    except ValueError as exc:
        return Result(path, "problem", f"its SETTINGS are not JSON: {exc}")
    # As plan.json writes each value (a tuple as a JSON list), so it compares with the file's JSON.
    expected = {item.key: item.to_json()["value"] for item in planned.prepare} if planned else {}
    differ = sorted(key for key in expected.keys() | settings.keys() - {"placeholders"}
                    if settings.get(key) != expected.get(key))
    if differ:
        return Result(path, "problem", f"its settings differ from plan.json's frameworks.verl.settings.prepare: "
                                       f"{', '.join(differ)}")
    return Result(path, "ok")
