"""mindspeed-mm: the resolver's side of the plugin (contract: generator/frameworks/contract.py Planning).

MindSpeed-MM places the vision encoder (and its projector) wholly on the first pipeline stage in every upstream
Qwen2.5-VL example (examples/qwen2.5vl/model_*.json, vision_encoder.pipeline_num_layers [32, 0, ...]), and splits
the text decoder's layers so that stage weighs about as much as the others (fewer text layers there). The plan does
the same: the layer split comes from the model's `vision_stage_layers` / `last_stage_layers` facts (frameworks.yaml),
and the memory of the first stage counts the vision encoder.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cache

from ...api import provenance
from ...api.frozen import frozen
from ...api.notes import Note
from ...calibration import measured
from ...context import Context
from ...errors import SpecError
from ...layouts import split_layers
from ...memory import GIB, MemoryBreakdown, MemoryJob, megatron_stages
from ...parallel import Parallel
from ...plan import FrameworkPlan, Layout, Plan
from ...resources import DATA_DIR
from ...spaces import GridSpace
from ...spec import Spec
from ...tables import Model
from ...throughput import Throughput, throughput, uses_step_model
from ...training import Training
from .. import contract
from ..base import DefaultPlanning
from ..contract import PathDefault, RoleKind, SearchSpace, Structure

# The vision layers of Qwen2.5-VL's encoder (model_*.json vision_encoder.num_layers).
VISION_LAYERS = 32
# The --seq-length of upstream's finetune_qwen2_5_vl_*.sh, which its published throughput ran with.
PUBLISHED_SEQ_LEN = 1024


@cache
def upstream_models() -> dict:
    """model name -> {source, model}: upstream's --mm-model JSON (generator/data/mindspeed_mm_models.json)."""
    return json.loads((DATA_DIR / "mindspeed_mm_models.json").read_text(encoding="utf-8"))["models"]


def text_layers(model: Model, info: dict, pp: int) -> tuple[int, ...]:
    """The text decoder's layers per pipeline stage: num_layers plus what the vision encoder (first stage) and the
    output layer (last stage) weigh, split evenly with the remainder on the last stages, less those weights."""
    if pp == 1:
        return (model.layers,)
    first, last = info["vision_stage_layers"], info.get("last_stage_layers", 0)
    stages = list(split_layers(model.layers + first + last, pp))
    stages[0] -= first
    stages[-1] -= last
    if min(stages) < 0:  # too many stages to give the first one fewer layers: the even split
        return split_layers(model.layers, pp)
    return tuple(stages)


def vision_layers(pp: int) -> tuple[int, ...]:
    """The vision encoder's layers per stage: all on the first (upstream's every Qwen2.5-VL example)."""
    return (VISION_LAYERS,) + (0,) * (pp - 1)


def vision_trains(method: str) -> bool:
    """full_vision trains the vision encoder and projector (freeze false); full keeps them frozen, as upstream's
    model_*.json ("freeze": true; README.md l. 408 says how to unfreeze)."""
    return method == "full_vision"


# Sequence parallel scatters the vision encoder's patches over the TP ranks with no padding
# (mindspeed_mm/models/vision/vision_encoders/qwen2vl_vit_model.py:556-557 at 4c75a551), and Megatron's split needs
# the length divisible by TP (core_v0.12.1 megatron/core/tensor_parallel/mappings.py:66-69). An image brings
# spatial_merge_size^2 = 4 patches per token (model_*.json), so only a TP that divides 4 splits every image.
SP_PATCH_MULTIPLE = 4
SP_SOURCE = ("qwen2vl_vit_model.py:556-557 scatters the image patches over TP unpadded; Megatron core_v0.12.1 "
             "mappings.py:66-69 needs them divisible by TP; an image brings a multiple of 4 patches")


def sp_breaks(tp: int) -> bool:
    """Sequence parallel at this TP would crash on an image whose patches TP does not divide."""
    return SP_PATCH_MULTIPLE % tp != 0


