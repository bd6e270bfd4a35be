"""MindSpeed-RL: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning).

GRPO runs an actor (MindSpeed-LLM's Megatron), a reference on the actor's layout and a vLLM rollout engine, all on
every card in turns: the integrated worker, v2.3.0's only mode (docs/features/integrated_worker.md l. 10-14). The
actor's layout and the rollout's TP follow the upstream config for the model unless the spec pins them; every value
of the files is decided here (settings), and a spec breaking one of rules.py's rules is refused at its key."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...calibration import measured
from ...context import Context
from ...errors import Problem, SpecError
from ...families.rl.rates import published
from ...families.rl.rollout import rollout_memory
from ...memory import MemoryBreakdown
from ...parallel import Parallel
from ...plan import FrameworkPlan, Layout, Plan
from ...spaces import GridSpace
from ...tables import Framework, Hardware, Model, RecipeDefaults
from ...throughput import Throughput
from .. import contract
from ..base import DefaultPlanning
from ..contract import PathDefault, RoleDef, RoleKind, Structure
from . import rules
from .examples import RELEASE, Example, example, facts
from .settings import MsrlSettings, Setting

NAME = "mindspeed-rl"
FROZEN = ("feature-frozen upstream since 2026-04 (bug fixes only; master README.md l. 14-15 points to verl's Ascend "
          "tutorial)")


def example_of(method: str, model: str) -> Example:
    found = example(method, model)
    if found is None:
        raise SpecError.at("model", f"{model}: {RELEASE} ships no {method} config for it; models it does: "
                                    f"{', '.join(sorted(facts().get(method, {})))}")
    return found


@dataclass(frozen=True)
class Recipe:
    """The RL values the family's rollout memory reads (families/rl/recipe.py Recipe)."""

    n: int
    seq_len: int
    gpu_memory_utilization: float
    sources: dict
    max_num_seqs: tuple[int, str]


def recipe_of(ctx: Context) -> Recipe:
    ex = example_of(ctx.spec.method, ctx.model.name)
    key = "generate_config.gpu_memory_utilization"
    return Recipe(int(ctx.spec.rl.get("samples_per_prompt", ex.get("rl_config.n_samples_per_prompt"))),
                  ctx.spec.seq_len, float(ex.get(key)), {"gpu_memory_utilization": ex.source(key)},
                  (int(ex.get("generate_config.max_num_seqs")), ex.source("generate_config.max_num_seqs")))


ACTOR_KEYS = ("actor_config.tensor_model_parallel_size", "actor_config.pipeline_model_parallel_size")


@dataclass(frozen=True)
class ExampleSpace(GridSpace):
    """The upstream config's layout for the role (actor TP/PP, or the rollout's TP), unless the spec pins one."""

    keys: tuple[str, str | None] = ("generate_config.infer_tensor_parallel_size", None)

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        if ctx.pinned:
            return super().structures(ctx, cards)
        ex = example_of(ctx.spec.method, ctx.model.name)
        tp_key, pp_key = self.keys
        tp, pp = int(ex.get(tp_key)), int(ex.get(pp_key)) if pp_key else 1
        # Every role shares the cards (integrated worker): a count the actor's upstream layout does not tile has
        # no layout for any role, so the card search moves on to one it does.
        actor = int(ex.get(ACTOR_KEYS[0])) * int(ex.get(ACTOR_KEYS[1]))
        return [Structure(tp, pp)] if cards % (tp * pp) == 0 and cards % actor == 0 else []


ACTOR = ExampleSpace(keys=ACTOR_KEYS)
ROLLOUT = ExampleSpace(tp_choices=(1, 2, 4, 8), pp_choices=(1,))


