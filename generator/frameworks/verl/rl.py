"""The RL recipe of one verl job: the spec's `rl:` keys, else the values of the upstream example the plan follows for
the model and method (examples.py), else verl 0.7.0's own config defaults; each value with its source. Pure."""

from __future__ import annotations

from ...api.frozen import frozen
from ...api.notes import Note
from ...errors import SpecError
from ...families.rl.batching import SEQUENCES
from ...tables import Framework, Model
from .examples import Example, example

VERL = "verl 0.7.0"
ACTOR_YAML = f"{VERL} verl/trainer/config/actor/actor.yaml"
ROLLOUT_YAML = f"{VERL} verl/trainer/config/rollout/rollout.yaml"
GUIDE = f"{VERL} docs/perf/perf_tuning.rst"  # its dynamic batch size tuning tips (families/rl/batching.py)
# rl.reward -> the data_source verl's default_compute_score picks that rule reward by
# (verl 0.7.0 verl/utils/reward_score/__init__.py l. 44, 48, 59, 89).
DATA_SOURCES = {"gsm8k": ("openai/gsm8k", 44), "math": ("lighteval/MATH", 48), "math_dapo": ("math_dapo", 59),
                "geo3k": ("hiyouga/geometry3k", 89)}
# What verl's config says where an example sets nothing: key -> (value, source).
DEFAULTS: dict[str, tuple[object, str]] = {
    "n": (1, f"{ROLLOUT_YAML} l. 105: n 1"),
    "clip_ratio_low": (0.2, f"{ACTOR_YAML} l. 39: clip_ratio_low 0.2"),
    "clip_ratio_high": (0.2, f"{ACTOR_YAML} l. 42: clip_ratio_high 0.2"),
    "use_kl_loss": (False, f"{ACTOR_YAML} l. 95: use_kl_loss false"),
    "kl_coef": (0.001, f"{ACTOR_YAML} l. 102: kl_loss_coef 0.001"),
    "sp": (1, f"{VERL} verl/trainer/config/actor/dp_actor.yaml l. 34: ulysses_sequence_parallel_size 1"),
    "dynamic_bsz": (False, f"{ACTOR_YAML} l. 28: use_dynamic_bsz false"),
    "chunked_prefill": (True, f"{ROLLOUT_YAML} l. 71: enable_chunked_prefill True"),
    "max_num_batched_tokens": (8192, f"{ROLLOUT_YAML} l. 62: max_num_batched_tokens 8192"),
    "enforce_eager": (False, f"{ROLLOUT_YAML} l. 38: enforce_eager False"),
    "gpu_memory_utilization": (0.5, f"{ROLLOUT_YAML} l. 32: gpu_memory_utilization 0.5"),
    "remove_padding": (False, f"{VERL} verl/trainer/config/model/hf_model.yaml: use_remove_padding false"),
    "param_offload": (False, f"{VERL} verl/trainer/config/engine/fsdp.yaml: param_offload false"),
    "optimizer_offload": (False, f"{VERL} verl/trainer/config/engine/fsdp.yaml: optimizer_offload false"),
    "filter_groups": (False, f"{VERL} recipe/dapo/config/dapo_trainer.yaml l. 23: filter_groups.enable False"),
}


@frozen
class RL:
    """The RL values of one job, each with its source (`sources`, by field name)."""

    script: str  # the upstream example followed
    nearest: Note | None  # where the example trains another model (or its base): why (the plan says so)
    prompt_length: int
    response_length: int
    n: int
    use_kl_loss: bool
    kl_coef: float
    clip_ratio_low: float
    clip_ratio_high: float
    mini_batch_size: int
    reward: str
    micro_batch_size: int  # actor.ppo_micro_batch_size_per_gpu (sequences; with dynamic_bsz, those of its limit)
    log_prob_micro_batch_size: int  # rollout / ref log_prob_micro_batch_size_per_gpu
    sp: int  # ulysses sequence parallel size of the actor (and ref, critic)
    dynamic_bsz: bool
    remove_padding: bool
    rollout_tp: int  # the example's rollout TP: the rollout search starts here
    gpu_memory_utilization: float  # the example's: the plan lowers it where the actor's states leave less
    chunked_prefill: bool
    max_num_batched_tokens: int
    enforce_eager: bool
    example: Example
    sources: dict[str, str]

    @property
    def seq_len(self) -> int:
        return self.prompt_length + self.response_length

    @property
    def data_source(self) -> str:
        return DATA_SOURCES[self.reward][0]

    @property
    def max_num_seqs(self) -> tuple[int, str]:
        """vLLM's limit on running sequences, as verl's rollout config sets it (the RL family's rollout model)."""
        return 1024, f"{ROLLOUT_YAML} l. 68: max_num_seqs 1024"