def has_frozen_stage(vision: list[int], text: list[int], vision_frozen: bool, projector_frozen: bool) -> bool:
    """Whether a pipeline stage (in order, virtual stage by virtual stage) holds only frozen parameters, so needs
    --enable-dummy-optimizer (README.md l. 404): no text layers, and no vision layers or only frozen ones; the
    projector trains on the stage that ends the vision encoder (VisionModel's post_process, vlm_model.py:183-184)."""
    last_vision = max((i for i, n in enumerate(vision) if n), default=-1)
    return any(t == 0 and (v == 0 or (vision_frozen and (projector_frozen or i != last_vision)))
               for i, (v, t) in enumerate(zip(vision, text)))


# The step model (generator/throughput.py) overestimates what upstream publishes for its own layouts. FACTOR: the
# published tokens/s per card over the step model at the model's published layout and batch (MBS 1, seq 1024, no
# recompute, sequence parallel off), on the hardware it ran on (tests/test_mindspeed_mm.py recomputes each from the
# rows in frameworks.yaml). A model's estimate is scaled by its own factor on either hardware: upstream publishes
# one A3 row (the 72B's), which says nothing of another model's error. The factors differ by up to SPREAD from each
# other: a calibration, not a measurement.
FACTOR = {"qwen2.5_vl-3b": 0.263, "qwen2.5_vl-7b": 0.446, "qwen2.5_vl-32b": 0.413, "qwen2.5_vl-72b": 0.385}
CALIBRATION = math.prod(FACTOR.values()) ** (1 / len(FACTOR))  # a model without a published row: their mean
SPREAD = max(FACTOR.values()) / min(FACTOR.values())


def measured_on(published: dict) -> str:
    """The hardware a published row ran on: the A3 row on snt9b23, the A2 (Atlas 900 A2 PODc) rows on snt9b."""
    return "snt9b23" if "A3" in published["source"] else "snt9b"


def measured_layout(ctx: Context, shape: Parallel, published: dict) -> bool:
    """Whether `shape` is the one upstream's published figure ran: its hardware, fine-tuning at --seq-length 1024,
    and its script's cards, TP, PP, CP 1, MBS 1, no recompute."""
    return (ctx.hw.name == measured_on(published) and ctx.spec.method == "full" and
            ctx.spec.seq_len == PUBLISHED_SEQ_LEN
            and (shape.cards, shape.tp, shape.pp, shape.cp, shape.micro_batch_size, shape.recompute) ==
            (published["cards"], published["tp"], published["pp"], 1, 1, "none"))


def _factor(ctx: Context) -> tuple[float, str]:
    """What the step model is scaled by for this model, and why in words (the rows on this hardware named)."""
    here = sorted(name for name, info in ctx.fw.models.items()
                  if info.get("published") and measured_on(info["published"]) == ctx.hw.name)
    rows = (f"upstream publishes {'one row' if len(here) == 1 else f'{len(here)} rows'} on {ctx.hw.name} "
            f"({', '.join(here)})")
    published = ctx.info.get("published")
    if published is None or ctx.model.name not in FACTOR:
        return CALIBRATION, (f"the geometric mean of MindSpeed-MM's published rows over the step model "
                             f"({len(FACTOR)} rows, {SPREAD:.2f}x apart); {rows}")
    return FACTOR[ctx.model.name], (f"{ctx.model.name}'s published figure over the step model at upstream's layout "
                                    f"(TP{published['tp']} PP{published['pp']}, {published['cards']} cards of "
                                    f"{measured_on(published)}); the rows' factors are {SPREAD:.2f}x apart; {rows}")


def swaps_attention(info: dict, recompute: str) -> bool:
    """--swap-attention where upstream's script for the model passes it and the layout recomputes nothing (it
    stands in for full recompute: MindSpeed 5176c6f5 docs/features/swap_attention.md l. 15-21)."""
    return bool(info.get("swap_attention")) and recompute == "none"