class Planning(DefaultPlanning):
    path_keys = ("mindspeed_rl_dir", "mindspeed_llm_dir", "mcore_ckpt_dir")
    min_cards_stand_in = "MindSpeed-RL's own column of min_cards.csv (the seed's MindSpeed-RL row)"
    # Upstream asks new work to go to verl: a plan names MindSpeed-RL only where the spec lists it.
    opt_in = f"{NAME} is {FROZEN}; list it in frameworks: to plan it"

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return (RoleDef(RoleKind.ACTOR), RoleDef(RoleKind.ROLLOUT),
                RoleDef(RoleKind.REFERENCE, takes=RoleKind.ACTOR))

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model, fw: Framework,
                        hw: Hardware | None = None) -> RecipeDefaults:
        ex = example(defaults.method, model.name)
        if ex is None:
            return defaults
        key = "megatron_training.global_batch_size"
        row = {"value": int(ex.get(key)), "source": f"{ex.source(key)} (prompts)"}
        return replace(defaults, values={**defaults.values, "global_batch_size": row})

    def space(self, role: RoleKind) -> GridSpace:
        return ROLLOUT if role is RoleKind.ROLLOUT else ACTOR

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        if ctx.role_kind is not RoleKind.ROLLOUT:
            return None  # the core's Megatron model (frameworks.yaml memory: megatron-distopt)
        return rollout_memory(ctx.model, ctx.hw, ctx.fw.overhead_gb, recipe_of(ctx), shape.tp, shape.cards,
                              shape.offload, ctx.spec.method, shape.global_batch_size)

    def rate(self, ctx: Context, layout: Layout | None) -> Throughput | None:
        if ctx.role_kind is not RoleKind.ACTOR:
            return Throughput(0.0, f"not estimated: {ctx.role_kind.value} runs inside the actor's whole-step figure",
                              is_estimate=True)
        given = measured(ctx, layout)
        if given is not None:  # the spec's rate or calibration: its own e2e_tps, converted as a published row
            return per_data_token(ctx, given.tokens_per_card_s, f"{given.source}; as MindSpeed-RL's e2e_tps", False)
        found = next((row for row in published() if (row.method, row.model, row.hardware)
                      == (ctx.spec.method, ctx.model.name, ctx.hw.name)), None)
        if found is None:
            return Throughput(0.0, f"none published: MindSpeed-RL gives no throughput for {ctx.spec.method} "
                                   f"{ctx.model.name} on {ctx.hw.name}, so the plan gives no time", is_estimate=True)
        return per_data_token(ctx, found.tokens_per_card_s, found.source, True)

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        return {"mindspeed_rl_dir": PathDefault("/path/to/MindSpeed-RL"),
                "mindspeed_llm_dir": PathDefault("/path/to/MindSpeed-LLM"),
                "mcore_ckpt_dir": PathDefault(f"{output_dir.rstrip('/')}/mcore_tp{layout.tp}_pp{layout.pp}",
                                              derived_from="output_dir")}

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> MsrlSettings:
        return settings(ctx, plan, fp)


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name


def per_data_token(ctx: Context, figure: float, source: str, is_estimate: bool) -> Throughput:
    """An end-to-end tps (prompt + response tokens of every generated sequence per second per card) as the core's
    rate per data token: a step makes global batch x n sequences of up to seq_len tokens, and the core times the
    spec's data tokens."""
    n = recipe_of(ctx).n
    tokens, samples = ctx.spec.tokens_per_epoch, ctx.spec.samples_per_epoch
    per_sample = tokens / samples if tokens and samples else float(ctx.spec.seq_len)
    return Throughput(figure * per_sample / (n * ctx.spec.seq_len),
                      f"{source}; per data token (of {per_sample:g} a sample) the figure x {per_sample:g} "
                      f"/ (n {n} x seq_len {ctx.spec.seq_len})", is_estimate=is_estimate)


