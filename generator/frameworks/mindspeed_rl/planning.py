"""MindSpeed-RL: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning).

GRPO runs an actor (MindSpeed-LLM's Megatron), a reference on the actor's layout and a vLLM rollout engine, all on
every card in turns: the integrated worker, v2.3.0's only mode (docs/features/integrated_worker.md l. 10-14). The
actor's layout and the rollout's TP follow the upstream config for the model unless the spec pins them; every value
of the files is decided here (settings), and a spec breaking one of rules.py's rules is refused at its key."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ...api.frozen import frozen
from ...api.notes import Note
from ...calibration import measured
from ...context import Context
from ...errors import Problem, SpecError
from ...families.megatron.convert import Target, hf_to_mcore
from ...families.megatron.flags import typed
from ...families.rl.batching import SEQUENCES, limit_source, token_limit
from ...families.rl.rates import published
from ...families.rl.rollout import kv_cache, kv_per_sequence_gb, rollout_memory, weights_gb
from ...families.rl.run import RunSteps
from ...layouts import core_memory
from ...memory import MemoryBreakdown
from ...parallel import Parallel
from ...plan import FrameworkPlan, Layout, Plan
from ...recipe import batch_target
from ...spaces import GridSpace
from ...tables import Framework, Hardware, Model, RecipeDefaults
from ...throughput import Throughput
from .. import contract
from ..base import DefaultPlanning
from ..contract import PathDefault, RoleDef, RoleKind, Structure
from . import rules
from .examples import RELEASE, Example, example, facts
from .rules import VALIDATE
from .run import iterations
from .settings import MsrlSettings, Setting

NAME = "mindspeed-rl"
GUIDE = "verl 0.7.0 docs/perf/perf_tuning.rst"  # the RL family's token-limit rule (families/rl/batching.py)
FROZEN = ("feature-frozen upstream since 2026-04 (bug fixes only; master README.md l. 14-15 points to verl's Ascend "
          "tutorial)")


def example_of(method: str, model: str, hardware: str | None = None) -> Example:
    found = example(method, model, hardware)
    if found is None:
        raise SpecError.at("model", f"{model}: {RELEASE} ships no {method} config for it; models it does: "
                                    f"{', '.join(sorted(facts().get(method, {})))}")
    return found


@frozen
class Recipe:
    """The RL values the family's rollout memory reads (families/rl/recipe.py Recipe)."""

    n: int
    seq_len: int
    gpu_memory_utilization: float
    sources: dict
    max_num_seqs: tuple[int, str]


def recipe_of(ctx: Context) -> Recipe:
    ex = example_of(ctx.spec.method, ctx.model.name, ctx.hw.name)
    key = GMU_KEY
    made = Recipe(int(ctx.spec.rl.get("samples_per_prompt", ex.get("rl_config.n_samples_per_prompt"))),
                  ctx.spec.seq_len, float(ex.get(key)), {"gpu_memory_utilization": ex.source(key)},
                  (int(ex.get("generate_config.max_num_seqs")), ex.source("generate_config.max_num_seqs")))
    return replace(made, max_num_seqs=upstream_sequences(ctx, ex, made))


def upstream_sequences(ctx: Context, ex: Example, made: Recipe) -> tuple[int, str]:
    """The most sequences of the plan's seq_len the rollout's KV cache must hold at once: max_num_seqs, or fewer
    where the KV cache upstream's own config has (at its gpu_memory_utilization, rollout TP and EP, the actor's
    states offloaded) holds fewer: that config runs, so the plan asks no larger a KV cache than it has."""
    gmu = float(ex.get("generate_config.gpu_memory_utilization"))
    tp, ep = int(ex.get(ROLLOUT_TP)), int(ex.find("generate_config.infer_expert_parallel_size", 1))
    kv = gmu * ctx.hw.memory_gb - weights_gb(ctx.model, tp, ep) - ctx.fw.overhead_gb
    held = max(1, math.floor(round(kv / kv_per_sequence_gb(ctx.model, made, tp), 6)))
    if held >= made.max_num_seqs[0]:
        return made.max_num_seqs
    return held, (f"the {held} sequences of {made.seq_len} tokens the {kv:.1f} GiB KV cache of {ex.name}.yaml holds "
                  f"(gpu_memory_utilization {gmu:g}, rollout TP {tp}, EP {ep}; max_num_seqs {made.max_num_seqs[0]})")