def swapped_attention_bytes(model: Model, seq_len: int, shape: Parallel) -> float:
    """What --swap-attention moves to host memory per layer and micro batch: in mcore only the self_attention
    module's saved activations (docs/features/swap_attention.md l. 28), counted with memory.layer_activation_bytes'
    terms: its input (2 bytes x hidden per token, split over TP only with sequence parallel) and q, k, v and the
    attention output (2 bytes each per token, split over TP). The device keeps one layer's worth (the prefetch)."""
    tokens = seq_len // shape.cp * shape.micro_batch_size
    hidden = 2.0 * tokens * model.hidden / (shape.tp if shape.sequence_parallel else 1)
    return hidden + 2.0 * tokens * (2 * model.q_dim + 2 * model.kv_dim) / shape.tp


class Space(GridSpace):
    """The model-parallel grid with upstream's layer split and sequence parallel off unless pinned (none of
    upstream's finetune_qwen2_5_vl_*.sh passes --sequence-parallel); recompute none or full (recompute_granularity
    full / uniform / 1 in model.json: the text decoder's, README.md l. 300-304, and a trained ViT's, l. 406-430).
    Selective recompute is refused: MindSpeed-MM's is Megatron's core-attention recompute, which neither the
    memory model counts nor upstream's Qwen2.5-VL examples use."""

    def structures(self, ctx: Context, cards: int) -> list[Structure]:
        # The core asks a pinned TP of a pinned sequence parallel
        if ctx.pins.sequence_parallel and ctx.pins.tp and sp_breaks(ctx.pins.tp):
            raise SpecError.at(ctx.pin_path("sequence_parallel"),
                               f"true with TP {ctx.pins.tp}: {SP_SOURCE}; pin a TP of 2 or 4, or leave it off")
        return [replace(s, num_layer_list=text_layers(ctx.model, ctx.info, s.pp), sequence_parallel=False)
                for s in super().structures(ctx, cards)]

    def recomputes(self, ctx: Context) -> list[str]:
        if ctx.pins.recompute == "selective":
            raise SpecError.at(ctx.pin_path("recompute"),
                               "selective: the mindspeed-mm plan writes recompute none or full (model.json "
                               "recompute_granularity full, README.md l. 300-304); upstream's Qwen2.5-VL examples "
                               "use no selective recompute")
        return [ctx.pins.recompute] if ctx.pins.recompute else ["none", "full"]


SPACE = Space()


Value = bool | int | float | str | list[int] | list[str]
Setting = provenance.Setting[Value]  # a value as model.json, data.json or launch.sh take it

ENV = "env "
SOURCED = "sourced "
DATA = "data.json "


@frozen
class MmSettings:
    """The values of a MindSpeed-MM job's files the plugin decides (contract.py Planning.settings)."""

    items: tuple[Setting, ...]

    def value(self, key: str) -> Value:
        return next(item.value for item in self.items if item.key == key)

    def split(self, key: str) -> list[int]:
        """A pipeline split (layers per stage)."""
        value = self.value(key)
        assert isinstance(value, list), key
        return [int(n) for n in value]

    def switch(self, key: str) -> bool:
        value = self.value(key)
        assert isinstance(value, bool), key
        return value

    def prefixed(self, prefix: str) -> list[tuple[str, Value]]:
        """(key less the prefix, value) of every item under `prefix`, in the plan's order."""
        return [(item.key[len(prefix):], item.value) for item in self.items if item.key.startswith(prefix)]

    def to_json(self) -> dict:
        return {item.key: {"value": item.value, "source": item.source} for item in self.items}

    def rows(self) -> list[tuple[str, str, str]]:
        return [(item.key, item.value if isinstance(item.value, str) else json.dumps(item.value), item.source)
                for item in self.items]