def lengths(plan: Plan, ex: Example) -> tuple[tuple[int, str], tuple[int, str]]:
    """(max_prompt_length, source), (max_tokens, source): the spec's, else the example's prompt cap (at most half
    the sequence) and the rest of seq_len for the response (reference mindspeed_rl.md s7.1 rule 7)."""
    if "prompt_length" in plan.rl:
        prompt = (int(plan.rl["prompt_length"]), "spec rl.prompt_length")
    else:
        capped = min(int(ex.get("rl_config.max_prompt_length")), plan.seq_len // 2)
        prompt = (capped, f"{ex.source('rl_config.max_prompt_length')}, at most half of seq_len {plan.seq_len}")
    if "response_length" in plan.rl:
        return prompt, (int(plan.rl["response_length"]), "spec rl.response_length")
    return prompt, (plan.seq_len - prompt[0], f"derived: seq_len {plan.seq_len} - max_prompt_length {prompt[0]}")


def verifier(plan: Plan, ex: Example) -> tuple[str, str]:
    reward = plan.rl.get("reward")
    if reward is None:
        return str(ex.get("rl_config.verifier_function")[0]), ex.source("rl_config.verifier_function")
    found = facts()["rewards"].get(reward)
    if found is None:
        works = ", ".join(sorted(facts()["rewards"]))
        raise SpecError.at("rl.reward", f"{reward}: MindSpeed-RL has no verifier for it (rule_verifier.py l. 152-162); "
                                        f"values that work: {works}")
    return found, f"spec rl.reward {reward} (examples.yaml rewards)"


def decided(plan: Plan, fp: FrameworkPlan, ex: Example) -> dict[str, tuple[object, str]]:
    """The values the plan decides over the example's, by config key."""
    actor, rollout = fp.roles["actor"].layout, fp.roles["rollout"].layout
    (prompt, prompt_src), (tokens, tokens_src) = lengths(plan, ex)
    n = int(plan.rl.get("samples_per_prompt", ex.get("rl_config.n_samples_per_prompt")))
    gbs = plan.train.global_batch_size
    example_gbs = int(ex.get("megatron_training.global_batch_size"))
    mini = int(plan.rl.get("mini_batch_size", max(1, gbs * int(ex.get("rl_config.mini_batch_size"))
                                                  // example_gbs)))
    out = plan.output_dir(NAME)
    budget = int(ex.get("generate_config.max_num_batched_tokens"))
    verify, verify_src = verifier(plan, ex)
    return {
        **recompute(actor.recompute),
        # The layout's micro batch, whose activations the actor's memory counts (upstream's differs where the
        # search found it does not fit the plan's cards; rules.py checks it divides each rank's samples).
        "actor_config.micro_batch_size": (actor.micro_batch_size, f"plan: the actor's layout (upstream "
                                                                  f"{ex.get('actor_config.micro_batch_size')}: "
                                                                  f"{ex.source('actor_config.micro_batch_size')})"),
        "megatron_training.tokenizer_name_or_path": (plan.paths["model_dir"].value, "spec paths.model_dir (HF folder)"),
        "megatron_training.global_batch_size": (gbs, "plan: the recipe's global batch (prompts)"),
        "megatron_training.seq_length": (prompt, "= max_prompt_length (prompt_dataset.py l. 140 truncates to it)"),
        "megatron_training.train_iters": (plan.train.steps, "plan: the recipe's steps") if plan.train.steps
        else (ex.get("megatron_training.train_iters"), f"{ex.source('megatron_training.train_iters')} (the spec "
                                                       f"gives no data size)"),
        "megatron_training.save_interval": (plan.train.save_every_steps, "plan: the recipe's checkpoint interval"),
        "megatron_training.data_path": (f"{out}/data/data", "= the dataset YAML's output_prefix (s5.1)"),
        "actor_config.tensor_model_parallel_size": (actor.tp, "plan: the actor's layout"),
        "actor_config.pipeline_model_parallel_size": (actor.pp, "plan: the actor's layout"),
        "actor_config.load": (plan.paths["mcore_ckpt_dir"].value, "spec paths.mcore_ckpt_dir (convert.sh writes it)"),
        "actor_config.save": (f"{out}/ckpt", "plan: under the framework's output folder"),
        "rl_config.mini_batch_size": (mini, "spec rl.mini_batch_size" if "mini_batch_size" in plan.rl else
                                      f"{ex.source('rl_config.mini_batch_size')}, its share of the global batch"),
        "rl_config.max_prompt_length": (prompt, prompt_src),
        "rl_config.n_samples_per_prompt": (n, "spec rl.samples_per_prompt" if "samples_per_prompt" in plan.rl else
                                           ex.source("rl_config.n_samples_per_prompt")),
        "rl_config.verifier_function": ((verify,), verify_src),
        "rl_config.actor_resource.num_npus": (fp.layout.cards, f"plan: {fp.layout.nodes} node(s) x "
                                                               f"{fp.layout.local_cards}"),
        "generate_config.infer_tensor_parallel_size": (rollout.tp, "plan: the rollout's layout"),
        "generate_config.max_model_len": (prompt + tokens, "= max_prompt_length + max_tokens (the spec's seq_len)"),
        "generate_config.max_num_batched_tokens": (
            max(budget, prompt + tokens), f"{ex.source('generate_config.max_num_batched_tokens')}, at least "
                                          f"max_model_len"),
        "generate_config.sampling_config.max_tokens": (tokens, tokens_src),
    }


def recompute(kind: str) -> dict[str, tuple[object, str]]:
    """The actor's recompute as MindSpeed-LLM's flags (MegatronConfig keys, megatron_config.py l. 369-376): full
    recomputes every layer's forward, selective MindSpeed's activation function only; upstream's config sets none."""
    source = f"plan: the actor's recompute {kind} (the layout whose memory the plan counts)"
    if kind == "full":
        return {"actor_config.recompute_granularity": ("full", source),
                "actor_config.recompute_method": ("uniform", source), "actor_config.recompute_num_layers": (1, source)}
    return {"actor_config.recompute_activation_function": (True, source)} if kind == "selective" else {}


def shape_of(plan: Plan, settings: MsrlSettings, model: Model) -> rules.Shape:
    """rules.Shape from the config's values (the plan's, or a file's read back: checks.py)."""
    dataset = facts()["datasets"]
    template: list[str] = next((row["verifiers"] for row in dataset.values()
                     if row["prompt_type"] == dict((s.key, s.value) for s in settings.dataset).get("prompt_type")), [])
    return shape_from(settings.nested(), settings.nnodes, model, tuple(template))


def shape_from(config: dict, nodes: int, model: Model, template: tuple[str, ...]) -> rules.Shape:
    mt, actor, rl, gen = (config.get(k, {}) for k in ("megatron_training", "actor_config", "rl_config",
                                                     "generate_config"))
    both = {**mt, **actor}
    layer_list = both.get("num_layer_list")
    return rules.Shape(
        cards=int(rl["actor_resource"]["num_npus"]), nodes=nodes, tp=int(both.get("tensor_model_parallel_size", 1)),
        pp=int(both.get("pipeline_model_parallel_size", 1)), itp=int(gen.get("infer_tensor_parallel_size", 8)),
        heads=model.heads, kv_heads=model.kv_heads, layers=model.layers,
        num_layer_list=tuple(int(x) for x in str(layer_list).split(",")) if layer_list else None,
        gbs=int(both["global_batch_size"]), n=int(rl.get("n_samples_per_prompt", 1)),
        mbs=int(both["micro_batch_size"]), mini=int(rl.get("mini_batch_size", 1)),
        forward_mbs=int(rl.get("actor_forward_micro_batch_size") or both["micro_batch_size"]),
        max_prompt=int(rl.get("max_prompt_length", 512)), max_tokens=int(gen["sampling_config"]["max_tokens"]),
        max_model_len=int(gen.get("max_model_len", 2048)),
        max_num_batched_tokens=int(gen.get("max_num_batched_tokens", 2048)),
        scheduler=bool(gen.get("ascend_scheduler_config_enabled", True)), max_positions=model.max_positions,
        verifiers=tuple(rl.get("verifier_function", ("base_acc",))), known_verifiers=tuple(facts()["verifiers"]),
        template_verifiers=template)


# The paths the Hydra configs (the job's and the dataset's, cli/preprocess_data.py l. 110) hold: OmegaConf reads
# `${...}` in any string as an interpolation, so a path holding one would be read as another value.
HYDRA_PATHS = ("model_dir", "dataset", "output_dir", "mcore_ckpt_dir")


def path_problems(plan: Plan) -> list[Problem]:
    return [Problem(f"paths.{key}", f"{plan.paths[key].value!r} holds '${{', which Hydra's OmegaConf reads as an "
                                    f"interpolation in MindSpeed-RL's config; rename the folder")
            for key in HYDRA_PATHS if key in plan.paths and "${" in plan.paths[key].value]


def settings(ctx: Context, plan: Plan, fp: FrameworkPlan) -> MsrlSettings:
    if path_problems(plan):
        raise SpecError(path_problems(plan))
    ex = example_of(plan.method, plan.model)
    chosen = decided(plan, fp, ex)
    config = tuple(Setting(key, _typed(chosen[key][0]) if key in chosen else _typed(value),
                           chosen[key][1] if key in chosen else ex.source(key))
                   for key, (value, _) in ex.values.items() if not key.startswith("defaults"))
    config += tuple(Setting(key, _typed(value), source) for key, (value, source) in chosen.items()
                    if key not in ex.values)
    data = facts()["datasets"][ex.dataset]
    source = f"upstream {RELEASE} configs/datasets/{ex.dataset}.yaml l. 1-10"
    model_dir, out = plan.paths["model_dir"].value, plan.output_dir(NAME)
    dataset = tuple(Setting(k, v, s) for k, v, s in (
        ("input", plan.paths["dataset"].value, "spec paths.dataset"),
        ("tokenizer_name_or_path", model_dir, "spec paths.model_dir"),
        ("output_prefix", f"{out}/data/data", "plan: = megatron_training.data_path"),
        ("handler_name", data["handler_name"], source), ("tokenizer_type", "HuggingFaceTokenizer", source),
        ("workers", 8, source), ("log_interval", 1000, source), ("prompt_type", data["prompt_type"], source),
        ("dataset_additional_keys", ("labels",), source), ("map_keys", data["map_keys"], source)))
    actor = fp.roles["actor"].layout
    convert = tuple(Setting(flag, None, ex.converter + " (MindSpeed-LLM a2c0733b examples/mcore)")
                    for flag in ex.converter_flags if flag.startswith("--")) + tuple(
        Setting(k, v, s) for k, v, s in (
            ("--load-model-type", "hf", "s5.2"), ("--save-model-type", "mg", "s5.2"),
            ("--target-tensor-parallel-size", actor.tp, "= actor_config.tensor_model_parallel_size"),
            ("--target-pipeline-parallel-size", actor.pp, "= actor_config.pipeline_model_parallel_size"),
            ("--load-dir", model_dir, "spec paths.model_dir"),
            ("--save-dir", plan.paths["mcore_ckpt_dir"].value, "= actor_config.load")))
    if ex.tokenizer_model:
        convert += (Setting("--tokenizer-model", f"{model_dir.rstrip('/')}/{ex.tokenizer_model}",
                            "MindSpeed-LLM a2c0733b examples/mcore/qwen25/ckpt_convert_qwen25_hf2mcore.sh l. 6-18"),)
    resume = tuple(Setting(k, v, "docs/algorithms/grpo.md l. 105-118") for k, v in (
        ("actor_config.finetune", False), ("actor_config.load", f"{out}/ckpt"), ("actor_config.no_load_optim", False),
        ("actor_config.no_load_rng", False),
        ("rl_config.integrated_mode_config.ref_model_load_path", plan.paths["mcore_ckpt_dir"].value)))
    made = MsrlSettings(config_name=f"{plan.method}_{ex.model_yaml}_{plan.hardware}_{fp.layout.cards}",
                        upstream=f"{RELEASE} configs/{ex.name}.yaml", model_yaml=ex.model_yaml, config=config,
                        dataset=dataset, convert=_with_values(convert, ex.converter_flags), converter=ex.converter,
                        resume=resume, nnodes=fp.layout.nodes, npus_per_node=fp.layout.local_cards,
                        feature_frozen=FROZEN, alternative="verl",
                        alternative_plans=ctx.tables is not None and ctx.tables.supports("verl", plan.model))
    problems = [Problem(b.spec_key, b.message) for b in rules.broken(shape_of(plan, made, plan.shape))]
    if problems:
        raise SpecError(problems)
    return made


def _with_values(convert: tuple[Setting, ...], flags: tuple[str, ...]) -> tuple[Setting, ...]:
    """A family flag followed by its value in examples.yaml (--model-type GPT) takes that value."""
    values = {flag: nxt for flag, nxt in zip(flags, flags[1:] + ("",), strict=True)
              if flag.startswith("--") and nxt and not nxt.startswith("--")}
    return tuple(replace(item, value=values.get(item.key, item.value)) for item in convert)


def _typed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