ACTOR_KEYS = ("actor_config.tensor_model_parallel_size", "actor_config.pipeline_model_parallel_size")
ROLLOUT_TP = "generate_config.infer_tensor_parallel_size"
EP_KEY = "actor_config.expert_model_parallel_size"
RECOMPUTE_KEY = "actor_config.recompute_granularity"
LAYERS_KEY = "actor_config.num_layer_list"


def actor_structure(ex: Example) -> Structure:
    """The upstream config's actor layout: TP, PP, EP (MoE: its experts split over TP x EP with moe_tp_extend_ep)
    and its uneven layer list."""
    layers = ex.find(LAYERS_KEY)
    return Structure(int(ex.get(ACTOR_KEYS[0])), int(ex.get(ACTOR_KEYS[1])), ep=int(ex.find(EP_KEY, 1)),
                     num_layer_list=tuple(int(n) for n in str(layers).split(",")) if layers else None)


def states_offloaded(ex: Example) -> bool:
    """Whether the actor's parameters and optimizer leave the cards while vLLM generates: offload_train_param
    with offload_train_optimizer, or the optimizer swapped to host memory all along (swap_optimizer, as the MoE
    configs do; generate_config.py l. 92-94, reference mindspeed_rl.md s2.3)."""
    return bool(ex.find("generate_config.offload_train_param")) and bool(
        ex.find("generate_config.offload_train_optimizer") or ex.find("megatron_training.swap_optimizer"))


def actor_cards(ex: Example) -> int:
    """The fewest cards the upstream actor layout tiles: PP stages of TP x EP cards (expert TP = TP with
    moe_tp_extend_ep; Megatron core_v0.12.1 megatron/core/parallel_state.py l. 696-703)."""
    shape = actor_structure(ex)
    return shape.tp * shape.pp * shape.ep


@frozen
class ExampleSpace(GridSpace):
    """The upstream config's layout for the role (actor TP/PP, or the rollout's TP), unless the spec pins one."""

    keys: tuple[str, str | None] = (ROLLOUT_TP, None)

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        if ctx.pinned:
            return super().structures(ctx, cards)
        ex = example_of(ctx.spec.method, ctx.model.name, ctx.hw.name)
        # Every role shares the cards (integrated worker): a count the actor's upstream layout does not tile has
        # no layout for any role, so the card search moves on to one it does.
        if cards % actor_cards(ex):
            return []
        if self.keys == ACTOR_KEYS:
            return [actor_structure(ex)]
        tp = int(ex.get(self.keys[0]))
        return [Structure(tp, ep=int(ex.find("generate_config.infer_expert_parallel_size", 1)),
                          offload=states_offloaded(ex))] if cards % tp == 0 else []


    def recomputes(self, ctx: Context) -> list[str]:
        """Upstream's recompute where its config sets one (the large MoE configs recompute in full), unless pinned."""
        granularity = example_of(ctx.spec.method, ctx.model.name, ctx.hw.name).find(RECOMPUTE_KEY)
        if ctx.pins.recompute or self.keys != ACTOR_KEYS or granularity is None:
            return super().recomputes(ctx)
        return [str(granularity)]


ACTOR = ExampleSpace(keys=ACTOR_KEYS)
ROLLOUT = ExampleSpace(tp_choices=(1, 2, 4, 8), pp_choices=(1,))


