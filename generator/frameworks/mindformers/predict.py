"""MindFormers inference (`method: predict`, run_mode predict): the `serve` role's layout, memory and settings
(its files: predict_files.py).

The facts (reference mindformers_predict.md; seed 003 = configs/qwen3/README.md of mindspore-ai/mindformers v1.8.0,
its "推理" sections; code at the project's pin, master 167a50d, unless a line says otherwise):
- predict runs no data parallelism: data_parallel 1, model_parallel = the cards used (seed 003 "多卡推理" points 1-2);
- Mcore inference's world check dp x tp x pp x cp = world size (parallel_core/inference/parallel_state.py
  l. 240-265), so with dp = pp = cp = 1, model_parallel = the workers msrun starts;
- the attention splits its heads over TP (parallel_core/inference/transformer/attention.py l. 148) and its KV
  heads: heads % kv_heads == 0, and kv_heads % tp == 0 where kv_heads >= tp, else tp % kv_heads == 0 (each card
  then holds one replicated KV head) (l. 206-224).
"""

from __future__ import annotations

from dataclasses import replace

from ...api.frozen import frozen
from ...api.notes import Note
from ...context import Context
from ...errors import SpecError
from ...memory import GIB, MemoryBreakdown, MemoryJob, estimate
from ...parallel import Parallel
from ...plan import FrameworkPlan, Layout, Plan, Rejected
from ..contract import Structure

UPSTREAM = "configs/qwen3/predict_qwen3.yaml"
WORLD_RULE = "parallel_core/inference/parallel_state.py l. 240-265"
SPLIT_RULE = "parallel_core/inference/transformer/attention.py l. 148, 206-224"
NO_DP_RULE = "MindFormers' Qwen3 guide (configs/qwen3/README.md v1.8.0) 多卡推理 points 1-2"
KV_BYTES = 2  # bf16 cache (predict_qwen3.yaml l. 20-25: compute_dtype and params_dtype bfloat16)


def kv_heads_per_card(kv_heads: int, tp: int) -> int:
    """KV heads one card caches: its share, or one replicated head where TP exceeds them (SPLIT_RULE)."""
    return kv_heads // tp if kv_heads >= tp else 1


def split_problem(heads: int, kv_heads: int, tp: int) -> str | None:
    """Why model_parallel `tp` cannot split the attention for inference (SPLIT_RULE), or None: the heads split over
    TP (l. 148), and the KV heads too where there are at least as many, else TP is a multiple of them (l. 206-224)."""
    if heads % kv_heads:
        return f"num_attention_heads {heads} must divide by num_key_value_heads {kv_heads}"
    if heads % tp:
        return f"num_attention_heads {heads} must divide by model_parallel {tp}"
    if kv_heads >= tp and kv_heads % tp:
        return f"num_key_value_heads {kv_heads} must divide by model_parallel {tp}"
    if kv_heads < tp and tp % kv_heads:
        return f"model_parallel {tp} must divide by num_key_value_heads {kv_heads} where it exceeds them"
    return None


@frozen
class PredictSpace:
    """The serve role's one structure at a card count: all of it model parallel (data_parallel 1, no pipeline,
    context or expert parallelism), as MindFormers' predict runs it."""

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        pins = ctx.pins
        for key in ("pp", "cp", "ep"):
            if getattr(pins, key) not in (None, 1):
                raise SpecError.at(ctx.pin_path(key), f"MindFormers predict splits the model by model_parallel "
                                                      f"only ({NO_DP_RULE}; {WORLD_RULE}); leave {key} out")
        if pins.tp is not None and pins.tp != cards:
            raise SpecError.at(ctx.pin_path("tp"), f"MindFormers predict runs data_parallel 1 and model_parallel = "
                                                   f"the cards ({NO_DP_RULE}; {WORLD_RULE}): tp must be {cards}")
        model = ctx.model
        split = split_problem(model.heads, model.kv_heads, cards)
        if split and cards == ctx.spec.cards:  # the spec's count cannot split the model: say which counts can
            # (the MLP and the vocabulary split over TP too: the core's rules, layouts.py)
            counts = [n for n in range(1, model.heads + 1) if model.ffn % n == model.vocab % n == 0
                      and not split_problem(model.heads, model.kv_heads, n)]
            raise SpecError.at("cards", f"MindFormers predict runs model_parallel = the {cards} cards, and {split} "
                                        f"(mindformers {SPLIT_RULE}); {model.name} splits over "
                                        f"{', '.join(map(str, counts))} cards")
        return [Structure(tp=cards)]

    def recomputes(self, ctx: Context) -> list[str]:
        return ["none"]

    def micro_batches(self, ctx: Context, cards: int) -> list[int] | None:
        return None  # the core's: a server's micro batch is the whole predict batch (layouts.py)

    def label(self, structure: Structure) -> str:
        return f"model_parallel={structure.tp}"

    def choice_note(self, best: Layout, rejected: list[Rejected]) -> Note | None:
        return Note("mindformers.predict_cards",
                    f"predict: model_parallel {best.tp} = the {best.cards} card(s), data_parallel 1 ({NO_DP_RULE}; "
                    f"{WORLD_RULE}); the fewest cards whose memory holds the weights and the KV cache")


