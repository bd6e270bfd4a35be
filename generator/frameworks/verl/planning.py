"""verl: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning).

GRPO and DAPO run an actor, a vLLM rollout engine and, with a KL term, a frozen reference; PPO adds a critic.
verl 0.7.0's hybrid engine puts them in one resource pool over every card (verl/trainer/main_ppo.py: one
global_pool for actor_rollout, ref and critic), so every role is colocated and the job's cards are the peak over
the phases."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...api.frozen import frozen
from ...api.notes import Note
from ...calibration import measured
from ...context import Context
from ...errors import SpecError
from ...families.rl.batching import CRITIC_SEQUENCES, SEQUENCES, limit_source, token_limit
from ...families.rl.rates import published
from ...families.rl.rollout import KVCache, kv_cache
from ...families.rl.run import RunSteps, example_defaults, loader_steps
from ...memory import MemoryBreakdown
from ...parallel import Parallel
from ...plan import HEADROOM, FrameworkPlan, Layout, Plan, Rejected
from ...recipe import batch_target
from ...spaces import divisors
from ...tables import Framework, Hardware, Model, RecipeDefaults
from ...throughput import Throughput
from .. import contract
from ..base import DefaultPlanning
from ..contract import PathDefault, RoleDef, RoleKind, Structure
from . import memory
from .examples import example
from .rl import DATA_SOURCES, GUIDE, RL, VERL, bare, example_script, rl_config
from .settings import Setting, VerlSettings

if TYPE_CHECKING:
    from ...api.starter import StarterSection

NAME = "verl"
FSDP_WORKERS = f"{VERL} verl/workers/fsdp_workers.py"
CONFIG_PY = f"{VERL} verl/utils/config.py"
ROLLOUT_TPS = (1, 2, 4, 8, 16)
DAPO_YAML = f"{VERL} recipe/dapo/config/dapo_trainer.yaml"
RAY_TRAINER = f"{VERL} verl/trainer/ppo/ray_trainer.py"
# verl's own epochs where the followed script sets none (the Qwen3-8B PPO script caps its steps instead)
DEFAULT_EPOCHS = (30, f"{VERL} verl/trainer/config/ppo_trainer.yaml l. 129: trainer.total_epochs 30")
VAL_SHARE = 0.05  # the rows prepare_data.py holds out for validation: round(rows x share), at least one
# Override -> examples.yaml key: written with the example's value where the followed script sets it.
EXAMPLE_KEYS = (
    ("algorithm.filter_groups.metric", "filter_groups_metric"),
    ("algorithm.filter_groups.max_num_gen_batches", "max_num_gen_batches"),
    ("actor_rollout_ref.actor.clip_ratio_c", "clip_ratio_c"),
    ("actor_rollout_ref.actor.loss_agg_mode", "loss_agg_mode"),
    ("actor_rollout_ref.rollout.temperature", "temperature"),
    ("actor_rollout_ref.rollout.top_p", "top_p"),
    ("actor_rollout_ref.rollout.top_k", "top_k"),
    ("actor_rollout_ref.rollout.max_num_seqs", "max_num_seqs"),
    ("actor_rollout_ref.rollout.val_kwargs.temperature", "val_temperature"),
    ("actor_rollout_ref.rollout.val_kwargs.top_p", "val_top_p"),
    ("actor_rollout_ref.rollout.val_kwargs.top_k", "val_top_k"),
    ("actor_rollout_ref.rollout.val_kwargs.do_sample", "val_do_sample"),
    ("actor_rollout_ref.rollout.val_kwargs.n", "val_n"),
    ("trainer.val_before_train", "val_before_train"),
    ("trainer.test_freq", "test_freq"),
    ("actor_rollout_ref.actor.fsdp_config.forward_prefetch", "forward_prefetch"),
    ("actor_rollout_ref.ref.fsdp_config.forward_prefetch", "ref_forward_prefetch"),
    ("actor_rollout_ref.actor.entropy_from_logits_with_chunking", "entropy_chunking"),
    ("actor_rollout_ref.ref.entropy_from_logits_with_chunking", "ref_entropy_chunking"),
    ("actor_rollout_ref.actor.entropy_checkpointing", "entropy_checkpointing"),
    ("actor_rollout_ref.ref.entropy_checkpointing", "ref_entropy_checkpointing"),
    ("+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype", "mixed_precision_param_dtype"),
    ("+actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype", "mixed_precision_reduce_dtype"),
    ("+actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype", "mixed_precision_buffer_dtype"),
    ("actor_rollout_ref.model.use_fused_kernels", "use_fused_kernels"),
    ("actor_rollout_ref.rollout.free_cache_engine", "free_cache_engine"),
)
# Where a dynamic batch sets the micro batches, verl reads no micro batch size (the followed script sets one anyway).
DYNAMIC_MICRO = {"actor": f"{VERL} verl/workers/actor/dp_actor.py l. 366-370, 440-446",
                 "critic": f"{VERL} verl/workers/critic/dp_critic.py l. 167-171, 211-218"}
FSDP_SIZE = "actor_rollout_ref.actor.fsdp_config.fsdp_size"


def rl_of(ctx: Context) -> RL:
    return rl_config(ctx.spec.rl, ctx.spec.method, ctx.spec.seq_len, ctx.model, ctx.fw, ctx.hw.accelerator)


@frozen
class VerlSpace:
    """One role's choices. Actor and critic: FSDP full shard over every card (no TP or PP), gradient checkpointing
    on (every NPU example), with the actor's (and critic's) parameter + optimizer offload between phases off, then
    on. Rollout: vLLM TP from the example's up, dividing the KV heads and the cards, within a node, each with the
    actor's states offloaded during rollout or not. Reference: its parameters always offloaded (every NPU example);
    the actor's states beside it offloaded or not. The layout's micro batch counts prompts per card of the global
    batch's tiling (1); verl's own per-GPU micro batch (sequences) is on the plan's settings."""

    kind: RoleKind

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        offloads = [ctx.pins.offload] if ctx.pins.offload is not None else [False, True]
        if self.kind is RoleKind.ACTOR and not rollout_fits(ctx, cards, offloads):
            return []  # every role shares the actor's cards: a count the rollout phase cannot run on is none
        if self.kind is not RoleKind.ROLLOUT:
            return [Structure(offload=offload) for offload in offloads]
        return [Structure(tp=tp, offload=offload) for tp in rollout_tps(ctx, cards) for offload in offloads]

    def recomputes(self, ctx: Context) -> list[str]:
        return ["full"] if self.kind.trains else ["none"]

    def micro_batches(self, ctx: Context, cards: int) -> list[int] | None:
        return [1]

    def label(self, structure: Structure) -> str:
        offload = f"actor offload {'on' if structure.offload else 'off'}"
        return f"vLLM tp={structure.tp}, {offload}" if self.kind is RoleKind.ROLLOUT else f"FSDP, {offload}"

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> Note | None:
        return None


SPACES = {kind: VerlSpace(kind) for kind in RoleKind}


def rollout_tps(ctx: Context, cards: int) -> list[int]:
    """vLLM TP sizes from the example's up: dividing the KV heads (vLLM shards them) and the cards (the rollout
    world, TP x DP, must divide the actor's world: fsdp_workers.py l. 614-620), within a node; the spec's own pin
    for the rollout (layout.verl.rollout.tp) alone where it gives one (its rules are checked at its key)."""
    own = dict(ctx.spec.layout[NAME].roles).get(RoleKind.ROLLOUT.value) if NAME in ctx.spec.layout else None
    if own is not None and own.tp:
        return [own.tp]
    start = rl_of(ctx).rollout_tp
    fitting = [tp for tp in ROLLOUT_TPS if tp <= ctx.hw.cards_per_node and tp <= cards and cards % tp == 0
               and ctx.model.kv_heads % tp == 0]
    return [tp for tp in fitting if tp >= start] or fitting[-1:]


def rollout_fits(ctx: Context, cards: int, offloads: list[bool]) -> bool:
    """Whether some rollout layout fits at `cards` (the rollout's TP must divide the cards, so a count above one
    that fits may not: the actor's search skips such a count, as the colocated roles run on its cards)."""
    rl = rl_of(ctx)
    batch = ctx.spec.global_batch_size or batch_target(ctx.defaults, ctx.spec)[0]
    budget = ctx.usable_gb * (1.0 - HEADROOM)
    return any(memory.rollout_memory(ctx.model, ctx.hw, ctx.fw.overhead_gb, rl, tp, cards, offload, ctx.spec.method,
                                     batch).total <= budget for tp in rollout_tps(ctx, cards) for offload in offloads)