class Planning(DefaultPlanning):
    path_keys = ("mindspeed_rl_dir", "mindspeed_llm_dir", "mcore_ckpt_dir")
    min_cards_stand_in = Note("mindspeed_rl.min_cards_column", "MindSpeed-RL's own column of min_cards.csv (the "
                                                               "Huawei card table's MindSpeed-RL row)")
    # Upstream asks new work to go to verl: a plan names MindSpeed-RL only where the spec lists it.
    opt_in = f"{NAME} is {FROZEN}; list it in frameworks: to plan it"
    # Each count the plan chooses is whole nodes, as upstream runs RL (the contract's whole_nodes).
    whole_nodes = (f"every {RELEASE} config runs whole nodes (rl_config.actor_resource.num_npus 16 on A3: "
                   f"configs/grpo_qwen25_7b_A3.yaml l. 83, grpo_qwen3_8b_A3.yaml l. 81; 16 on A2: "
                   f"grpo_qwen25_32b_A2.yaml l. 81; 128 and 256 on the MoE ones)")

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        # PPO's critic runs in the actor's placement groups at the actor's layout (cli/train_ppo.py l. 65-91;
        # upstream's critic_config repeats the actor's TP / PP).
        critic = (RoleDef(RoleKind.CRITIC, takes=RoleKind.ACTOR),) if method == "ppo" else ()
        return (RoleDef(RoleKind.ACTOR), RoleDef(RoleKind.ROLLOUT),
                RoleDef(RoleKind.REFERENCE, takes=RoleKind.ACTOR)) + critic

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model, fw: Framework,
                        hw: Hardware | None = None) -> RecipeDefaults:
        ex = example(defaults.method, model.name)  # the row's own config: the defaults know no platform
        if ex is None:
            return defaults
        key = "megatron_training.global_batch_size"
        row = {"value": int(ex.get(key)), "source": f"{ex.source(key)} (prompts)"}
        return replace(defaults, values={**defaults.values, "global_batch_size": row})

    def sequences_per_sample(self, ctx: Context) -> int:
        # global_batch_size counts prompts; the update splits GBS x n samples over the actor's data-parallel ranks in
        # micro batches of samples (validate_config.py l. 109-144): the batch tiles in sequences, as verl's.
        return recipe_of(ctx).n

    def most_cards(self, ctx: Context) -> tuple[int, str] | None:
        # Each rollout replica (rollout TP cards) generates for at least one prompt of the step: GBS % (cards /
        # rollout TP) == 0 (validate_config.py l. 187-195), so past GBS x rollout TP a card holds no prompt.
        ex = example_of(ctx.spec.method, ctx.model.name, ctx.hw.name)
        batch = ctx.spec.global_batch_size or batch_target(ctx.defaults, ctx.spec)[0]
        tp = int(ex.get(ROLLOUT_TP))
        return batch * tp, (f"a global batch of {batch} prompts, at least one a rollout replica of TP {tp} "
                            f"({VALIDATE} l. 187-195)")

    def batch_unit(self, ctx: Context, layout: Layout) -> int:
        # Every rollout replica and, with rule rewards, every node takes whole prompts (validate_config.py
        # l. 187-195, 277-285): the rollout's TP is its pin, else upstream's.
        pinned = dict(ctx.spec.layout[NAME].roles).get("rollout") if NAME in ctx.spec.layout else None
        tp = (pinned.tp if pinned is not None else None) or int(example_of(ctx.spec.method, ctx.model.name,
                                                                           ctx.hw.name).get(ROLLOUT_TP))
        return math.lcm(max(layout.cards // tp, 1), layout.nodes)

    def run_steps(self, ctx: Context, batch: int) -> RunSteps | None:
        # train_iters iterations of one global batch each, over whole passes of the rows (run.py)
        samples = ctx.spec.samples_per_epoch
        if samples is None or "steps" in ctx.spec.train:
            return None
        row = ctx.defaults.values.get("epochs")
        epochs = ctx.spec.epochs if ctx.spec.epochs_given else row["value"] if row is not None else 1
        return iterations(samples, epochs, batch, ctx.spec.method == "dapo")

    def space(self, role: RoleKind) -> GridSpace:
        return ROLLOUT if role is RoleKind.ROLLOUT else ACTOR

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        ex = example_of(ctx.spec.method, ctx.model.name, ctx.hw.name)
        if ctx.role_kind is not RoleKind.ROLLOUT and packs(ex):
            # use_dynamic_bsz packs the token limit a micro batch (packing_values): its sequences, counted in full
            shape = replace(shape, micro_batch_size=max(shape.micro_batch_size, SEQUENCES))
        if ctx.role_kind in (RoleKind.ACTOR, RoleKind.CRITIC) and ex.find("megatron_training.swap_optimizer"):
            return swapped(core_memory(ctx, shape))
        if ctx.role_kind is not RoleKind.ROLLOUT:
            # the core's Megatron model (frameworks.yaml memory: megatron-distopt), at the packed micro batch
            return core_memory(ctx, shape) if packs(ex) else None
        return rollout_memory(ctx.model, ctx.hw, ctx.fw.overhead_gb, recipe_of(ctx), shape.tp, shape.cards,
                              shape.offload, ctx.spec.method, shape.global_batch_size, shape.ep)

    def rate(self, ctx: Context, shape: Parallel | None) -> Throughput | None:
        if ctx.role_kind is not RoleKind.ACTOR:
            return Throughput(0.0, f"not estimated: {ctx.role_kind.value} runs inside the actor's whole-step figure",
                              is_estimate=True)
        given = measured(ctx, shape)
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


# MindSpeed's swap-optimizer (SwapOptimizerFeature, --swap-optimizer-times default 16; docs "Swap Optimizer"): the
# fp32 master weights and Adam moments live in host memory and come to the card a 1/16 share at a time for the step.
SWAP_SHARE = 16


def swapped(memory: MemoryBreakdown) -> MemoryBreakdown:
    """The core's training memory with the optimizer states swapped to host memory (swap_optimizer)."""
    return replace(memory, optimizer=memory.optimizer / SWAP_SHARE)


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
    """(max_prompt_length, source), (max_tokens, source): the spec's, else upstream's split where the spec's seq_len
    holds it (upstream_prompt), else the example's prompt cap at most half the sequence and the rest of seq_len for
    the response (reference mindspeed_rl.md s7.1 rule 7)."""
    if "prompt_length" in plan.rl:
        prompt = (int(plan.rl["prompt_length"]), "spec rl.prompt_length")
    else:
        prompt = upstream_prompt(plan.seq_len, ex)
    if "response_length" in plan.rl:
        return prompt, (int(plan.rl["response_length"]), "spec rl.response_length")
    tokens = plan.seq_len - prompt[0]
    if tokens == int(ex.get(MAX_TOKENS)):
        return prompt, (tokens, f"{ex.source(MAX_TOKENS)} (= seq_len {plan.seq_len} - max_prompt_length {prompt[0]})")
    return prompt, (tokens, f"derived: seq_len {plan.seq_len} - max_prompt_length {prompt[0]}")


MAX_TOKENS = "generate_config.sampling_config.max_tokens"


def upstream_prompt(seq_len: int, ex: Example) -> tuple[int, str]:
    """The prompt cap: upstream's max_prompt_length where seq_len holds its prompt + response (the response takes
    the rest); at upstream's own max_model_len where its prompt + response overflow it (grpo_deepseek_r1_671b_A2:
    8196 + 2048 > 10240), upstream's response and the prompt that fits; elsewhere at most half of seq_len."""
    key, window = "rl_config.max_prompt_length", "generate_config.max_model_len"
    up_prompt, up_tokens, context = int(ex.get(key)), int(ex.get(MAX_TOKENS)), int(ex.get(window))
    if seq_len >= up_prompt + up_tokens:
        return up_prompt, (f"{ex.source(key)} (seq_len {seq_len} holds upstream's prompt + response {up_prompt} + "
                           f"{up_tokens})")
    if seq_len == context:
        return seq_len - up_tokens, (f"= seq_len {seq_len} - upstream's max_tokens {up_tokens} "
                                     f"({ex.source(MAX_TOKENS)}): upstream's max_prompt_length {up_prompt} "
                                     f"({ex.source(key)}) + {up_tokens} overflow its own max_model_len {context} "
                                     f"({ex.source(window)})")
    return min(up_prompt, seq_len // 2), (f"{ex.source(key)}, at most half of seq_len {seq_len} (reference "
                                          f"mindspeed_rl.md s7.1 rule 7): seq_len is below upstream's prompt + "
                                          f"response {up_prompt} + {up_tokens}")


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
    budget = int(ex.find("generate_config.max_num_batched_tokens", BATCHED_TOKENS[0]))
    verify, verify_src = verifier(plan, ex)
    return {
        **critic_values(plan, fp, ex),
        **dapo_values(ex, tokens, gbs, verify),
        **packing_values(plan, ex),
        **recompute(actor.recompute, ex),
        **layer_placement(fp, ex),
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
        **({EP_KEY: (actor.ep, "plan: the actor's layout")} if actor.ep > 1 or EP_KEY in ex.values else {}),
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
            max(budget, prompt + tokens), f"{batched_source(ex)}, at least max_model_len"),
        "generate_config.sampling_config.max_tokens": (tokens, tokens_src),
    }


# The token limits use_dynamic_bsz packs a micro batch to (base_training_engine.py l. 157-164): the reference's
# forward, the actor's forward and its update. v2.3.0 copies them from max_packing_token_size's default 4096 before
# it reads the config (rl_config.py l. 139-142, then update at l. 180), so a config's max_packing_token_size alone
# reaches only PPO's critic (critic_worker.py l. 104-105): each is written.
PACKING = ("rl_config.max_packing_token_size", "rl_config.ref_max_packing_token_size",
           "rl_config.actor_max_packing_token_size", "rl_config.update_max_packing_token_size")
PACKING_SOURCE = f"{RELEASE} mindspeed_rl/config_cls/rl_config.py l. 139-142, 180 (the limits copied before the " \
                 f"config is read)"


def packs(ex: Example) -> bool:
    """Whether upstream's config packs micro batches to a token limit (rl_config.use_dynamic_bsz)."""
    return bool(ex.find("rl_config.use_dynamic_bsz"))


def packing_values(plan: Plan, ex: Example) -> dict[str, tuple[object, str]]:
    """The RL family's token limit (families/rl/batching.py: SEQUENCES full sequences a micro batch, which the
    Megatron roles' memory counts) for each limit, where upstream's config turns use_dynamic_bsz on."""
    if not packs(ex):
        return {}
    limit = token_limit(plan.seq_len, 1, SEQUENCES)
    key = PACKING[0]
    own = (str(ex.get(key)), ex.source(key)) if key in ex.values else None
    source = f"{limit_source(SEQUENCES, plan.seq_len, 1, own, False, GUIDE)}; {PACKING_SOURCE}"
    return {name: (limit, source) for name in PACKING}


# GenerateConfig's default where a config sets none (mindspeed_rl/config_cls/generate_config.py l. 85)
BATCHED_TOKENS = (2048, f"{RELEASE} mindspeed_rl/config_cls/generate_config.py l. 85 (the default)")


def batched_source(ex: Example) -> str:
    key = "generate_config.max_num_batched_tokens"
    return ex.source(key) if key in ex.values else BATCHED_TOKENS[1]


def critic_dir(plan: Plan) -> str:
    """Where convert.sh writes PPO's critic (the HF weights with a value head: MindSpeed-LLM convert_ckpt.py --orm,
    docs/algorithms/ppo.md l. 80), under the framework's output folder."""
    return f"{plan.output_dir(NAME)}/critic_mcore"


def critic_values(plan: Plan, fp: FrameworkPlan, ex: Example) -> dict[str, tuple[object, str]]:
    """PPO's critic: the actor's cards and layout, its own converted weights and save folder."""
    if "critic_config.model" not in ex.values:
        return {}
    actor = fp.roles["actor"].layout
    return {"critic_config.tensor_model_parallel_size": (actor.tp, "= the actor's layout (cli/train_ppo.py l. 65-91)"),
            "critic_config.pipeline_model_parallel_size": (actor.pp, "= the actor's layout"),
            "critic_config.micro_batch_size": (fp.roles["critic"].layout.micro_batch_size, "plan: the critic's layout"),
            "critic_config.load": (critic_dir(plan), "convert.sh's critic conversion (--orm)"),
            "critic_config.save": (f"{plan.output_dir(NAME)}/critic_ckpt", "plan: under the framework's output folder"),
            "rl_config.critic_resource.num_npus": (fp.layout.cards, "= actor_resource.num_npus (the critic shares "
                                                                    "the actor's cards, cli/train_ppo.py l. 65-91)")}


def dapo_values(ex: Example, tokens: int, gbs: int, verify: str) -> dict[str, tuple[object, str]]:
    """DAPO's keys that follow the plan's (validate_config.py l. 389-415): the overlong penalty's response length
    is the rollout's max_tokens, dynamic sampling fills upstream's share of the global batch and filters on the
    verifier the job scores with."""
    out: dict[str, tuple[object, str]] = {}
    if "rl_config.rollout_max_tokens" in ex.values:
        out["rl_config.rollout_max_tokens"] = (tokens, f"= sampling max_tokens ({VALIDATE} l. 389-399)")
    key = "rl_config.filter_groups_train_batch_size"
    if key in ex.values:
        share = gbs * int(ex.get(key)) // int(ex.get("megatron_training.global_batch_size"))
        out[key] = (share, f"{ex.source(key)}, its share of the global batch")
        out["rl_config.filter_groups_metric"] = (verify, f"= verifier_function ({VALIDATE} l. 401-415)")
    return out


def layer_placement(fp: FrameworkPlan, ex: Example) -> dict[str, tuple[object, str]]:
    """The actor's layers on its pipeline stages: upstream's noop layers (padding the stages to even counts) where
    the plan keeps upstream's PP, else the layout's layer list where uneven. A value None leaves the key out (the
    plan shows why)."""
    actor = fp.roles["actor"].layout
    same_pp = actor.pp == int(ex.get(ACTOR_KEYS[1]))
    out: dict[str, tuple[object, str]] = {}
    if "actor_config.noop_layers" in ex.values and not same_pp:
        why = f"left out: upstream's noop layers pad its PP {ex.get(ACTOR_KEYS[1])}, not the plan's {actor.pp}"
        out = {"actor_config.noop_layers": (None, why), "actor_config.num_layers": (None, why)}
    elif "actor_config.noop_layers" in ex.values:
        return out
    uneven = ",".join(map(str, actor.layers_per_stage)) if actor.uneven_layers else None
    if uneven == ex.find(LAYERS_KEY):
        return out
    if uneven is not None:
        out[LAYERS_KEY] = (uneven, "plan: the actor's layout (its layers on the pipeline stages)")
    elif LAYERS_KEY in ex.values:
        out[LAYERS_KEY] = (None, f"left out: the plan's {actor.pp} stages hold even layers")
    return out


def recompute(kind: str, ex: Example) -> dict[str, tuple[object, str]]:
    """The actor's recompute as MindSpeed-LLM's flags (MegatronConfig keys, megatron_config.py l. 369-376): full
    recomputes every layer's forward, selective MindSpeed's activation function only; upstream's own keys where it
    sets the same recompute."""
    if ex.find(RECOMPUTE_KEY) == kind:
        return {}
    source = f"plan: the actor's recompute {kind} (the layout whose memory the plan counts)"
    out: dict[str, tuple[object, str]] = {key: (None, f"left out: {source}") for key in
                                          (RECOMPUTE_KEY, "actor_config.recompute_method",
                                           "actor_config.recompute_num_layers") if key in ex.values}
    if kind == "full":
        out.update({RECOMPUTE_KEY: ("full", source), "actor_config.recompute_method": ("uniform", source),
                    "actor_config.recompute_num_layers": (1, source)})
    elif kind == "selective":
        out["actor_config.recompute_activation_function"] = (True, source)
    return out


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
        heads=model.heads, kv_heads=model.kv_heads, layers=int(both.get("num_layers") or model.layers),
        num_layer_list=tuple(int(x) for x in str(layer_list).split(",")) if layer_list else None,
        gbs=int(both["global_batch_size"]), n=int(rl.get("n_samples_per_prompt", 1)),
        mbs=int(both["micro_batch_size"]), mini=int(rl.get("mini_batch_size", 1)),
        forward_mbs=int(rl.get("actor_forward_micro_batch_size") or both["micro_batch_size"]),
        max_prompt=int(rl.get("max_prompt_length", 512)), max_tokens=int(gen["sampling_config"]["max_tokens"]),
        max_model_len=int(gen.get("max_model_len", 2048)),
        max_num_batched_tokens=int(gen.get("max_num_batched_tokens", 2048)),
        scheduler=bool(gen.get("ascend_scheduler_config_enabled", True)), max_positions=model.max_positions,
        verifiers=tuple(rl.get("verifier_function", ("base_acc",))), known_verifiers=tuple(facts()["verifiers"]),
        template_verifiers=template, ep=int(both.get("expert_model_parallel_size", 1)),
        iep=int(gen.get("infer_expert_parallel_size", 1)), tp_extend_ep=bool(both.get("moe_tp_extend_ep")),
        noop=len(str(both["noop_layers"]).split(",")) if both.get("noop_layers") else 0, model_layers=model.layers,
        overlong_buffer=int(rl["overlong_buffer"]) if rl.get("overlong_buffer_enable") else None,
        rollout_max_tokens=int(rl["rollout_max_tokens"]) if rl.get("overlong_buffer_enable") else None,
        filter_metric=rl.get("filter_groups_metric") if rl.get("filter_groups_enable") else None,
        filter_batch=int(rl["filter_groups_train_batch_size"]) if rl.get("filter_groups_enable") else None,
        critic_cards=int(rl["critic_resource"]["num_npus"]) if "critic_resource" in rl else None)