def rl_config(given: dict, method: str, seq_len: int, model: Model, fw: Framework, accelerator: str = "npu") -> RL:
    """The job's RL values: `given`, the spec's `rl:` keys, for `method` at `seq_len` on `accelerator` (a GPU plan
    follows verl's GPU script for the model where it ships one: frameworks.yaml <method>_gpu)."""
    if method == "ppo" and model.vision_params_b > 0:
        raise SpecError.at("method", f"verl 0.7.0 cannot start ppo on {model.name}: PPO's critic needs a value "
                                     f"head, which transformers has none of for a vision-language model, so verl "
                                     f"builds it only through trl's AutoModelForCausalLMWithValueHead ({VERL} "
                                     f"verl/utils/model.py l. 621-655), and the Ascend install has no trl; no "
                                     f"upstream script runs PPO on a VL model. Use grpo or dapo (upstream "
                                     f"examples/grpo_trainer/run_qwen2_5_vl_7b_npu.sh, recipe/dapo's VL scripts)")
    info = fw.models.get(model.name) or {}
    script = example_script(info, method, accelerator)
    if not script:
        raise SpecError.at("method", f"verl plans {method} for {model.name} from no upstream example "
                                     f"(frameworks.yaml verl)")
    ex = example(script)
    nearest = _nearest(method, model, ex, "GPU" if script == info.get(f"{method}_gpu") else "NPU", accelerator)
    sources: dict[str, str] = {}
    engine = _vision_engine(model, info, ex, accelerator)

    def pick(field: str, given_key: str | None = None, example_key: str | None = None):
        if given_key and given_key in given:
            sources[field] = f"spec rl.{given_key}"
            return given[given_key]
        found = (engine if field in VISION_ENGINE_KEYS else ex).get(example_key or field)
        if found is not None:
            sources[field] = found[1]
            return found[0]
        value, source = DEFAULTS[example_key or field]
        sources[field] = source
        return value

    prompt, response = _lengths(given, seq_len, ex, sources)
    n = pick("n", "samples_per_prompt")
    kl_given = "kl_coef" in given
    use_kl = given["kl_coef"] > 0 if kl_given else pick("use_kl_loss")
    if kl_given:
        sources["use_kl_loss"] = "derived: rl.kl_coef > 0"
    kl = pick("kl_coef", "kl_coef")
    mini = pick("mini_batch_size", "mini_batch_size")
    reward = pick("reward", "reward")
    sp = pick("sp")
    example_seq = int(ex.values["prompt_length"][0]) + int(ex.values["response_length"][0])
    dynamic = pick("dynamic_bsz")
    if dynamic:  # micro batches packed to a token limit of SEQUENCES full sequences (families/rl/batching.py)
        micro = log_prob = SEQUENCES
        sources["micro_batch_size"] = sources["log_prob_micro_batch_size"] = \
            f"derived: use_dynamic_bsz packs {SEQUENCES} sequences' tokens a micro batch ({GUIDE} l. 148-149)"
    else:
        micro, sources["micro_batch_size"] = _scaled(ex, "micro_batch_size", example_seq, prompt + response)
        log_prob, sources["log_prob_micro_batch_size"] = _scaled(ex, "log_prob_micro_batch_size", example_seq,
                                                                 prompt + response, micro)
    rl = RL(script=script, nearest=nearest, prompt_length=prompt, response_length=response, n=n, use_kl_loss=use_kl,
            kl_coef=kl, clip_ratio_low=pick("clip_ratio_low", "clip_ratio_low"),
            clip_ratio_high=pick("clip_ratio_high", "clip_ratio_high"), mini_batch_size=mini, reward=reward,
            micro_batch_size=micro, log_prob_micro_batch_size=log_prob,
            sp=sp, dynamic_bsz=dynamic, remove_padding=pick("remove_padding"),
            rollout_tp=pick("rollout_tp", example_key="rollout_tp") if ex.get("rollout_tp") else 1,
            gpu_memory_utilization=pick("gpu_memory_utilization"), chunked_prefill=pick("chunked_prefill"),
            max_num_batched_tokens=pick("max_num_batched_tokens"), enforce_eager=pick("enforce_eager"),
            example=ex, sources=sources)
    return rl


# The vLLM engine settings a vision-language model's rollout takes from its own upstream example, whichever script
# the method follows (both VL NPU examples set eager mode and no chunked prefill, the text ones the opposite).
VISION_ENGINE_KEYS = ("enforce_eager", "chunked_prefill")


