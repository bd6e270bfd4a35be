"""The rules a MindSpeed-RL v2.3.0 GRPO job must keep that its start-up (mindspeed_rl/config_cls/validate_config.py
validate_rl_args) checks only in part, each with its upstream file and line: the planner refuses a spec breaking one
at the spec key (planning.py), and `validate` checks the config on disk against the same rules (checks.py).

One Shape holds the numbers the rules read, from the plan or from a config file; each broken rule is a Broken: the
config key it is about, the spec key that sets it, and a sentence naming the values that work."""

from __future__ import annotations

import math

from ...api.frozen import frozen
from ...spaces import divisors

SRC = "MindSpeed-RL v2.3.0"
VALIDATE = f"{SRC} mindspeed_rl/config_cls/validate_config.py"
CONTAINER = f"{SRC} mindspeed_rl/workers/resharding/vllm_weight_container.py"


@frozen
class Shape:
    """A job's numbers as MindSpeed-RL reads them (`cards`: actor_resource.num_npus; batches in prompts, as
    global_batch_size and mini_batch_size are written; `mbs`: actor_config.micro_batch_size in samples)."""

    cards: int
    nodes: int
    tp: int
    pp: int
    itp: int
    heads: int
    kv_heads: int
    layers: int
    num_layer_list: tuple[int, ...] | None
    gbs: int
    n: int
    mbs: int
    mini: int
    forward_mbs: int
    max_prompt: int
    max_tokens: int
    max_model_len: int
    max_num_batched_tokens: int
    scheduler: bool  # generate_config.ascend_scheduler_config_enabled
    max_positions: int
    verifiers: tuple[str, ...]
    known_verifiers: tuple[str, ...]
    template_verifiers: tuple[str, ...]  # the verifiers the dataset's prompt template asks an answer format for
    ep: int = 1  # actor_config.expert_model_parallel_size
    iep: int = 1  # generate_config.infer_expert_parallel_size
    tp_extend_ep: bool = False  # actor_config.moe_tp_extend_ep
    noop: int = 0  # actor_config.noop_layers: empty layers padding the stages (`layers` counts them)
    model_layers: int | None = None  # the model's own layers (None: `layers`)
    overlong_buffer: int | None = None  # DAPO's overlong penalty window (None: off)
    rollout_max_tokens: int | None = None  # DAPO: the response length the penalty reads
    filter_metric: str | None = None  # DAPO dynamic sampling's metric (None: off)
    filter_batch: int | None = None  # DAPO: prompts dynamic sampling fills a step with
    critic_cards: int | None = None  # PPO: rl_config.critic_resource.num_npus

    @property
    def dp(self) -> int:
        return self.cards // (self.tp * self.pp)

    @property
    def gdp(self) -> int:
        return self.cards // self.itp


@frozen
class Broken:
    """A start-up rule the config breaks: its key, the spec key that sets it, and why."""

    config_key: str
    spec_key: str
    message: str