# The paths the Hydra configs (the job's and the dataset's, cli/preprocess_data.py l. 110) hold: OmegaConf reads
# `${...}` in any string as an interpolation, so a path holding one would be read as another value.
HYDRA_PATHS = ("model_dir", "dataset", "output_dir", "mcore_ckpt_dir")


GMU_KEY = "generate_config.gpu_memory_utilization"


def rollout_share(ctx: Context, plan: Plan, fp: FrameworkPlan) -> tuple[float, str]:
    """The rollout's gpu_memory_utilization the memory model counts (families/rl/rollout.py kv_cache): upstream's,
    or lowered where the actor's resident states and vLLM would not fit the card with it (the plan says why)."""
    rollout = fp.roles["rollout"].layout
    kv = kv_cache(ctx.model, ctx.hw, ctx.fw.overhead_gb, recipe_of(ctx), rollout.tp, rollout.cards, rollout.offload,
                  plan.method, plan.train.global_batch_size, rollout.ep)
    return kv.gmu, kv.source


def path_problems(plan: Plan) -> list[Problem]:
    return [Problem(f"paths.{key}", f"{plan.paths[key].value!r} holds '${{', which Hydra's OmegaConf reads as an "
                                    f"interpolation in MindSpeed-RL's config; rename the folder")
            for key in HYDRA_PATHS if key in plan.paths and "${" in plan.paths[key].value]