def _nearest(method: str, model: Model, ex: Example, kind: str, accelerator: str) -> Note | None:
    """Where the followed script trains another model (or another variant of it), or is the NPU script on a GPU:
    what PLAN.md says of it (None: upstream ran this very job)."""
    on_gpu = "" if accelerator != "gpu" or kind != "NPU" else \
        (f"; verl 0.7.0 ships no {method} GPU script for {model.name}: the plan follows its NPU example "
         f"({ex.script}) on the GPU")
    if bare(ex.model) != bare(model.hf_id):
        return Note("verl.example_of_other_model",
                    f"verl 0.7.0 has no {method} {kind} example for {model.name}: upstream has never run this job "
                    f"{'on Ascend' if kind == 'NPU' else 'on a GPU'}; the plan follows the same method's example for "
                    f"the nearest model, {ex.model} ({ex.script}){on_gpu}")
    if ex.model.lower() != model.hf_id.lower():
        return Note("verl.example_of_variant",
                    f"verl 0.7.0's {method} {kind} example for {model.name} trains {ex.model} ({ex.script}); the "
                    f"plan trains {model.hf_id} with its values: the nearest model upstream runs {method} on{on_gpu}")
    return Note("verl.npu_example_on_gpu", on_gpu[2:]) if on_gpu else None


def example_script(info: dict, method: str, accelerator: str) -> str | None:
    """The upstream script a plan follows for `method` (a model's frameworks.yaml verl row): on a GPU, verl's GPU
    script where it ships one for the model; else the NPU one."""
    return (info.get(f"{method}_gpu") if accelerator == "gpu" else None) or info.get(method)


def _vision_engine(model: Model, info: dict, ex: Example, accelerator: str) -> Example:
    """The example a VL model's rollout engine settings come from: its own GRPO example where the method's script
    trains a text model; else the followed script."""
    own = example_script(info, "grpo", accelerator)
    if model.vision_params_b <= 0 or not own or bare(ex.model) == bare(model.hf_id):
        return ex
    return example(own)


def _scaled(ex: Example, key: str, example_seq: int, seq: int, fallback: int = 1) -> tuple[int, str]:
    """A per-GPU micro batch (sequences) at `seq`: the example's, holding as many tokens as the example's micro
    batch of `example_seq`-token sequences (at least one sequence); `fallback` where the example sets none (with
    use_dynamic_bsz verl packs micro batches by tokens instead)."""
    found = ex.get(key)
    if found is None:
        return fallback, "derived: the example balances micro batches by tokens (use_dynamic_bsz); one sequence"
    value = max(1, int(found[0]) * example_seq // seq)
    if value == found[0]:
        return value, found[1]
    return value, (f"derived: the example's {found[0]} sequences of {example_seq} tokens ({found[1]}), as many "
                   f"tokens at {seq}")


def bare(hf_id: str) -> str:
    """A HuggingFace id without its owner and its -Instruct / -Base variant: the model an example trains."""
    name = hf_id.split("/")[-1].lower()
    for suffix in ("-instruct", "-base"):
        name = name.removesuffix(suffix)
    return name


def _lengths(given_rl: dict, seq_len: int, ex: Example, sources: dict[str, str]) -> tuple[int, int]:
    """prompt_length + response_length = seq_len: the spec's, else the example's prompt length and the rest."""
    given = {key: given_rl[key] for key in ("prompt_length", "response_length") if key in given_rl}
    if len(given) == 2:
        if sum(given.values()) != seq_len:
            raise SpecError.at("rl.response_length", f"prompt_length {given['prompt_length']} + response_length "
                                                     f"{given['response_length']} = {sum(given.values())} must equal "
                                                     f"seq_len {seq_len}; response_length "
                                                     f"{seq_len - given['prompt_length']} does")
        sources["prompt_length"] = sources["response_length"] = "spec rl"
        return given["prompt_length"], given["response_length"]
    if "response_length" in given:
        prompt = seq_len - given["response_length"]
        if prompt <= 0:
            raise SpecError.at("rl.response_length", f"{given['response_length']} leaves no prompt within seq_len "
                                                     f"{seq_len}")
        sources["response_length"], sources["prompt_length"] = "spec rl.response_length", \
            "derived: seq_len - response_length"
        return prompt, given["response_length"]
    if "prompt_length" in given:
        prompt, sources["prompt_length"] = given["prompt_length"], "spec rl.prompt_length"
    else:
        found = ex.get("prompt_length")
        assert found is not None, ex.script
        prompt, sources["prompt_length"] = int(found[0]), found[1]
    if prompt >= seq_len:
        key = "rl.prompt_length" if "prompt_length" in given else "seq_len"
        raise SpecError.at(key, f"the prompt length {prompt} ({sources['prompt_length']}) leaves no response within "
                                f"seq_len {seq_len}; give a seq_len above {prompt}, or rl.prompt_length below "
                                f"{seq_len}")
    sources["response_length"] = "derived: seq_len - prompt_length"
    return prompt, seq_len - prompt