SPACE = PredictSpace()


def memory(ctx: Context, shape: Parallel) -> MemoryBreakdown:
    """One card of the server: the bf16 weights split by TP and the prefill's working set, one layer's activations
    for the whole batch at seq_len (memory.py's forward-only role), with the runtime overhead; the fp32 logits of
    each sequence's last token only (the prefill gathers them before the output layer: parallel_core/inference/
    base_models/gpt/gpt_model.py l. 230-236, 337), split by TP; and the KV cache for the whole batch at seq_len
    (prompt + generated), its KV heads split by TP."""
    model = ctx.model
    job = MemoryJob(model=model, method=ctx.spec.method, scheme=ctx.fw.memory, seq_len=ctx.spec.seq_len,
                    lora_rank=0, overhead_gb=ctx.fw.overhead_gb, trains=False, expert_tp=ctx.fw.expert_tp)
    # The server takes the whole batch at once: its micro batch is the predict batch.
    batch = shape.global_batch_size
    forward = estimate(job, replace(shape, micro_batch_size=batch, global_batch_size=batch))
    cache = (model.layers * 2 * kv_heads_per_card(model.kv_heads, shape.tp) * model.kv_channels * KV_BYTES
             * batch * ctx.spec.seq_len)
    logits = batch * model.vocab * 4.0 / shape.tp
    return replace(forward, logits=logits / GIB,
                   extra=(*forward.extra, ("KV cache (batch x seq_len)", cache / GIB)))


@frozen
class PredictSettings:
    """What predict.yaml and launch.sh hold beyond the layout, each with its source (contract.py Settings)."""

    batch: int
    seq_length: int
    max_device_memory: str
    weights: str
    inputs: str
    rows_: tuple[tuple[str, str, str], ...]

    def to_json(self) -> dict:
        return {"predict_batch_size": self.batch, "seq_length": self.seq_length,
                "max_device_memory": self.max_device_memory,
                "pretrained_model_dir": self.weights, "predict_data": self.inputs,
                "sources": {key: source for key, _, source in self.rows_}}

    def rows(self) -> list[tuple[str, str, str]]:
        return list(self.rows_)


def settings(plan: Plan, fp: FrameworkPlan) -> PredictSettings:
    lay = fp.layout
    batch, weights, inputs = lay.global_batch_size, plan.paths["model_dir"].value, plan.paths["dataset"].value
    memory_cap = f"{lay.usable_gb:g}GB"
    rows = (
        ("--predict_batch_size", str(batch), "plan: global_batch_size, the prompts generated together "
                                             "(MindFormers' Qwen3 guide, its multi-batch example)"),
        ("model.model_config.seq_length", str(plan.seq_len),
         "plan: seq_len, the prompt and its answer; predict.yaml's model_config overrides the HuggingFace "
         "config.json (models/build_config.py l. 125-136), which has no seq_length, so without it Qwen3Config's "
         "default 4096 runs (models/qwen3/configuration_qwen3.py l. 148); upstream's "
         "configs/telechat3/predict_telechat3_36b.yaml l. 20 writes it so"),
        ("context.max_device_memory", memory_cap, f"plan: the usable memory per card the layout is sized to "
                                                  f"({UPSTREAM} l. 33 writes 59GB; MindFormers' Qwen3 guide: at "
                                                  f"most 60GB on Atlas 800T A2 / A3)"),
        ("pretrained_model_dir", weights, "paths.model_dir: a HuggingFace folder (config.json, tokenizer, "
                                          "safetensors), loaded online with no conversion (MindFormers' Qwen3 "
                                          "guide, 推理 step 1)"),
        ("--predict_data", inputs, "paths.dataset: a text file of one prompt per line, global_batch_size lines "
                                   "(trainer/causal_language_modeling/causal_language_modeling.py l. 332-339 "
                                   "reads a file path's lines)"),
    )
    return PredictSettings(batch, plan.seq_len, memory_cap, weights, inputs, rows)