def settings(ctx: Context, plan: Plan, fp: FrameworkPlan) -> MsrlSettings:
    if path_problems(plan):
        raise SpecError(path_problems(plan))
    ex = example_of(plan.method, plan.model, plan.hardware)
    chosen = {**decided(plan, fp, ex), GMU_KEY: rollout_share(ctx, plan, fp)}
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
    script, convert = converter(ctx, plan, fp, ex, chosen)
    resume = tuple(Setting(k, v, "docs/algorithms/grpo.md l. 105-118") for k, v in (
        ("actor_config.finetune", False), ("actor_config.load", f"{out}/ckpt"), ("actor_config.no_load_optim", False),
        ("actor_config.no_load_rng", False),
        ("rl_config.integrated_mode_config.ref_model_load_path", plan.paths["mcore_ckpt_dir"].value))) + tuple(
        Setting(k, v, "docs/algorithms/ppo.md: the critic resumes as the actor does") for k, v in (
            ("critic_config.finetune", False), ("critic_config.load", f"{out}/critic_ckpt"),
            ("critic_config.no_load_optim", False), ("critic_config.no_load_rng", False))
        if "critic_config.model" in ex.values)
    made = MsrlSettings(entry=f"cli/train_{plan.method}.py",
                        config_name=f"{plan.method}_{ex.model_yaml}_{plan.hardware}_{fp.layout.cards}",
                        upstream=f"{RELEASE} configs/{ex.name}.yaml", model_yaml=ex.model_yaml, config=config,
                        dataset=dataset, convert=convert, converter=script,
                        resume=resume, nnodes=fp.layout.nodes, npus_per_node=fp.layout.local_cards,
                        feature_frozen=FROZEN, alternative="verl",
                        alternative_plans=ctx.tables is not None and ctx.tables.supports("verl", plan.model))
    problems = [Problem(b.spec_key, b.message) for b in rules.broken(shape_of(plan, made, plan.shape))]
    if problems:
        raise SpecError(problems)
    return made