def _works(values: list[int]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def expert_rules(s: Shape) -> list[Broken]:
    """A MoE actor's experts: split over TP x EP, which the resharding to vLLM requires and the rollout's TP x EP
    must tile (reference mindspeed_rl.md s3.4)."""
    if s.ep == 1:
        return []
    out = []
    if not s.tp_extend_ep:
        out.append(Broken("actor_config.moe_tp_extend_ep", "layout.mindspeed-rl.actor.ep",
                          f"EP {s.ep} needs moe_tp_extend_ep: true ({CONTAINER} l. 152-169)"))
    if (s.iep * s.itp) % s.ep:
        out.append(Broken("generate_config.infer_expert_parallel_size", "layout.mindspeed-rl.actor.ep",
                          f"the rollout's TP x EP ({s.itp} x {s.iep}) must be a multiple of the actor's EP {s.ep} "
                          f"({CONTAINER} l. 152-169); values that work: "
                          f"{_works([e for e in divisors(s.iep * s.itp) if (s.cards // s.pp) % (s.tp * e) == 0])}"))
    if (s.cards // s.pp) % (s.tp * s.ep):
        out.append(Broken("actor_config.expert_model_parallel_size", "layout.mindspeed-rl.actor.ep",
                          f"TP x EP = {s.tp} x {s.ep} must divide a pipeline stage's {s.cards // s.pp} cards (expert "
                          f"TP = TP: Megatron core_v0.12.1 megatron/core/parallel_state.py l. 696-703)"))
    return out


def layer_rules(s: Shape) -> list[Broken]:
    """The actor's layers on its pipeline stages: an even split, a layer list, or noop layers padding the model's
    (reference mindspeed_rl.md s3.4)."""
    out = []
    own = s.layers if s.model_layers is None else s.model_layers
    if s.layers - s.noop != own:
        out.append(Broken("actor_config.num_layers", "layout.mindspeed-rl.actor.pp",
                          f"{s.layers} less the {s.noop} noop layers must be the model's {own} layers"))
    if s.num_layer_list is not None:
        if len(s.num_layer_list) != s.pp or sum(s.num_layer_list) != s.layers:
            out.append(Broken("actor_config.num_layer_list", "layout.mindspeed-rl.actor.pp",
                              f"{list(s.num_layer_list)} must give {s.pp} stages summing to the {s.layers} layers "
                              f"({CONTAINER} l. 268-283)"))
    elif s.layers % s.pp:
        pps = [p for p in divisors(s.layers) if s.cards % p == 0]
        out.append(Broken("actor_config.pipeline_model_parallel_size", "layout.mindspeed-rl.actor.pp",
                          f"{s.pp} must divide the {s.layers} layers without a num_layer_list ({CONTAINER} "
                          f"l. 268-283); values that work: {_works(pps)}"))
    return out


def layout_rules(s: Shape) -> list[Broken]:
    """The actor's and the rollout's layout (reference mindspeed_rl.md s3.4)."""
    out = layer_rules(s)
    tps = [t for t in divisors(s.cards) if s.heads % t == 0 and s.kv_heads % t == 0]
    if s.heads % s.tp or s.kv_heads % s.tp:
        out.append(Broken("actor_config.tensor_model_parallel_size", "layout.mindspeed-rl.actor.tp",
                          f"{s.tp} must divide the attention heads ({s.heads}) and KV heads ({s.kv_heads}) "
                          f"(Megatron, MindSpeed-LLM a2c0733b arguments); values that work: {_works(tps)}"))
    if s.critic_cards is not None and s.critic_cards != s.cards:
        out.append(Broken("rl_config.critic_resource.num_npus", "cards",
                          f"{s.critic_cards} must equal actor_resource.num_npus {s.cards}: the critic runs in the "
                          f"actor's placement groups ({SRC} cli/train_ppo.py l. 65-91)"))
    if s.cards % (s.tp * s.pp):
        out.append(Broken("rl_config.actor_resource.num_npus", "cards",
                          f"{s.cards} must be a multiple of TP x PP = {s.tp * s.pp} ({VALIDATE} l. 81-106)"))
    itps = [t for t in divisors(s.cards) if s.heads % t == 0 and (s.tp % t == 0 or t % s.tp == 0)
            and (s.cards // s.pp) % t == 0]
    if s.cards % s.itp or s.heads % s.itp:
        out.append(Broken("generate_config.infer_tensor_parallel_size", "layout.mindspeed-rl.rollout.tp",
                          f"{s.itp} must divide the cards ({s.cards}: the resharding's groups, {CONTAINER} "
                          f"l. 152-175) and the attention heads ({s.heads}: vLLM's verify_with_parallel_config); "
                          f"values that work: {_works(itps)}"))
    elif not (s.tp % s.itp == 0 or (s.itp % s.tp == 0 and (s.cards // s.pp) % s.itp == 0)):
        out.append(Broken("generate_config.infer_tensor_parallel_size", "layout.mindspeed-rl.rollout.tp",
                          f"{s.itp} against the actor's TP {s.tp}: the resharding needs TP % rollout TP == 0, or "
                          f"rollout TP % TP == 0 with (cards / PP) % rollout TP == 0 ({CONTAINER} l. 152-175, "
                          f"594-595, 632-633); values that work: {_works(itps)}"))
    return out


def batch_rules(s: Shape) -> list[Broken]:
    """The batches (prompts) against the data-parallel ranks of both layouts and the nodes (reference
    mindspeed_rl.md s7.1 rules 4-6)."""
    out = []
    unit = math.lcm(s.dp, s.gdp, s.nodes) if s.dp and s.gdp else 0
    works = [unit * k for k in (1, 2, 3, 4)] if unit else []
    if not unit or s.gbs % unit:
        out.append(Broken("megatron_training.global_batch_size", "global_batch_size",
                          f"{s.gbs} prompts must be a multiple of the actor's data-parallel ranks ({s.dp}: "
                          f"{VALIDATE} l. 134-144), the rollout's ({s.gdp}: l. 187-195) and, with rule rewards, "
                          f"the nodes ({s.nodes}: l. 277-285); values that work: {_works(works)}"))
    elif (s.gbs // s.dp * s.n) % s.mbs or (s.gbs * s.n) % s.mbs:
        out.append(Broken("actor_config.micro_batch_size", "global_batch_size",
                          f"{s.mbs}: each data-parallel rank's {s.gbs // s.dp} prompts x n {s.n} samples must be a "
                          f"multiple of the micro batch ({VALIDATE} l. 109-119, 181-185)"))
    minis = [m for m in divisors(s.gbs) if (m * s.n // max(s.dp, 1)) % s.mbs == 0 and m * s.n >= s.dp]
    if s.gbs % s.mini or s.mini * s.n < s.dp or (s.mini * s.n // s.dp) % s.mbs:
        out.append(Broken("rl_config.mini_batch_size", "rl.mini_batch_size",
                          f"{s.mini} must divide the global batch {s.gbs} and give each of the {s.dp} data-parallel "
                          f"ranks whole micro batches of {s.mbs} samples ({SRC} mindspeed_rl/workers/"
                          f"actor_hybrid_worker.py l. 125-126: the update per rank is mini x n / DP; start-up "
                          f"accepts any, s3.3); values that work: {_works(minis)}"))
    if unit and s.gbs % unit == 0 and (s.gbs * s.n // s.dp) % s.forward_mbs:
        out.append(Broken("rl_config.actor_forward_micro_batch_size", "global_batch_size",
                          f"{s.forward_mbs} must divide each rank's {s.gbs * s.n // s.dp} samples"))
    return out


def length_rules(s: Shape) -> list[Broken]:
    """Lengths: seq_len = max_prompt_length + max_tokens = max_model_len (reference mindspeed_rl.md s7.1 rule 7)."""
    out = []
    if s.max_model_len != s.max_prompt + s.max_tokens:
        out.append(Broken("generate_config.max_model_len", "rl.response_length",
                          f"{s.max_model_len} must equal max_prompt_length {s.max_prompt} + max_tokens "
                          f"{s.max_tokens} (= the spec's seq_len)"))
    if s.max_model_len > s.max_positions:
        out.append(Broken("generate_config.max_model_len", "seq_len",
                          f"{s.max_model_len} exceeds the model's max_position_embeddings {s.max_positions} "
                          f"(vLLM _get_and_verify_max_len); at most {s.max_positions}"))
    if s.scheduler and s.max_num_batched_tokens < s.max_model_len:
        out.append(Broken("generate_config.max_num_batched_tokens", "seq_len",
                          f"{s.max_num_batched_tokens} must be at least max_model_len {s.max_model_len} while "
                          f"ascend_scheduler_config_enabled (chunked prefill off: {SRC} mindspeed_rl/config_cls/"
                          f"generate_config.py l. 85, 101)"))
    return out


def dapo_rules(s: Shape) -> list[Broken]:
    """DAPO's overlong penalty and dynamic sampling (validate_config.py l. 389-415)."""
    out = []
    if s.overlong_buffer is not None and s.overlong_buffer >= s.max_tokens:
        out.append(Broken("rl_config.overlong_buffer", "rl.response_length",
                          f"the overlong penalty's {s.overlong_buffer} tokens must be fewer than the response's "
                          f"max_tokens {s.max_tokens} ({VALIDATE} l. 389-399); a response length above "
                          f"{s.overlong_buffer} works"))
    if s.rollout_max_tokens is not None and s.rollout_max_tokens != s.max_tokens:
        out.append(Broken("rl_config.rollout_max_tokens", "rl.response_length",
                          f"{s.rollout_max_tokens} must equal max_tokens {s.max_tokens} ({VALIDATE} l. 389-399)"))
    if s.filter_metric is not None and s.filter_metric not in s.verifiers:
        out.append(Broken("rl_config.filter_groups_metric", "rl.reward",
                          f"{s.filter_metric} must be one of verifier_function {list(s.verifiers)} ({VALIDATE} "
                          f"l. 401-415)"))
    if s.filter_batch is not None and (s.filter_batch % s.dp or (s.filter_batch // s.dp * s.n) % s.mbs):
        out.append(Broken("rl_config.filter_groups_train_batch_size", "global_batch_size",
                          f"{s.filter_batch} prompts must tile the {s.dp} data-parallel ranks in whole micro batches "
                          f"of {s.mbs} ({VALIDATE} l. 219-240, 307-321)"))
    return out


def reward_rules(s: Shape) -> list[Broken]:
    """A verifier rule_verifier.py registers, matching the answer format the dataset's prompt template asks for."""
    unknown = [v for v in s.verifiers if v not in s.known_verifiers]
    if unknown:
        return [Broken("rl_config.verifier_function", "rl.reward",
                       f"{unknown[0]} is no verifier of {SRC} (mindspeed_rl/models/rule_verifier.py l. 152-162; "
                       f"an unknown one scores 0, l. 171-173); values that work: {', '.join(s.template_verifiers)}")]
    mismatched = [v for v in s.verifiers if v not in s.template_verifiers]
    if mismatched:
        return [Broken("rl_config.verifier_function", "rl.reward",
                       f"{mismatched[0]} grades an answer format the dataset's prompt template does not ask for "
                       f"(rule_verifier.py l. 203-265); the verifiers that fit it: "
                       f"{', '.join(s.template_verifiers)} (without rl.reward the plan takes upstream's)")]
    return []


def broken(s: Shape) -> list[Broken]:
    return layout_rules(s) + expert_rules(s) + batch_rules(s) + length_rules(s) + dapo_rules(s) + reward_rules(s)