STARTER_SEQ_LEN = 4096  # any length the example's prompt fits in: only the example's own lengths are read

class VerlPlanning(DefaultPlanning):
    path_keys = ("rl_data",)
    # No core step-count note: verl's count is its own (run_length), and prepare_data.py refuses a data file of
    # another size than the one it was sized for.
    min_cards_stand_in = Note("verl.min_cards_column", "verl's own column of min_cards.csv (the Huawei card table's "
                                                       "VeRL rows)")
    # Each count the plan chooses is whole nodes, as upstream runs RL (the contract's whole_nodes).
    whole_nodes = ("every verl 0.7.0 NPU example runs whole nodes (trainer.n_gpus_per_node 8 on A2, 16 on A3: "
                   "verl_0.7.0/examples.yaml gpus_per_node)")
    # verl applies the model's own tokenizer chat template to each prompt (verl 0.7.0 verl/utils/dataset/
    # rl_dataset.py l. 197, 242), so a Qwen3 decoder's template, with its thinking switch, is the one applied.
    chat_template_fact = "decoder"
    thinking_template = "verl applies the tokenizer's chat template, Qwen3's for a qwen3 decoder"
    thinking_note = Note("verl.thinking_kwargs",
                         "Qwen3's chat template thinks unless told not to; the plan passes train.enable_thinking to "
                         "it as data.apply_chat_template_kwargs.enable_thinking (verl 0.7.0 verl/trainer/config/"
                         "data/legacy_data.yaml l. 131, verl/utils/dataset/rl_dataset.py l. 197, 242)")

    def roles(self, method: str) -> tuple[RoleDef, ...]:
        base = (RoleDef(RoleKind.ACTOR), RoleDef(RoleKind.ROLLOUT), RoleDef(RoleKind.REFERENCE))
        return base + ((RoleDef(RoleKind.CRITIC),) if method == "ppo" else ())

    def starter_section(self, method: str, model: Model, fw: Framework) -> StarterSection:
        """The `rl:` keys at the values of the upstream example the plan follows; the reward written out (it decides
        what the data must hold), the rest commented. seq_len: the example's prompt plus response, raised to the
        multiple of 256 a spec's seq_len is (the response takes the rest)."""
        from ...api.starter import StarterRow, StarterSection  # init's alone: a plan does not load them

        values = rl_config({}, method, STARTER_SEQ_LEN, model, fw).example.values
        seq_len = -(-(int(values["prompt_length"][0]) + int(values["response_length"][0])) // 256) * 256
        rl = rl_config({}, method, seq_len, model, fw)
        # A given rl.kl_coef > 0 turns the KL loss on (rl.py): say so where the example keeps it off.
        kl = "" if rl.use_kl_loss else \
            f"; the example has no KL loss ({rl.sources['use_kl_loss']}): giving kl_coef turns one on"
        row = StarterRow
        what = "the rule reward that scores each response, and the values of the upstream example the plan follows"
        return StarterSection("rl", what, seq_len, (
            row("reward", rl.reward, f"gsm8k, math, math_dapo or geo3k; {rl.sources['reward']}", written=True),
            row("answer_column", "answer", "the column holding the final answer only; default: found in the answer "
                                           "text"),
            row("prompt_length", rl.prompt_length, rl.sources["prompt_length"]),
            row("response_length", rl.response_length, rl.sources["response_length"]),
            row("samples_per_prompt", rl.n, rl.sources["n"]),
            row("kl_coef", rl.kl_coef, rl.sources["kl_coef"] + kl),
            row("clip_ratio_low", rl.clip_ratio_low, rl.sources["clip_ratio_low"]),
            row("clip_ratio_high", rl.clip_ratio_high, rl.sources["clip_ratio_high"]),
            row("mini_batch_size", rl.mini_batch_size, rl.sources["mini_batch_size"])))

    def recipe_defaults(self, defaults: RecipeDefaults, model: Model, fw: Framework,
                        hw: Hardware | None = None) -> RecipeDefaults:
        # The global batch and epochs of the script the plan follows for the model and method (the mini and gen
        # batches scale with the batch: fitted_mini, dapo_generation); verl's own epochs where it sets none.
        script = example_script(fw.models.get(model.name) or {}, defaults.method, hw.accelerator if hw else "npu")
        if not script:
            return defaults
        ex = example(script)
        return example_defaults(defaults, ex.get("train_batch_size"), ex.get("total_epochs") or DEFAULT_EPOCHS)

    def run_steps(self, ctx: Context, batch: int) -> RunSteps | None:
        # verl's loader draws batches of data.train_batch_size prompts (DAPO: gen_batch_size) from the train split
        samples = ctx.spec.samples_per_epoch
        if samples is None or "steps" in ctx.spec.train:
            return None
        rl = rl_of(ctx)
        dapo = ctx.spec.method == "dapo"
        loader = batch * generation_ratio(rl) if dapo else batch
        given = ctx.spec.epochs_given
        cap = None if given else rl.example.get("total_training_steps")
        epochs = ctx.spec.epochs if given else ctx.defaults.values["epochs"]["value"]  # recipe_defaults sets it
        steps, why = data_steps(samples, loader, max(1, math.ceil(epochs)), cap, dapo)
        return RunSteps(steps, loader, why)

    def role_runs(self, ctx: Context, role: RoleKind) -> bool:
        # verl builds the reference worker only where a KL term needs its log-probs (main_ppo.py l. 138 and l. 252,
        # recipe/dapo/main_dapo.py l. 148: algorithm.use_kl_in_reward, which the plan keeps off, or
        # actor.use_kl_loss).
        return role is not RoleKind.REFERENCE or rl_of(ctx).use_kl_loss

    def space(self, role: RoleKind) -> VerlSpace:
        return SPACES[role]

    def most_cards(self, ctx: Context) -> tuple[int, str] | None:
        # Each data-parallel rank needs a sequence of every mini batch (mini x n // (cards / SP) > 0:
        # fsdp_workers.py l. 242-246); past that a card holds no data.
        rl = rl_of(ctx)
        batch = ctx.spec.global_batch_size or batch_target(ctx.defaults, ctx.spec)[0]
        mini = fitted_mini(rl, batch, rl.sp, rl.sp, batch)[0]
        return mini * rl.n * rl.sp, (f"a mini batch of {mini} prompts x n {rl.n} = {mini * rl.n} sequences, one a "
                                     f"data-parallel rank, x SP {rl.sp} ({FSDP_WORKERS} l. 242-246)")

    def sequences_per_sample(self, ctx: Context) -> int:
        # data.train_batch_size x rollout.n sequences split over the ranks (verl/utils/config.py l. 109-113)
        return rl_of(ctx).n

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        rl = sized(rl_of(ctx), ctx.model, ctx.hw, ctx.fw, ctx.spec.method, shape.cards, shape.global_batch_size,
                   shape.offload)
        return memory.role_memory(ctx.role_kind, ctx.model, ctx.hw, ctx.fw, ctx.spec.method, rl, shape)

    def rate(self, ctx: Context, shape: Parallel | None) -> Throughput | None:
        if ctx.role_kind is not RoleKind.ACTOR:
            why = "inside the actor's whole-step figure" if ctx.role_kind.trains else "does not train"
            return Throughput(0.0, f"not estimated: {ctx.role_kind.value} {why}", is_estimate=True)
        given = measured(ctx, shape)
        if given is not None:  # the spec's measured rate or calibration: verl's own perf/throughput
            return per_data_token(ctx, given.tokens_per_card_s, f"{given.source}; as verl's perf/throughput", "",
                                  False)
        found = next((row for row in published() if (row.method, row.model, row.hardware)
                      == (ctx.spec.method, ctx.model.name, ctx.hw.name)), None)
        if found is None:
            return Throughput(0.0, f"none published: no Ascend RL throughput for {ctx.spec.method} {ctx.model.name} "
                                   f"on {ctx.hw.name} (verl publishes none; MindSpeed-RL's figures cover other "
                                   f"rows), so the plan gives no time", is_estimate=True)
        return per_data_token(ctx, found.tokens_per_card_s, "MindSpeed-RL's measurement, not verl's", found.source,
                              True)

    def layout_notes(self, ctx: Context, layout: Layout) -> list[Note]:
        rl = rl_of(ctx)
        own = bare(rl.example.model) == bare(ctx.model.hf_id)  # upstream's job: the model (or its base)
        return ([rl.nearest] if rl.nearest else []) + (fewer_than_upstream(rl, ctx.hw, layout) if own else []) + \
            critic_checkpointing(rl)

    def path_defaults(self, output_dir: str, model, layout: Layout) -> dict[str, PathDefault]:
        # The prepared parquet files verl reads (data.train_files / val_files): the data-preparation step writes
        # them here from paths.dataset: a real folder where the spec gives paths.output_dir, a placeholder otherwise,
        # which paths.output_dir sets (the job writes it).
        return {"rl_data": PathDefault(f"{output_dir}/verl/data", derived_from="output_dir", set_through_source=True)}

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> VerlSettings:
        return settings(ctx, plan, fp)


def per_data_token(ctx: Context, figure: float, label: str, origin: str, is_estimate: bool) -> Throughput:
    """An end-to-end RL rate that counts the prompt + response tokens of every sequence generated and trained
    (MindSpeed-RL's end-to-end tps; verl's perf/throughput, metric_utils.py l. 293-302: total_num_tokens / (time x
    n_gpus)) as the core's rate per data token. Every prompt the loader draws (DAPO: a generation batch's, each drawn
    once an epoch, run_steps) makes n sequences, each counted at prompt + response = seq_len tokens; the core times
    the spec's data tokens, so the rate per data token is the figure x tokens per sample / (n x seq_len)."""
    rl = rl_of(ctx)
    tokens, samples = ctx.spec.tokens_per_epoch, ctx.spec.samples_per_epoch
    per_sample = tokens / samples if tokens and samples else float(rl.seq_len)
    return Throughput(figure * per_sample / (rl.n * rl.seq_len),
                      f"{label}: {figure:g} tokens/s per card{f' ({origin})' if origin else ''}, counting prompt + "
                      f"response tokens; every prompt drawn (DAPO: each of its generation batch) makes n ({rl.n}) "
                      f"sequences of prompt + response ({rl.seq_len}) tokens, so per data token (of {per_sample:g} "
                      f"a sample) the figure x {per_sample:g} / {rl.n * rl.seq_len}", is_estimate)


def fewer_than_upstream(rl: RL, hw: Hardware, layout: Layout) -> list[Note]:
    """Why the plan runs the model's own upstream example's job (its nodes of this platform's size) on fewer cards:
    the memory model's fewest that hold every phase at the job's lengths and batch (none where it runs as many)."""
    nodes, per_node = rl.example.values.get("nnodes"), rl.example.values.get("gpus_per_node")  # (value, line)
    if nodes is None or per_node is None or per_node[0] != hw.cards_per_node or \
            layout.cards >= nodes[0] * per_node[0]:
        return []
    upstream = nodes[0] * per_node[0]
    return [Note("verl.fewer_cards_than_upstream",
                 f"upstream {rl.script} ({VERL}) runs this job on {upstream} cards ({nodes[0]} node(s) x "
                 f"{per_node[0]}: l. {nodes[1]}, {per_node[1]}); the plan takes {layout.cards}, the fewest whole "
                 f"nodes where every phase fits by the memory model at seq_len {rl.seq_len} and the global batch "
                 f"{layout.global_batch_size}; set cards: {upstream} to run as upstream")]


def critic_checkpointing(rl: RL) -> list[Note]:
    """Why the critic keeps gradient checkpointing where the followed script turns it off (none elsewhere)."""
    found = rl.example.get("critic_gradient_checkpointing")
    if found is None or found[0]:
        return []
    return [Note("verl.critic_checkpointing",
                 f"{found[1]} turns the critic's gradient checkpointing off (critic.model.enable_gradient_"
                 f"checkpointing=False); the plan keeps it on (verl's default, {VERL} verl/trainer/config/critic/"
                 f"dp_critic.yaml l. 38): the memory model counts the critic's activations with checkpointing only, "
                 f"so without it the critic's update could exceed the card where the plan says it fits")]


PLANNING: contract.Planning = VerlPlanning()  # typed here: contract.Plugin loads it by name


# ----------------------------------------------------------------------------------------------------------------
# Settings: every value the files hold, with its source


def fitted_micro(rl: RL, model: Model, hw: Hardware, fw: Framework, method: str, cards: int,
                 offload: bool) -> tuple[int, str]:
    """verl's per-GPU micro batch (sequences) and its source: the example's (at the spec's length) where it divides
    the per-card mini batch (fsdp_workers.py l. 242-262: ppo_mini_batch_size x n // (cards / SP), which the micro
    batch must divide) and the actor's training phase fits the card with it; else the largest that does both, so the
    search lowers the micro batch before it adds cards (1 where none fits: the phase then does not fit). The memory
    model sizes the actor and critic at this value, the one the files write."""
    per_card = rl.mini_batch_size * rl.n // (cards // rl.sp)
    budget = hw.usable_gb * (1.0 - HEADROOM)
    if rl.dynamic_bsz:
        return _fitted_tokens(rl, model, fw, method, cards, offload, budget)
    if per_card == 0:
        return rl.micro_batch_size, rl.sources["micro_batch_size"]
    dividing = [d for d in divisors(per_card) if d <= rl.micro_batch_size] or [1]
    fitting = [d for d in dividing if memory.train_memory(RoleKind.ACTOR, model, fw, method,
                                                          replace(rl, micro_batch_size=d), cards, offload).total
               <= budget]
    micro = max(fitting or [1])
    if micro == rl.micro_batch_size:
        return micro, rl.sources["micro_batch_size"]
    why = (f"does not divide the {per_card} sequences per card of a mini batch ({FSDP_WORKERS} l. 242-262)"
           if micro == max(dividing) else "leaves the actor's training phase above the card's budget")
    return micro, (f"derived: the example's {rl.micro_batch_size} ({rl.sources['micro_batch_size']}) {why}; the "
                   f"largest that divides it and fits")


def _fitted_tokens(rl: RL, model: Model, fw: Framework, method: str, cards: int, offload: bool,
                   budget: float) -> tuple[int, str]:
    """With dynamic batch size: the full sequences a micro batch's token limit holds, the guide's SEQUENCES where
    the actor's training and log-prob phases fit the card with them, else one (the example's own limit), so the
    search lowers the limit before it adds cards."""
    def fits(count: int) -> bool:
        shaped = replace(rl, micro_batch_size=count, log_prob_micro_batch_size=count)
        return max(memory.train_memory(RoleKind.ACTOR, model, fw, method, shaped, cards, offload).total,
                   memory.log_prob_memory(model, fw, method, shaped, cards, offload).total) <= budget

    if rl.micro_batch_size == 1 or fits(rl.micro_batch_size):
        return rl.micro_batch_size, rl.sources["micro_batch_size"]
    return 1, (f"derived: {rl.micro_batch_size} sequences' tokens a micro batch ({rl.sources['micro_batch_size']}) "
               f"leave the actor's training phase above the card's budget at {cards} cards; one, as the example")


def dapo_generation(rl: RL, method: str) -> tuple[int, str]:
    """The prompts a step trains on per global-batch prompt, and why: DAPO without its group filter trains every
    prompt it generates, gen_batch_size of them (recipe/dapo/dapo_ray_trainer.py: the batch is the whole generated
    one unless filter_groups.enable), gen / train batch times the global batch, as the followed script; else 1."""
    found_gen, found_train, found_filter = (rl.example.get(key) for key in ("gen_batch_size", "train_batch_size",
                                                                              "filter_groups"))
    if method != "dapo" or not found_gen or not found_train or (found_filter and found_filter[0]):
        return 1, ""
    return int(found_gen[0]) // int(found_train[0]), found_gen[1]


def sized(rl: RL, model: Model, hw: Hardware, fw: Framework, method: str, cards: int, batch: int,
          offload: bool) -> RL:
    """`rl` at `cards` and global batch `batch`: its ulysses SP, mini batch and per-GPU micro batch as the files
    write them (one set of values for the memory model and the files), each with its source."""
    sp, sp_source = _sp(rl, model, cards)
    rl = replace(rl, sp=sp, sources={**rl.sources, "sp": sp_source})
    mini, mini_source = fitted_mini(rl, batch, cards, sp, batch * dapo_generation(rl, method)[0])
    rl = replace(rl, mini_batch_size=mini, sources={**rl.sources, "mini_batch_size": mini_source})
    micro, micro_source = fitted_micro(rl, model, hw, fw, method, cards, offload)
    rl = replace(rl, micro_batch_size=micro, sources={**rl.sources, "micro_batch_size": micro_source})
    if rl.dynamic_bsz:  # one token limit for the update and the log-prob passes
        return replace(rl, log_prob_micro_batch_size=micro,
                       sources={**rl.sources, "log_prob_micro_batch_size": micro_source})
    log_prob, log_prob_source = fitted_log_prob(rl, model, hw, fw, method, cards, offload)
    return replace(rl, log_prob_micro_batch_size=log_prob,
                   sources={**rl.sources, "log_prob_micro_batch_size": log_prob_source})


def fitted_log_prob(rl: RL, model: Model, hw: Hardware, fw: Framework, method: str, cards: int,
                    offload: bool) -> tuple[int, str]:
    """The log-prob passes' per-GPU micro batch (sequences): the example's where the actor's log-prob pass fits the
    card with it, else the largest below it that does (1 where none does), so the search lowers it before it adds
    cards."""
    budget = hw.usable_gb * (1.0 - HEADROOM)
    example = rl.log_prob_micro_batch_size
    chosen = next((count for count in range(example, 0, -1) if memory.log_prob_memory(
        model, fw, method, replace(rl, log_prob_micro_batch_size=count), cards, offload).total <= budget), 1)
    if chosen == example:
        return chosen, rl.sources["log_prob_micro_batch_size"]
    return chosen, (f"derived: the example's {example} ({rl.sources['log_prob_micro_batch_size']}) leaves the "
                    f"actor's log-prob pass above the card's budget at {cards} cards; the largest that fits")


# The Qwen chat template around a user turn alone: <|im_start|> user \n ... <|im_end|> \n <|im_start|> assistant \n.
TEMPLATE_TOKENS = 8
CORE_ALGOS = f"{VERL} verl/trainer/ppo/core_algos.py"


def check_rules(plan: Plan, rl: RL, cards: int, sp: int) -> None:
    """verl's mini batch rules at the spec's rl.mini_batch_size, refused with the nearest values that work; a group
    of one sequence for GRPO's (and DAPO's) group-relative advantage, and a prompt length no prompt fits in. (Its
    batch rule, train_batch_size x n divisible by the cards (verl/utils/config.py l. 88-113), always holds: the
    core's tiling keeps the global batch a multiple of the actor's micro batch 1 x DP = the cards.)"""
    batch = plan.train.global_batch_size
    ranks = cards // sp
    if plan.method in ("grpo", "dapo") and rl.n < 2:
        raise SpecError.at("rl.samples_per_prompt", f"{rl.n}: {plan.method}'s advantage compares each response with "
                                                    f"the other responses to its prompt, and a group of one has none "
                                                    f"({CORE_ALGOS} l. 312-314: mean 0, std 1, the raw reward); at "
                                                    f"least 2")
    if rl.prompt_length <= TEMPLATE_TOKENS:
        raise SpecError.at("rl.prompt_length", f"{rl.prompt_length} tokens hold no prompt: the chat template alone "
                                               f"takes {TEMPLATE_TOKENS}, and data.filter_overlong_prompts drops "
                                               f"every prompt longer than max_prompt_length ({VERL} "
                                               f"verl/utils/dataset/rl_dataset.py l. 183-255), leaving no data")
    mini = rl.mini_batch_size
    if "mini_batch_size" in plan.rl and (mini > batch or batch % mini or mini * rl.n // ranks == 0):
        fits = [d for d in divisors(batch) if d * rl.n // ranks > 0]
        if mini * rl.n // ranks == 0 and batch % mini == 0 and mini <= batch:
            least = -(-ranks // rl.n)
            raise SpecError.at("rl.mini_batch_size", f"{mini} x samples_per_prompt {rl.n} = {mini * rl.n} "
                                                     f"sequences leave none per card on {ranks} data-parallel ranks "
                                                     f"({FSDP_WORKERS} l. 242-246); at least {least}")
        gap = min(abs(d - mini) for d in fits)
        nearest = " or ".join(str(d) for d in fits if abs(d - mini) == gap)
        raise SpecError.at("rl.mini_batch_size", f"{mini} must divide the global batch {batch} and not exceed it "
                                                 f"({VERL} verl/workers/config/actor.py l. 172-234: train_batch_size "
                                                 f">= ppo_mini_batch_size); nearest that works: {nearest}")


def fitted_mini(rl: RL, batch: int, cards: int, sp: int, trained: int) -> tuple[int, str]:
    """The mini batch (prompts): the spec's (checked, not moved: check_rules), else the followed script's share of
    its train batch at this global batch (so a step takes as many updates as upstream's), moved to the nearest that
    divides the global batch and splits evenly over the data-parallel ranks: verl splits each rank's data into
    chunks of mini x n / (cards / SP) sequences (fsdp_workers.py l. 242-243, workers/actor/dp_actor.py l. 430), so a
    remainder would leave uneven mini batches. `trained`: the prompts a step trains on (the updates a step are
    trained / mini)."""
    ranks = cards // sp
    found_train, spec_given = rl.example.get("train_batch_size"), rl.sources["mini_batch_size"].startswith("spec")
    if spec_given or found_train is None or batch == int(found_train[0]):
        target, why = rl.mini_batch_size, rl.sources["mini_batch_size"]
    else:
        target = max(1, round(batch * rl.mini_batch_size / int(found_train[0])))
        why = (f"the example's {rl.mini_batch_size} of its train batch {found_train[0]} "
               f"({rl.sources['mini_batch_size']}; {found_train[1]}) at the global batch {batch}")
    fits = [d for d in divisors(batch) if d * rl.n % ranks == 0]
    chosen = target if spec_given or target in fits or not fits else min(fits, key=lambda d: (abs(d - target), d))
    updates = f"; {trained // chosen} updates a step" if batch % chosen == 0 else ""
    scaled = not spec_given and why != rl.sources["mini_batch_size"]
    if chosen == target:
        return chosen, ("derived: " if scaled else "") + why + updates
    return chosen, (f"derived: {target} ({why}) moved to the nearest that divides the global batch with mini x n "
                    f"({chosen} x {rl.n}) divisible by the {ranks} data-parallel ranks ({FSDP_WORKERS} l. 242-243)"
                    f"{updates}")


def settings(ctx: Context, plan: Plan, fp: FrameworkPlan) -> VerlSettings:
    model, hw, fw = ctx.model, ctx.hw, ctx.fw
    rl = rl_config(plan.rl, plan.method, plan.seq_len, model, fw, hw.accelerator)
    actor, rollout = fp.roles[RoleKind.ACTOR.value].layout, fp.roles[RoleKind.ROLLOUT.value].layout
    cards = actor.cards
    check_rules(plan, rl, cards, _sp(rl, model, cards)[0])
    rl = sized(rl, model, hw, fw, plan.method, cards, plan.train.global_batch_size, actor.offload)
    sp, sp_source = rl.sp, rl.sources["sp"]
    offload, offload_source = _offload(fp, rl)
    # The KV cache vLLM sizes with the offload the files write (every role's, where one needs it).
    kv = kv_cache(model, hw, fw.overhead_gb, rl, rollout.tp, cards, offload, plan.method,
                         plan.train.global_batch_size)
    t = plan.train
    out = plan.output_dir(NAME)
    data = plan.paths["rl_data"].value
    ex = rl.example.get
    dapo, ppo = plan.method == "dapo", plan.method == "ppo"
    vl = model.vision_params_b > 0
    o: list[Setting] = []

    def add(key: str, value, source: str) -> None:
        o.append(Setting(key, value, source))

    add("algorithm.adv_estimator", "gae" if ppo else "grpo",
        f"upstream {rl.script}: {'gae (PPO: the critic estimates advantages)' if ppo else 'grpo'}")
    add("data.train_files", f"{data}/train.parquet", "paths.rl_data: the data-preparation step's train split")
    add("data.val_files", f"{data}/val.parquet", "paths.rl_data: the data-preparation step's validation split")
    add("data.train_batch_size", t.global_batch_size, "plan: global batch (prompts)")
    if dapo:
        ratio, found_gen = generation_ratio(rl), ex("gen_batch_size")
        assert found_gen is not None
        add("data.gen_batch_size", t.global_batch_size * ratio,
            f"derived: {ratio} x the global batch, as {found_gen[1]}")
    else:
        ratio = 1
    add("data.max_prompt_length", rl.prompt_length, rl.sources["prompt_length"])
    add("data.max_response_length", rl.response_length, rl.sources["response_length"])
    add("data.filter_overlong_prompts", True,
        "upstream examples/grpo_trainer NPU scripts: filter_overlong_prompts=True")
    truncation = "left" if dapo else "error"
    add("data.truncation", truncation, f"upstream {rl.script}: truncation {truncation}")
    if t.enable_thinking is not None:  # a Qwen3 decoder: its tokenizer's template reads the switch
        add("+data.apply_chat_template_kwargs.enable_thinking", t.enable_thinking,
            f"train.enable_thinking ({t.origin['enable_thinking']}); verl passes data.apply_chat_template_kwargs to "
            f"the tokenizer's apply_chat_template ({VERL} verl/utils/dataset/rl_dataset.py l. 197, 242)")
    if vl:
        add("data.image_key", "images", "upstream examples/grpo_trainer/run_qwen2_5_vl_7b_npu.sh l. 17 (geo3k images)")
    remove_padding = _actor_overrides(add, plan, rl, sp, sp_source, offload, offload_source)
    _rollout_overrides(add, rl, rollout, kv, vl)
    _algorithm_overrides(add, rl, dapo, cards)
    _critic_overrides(add, plan, rl, ppo, remove_padding, offload, offload_source)
    add("trainer.critic_warmup", 0, f"upstream {rl.script}: critic_warmup=0")
    add("trainer.logger", ("console",), "gen-launch: console only (upstream examples add wandb, which needs a key)")
    add("trainer.project_name", plan.job, "the spec's job")
    add("trainer.experiment_name", f"{plan.job}-{plan.method}", "the spec's job and method")
    add("trainer.device", "npu" if hw.accelerator == "npu" else "cuda",
        f"{hw.name} is {'an Ascend NPU' if hw.accelerator == 'npu' else 'an NVIDIA GPU'} (trainer.device)")
    add("trainer.n_gpus_per_node", min(cards, hw.cards_per_node), "plan: cards per node")
    add("trainer.nnodes", actor.nodes, "plan: nodes")
    add("trainer.default_local_dir", f"{out}/checkpoints", "paths.output_dir: verl's checkpoints")
    add("hydra.run.dir", hydra_run_dir(out), "paths.output_dir: Hydra's run folder (its .hydra/ record and the "
        "job's log; Hydra's default is outputs/ under the working folder, hydra/conf/hydra/output/default.yaml l.4 "
        "at hydra-core 1.3.8, and launch.sh starts verl from its own folder, which a run never writes)")
    add("trainer.resume_mode", "auto" if t.resume else "disable", t.origin.get("resume", ""))
    loader = t.global_batch_size * ratio if dapo else t.global_batch_size
    steps, steps_source, epochs, epochs_source = run_length(plan, loader, dapo)
    save = min(t.save_every_steps, steps)
    add("trainer.save_freq", save, t.origin.get("save_every_steps", "") if save == t.save_every_steps else
        f"derived: the run's {steps} steps (verl saves at every save_freq-th step and at the last: {RAY_TRAINER} "
        f"l. 1585-1590)")
    add("trainer.total_training_steps", steps, steps_source)
    add("trainer.total_epochs", epochs, epochs_source)
    keep = (t.keep_checkpoints, t.origin.get("keep_checkpoints", ""))
    add("trainer.max_actor_ckpt_to_keep", *keep)
    if ppo:
        add("trainer.max_critic_ckpt_to_keep", *keep)
    prepare, merge = _prepare_settings(plan, rl, vl, data), _merge_settings(out)
    return VerlSettings(entry="recipe.dapo.main_dapo" if dapo else "verl.trainer.main_ppo",
                        config="dapo" if dapo else "ppo", upstream=f"{rl.script} at {VERL} (f9c855f7)",
                        overrides=tuple(o), environment=environment(plan, hw.accelerator, vl, actor.nodes),
                        prepare=prepare, merge=merge,
                        nnodes=actor.nodes, gpus_per_node=min(cards, hw.cards_per_node),
                        node_ifname=node_ifname(plan, actor.nodes))


def _actor_overrides(add: Callable[[str, Any, str], None], plan: Plan, rl: RL, sp: int, sp_source: str,
                    offload: bool, offload_source: str) -> bool:
    """The actor's (and the reference's log-prob) overrides; whether the actor removes padding (the critic's too)."""
    t = plan.train
    ex = rl.example.get
    micro, micro_source = rl.micro_batch_size, rl.sources["micro_batch_size"]
    add("actor_rollout_ref.model.path", plan.paths["model_dir"].value, "paths.model_dir")
    add("actor_rollout_ref.actor.optim.lr", t.learning_rate, t.origin.get("learning_rate", ""))
    add("actor_rollout_ref.actor.optim.weight_decay", t.weight_decay, t.origin.get("weight_decay", ""))
    warmup = ex("lr_warmup_steps")
    if warmup and "given" not in (t.origin.get("warmup_steps"), t.origin.get("warmup_ratio")):
        add("actor_rollout_ref.actor.optim.lr_warmup_steps", warmup[0], warmup[1])
    else:
        add("actor_rollout_ref.actor.optim.lr_warmup_steps", t.warmup_steps if t.warmup_steps else -1,
            t.origin.get("warmup_steps", "derived: no warmup (-1: lr_warmup_steps_ratio 0.0)"))
    add("actor_rollout_ref.actor.optim.betas", tuple(t.adam_betas), t.origin.get("adam_betas", ""))
    add("actor_rollout_ref.actor.grad_clip", t.max_grad_norm, t.origin.get("max_grad_norm", ""))
    remove_padding = rl.remove_padding or sp > 1
    add("actor_rollout_ref.model.use_remove_padding", remove_padding,
        rl.sources["remove_padding"] if remove_padding == rl.remove_padding else
        f"derived: ulysses SP {sp} needs it ({VERL} verl/workers/config/actor.py l. 303)")
    add("actor_rollout_ref.actor.ppo_mini_batch_size", rl.mini_batch_size, rl.sources["mini_batch_size"])
    if rl.dynamic_bsz:
        add("actor_rollout_ref.actor.use_dynamic_bsz", True, rl.sources["dynamic_bsz"])
        add("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", *_token_limit(rl, sp))
        _unread_micro(add, rl, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "micro_batch_size", "actor")
        _unread_micro(add, rl, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                      "log_prob_micro_batch_size", "actor")
    else:
        add("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro, micro_source)
    add("actor_rollout_ref.actor.use_kl_loss", rl.use_kl_loss, rl.sources["use_kl_loss"])
    add("actor_rollout_ref.actor.kl_loss_coef", float(rl.kl_coef), rl.sources["kl_coef"])  # a float key
    if rl.use_kl_loss:
        add("actor_rollout_ref.actor.kl_loss_type", "low_var_kl", f"upstream {rl.script}: low_var_kl")
    add("actor_rollout_ref.actor.clip_ratio_low", rl.clip_ratio_low, rl.sources["clip_ratio_low"])
    add("actor_rollout_ref.actor.clip_ratio_high", rl.clip_ratio_high, rl.sources["clip_ratio_high"])
    add("actor_rollout_ref.actor.entropy_coeff", 0, f"upstream {rl.script}: entropy_coeff=0")
    add("actor_rollout_ref.actor.use_torch_compile", False, f"upstream {rl.script}: use_torch_compile=False")
    add("actor_rollout_ref.ref.use_torch_compile", False, "upstream NPU examples: ref.use_torch_compile=False")
    add("actor_rollout_ref.model.enable_gradient_checkpointing", True,
        "upstream NPU examples: enable_gradient_checkpointing=True (the memory model counts it)")
    add("actor_rollout_ref.actor.fsdp_config.param_offload", offload, offload_source)
    add("actor_rollout_ref.actor.fsdp_config.optimizer_offload", offload, offload_source)
    if sp > 1:
        add("actor_rollout_ref.actor.ulysses_sequence_parallel_size", sp, sp_source)
        add("actor_rollout_ref.ref.ulysses_sequence_parallel_size", sp, sp_source)
    if rl.dynamic_bsz:
        for role in ("rollout", "ref"):
            add(f"actor_rollout_ref.{role}.log_prob_use_dynamic_bsz", True, rl.sources["dynamic_bsz"])
            add(f"actor_rollout_ref.{role}.log_prob_max_token_len_per_gpu", *_token_limit(rl, sp))
    else:
        add("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", rl.log_prob_micro_batch_size,
            rl.sources["log_prob_micro_batch_size"])
    return remove_padding


def _offload(fp: FrameworkPlan, rl: RL) -> tuple[bool, str]:
    """The actor's (and critic's) parameter and optimizer offload the memory model chose, and why: the example's
    named where it differs."""
    offloaded = [kind for kind, role in fp.roles.items() if role.layout.offload]
    source = (f"plan: the {', '.join(offloaded)} phase needs the actor's states off the card (memory per role)"
              if offloaded else "plan: every phase fits with the actor's states on the card")
    found = rl.example.get("param_offload")
    if found is not None and bool(found[0]) != bool(offloaded):
        source += f" (where {found[1]} sets {found[0]}: the memory model decides at the plan's cards and lengths)"
    return bool(offloaded), source


def _unread_micro(add: Callable[[str, Any, str], None], rl: RL, key: str, example_key: str, role: str) -> None:
    """Under a dynamic batch, the micro batch size the followed script sets though verl does not read it there: as
    upstream writes it, saying so."""
    found = rl.example.get(example_key)
    if found:
        add(key, found[0], f"{found[1]}; verl reads it only without a dynamic batch ({DYNAMIC_MICRO[role]}): the "
                           f"token limit sets the micro batches")


def _rollout_overrides(add: Callable[[str, Any, str], None], rl: RL, rollout: Layout, kv: KVCache,
                      vl: bool) -> None:
    """The rollout engine's overrides (vLLM) and the reference's log-prob batch."""
    add("actor_rollout_ref.rollout.tensor_model_parallel_size", rollout.tp,
        "layout.verl.rollout.tp: the spec's pin" if rollout.pinned_at == "layout.verl.rollout" else
        rl.sources.get("rollout_tp", "") if rollout.tp == rl.rollout_tp else
        f"plan: the rollout layout's TP (the example's {rl.rollout_tp}, "
        f"{rl.sources.get('rollout_tp', 'where it sets none: verl default 1')}, does not fit or divide)")
    add("actor_rollout_ref.rollout.name", "vllm", f"upstream {rl.script}: rollout.name=vllm")
    if vl:
        add("+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache", True,
            "upstream examples/grpo_trainer/run_qwen2_5_vl_7b_npu.sh l. 34 (a key outside verl's schema: +)")
    add("actor_rollout_ref.rollout.gpu_memory_utilization", kv.gmu, f"{kv.source}; {kv.capacity(rl.seq_len)}")
    chunked = rl.chunked_prefill
    batched = rl.max_num_batched_tokens
    batched_source = rl.sources["max_num_batched_tokens"]
    if not chunked and batched < rl.seq_len:
        batched, batched_source = rl.seq_len, ("derived: prompt + response, since without chunked prefill vLLM "
                                               "schedules a whole prompt at once (vLLM 0.11 SchedulerConfig: "
                                               "max_num_batched_tokens >= max_model_len)")
    add("actor_rollout_ref.rollout.enable_chunked_prefill", chunked, rl.sources["chunked_prefill"])
    add("actor_rollout_ref.rollout.max_num_batched_tokens", batched, batched_source)
    add("actor_rollout_ref.rollout.enforce_eager", rl.enforce_eager, rl.sources["enforce_eager"])
    add("actor_rollout_ref.rollout.n", rl.n, rl.sources["n"])
    if not rl.dynamic_bsz:
        add("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", rl.log_prob_micro_batch_size,
            rl.sources["log_prob_micro_batch_size"])
    add("actor_rollout_ref.ref.fsdp_config.param_offload", True,
        "upstream NPU examples: ref.fsdp_config.param_offload=True (the memory model counts it where verl builds a "
        "reference: with a KL term)")


def _algorithm_overrides(add: Callable[[str, Any, str], None], rl: RL, dapo: bool, cards: int) -> None:
    """The algorithm's and the reward's overrides, and the rest of what the followed script sets."""
    ex = rl.example.get
    add("algorithm.use_kl_in_reward", False, f"upstream {rl.script}: use_kl_in_reward=False")
    if dapo:
        filter_found = ex("filter_groups")
        add("algorithm.filter_groups.enable", bool(filter_found[0]) if filter_found else False,
            filter_found[1] if filter_found else f"{DAPO_YAML} l. 23: enable False")
        add("reward_model.reward_manager", "dapo", f"{DAPO_YAML} l. 13")
        buffer = ex("overlong_buffer_len")
        if buffer:
            # The example's share of its response (4096 of 20480: the penalty ramps over the last 20%).
            example_response = int(rl.example.values["response_length"][0])
            length = int(buffer[0]) * rl.response_length // example_response
            add("reward_model.overlong_buffer.enable", True, buffer[1])
            add("reward_model.overlong_buffer.len", length, buffer[1] if length == buffer[0] else
                f"derived: the example's share, {buffer[0]} of its {example_response}-token response ({buffer[1]}), "
                f"of the {rl.response_length}-token response")
            add("reward_model.overlong_buffer.penalty_factor", 1.0,
                f"upstream {rl.script}: overlong_penalty_factor=1.0")
    # The rest of what the followed script sets, where it sets it: DAPO's group filter (a metric it must have:
    # recipe/dapo/dapo_ray_trainer.py l. 233-247 reads it from every batch), its dual-clip, loss aggregation, rollout
    # and validation sampling, and validation schedule; PPO's vLLM sequence limit.
    for key, example_key in EXAMPLE_KEYS:
        found = ex(example_key)
        if found:
            add(key, found[0], found[1])
    fsdp_size = ex("fsdp_size")
    if fsdp_size:
        # -1, or a group as large as the cards, shards over every card (fsdp_workers.py l. 99-104), as the memory
        # model counts the actor's states; a smaller group (hybrid shard, a copy of the states a group) holds
        # states / group size a card, which it does not count, so the plan then shards over every card.
        every = fsdp_size[0] == -1 or fsdp_size[0] >= cards
        add(FSDP_SIZE, fsdp_size[0] if every else -1, fsdp_size[1] if every else
            f"plan: every card (-1), where the example's {fsdp_size[0]} ({fsdp_size[1]}) shards over groups of "
            f"{fsdp_size[0]} of the {cards} cards, a copy of the states a group ({FSDP_WORKERS} l. 99-104 "
            f"create_device_mesh); the memory model counts the actor's states sharded over every card")


def _critic_overrides(add: Callable[[str, Any, str], None], plan: Plan, rl: RL, ppo: bool, remove_padding: bool,
                     offload: bool, offload_source: str) -> None:
    """PPO's critic's overrides (none for GRPO and DAPO)."""
    ex = rl.example.get
    sp, sp_source = rl.sp, rl.sources["sp"]
    micro, micro_source = rl.micro_batch_size, rl.sources["micro_batch_size"]
    if ppo:
        critic_lr = ex("critic_lr")
        add("critic.optim.lr", critic_lr[0] if critic_lr else 1e-5,
            critic_lr[1] if critic_lr else f"{VERL} verl/trainer/config/critic/critic.yaml l. 19: lr 1e-5")
        add("critic.model.use_remove_padding", remove_padding, "as the actor's")
        add("critic.model.path", plan.paths["model_dir"].value, "paths.model_dir (the critic starts from the policy)")
        checkpointing = ex("critic_gradient_checkpointing")
        add("critic.model.enable_gradient_checkpointing", True,
            "as the actor's (the memory model counts the critic's activations with it)" if checkpointing is None else
            checkpointing[1] if checkpointing[0] else
            f"plan: on where {checkpointing[1]} turns it off: the memory model counts the critic's activations with "
            f"it (see the notes)")
        if rl.dynamic_bsz:
            add("critic.use_dynamic_bsz", True, rl.sources["dynamic_bsz"])
            add("critic.ppo_max_token_len_per_gpu", *_token_limit(rl, sp, critic=True))
            _unread_micro(add, rl, "critic.ppo_micro_batch_size_per_gpu", "critic_micro_batch_size", "critic")
        else:
            add("critic.ppo_micro_batch_size_per_gpu", micro, micro_source)
        if sp > 1:
            add("critic.ulysses_sequence_parallel_size", sp, sp_source)
        add("critic.model.fsdp_config.param_offload", offload, offload_source)
        add("critic.model.fsdp_config.optimizer_offload", offload, offload_source)


def _token_limit(rl: RL, sp: int, critic: bool = False) -> tuple[int, str]:
    """A dynamic batch's token limit per card, the actor's (and log-prob passes') `rl.micro_batch_size` full
    sequences an SP group (the critic's twice that), and its source."""
    sequences = rl.micro_batch_size * (CRITIC_SEQUENCES // SEQUENCES if critic else 1)
    example = rl.example.get("max_token_len")
    source = limit_source(sequences, rl.seq_len, sp, (str(example[0]), example[1]) if example else None, critic,
                          GUIDE)
    if rl.micro_batch_size < SEQUENCES:
        source += f"; below the guide's {SEQUENCES}: {rl.sources['micro_batch_size']}"
    return token_limit(rl.seq_len, sp, sequences), source


def _prepare_settings(plan: Plan, rl: RL, vl: bool, data: str) -> tuple[Setting, ...]:
    """The data-preparation step's options (prepare_data.py)."""
    line = DATA_SOURCES[rl.reward][1]
    prepare = (Setting("data_source", rl.data_source, f"{VERL} verl/utils/reward_score/__init__.py l. {line} "
                                              f"(rl.reward {rl.reward}: {rl.sources['reward']})"),
               Setting("ability", "math", f"{VERL} examples/data_preprocess/gsm8k.py l. 76, geo3k.py l. 74: the "
                                          f"rule rewards verl scores by data_source are all math"),
               Setting("format", plan.data.format, "paths.dataset_format"),
               Setting("columns", tuple(plan.data.columns), "paths.dataset_columns"),
               Setting("image_column", "images" if vl else None, "data.image_key" if vl else "not a VL model"),
               Setting("val_share", VAL_SHARE, "gen-launch: 5% of the rows held out for validation"),
               Setting("input", plan.paths["dataset"].value, "paths.dataset"),
               Setting("output", data, "paths.rl_data"),
               Setting("rows", plan.data_rows, "data.samples: the rows trainer.total_training_steps is sized for "
                                               "(a file of another size is refused)" if plan.data_rows else
                       "no data.samples: any number of rows"),
               *answer_settings(rl.reward, plan.rl.get("answer_column")))
    return prepare


def _merge_settings(out: str) -> tuple[Setting, ...]:
    """The model-merge step's options (verl.model_merger)."""
    merge = (Setting("backend", "fsdp", f"{VERL} verl/model_merger: --backend fsdp (FSDP checkpoints)"),
             Setting("checkpoints", f"{out}/checkpoints",
                     f"trainer.default_local_dir: the actor of the step its latest_checkpointed_iteration.txt names "
                     f"({RAY_TRAINER} l. 1001-1005 writes it after every save)"),
             Setting("target_dir", f"{out}/merged", "paths.output_dir: the merged HuggingFace models, one folder "
                                                    "global_step_N per merged step"))
    return merge


# Why verl's NPU jobs turn vllm-ascend's NZ weight format off: vllm-ascend v0.11.0rc1 turns it on by default
# (vllm_ascend/envs.py l. 173-174) and its worker's wake_up refuses it (vllm_ascend/worker/worker_v1.py l. 183-186),
# which verl's hybrid engine calls on every switch to rollout (verl/workers/rollout/vllm_rollout/vllm_rollout.py
# l. 227).
NZ_WHY = ("vllm-ascend v0.11.0rc1 turns the NZ weight format on by default (vllm_ascend/envs.py l. 173-174) and its "
          "wake_up, which verl's hybrid engine calls on every switch to rollout (verl/workers/rollout/vllm_rollout/"
          "vllm_rollout.py l. 227), refuses it (vllm_ascend/worker/worker_v1.py l. 183-186)")
R1_START = f"{VERL} recipe/r1_ascend/ray_start_grpo_npu.sh"


def environment(plan: Plan, accelerator: str, vl: bool, nodes: int) -> tuple[Setting, ...]:
    """The variables launch.sh exports on every node before Ray starts: those verl's NPU CI and example scripts set
    (each with its source), and across nodes the interface of node_ifname for torch's Gloo groups and TensorPipe, as
    upstream's multi-node NPU start script sets them (the core's prologue exports HCCL_/NCCL_SOCKET_IFNAME)."""
    env: list[Setting] = []
    if accelerator == "npu":
        env.append(Setting("VLLM_USE_V1", "1", f"upstream {VERL} examples/ppo_trainer/run_qwen3-8b_npu.sh l. 3"))
        env.append(Setting("VLLM_ASCEND_ENABLE_NZ", "0",
                           f"upstream {VERL} tests/special_npu/run_qwen2_5_05b_grpo.sh l. 2 (verl's NPU CI; "
                           f"run_qwen2_5_05b_dapo.sh l. 3, run_qwen3_06b_ppo.sh l. 2): {NZ_WHY}"))
        if vl:
            env.append(Setting("USE_OPTIMIZED_MODEL", "0",
                               f"upstream {VERL} examples/grpo_trainer/run_qwen2_5_vl_7b_npu.sh l. 6: vllm-ascend's "
                               f"optimized model may not suit RL training"))
        if nodes > 1:
            env.append(Setting("HCCL_CONNECT_TIMEOUT", "600",
                               f"upstream {R1_START} l. 31: seconds HCCL waits for every node's link (its default, "
                               f"120, may pass while the other nodes still load the model)"))
    ifname = node_ifname(plan, nodes)
    if ifname:
        env.append(Setting("GLOO_SOCKET_IFNAME", ifname, f"cluster.socket_ifname, as upstream {R1_START} l. 24"))
        env.append(Setting("TP_SOCKET_IFNAME", ifname, f"cluster.socket_ifname, as upstream {R1_START} l. 22"))
    return tuple(env)


def run_length(plan: Plan, loader: int, dapo: bool) -> tuple[int, str, int, str]:
    """(trainer.total_training_steps, its source, trainer.total_epochs, its source): the steps verl runs. Its loader
    draws batches of `loader` prompts (data.gen_batch_size for DAPO, else train_batch_size) from the train split and
    drops the last partial one (verl/trainer/ppo/ray_trainer.py l. 392-399); it stops at total_training_steps or
    after total_epochs, and saves at the last step only where it reaches total_training_steps (l. 1356, 1585-1590).
    So the steps are whole batches of the rows prepare_data.py keeps for training, times whole epochs; a given
    train.steps gets the epochs that reach it. Without a data size: the placeholder steps, one an epoch at least."""
    t = plan.train
    if plan.samples_per_epoch is None:
        steps = t.steps if t.steps is not None else t.placeholders["placeholder_steps"]
        source = t.origin["steps"] if t.steps is not None else t.origin["placeholder_steps"]
        return steps, source, steps, ("derived: without a data size, one step an epoch at least, so the run stops "
                                      "at total_training_steps")
    if "steps" in t.origin and t.origin["steps"] == "given" and t.steps is not None:
        per_epoch, why = data_steps(plan.samples_per_epoch, loader, 1, None, dapo)
        epochs = math.ceil(t.steps / per_epoch)
        return t.steps, "given", epochs, f"derived: enough epochs to reach train.steps, {why}"
    assert t.steps is not None  # the plan's steps over a data size are the run's (VerlPlanning.run_steps)
    return t.steps, t.origin["steps"], max(1, math.ceil(t.epochs or 1)), \
        f"plan: epochs, whole ({t.origin.get('epochs', '')})"


def data_steps(rows: int, loader: int, epochs: int, cap: tuple[int, str] | None, dapo: bool) -> tuple[int, str]:
    """The steps verl runs over `rows` prepared rows in batches of `loader` prompts, and why (the RL family's
    loader_steps over the rows prepare_data.py keeps for training); refused where not one batch is left."""
    train_rows = _train_rows(rows)
    if train_rows < loader:
        least = next(n for n in itertools.count(loader + 1) if _train_rows(n) >= loader)
        raise SpecError.at("data.samples", f"{rows} rows leave {train_rows} for training after the validation "
                                           f"split, less than one batch of {loader} prompts verl's loader draws "
                                           f"({RAY_TRAINER} l. 392-399, drop_last); give at least "
                                           f"{least} rows or a smaller "
                                           f"global_batch_size")
    steps, why = loader_steps(train_rows, loader, epochs, cap)
    why += (f" (data.samples {rows} less the validation split; a batch is "
            f"{'data.gen_batch_size' if dapo else 'data.train_batch_size'}, and {RAY_TRAINER} l. 392-399 drops the "
            f"partial one; verl stops at the first of total_epochs and total_training_steps, l. 422-425, 1356)")
    if dapo:
        why += ("; DAPO's group filter may spend several generation batches on one step, so it can run fewer, and "
                "then saves the last step when the data ends (recipe/dapo/dapo_ray_trainer.py l. 410-416)")
    return steps, why


def generation_ratio(rl: RL) -> int:
    """DAPO's generation batch over its train batch in the followed script (gen_batch_size / train_batch_size)."""
    found_gen, found_train = rl.example.get("gen_batch_size"), rl.example.get("train_batch_size")
    assert found_gen and found_train, rl.script
    return int(found_gen[0]) // int(found_train[0])


PREPROCESS = f"{VERL} examples/data_preprocess"
# rl.reward -> (the text put before / after the last user message, as upstream's preprocessor for that data set does;
# how its final answer, reward_model.ground_truth, is found in the answer text; the sources). Every scorer compares
# the response's final answer with ground_truth, which must be the final answer only (gsm8k.py l. 65-72: string
# equality with the number after "####"; math_dapo.py l. 180-190 normalizes both sides; math_reward.py and geo3k.py
# grade the \boxed{} content against it).
ANSWER_FORMATS: dict[str, tuple[str, str, str, str]] = {
    "gsm8k": ("", " Let's think step by step and output the final answer after \"####\".", "hashes",
              f"{PREPROCESS}/gsm8k.py l. 57, 64 (instruction after the question); l. 27-32, 67 (ground truth: the "
              f"number after '#### ', commas removed)"),
    "math": ("", " Let's think step by step and output the final answer within \\boxed{}.", "boxed",
             f"{PREPROCESS}/math_dataset.py l. 60, 67 (instruction after the question); l. 28-29, 70 (ground truth: "
             f"the last \\boxed{{}} content of the solution)"),
    "math_dapo": ("Solve the following math problem step by step. The last line of your response should be of the "
                  "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n",
                  "\n\nRemember to put your answer on its own line after \"Answer:\".", "boxed_or_answer_line",
                  f"the prompt of BytedTsinghua-SIA/DAPO-Math-17k, the train file of recipe/dapo's NPU scripts "
                  f"(run_dapo_qwen2.5_32b_npu.sh l. 42), whose 'Answer:' line {VERL} verl/utils/reward_score/"
                  f"math_dapo.py l. 166, 180-181 reads; ground truth: the last \\boxed{{}} content of the answer, "
                  f"else its last 'Answer:' line"),
    "geo3k": ("", " You FIRST think about the reasoning process as an internal monologue and then provide the final "
                  "answer. The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST "
                  "BE put in \\boxed{}.", "boxed",
              f"{PREPROCESS}/geo3k.py l. 51-55, 61 (instruction after the problem), l. 62, 75 (ground truth: the "
              f"data set's final answer; here the last \\boxed{{}} content of the answer)"),
}


# Rewards that compare the response's final answer with the ground truth as a normalized string: an answer that is
# not a plain number (\dfrac{1}{2}, \sqrt2) scores -1 whenever the response writes it another way.
LITERAL_REWARDS = {"math_dapo": f"{VERL} verl/utils/reward_score/math_dapo.py l. 124-190, 265: the normalized "
                                f"strings compared as they are, -1.0 unless equal"}


def hydra_run_dir(out: str) -> str:
    """Hydra's run folder under verl's output folder. Hydra resolves it once to make the folder and again through
    its log file's name (${hydra.runtime.output_dir}/${hydra.job.name}.log: hydra-core 1.3.8, which verl 0.7.0
    installs, hydra/conf/hydra/job_logging/default.yaml l.15), so no escape of `${` holds in both: such a folder
    is refused."""
    if "${" in out:
        raise SpecError.at("paths.output_dir", f"{out!r} holds '${{', which Hydra would read as an interpolation in "
                                               f"verl's hydra.run.dir: choose a folder without it")
    return f"{out}/hydra"


def answer_settings(reward: str, column: str | None) -> tuple[Setting, ...]:
    """prepare_data.py's prompt instruction and final-answer rule for `reward` (ANSWER_FORMATS), or the column
    rl.answer_column names, which holds each row's final answer."""
    prefix, suffix, rule, source = ANSWER_FORMATS[reward]
    literal = LITERAL_REWARDS.get(reward)
    return (Setting("prompt_prefix", prefix, source), Setting("prompt_suffix", suffix, source),
            Setting("answer_rule", rule, source),
            Setting("answer_column", column, "spec rl.answer_column: each row's final answer" if column else
                    f"not given: the final answer is found in the answer text ({rule})"),
            Setting("literal_reward", f"{reward} ({literal})" if literal else None,
                    f"prepare_data.py warns of each final answer that is not a plain number: {literal}" if literal
                    else f"{reward} grades the answer, not its spelling"))


def _train_rows(rows: int) -> int:
    """The rows prepare_data.py keeps for training: all but round(rows x VAL_SHARE), at least one, held out."""
    return rows - max(1, round(rows * VAL_SHARE))


def node_ifname(plan: Plan, nodes: int) -> str | None:
    """The one interface every node of a multi-node job talks over: cluster.socket_ifname where it names a single
    interface (`eth0` or `=eth0`). launch.sh gives Ray that interface's address (ray start --node-ip-address, as
    upstream's recipe/r1_ascend/ray_start_grpo_npu.sh l. 19, 47, 70 does) and Gloo and TensorPipe its name (they
    take exact names only). With a list, an exclusion (`^...`: HCCL's and NCCL's syntax) or none: Ray and Gloo use
    the address of the node's host name, as they do by default."""
    ifname = (plan.socket_ifname or "").removeprefix("=")
    return ifname if nodes > 1 and ifname and not ifname.startswith("^") and "," not in ifname else None


def _sp(rl: RL, model, cards: int) -> tuple[int, str]:
    """Ulysses SP scaled down with the sequence: the smallest, up to the example's, that divides the heads (verl 0.7.0
    verl/utils/ulysses.py l. 328-332) and the cards and leaves each card no more of a sequence than the example's SP
    does of its own (prompt + response / SP); the largest dividing one where none does (a longer sequence than the
    example's keeps its SP, and the memory model judges it)."""
    example_seq = int(rl.example.values["prompt_length"][0]) + int(rl.example.values["response_length"][0])
    share = example_seq / rl.sp  # the tokens of one sequence a card holds in the example
    options = [d for d in divisors(math.gcd(model.heads, cards)) if d <= rl.sp]
    fitting = [d for d in options if rl.seq_len / d <= share]
    sp = min(fitting) if fitting else max(options)
    if sp == rl.sp:
        return sp, rl.sources["sp"]
    return sp, (f"derived: the example's SP {rl.sp} at {example_seq} tokens ({rl.sources['sp']}) leaves "
                f"{share:g} tokens of a sequence a card; at {rl.seq_len}, the smallest that does so and divides "
                f"{model.name}'s {model.heads} heads and the {cards} cards ({VERL} verl/utils/ulysses.py l. 328-332)"
                + ("" if fitting else f", else the largest, {sp}"))