def converter(ctx: Context, plan: Plan, fp: FrameworkPlan, ex: Example,
              chosen: dict[str, tuple[object, str]]) -> tuple[str, tuple[tuple[Setting, ...], ...]]:
    """MindSpeed-LLM's HF -> mcore command (the Megatron family's, as MindSpeed-LLM's plugin writes it) at the
    actor's exact layout, plus the flags of the actor's settings that change the saved weights' layout: experts
    split over TP x EP (moe_tp_extend_ep; docs/algorithms/grpo.md l. 67-68) and noop layers (num_layers counts
    them); PPO's critic is converted too. The flag tables are MindSpeed-LLM 2.2.0's parsers; v2.3.0 installs
    its 2.3.0 branch (a2c0733b), whose examples/mcore converters take the same flags."""
    if ctx.tables is None:
        raise ValueError("MindSpeed-RL's converter reads MindSpeed-LLM's row for the model from the tables")
    info = {**ctx.tables.frameworks["mindspeed-llm"].model_info(plan.model), **ex.converter}
    actor = fp.roles["actor"].layout
    value = {**{k: v for k, (v, _) in ex.values.items()}, **{k: v for k, (v, _) in chosen.items()}}
    layers = value.get(LAYERS_KEY)
    model_dir = plan.paths["model_dir"].value
    layer_list = None if layers is None else str(layers)
    script, table, flags = hf_to_mcore(info, plan.shape, Target(actor.tp, actor.pp, actor.ep, layer_list), model_dir,
                                       plan.paths["mcore_ckpt_dir"].value)
    noop = value.get("actor_config.noop_layers")
    if value.get("actor_config.moe_tp_extend_ep"):
        flags.append(("--moe-tp-extend-ep", True))
    if noop:
        flags += [("--num-layers", value["actor_config.num_layers"]), ("--noop-layers", noop)]
    sources = {"--target-tensor-parallel-size": "= actor_config.tensor_model_parallel_size",
               "--target-pipeline-parallel-size": "= actor_config.pipeline_model_parallel_size",
               "--target-expert-parallel-size": "= actor_config.expert_model_parallel_size",
               "--num-layer-list": "= actor_config.num_layer_list", "--load-dir": "spec paths.model_dir",
               "--save-dir": "= actor_config.load", "--moe-tp-extend-ep": "= actor_config.moe_tp_extend_ep",
               "--num-layers": "= actor_config.num_layers", "--noop-layers": "= actor_config.noop_layers"}
    commands = [flags]
    if "critic_config.model" in ex.values:  # PPO's critic: the same weights with a value head (ppo.md l. 80)
        commands.append([*((k, critic_dir(plan) if k == "--save-dir" else v) for k, v in flags), ("--orm", True)])
    made = tuple(tuple(Setting(flag, " ".join(words) if words else None,
                               sources.get(flag, f"MindSpeed-LLM's {script} command for {plan.model} "
                                                 f"(families/megatron/convert.py)"))
                       for flag, words in typed(table, command)) for command in commands)
    return script, made


def _typed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