VISION_SPLIT = "image_encoder.vision_encoder.pipeline_num_layers"
TEXT_SPLIT = "text_decoder.pipeline_num_layers"
VISION_FREEZE = "image_encoder.vision_encoder.freeze"
PROJECTOR_FREEZE = "image_encoder.vision_projector.freeze"
DUMMY_OPTIMIZER = "--enable-dummy-optimizer"
NO_SAVE_OPTIM = "--no-save-optim"
NO_SAVE_RNG = "--no-save-rng"
NUM_WORKERS = "--num-workers"
SWAP_ATTENTION = "--swap-attention"
EVAL_ITERS = "--eval-iters"
MM_TOOL = "--mm-tool"
CACHE_DIRS = f"{DATA}basic_parameters.cache_dir"
UPSTREAM = "MindSpeed-MM v2.2.0 examples/qwen2.5vl"

# The environment of upstream's finetune_qwen2_5_vl_<size>.sh (4c75a551): the same in every script but
# CPU_AFFINITY_CONF (2 in the 72B's, binding cores per die on A3) and PYTORCH_NPU_ALLOC_CONF (32B and 72B only).
_ENV_COMMON = (("CUDA_DEVICE_MAX_CONNECTIONS", "1", "Megatron's check (no effect on NPU)"),
               ("ASCEND_SLOG_PRINT_TO_STDOUT", "0", "logs"), ("ASCEND_GLOBAL_LOG_LEVEL", "3", "logs: errors only"),
               ("TASK_QUEUE_ENABLE", "2", "performance: task queue level 2"),
               ("COMBINED_ENABLE", "1", "performance: combined non-contiguous copies"),
               ("CPU_AFFINITY_CONF", None, "performance: core binding"),
               ("HCCL_CONNECT_TIMEOUT", "1200", "link setup timeout, s"),
               ("NPU_ASD_ENABLE", "0", "performance: silent-data-corruption detection off"),
               ("ASCEND_LAUNCH_BLOCKING", "0", "asynchronous launches"),
               ("ACLNN_CACHE_LIMIT", "100000", "performance: operator cache size"),
               ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", "memory: expandable segments"))
# script -> (first export line, CPU_AFFINITY_CONF, exports PYTORCH_NPU_ALLOC_CONF)
_ENV_SCRIPTS = {"finetune_qwen2_5_vl_3b.sh": (4, "1", False), "finetune_qwen2_5_vl_7b.sh": (5, "1", False),
                "finetune_qwen2_5_vl_32b.sh": (3, "1", True), "finetune_qwen2_5_vl_72b.sh": (3, "2", True)}

# What upstream's finetune_qwen2_5_vl_<size>.sh sources before anything else (l. 2 of each; the 7B's also ATB, l. 3),
# and a variable each of those scripts exports: launch.sh refuses to start without it and names the script (under
# srun or a fresh shell `import torch_npu` fails on every rank without CANN's libraries).
# (variable, script, what it is, {upstream script: line})
_SOURCED = (("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/set_env.sh", "CANN's toolkit",
             dict.fromkeys(_ENV_SCRIPTS, 2)),
            ("ATB_HOME_PATH", "/usr/local/Ascend/nnal/atb/set_env.sh", "CANN's NNAL ATB kernels",
             {"finetune_qwen2_5_vl_7b.sh": 3}))


def _sourced(example: str) -> list[Setting]:
    script = example.rsplit("/", 1)[-1]
    return [Setting(f"{SOURCED}{name}", path, f"{UPSTREAM}/{script} l. {lines[script]} sources it ({why}); launch.sh "
                                              f"checks {name} and names the file")
            for name, path, why, lines in _SOURCED if script in lines]


# data_<size>.json's processing values (the same in every size's file, l. 6-25 of data_7b.json).
_DATA_VALUES = (("preprocess_parameters.use_fast_tokenizer", True, 6),
                ("preprocess_parameters.split_special_tokens", False, 7),
                ("preprocess_parameters.image_max_pixels", 262144, 8),
                ("preprocess_parameters.image_min_pixels", 0, 9),
                ("preprocess_parameters.video_max_pixels", 16384, 10),
                ("preprocess_parameters.video_min_pixels", 0, 11), ("preprocess_parameters.video_fps", 2.0, 12),
                ("preprocess_parameters.video_maxlen", 64, 13), ("basic_parameters.template", "qwen2vl", 16),
                ("basic_parameters.train_on_prompt", False, 20), ("basic_parameters.mask_history", False, 21),
                ("basic_parameters.preprocessing_batch_size", 1000, 22),
                ("basic_parameters.preprocessing_num_workers", 16, 23))


def _env(example: str) -> list[Setting]:
    script = example.rsplit("/", 1)[-1]
    first, affinity, alloc = _ENV_SCRIPTS[script]
    out = []
    for line, (name, value, why) in enumerate(_ENV_COMMON, start=first):
        if name == "PYTORCH_NPU_ALLOC_CONF" and not alloc:
            continue
        out.append(Setting(f"{ENV}{name}", affinity if value is None else value,
                           f"{UPSTREAM}/{script} l. {line}: {why}"))
    return out


def cache_dirs(output_dir: str, nodes: int) -> list[str]:
    """data.json's cache_dir per node: upstream's README.md l. 327 says nodes must not share one, so every node
    rank has its own folder (and its own data JSON naming it)."""
    return [f"{output_dir}/cache/node{rank}" for rank in range(nodes)]


def data_files(nodes: int) -> list[str]:
    """The data JSON of each node rank: one per node, as each names its own cache_dir."""
    return ["data.json"] if nodes == 1 else [f"data_node{rank}.json" for rank in range(nodes)]


def settings(method: str, layout: Layout, info: dict, output_dir: str, resume: bool) -> MmSettings:
    text = list(layout.layers_per_stage)
    vision = list(vision_layers(layout.pp))
    frozen = not vision_trains(method)
    tower = ("fine-tuning keeps the vision tower frozen, as upstream's model_*.json (freeze true)" if frozen
             else "full_vision trains every module (freeze false; README.md l. 408 says how)")
    idle = has_frozen_stage(vision, text, frozen, frozen)
    saves = ("upstream's finetune_qwen2_5_vl_*.sh save neither (7b.sh l. 80-81); train.resume is false, so this "
             "job does not either" if not resume else
             "kept (upstream's 7b.sh l. 80-81 drops them): train.resume relaunches from the last checkpoint, which "
             "needs the optimizer states and the LR schedule (Megatron loads neither under --no-load-optim)")
    files = data_files(layout.nodes)
    return MmSettings((
        Setting(VISION_SPLIT, vision, "upstream's every model_*.json: the whole vision encoder on the first stage"),
        Setting(TEXT_SPLIT, text, f"plan: the layout's layers, the first stage weighing the vision encoder as "
                                  f"{info['vision_stage_layers']} text layers (frameworks.yaml vision_stage_layers)"),
        Setting(VISION_FREEZE, frozen, tower), Setting(PROJECTOR_FREEZE, frozen, tower),
        Setting(DUMMY_OPTIMIZER, idle, "README.md l. 404: needed where a stage holds only frozen parameters"),
        Setting(NO_SAVE_OPTIM, not resume, saves), Setting(NO_SAVE_RNG, not resume, saves),
        Setting(SWAP_ATTENTION, swaps_attention(info, layout.recompute),
                f"MindSpeed-MM v2.2.0 {info['swap_attention']}, where the layout recomputes nothing"
                if info.get("swap_attention") else "upstream's script for the model does not pass it"),
        Setting(NUM_WORKERS, 8, f"{UPSTREAM}/finetune_qwen2_5_vl_7b.sh l. 82 (every size's script)"),
        Setting(EVAL_ITERS, 0, "gen-launch: data.json names no validation data, so no evaluation (upstream's "
                               "7b.sh l. 94-95 evaluates only at --eval-interval 10000 = --train-iters)"),
        Setting(MM_TOOL, "./mindspeed_mm/tools/tools.json",
                f"{UPSTREAM}/finetune_qwen2_5_vl_7b.sh l. 26 (relative to paths.mindspeed_mm_dir)"),
        *_env(info["example"]),
        *_sourced(info["example"]),
        *(Setting(f"{DATA}{key}", value, f"{UPSTREAM}/data_7b.json l. {line} (every size's data JSON)")
          for key, value, line in _DATA_VALUES),
        Setting(CACHE_DIRS, cache_dirs(output_dir, layout.nodes),
                f"one per node rank ({', '.join(files)}): README.md l. 327, nodes must not share a cache_dir")))


@frozen
class _Vision:
    """What the vision encoder adds on the first stage, bytes per card."""

    weights: float
    gradients: float
    optimizer: float
    activations: float


def _vision(model: Model, method: str, seq_len: int, shape: Parallel) -> _Vision:
    """The vision encoder and projector, split over TP like the decoder (Megatron layers): bf16 weights; when they
    train, fp32 main grads, the distributed optimizer's 12 bytes over DP x CP, and the activations their backward
    keeps. Those are counted as for a decoder layer (memory.layer_activation_bytes' terms, no sequence parallel)
    at the most patches a sample can bring: seq_len image tokens, each merged from spatial_merge_size^2 patches
    (model_*.json), for every micro batch stage 0 holds in flight. A frozen tower keeps none (no backward)."""
    params = model.vision_params / shape.tp
    if not vision_trains(method):
        return _Vision(2.0 * params, 0.0, 0.0, 0.0)
    vit = upstream_models()[model.name]["model"]["image_encoder"]["vision_encoder"]
    hidden, ffn = vit["hidden_size"], vit["ffn_hidden_size"]
    patches = seq_len // shape.cp * vit["spatial_merge_size"] ** 2 * shape.micro_batch_size
    if shape.recompute == "full":
        per_layer = 2.0 * patches * hidden
    else:
        per_layer = 8.0 * patches * hidden + 2.0 * patches * (4 * hidden + 3 * ffn) / shape.tp
    in_flight = max(1, min(shape.pp, shape.grad_accum))
    return _Vision(2.0 * params, 4.0 * params, 12.0 * params / (shape.dp * shape.cp),
                   per_layer * vit["num_layers"] * in_flight)


# MindSpeed-MM checks every path among its flags and JSON values against the folder it runs in (launch.sh cds into
# paths.mindspeed_mm_dir) and warns, but uses none of the checks' results (v2.2.0 mindspeed_mm/configs/config.py
# l. 134-202, 234-239).
DISALLOWED_NOTE = Note("mindspeed_mm.disallowed_directory_warning",
                       "MindSpeed-MM prints \"WARNING: [<flag>] <path> attempts to traverse to an disallowed "
                       "directory\" for each path outside paths.mindspeed_mm_dir (this job folder, the data, weights "
                       "and output): expected and harmless, the check only warns (v2.2.0 "
                       "mindspeed_mm/configs/config.py l. 134-202, 234-239)")


def _measured_notes(ctx: Context, layout: Layout) -> list[Note]:
    """How the layout stands to upstream's published run of the model: kept over the memory budget because upstream
    ran it, or on fewer cards than upstream ever ran the model (the memory model's word alone)."""
    published = ctx.info.get("published")
    if published is None:
        return []
    ran = f"{published['cards']} cards of {measured_on(published)} (TP{published['tp']} PP{published['pp']})"
    if layout.measured and layout.memory.total > layout.budget_gb:
        return [Note("mindspeed_mm.published_over_budget",
                     f"upstream's published layout, kept although the memory model estimates "
                     f"{layout.memory.total:.1f} GiB per card, above the {layout.budget_gb:.1f} GiB budget: upstream "
                     f"ran it ({ran}), so the estimate errs, not the layout")]
    if layout.cards < published["cards"]:
        return [Note("mindspeed_mm.fewer_than_published",
                     f"{layout.cards} cards rests on the memory model alone: upstream's one published run of "
                     f"{ctx.model.name} is on {ran}, and it publishes none on fewer")]
    return []


# What a VL user calls pretraining is not what full_vision does, and not what the plan writes.
ALIGNMENT_NOTE = Note("mindspeed_mm.no_alignment_pretraining",
                      "full_vision is full fine-tuning with every module trained, on the fine-tuning recipe of "
                      "upstream's finetune_qwen2_5_vl_*.sh: MindSpeed-MM v2.2.0 has no Qwen2.5-VL pretraining recipe. "
                      "A VL model's pretraining (projector alignment: image-caption data, the text decoder and vision "
                      "encoder frozen, the projector alone trained at a higher learning rate) would need a frozen text"
                      " decoder, which pretrain_vlm.py does not pass (l. 100-110 read only the vision encoder's and "
                      "projector's freeze; VLMModel.freeze takes freeze_text_decoder, vlm_model.py l. 385-407), "
                      "caption data and its own recipe: gen-launch does not write it")


class Planning(DefaultPlanning):
    path_keys = ("mindspeed_mm_dir", "mm_ckpt_dir")
    fixed_steps = "MindSpeed-MM --train-iters"
    unshared_storage_note = Note("mindspeed_mm.unshared_storage",
                                 "output_dir is not shared (cluster.shared_storage: false): every node needs the "
                                 "images, the data JSON and the converted weights at the same paths, and its own "
                                 "cache_dir (data JSON basic_parameters.cache_dir must not be shared between nodes, "
                                 "README.md)")

    def space(self, role: RoleKind) -> SearchSpace:
        return SPACE

    def memory(self, ctx: Context, shape: Parallel) -> MemoryBreakdown | None:
        """The core's Megatron stages for the text decoder, plus the vision encoder on the first stage."""
        job = MemoryJob(model=ctx.model, method=ctx.spec.method, scheme=ctx.fw.memory, seq_len=ctx.spec.seq_len,
                        lora_rank=0, overhead_gb=ctx.fw.overhead_gb)
        stages = megatron_stages(job, shape)
        if swaps_attention(ctx.info, shape.recompute):
            swapped = swapped_attention_bytes(ctx.model, ctx.spec.seq_len, shape)
            for i, stage in enumerate(stages):
                held = (shape.num_layer_list or (0,) * shape.pp)[i] * max(1, min(shape.pp - i, shape.grad_accum))
                stages[i] = replace(stage, activations=stage.activations - swapped * max(0, held - 1) / GIB)
        vision = _vision(ctx.model, ctx.spec.method, ctx.spec.seq_len, shape)
        first = stages[0]
        stages[0] = replace(first, weights=first.weights + vision.weights / GIB,
                            gradients=first.gradients + vision.gradients / GIB,
                            optimizer=first.optimizer + vision.optimizer / GIB,
                            activations=first.activations + vision.activations / GIB)
        return max(stages, key=lambda m: m.total)

    def measured(self, ctx: Context, shape: Parallel) -> str:
        """Upstream's published layout for the model (README.md's performance table): it ran, so it fits."""
        published = ctx.info.get("published")
        return published["source"] if published is not None and measured_layout(ctx, shape, published) else ""

    def rate(self, ctx: Context, shape: Parallel | None) -> Throughput | None:
        """The core's step model scaled to upstream's published figures, so layouts rank by the step model and a
        cell is not several times optimistic: by the model's own published row (FACTOR), its layout getting exactly
        the published figure, labelled so. An estimate's spread is the factors' (SPREAD): the search lets it
        displace the measured layout only when it is faster by more than that."""
        if measured(ctx, shape) is not None or not uses_step_model(ctx.fw, ctx.hw):  # the core takes a measured rate
            return None
        published = ctx.info.get("published")
        if published is not None and shape is not None and measured_layout(ctx, shape, published):
            return Throughput(float(published["tokens_per_card_s"]),
                              f"published, upstream's own layout: {published['source']}", is_estimate=False)
        step = throughput(ctx.model, ctx.spec.method, ctx.spec.seq_len, ctx.fw, ctx.hw, None, shape,
                          ctx.spec.scaling_given)
        factor, why = _factor(ctx)
        return replace(step, tokens_per_card_s=step.tokens_per_card_s * factor,
                       mfu=None if step.mfu is None else step.mfu * factor,
                       source=f"{step.source}; x {factor:.3f}: {why}", spread=SPREAD)

    def layout_notes(self, ctx: Context, layout: Layout) -> list[Note]:
        tower = ("trains (full_vision: every module trains)" if vision_trains(ctx.spec.method)
                 else "is frozen (upstream's model_*.json: freeze true)")
        vision = _vision(ctx.model, ctx.spec.method, ctx.spec.seq_len, layout)
        held = (vision.weights + vision.gradients + vision.optimizer + vision.activations) / GIB
        what = ("weights, gradients, optimizer states and activations (every token an image token)"
                if vision_trains(ctx.spec.method) else "bf16 weights (frozen: no backward, nothing else kept)")
        notes = [Note("mindspeed_mm.vision_on_first_stage",
                      f"the vision encoder ({VISION_LAYERS} layers) and projector sit on pipeline stage 0 with "
                      f"{layout.layers_per_stage[0]} text layers; {held:.1f} GiB per card of their {what} counted "
                      f"there; the vision tower {tower}")]
        notes.append(DISALLOWED_NOTE)
        if vision_trains(ctx.spec.method):
            notes.append(ALIGNMENT_NOTE)
        notes.extend(_measured_notes(ctx, layout))
        if swaps_attention(ctx.info, layout.recompute):
            swapped = swapped_attention_bytes(ctx.model, ctx.spec.seq_len, layout) / GIB
            notes.append(Note("mindspeed_mm.swap_attention",
                              f"--swap-attention ({ctx.info['swap_attention']}) keeps each layer's self-attention "
                              f"activations in host memory, {swapped * 1024:.0f} MiB per layer and micro batch, all "
                              f"but one layer's counted off the device (an estimate: MindSpeed publishes no figure)"))
        return notes

    def settings(self, ctx: Context, plan: Plan, fp: FrameworkPlan) -> MmSettings:
        return settings(plan.method, fp.layout, fp.info, plan.output_dir("mindspeed-mm"), plan.train.resume)

    def checkpoint_note(self, spec: Spec, model: Model, recipe: Training) -> Note | None:
        """Megatron core_v0.12.1 keeps every checkpoint it saves (no keep-N option: arguments.py
        _add_checkpointing_args), so the plan states what they weigh: bf16 weights, and with train.resume the
        distributed optimizer's fp32 master weights and two Adam moments of every trained parameter (12 bytes)."""
        trained = model.params - (0 if vision_trains(spec.method) else model.vision_params)
        one = (2 * model.params + (12 * trained if recipe.resume else 0)) / GIB
        what = ("bf16 weights with the optimizer states train.resume needs" if recipe.resume
                else "bf16 weights only (--no-save-optim --no-save-rng, as upstream's scripts)")
        count = (f"{math.ceil(recipe.steps / recipe.save_every_steps)} checkpoints, "
                 f"{math.ceil(recipe.steps / recipe.save_every_steps) * one / 1024:,.1f} TiB in all"
                 if recipe.steps else f"one every {recipe.save_every_steps} steps")
        return Note("mindspeed_mm.keeps_every_checkpoint",
                    f"mindspeed-mm keeps every checkpoint (Megatron has no keep-N option): about {one:,.0f} GiB each "
                    f"({what}), {count}; train.keep_checkpoints ({recipe.keep_checkpoints}) limits the other "
                    f"frameworks only. Delete old iter_* folders as the run goes, or raise train.save_every_steps")

    def path_defaults(self, output_dir: str, model: Model, layout: Layout) -> dict[str, PathDefault]:
        # The converted weights are split for training's TP and pipeline layer lists, so the folder names them.
        return {"mindspeed_mm_dir": PathDefault("/path/to/MindSpeed-MM"),
                "mm_ckpt_dir": PathDefault(f"{output_dir.rstrip('/')}/mm_tp{layout.tp}_pp{layout.pp}",
                                           derived_from="output_dir")}


PLANNING: contract.Planning = Planning()  # typed here: contract.Plugin loads it by name
