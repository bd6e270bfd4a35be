"""MindFormers: the rules a train.yaml must pass, as MindFormers (and MindSpore under it) enforces them.

Each rule is a row: an id, where upstream enforces it (mindspore-ai/mindformers master 167a50d unless the row says
otherwise; "whl" = the mindformers 2.1.0 wheel), and a check over the loaded YAML plus the model's HuggingFace
shape, which MindFormers merges under the YAML's model_config when pretrained_model_dir is set
(models/build_config.py l. 125-136). The sources were read in the upstream code; reference mindformers.md s5 lists
most of them as V1-V33.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import yaml

from ...api.frozen import frozen
from ...checks import run_isolated
from ...resources import DATA_DIR
from ...tables import Model
from .predict import SPLIT_RULE, split_problem

# Strict sections (rule V18): any other key raises KeyError when the config is loaded.
MINDFORMERS_STRICT = {
    "parallel_config": {"data_parallel", "model_parallel", "context_parallel", "expert_parallel", "pipeline_stage",
                        "micro_batch_num", "seq_split_num", "use_seq_parallel", "optimizer_shard",
                        "gradient_aggregation_group", "vocab_emb_dp", "context_parallel_algo", "ulysses_degree_in_cp",
                        "mem_coeff"},
    "recompute_config": {"recompute", "select_recompute", "parallel_optimizer_comm_recompute", "select_comm_recompute",
                         "mp_comm_recompute", "recompute_slice_activation", "select_recompute_exclude",
                         "select_comm_recompute_exclude"},
    "runner_config": {"batch_size", "epochs", "sink_mode", "sink_size", "gradient_accumulation_steps", "num_classes",
                      "stop_step"},
}
# parallel.parallel_optimizer_config: the keys MindSpore's set_auto_parallel_context takes; any other raises
# ValueError "Unknown config" (MindSpore 2.10.0 parallel/_auto_parallel_context.py l. 1041-1048).
PARALLEL_OPTIMIZER_KEYS = {"gradient_accumulation_shard", "parallel_optimizer_threshold", "optimizer_weight_shard_size",
                           "optimizer_level"}
MAX_DEVICE_MEMORY = re.compile(r"^([1-9][0-9]*(\.)?[0-9]*GB|0\.[0-9]*GB)$")


@frozen
class View:
    """What the rules read: the YAML and the model it trains."""

    doc: dict
    cards: int
    model: Model

    @property
    def pc(self) -> dict:
        return self.doc.get("parallel_config") or {}

    @property
    def mc(self) -> dict:
        return (self.doc.get("model") or {}).get("model_config") or {}

    def size(self, key: str) -> int:
        return self.pc.get(key, 1)

    @property
    def parallel(self) -> bool:
        return bool(self.doc.get("use_parallel"))

    @property
    def layers(self) -> int:
        return self.mc.get("num_hidden_layers", self.mc.get("num_layers", self.model.layers))

    @property
    def mtp(self) -> int:
        return self.mc.get("num_nextn_predict_layers", self.model.mtp_layers)

    @property
    def interleave(self) -> int:
        return self.mc.get("pp_interleave_num", 1)

    @property
    def checkpoint(self) -> bool:
        return bool(self.doc.get("load_checkpoint") or self.doc.get("pretrained_model_dir"))


@frozen
class Rule:
    """One upstream rule the files are checked against: its id, source and message, and what breaks it."""

    id: str
    source: str
    message: str
    broken: Callable[[View], bool]


def _offset_broken(v: View) -> bool:
    pp, offset = v.size("pipeline_stage"), v.mc.get("offset", 0)
    chunks = pp * v.interleave
    if not isinstance(offset, list):
        return offset != 0 or (pp > 1 and v.layers % chunks != 0)
    flat = [x for row in offset for x in row] if offset and isinstance(offset[0], list) else offset
    per_stage = [v.layers // chunks + o for o in flat]
    return len(flat) != chunks or sum(flat) != v.layers % chunks or min(per_stage) < 0 or \
        any(n < 1 for n in per_stage[1:-1])


def _dataset_strategy_broken(v: View) -> bool:
    parallel = v.doc.get("parallel") or {}
    strategy = parallel.get("dataset_strategy")
    columns = (v.doc.get("train_dataset") or {}).get("input_columns") or []
    if parallel.get("full_batch") is not False or strategy is None:
        return False
    return len(strategy) != len(columns) or strategy[0][0] != v.size("data_parallel")


RULES: tuple[Rule, ...] = (
    Rule("V18", "tools/register/template.py l. 107-117", "unknown key in a strict section",
         lambda v: any(set(v.doc.get(s) or {}) - keys for s, keys in MINDFORMERS_STRICT.items())),
    Rule("V1", "tools/check_rules.py l. 186-190", "data_parallel x model_parallel x context_parallel x "
         "pipeline_stage must equal the world size",
         lambda v: v.parallel and v.size("data_parallel") * v.size("model_parallel") * v.size("context_parallel")
         * v.size("pipeline_stage") != v.cards),
    Rule("V5", "parallel_core/transformer_config.py l. 2203-2207", "num_attention_heads must divide by model_parallel",
         lambda v: v.model.heads % v.size("model_parallel") != 0),
    Rule("V6", "parallel_core/training_graph/transformer/attention.py l. 177", "num_key_value_heads must divide by "
         "model_parallel", lambda v: v.model.kv_heads % v.size("model_parallel") != 0),
    Rule("V7", "parallel_core/training_graph/transformer/attention.py l. 168-171", "hidden_size must divide by "
         "num_attention_heads", lambda v: v.model.hidden % v.model.heads != 0),
    Rule("V3", "MindSpore nn/wrap/cell_wrapper.py l. 883 (pipeline: micro_size >= stages)", "micro_batch_num must be "
         "at least pipeline_stage", lambda v: v.size("pipeline_stage") > 1 and
         v.size("micro_batch_num") < v.size("pipeline_stage")),
    Rule("V8", "parallel_core/model_parallel_config.py l. 144-145", "use_seq_parallel needs model_parallel > 1",
         lambda v: bool(v.parallel and v.pc.get("use_seq_parallel") and v.size("model_parallel") == 1)),
    Rule("V9", "tools/check_rules.py l. 207-210", "context_parallel > 1 needs model_config.use_flash_attention: True",
         lambda v: v.size("context_parallel") > 1 and v.mc.get("use_flash_attention") is not True),
    Rule("V12", "parallel_core/training_graph/transformer/utils.py l. 569-603", "offset must have one entry per "
         "pipeline stage, sum to num_layers % stages and leave every middle stage a layer", _offset_broken),
    Rule("V14", "tools/check_rules.py l. 293-297, 316-325", "a recompute list may have at most pipeline_stage "
         "entries", lambda v: any(isinstance(x, list) and len(x) > v.size("pipeline_stage")
                                  for x in ((v.doc.get("recompute_config") or {}).get(k)
                                            for k in ("recompute", "select_recompute")))),
    Rule("V17", "trainer/base_trainer.py l. 246-252", "parallel.dataset_strategy needs one [data_parallel, 1] per "
         "input column", _dataset_strategy_broken),
    Rule("V21", "MindSpore runtime/memory.py l. 31, 98-108", "max_device_memory must read '<number>GB'",
         lambda v: not MAX_DEVICE_MEMORY.match(str((v.doc.get("context") or {}).get("max_device_memory", "")))),
    Rule("V25", "parallel_core/transformer_config.py l. 652-653", "seq_length must be the same everywhere in the file",
         lambda v: len({int(s) for s in re.findall(r"seq_length': (\d+)", str(v.doc))}) > 1),
    Rule("V27", "trainer/trainer.py l. 1493-1502", "auto_trans_ckpt or resume_training needs load_checkpoint or "
         "pretrained_model_dir", lambda v: bool((v.doc.get("auto_trans_ckpt") or v.doc.get("resume_training"))
                                               and not v.checkpoint)),
    Rule("N1", "parallel_core/training_graph/transformer/moe/ffn.py l. 189-195", "expert_parallel must divide "
         "data_parallel x model_parallel (context_parallel does not count)",
         lambda v: v.model.is_moe and (v.size("data_parallel") * v.size("model_parallel"))
         % v.size("expert_parallel") != 0),
    Rule("N2", "parallel_core/training_graph/transformer/moe/moe_layer.py l. 60-63", "expert_parallel must divide "
         "the experts", lambda v: v.model.is_moe and v.model.experts % v.size("expert_parallel") != 0),
    Rule("N3", "parallel_core/transformer_config.py l. 2191-2201", "num_nextn_predict_layers (MTP) must be 0 or 1",
         lambda v: v.mtp > 1),
    Rule("N4", "models/modeling_utils.py l. 300-324; models/deepseek3/utils.py l. 67-89", "num_layers (plus MTP "
         "layers) must be at least pipeline_stage x pp_interleave_num",
         lambda v: v.size("pipeline_stage") * v.interleave > v.layers + v.mtp),
    Rule("N6", "utils/load_checkpoint_utils.py l. 387-392", "a complete safetensors checkpoint with use_parallel "
         "needs auto_trans_ckpt: True", lambda v: v.parallel and v.checkpoint and not v.doc.get("auto_trans_ckpt")),
    Rule("N7", "trainer/base_trainer.py l. 320-327", "gradient_accumulation_steps > 1 is reset to 1 without "
         "use_parallel (stand-alone): the global batch would silently shrink",
         lambda v: not v.parallel and (v.doc.get("runner_config") or {}).get("gradient_accumulation_steps", 1) > 1),
    Rule("N8", "trainer/base_trainer.py l. 544-545", "micro_batch_interleave_num > 1 is refused with use_legacy: False",
         lambda v: v.doc.get("use_legacy") is False and v.doc.get("micro_batch_interleave_num", 1) > 1),
    Rule("N10", "MindSpore 2.10.0 parallel/_auto_parallel_context.py l. 1041-1048", "parallel."
         f"parallel_optimizer_config takes only {', '.join(sorted(PARALLEL_OPTIMIZER_KEYS))}",
         lambda v: bool(set((v.doc.get("parallel") or {}).get("parallel_optimizer_config") or {})
                        - PARALLEL_OPTIMIZER_KEYS)),
    Rule("N9", "parallel_core/training_graph/transformer/moe/ffn.py l. 90-94", "stand-alone MoE needs "
         "moe_token_dispatcher_type: alltoall", lambda v: v.model.is_moe and not v.parallel
         and v.mc.get("moe_token_dispatcher_type") != "alltoall"),
)


def mindformers_problems(doc: dict, cards: int, model: Model) -> list[str]:
    """Every MindFormers rule `doc` breaks, naming the rule and where upstream enforces it."""
    view = View(doc, cards, model)
    return [f"{rule.message} ({rule.id}; mindformers {rule.source})" for rule in RULES if rule.broken(view)]


# ----------------------------------------------------------------------------------------------------------------
# train_dataset.data_loader: the keys each loader class takes (mindformers 2.1.0 wheel), and the data it reads

# datasets 4.0.0 load_dataset's parameters and its json builder's JsonConfig fields: HFDataLoader passes every key it
# does not take itself to datasets.load_dataset (hf_dataloader.py l. 298-307), which refuses any other.
_LOAD_DATASET = {"path", "name", "data_dir", "data_files", "split", "cache_dir", "features", "download_config",
                 "download_mode", "verification_mode", "keep_in_memory", "save_infos", "revision", "token",
                 "streaming", "num_proc", "storage_options", "encoding", "encoding_errors", "field", "use_threads",
                 "block_size", "chunksize", "newlines_in_values"}
# loader type -> (keys it requires, keys it takes, where): every other key is refused or silently ignored.
DATA_LOADERS: dict[str, tuple[set[str], set[str], str]] = {
    "HFDataLoader": ({"path", "data_files"}, _LOAD_DATASET | {
        "type", "load_func", "num_shards", "shard_id", "python_multiprocessing", "num_parallel_workers",
        "balance_spec", "packing", "handler", "adaptor_config", "create_attention_mask", "create_compressed_eod_mask",
        "compressed_eod_mask_length", "use_broadcast_data", "shuffle", "size", "dataset_state_dir", "save_step",
        "resume_step", "batch_size", "dataset_dir", "column_names"},
        ("dataset/dataloader/hf_dataloader.py l. 249-265, 403-422 (the rest to datasets.load_dataset, l. 298-307; "
         "a local JSON file is path \"json\" with data_files)")),
    "BlendedMegatronDatasetDataLoader": ({"datasets_type", "sizes", "config"}, {
        "type", "datasets_type", "sizes", "config", "tokenizer", "column_names", "shuffle", "num_shards", "shard_id",
        "phase"}, ("dataset/dataloader/blended_megatron_dataloader.py l. 285-295 (other keys reach the builder, "
                   "which ignores them, l. 101-115)")),
    "MindDataset": ({"dataset_dir"}, {
        "type", "dataset_dir", "dataset_files", "columns_list", "num_parallel_workers", "shuffle", "num_shards",
        "shard_id", "sampler", "padded_sample", "num_padded", "num_samples", "cache"},
        ("dataset/causal_language_model_dataset.py l. 403-431 (dataset_dir or dataset_files) and MindSpore's "
         "MindDataset.__init__ (dataset/engine/datasets_standard_format.py)")),
}
# BlendedMegatronDatasetDataLoader's `config`: the keys MegatronDatasetBuilder reads (blended_megatron_dataloader.py
# l. 192-218); it reads them with .get, so a misspelt key silently takes the default. data_path and seq_length
# have no usable default.
MEGATRON_CONFIG = ({"data_path", "seq_length"}, {
    "seed", "seq_length", "data_path", "train_data_path", "valid_data_path", "test_data_path", "split",
    "num_dataset_builder_threads", "path_to_cache", "mmap_bin_files", "reset_position_ids", "reset_attention_mask",
    "eod_mask_loss", "create_attention_mask", "create_compressed_eod_mask", "compressed_eod_mask_length",
    "eod_pad_length", "s3_cache_path", "drop_last_partial_validation_sequence", "add_extra_token_to_sequence", "eod",
    "pad"})


def _keys_problems(where: str, given: dict, required: set[str], allowed: set[str], source: str) -> list[str]:
    missing, unknown = sorted(required - set(given)), sorted(set(given) - allowed)
    out = [f"{where} lacks {', '.join(missing)}"] if missing else []
    out += [f"{where} has {', '.join(unknown)}, which it does not take"] if unknown else []
    return [f"{p} (mindformers {source})" for p in out]


def data_loader_problems(doc: dict, expected: str | None) -> list[str]:
    """train_dataset.data_loader against its class's keys, and the data it reads against `expected`: the path the
    job's data comes from (the spec's file for HFDataLoader, what preprocess_data.sh writes for the others)."""
    loader = (doc.get("train_dataset") or {}).get("data_loader")
    if not isinstance(loader, dict):
        return ["train_dataset.data_loader is missing or not a mapping"]
    if loader.get("type") not in DATA_LOADERS:
        return [f"train_dataset.data_loader.type {loader.get('type')!r} is not one of {', '.join(DATA_LOADERS)}"]
    kind = loader["type"]
    required, allowed, source = DATA_LOADERS[kind]
    if kind == "MindDataset" and "dataset_files" in loader:
        required = set()
    problems = _keys_problems(f"{kind}", loader, required, allowed, source)
    config = loader.get("config") if kind == "BlendedMegatronDatasetDataLoader" else None
    if isinstance(config, dict):
        problems += _keys_problems(f"{kind} config", config, *MEGATRON_CONFIG,
                                   "dataset/dataloader/blended_megatron_dataloader.py l. 192-218")
    blend = (config or {}).get("data_path")
    reads = {"HFDataLoader": loader.get("data_files"),  # Megatron's blend: weight, prefix (one data set)
             "BlendedMegatronDatasetDataLoader": blend[-1] if isinstance(blend, list) and blend else blend,
             "MindDataset": loader.get("dataset_dir", loader.get("dataset_files"))}[kind]
    if kind == "HFDataLoader" and loader.get("path") != "json":
        problems.append(f"HFDataLoader path {loader.get('path')!r}: the job's data is a local JSON file, read with "
                        f"path \"json\" and data_files")
    if expected is not None and reads != expected:
        problems.append(f"{kind} reads {reads!r}, but the job's data is {expected!r}")
    return problems


def preprocessed_path(script: str) -> str | None:
    """What mindformers/preprocess_data.sh writes for train.yaml to read: the Megatron dataset's prefix plus
    `_text_document` (--output-prefix), or the MindRecord file (--output_file); None when it writes neither."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    for flag, suffix in (("--output-prefix", "_text_document"), ("--output_file", "")):
        if flag in words[:-1]:
            return words[words.index(flag) + 1] + suffix
    return None


# ----------------------------------------------------------------------------------------------------------------
# MoE router: the keys of config.json that decide routing


# The routing keys of the MoE models' config.json (HuggingFace names, as MindFormers reads them).
ROUTER_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
               "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group", "scoring_func", "topk_method")


@lru_cache(maxsize=1)
def router_facts() -> dict[str, dict]:
    """model -> {"router": config.json's router settings, "source"} (moe_router.yaml)."""
    return yaml.safe_load((DATA_DIR / "moe_router.yaml").read_text(encoding="utf-8"))["models"]


def router_problems(doc: dict, model: Model) -> list[str]:
    """Router keys model_config writes must be the model's own (its config.json). A YAML that loads the HuggingFace
    weights lays its model_config over their config.json (models/build_config.py l. 125-136), so a different value
    there routes tokens otherwise than the experts were trained with."""
    if not model.is_moe:
        return []
    view = View(doc, 0, model)
    row = router_facts().get(model.name, {"router": {}, "source": "models.yaml"})
    # transformers' defaults where config.json is silent (Qwen3MoeConfig norm_topk_prob False; no scaling: 1.0)
    facts = {"num_experts": model.experts, "n_routed_experts": model.experts, "num_local_experts": model.experts,
             "num_experts_per_tok": model.topk, "moe_intermediate_size": model.moe_ffn, "norm_topk_prob": False,
             "routed_scaling_factor": 1.0, **row["router"]}
    wrong = {key: view.mc[key] for key in ROUTER_KEYS if key in view.mc and key in facts and view.mc[key] != facts[key]}
    if not wrong:
        return []
    why = ("overrides the loaded checkpoint's config.json (mindformers models/build_config.py l. 125-136): leave "
           "routing to config.json" if view.checkpoint else "trains another router than the model's")
    given = ", ".join(f"{k}: {v!r}" for k, v in wrong.items())
    own = ", ".join(f"{k}: {facts[k]!r}" for k in wrong)
    return [f"model_config {given} is not {model.name}'s {own} ({row['source']}); this {why}"]


# Opt-in: MindFormers' own loader and check_rules, in an interpreter that has mindformers (2.1.0, --no-deps) and a
# MindSpore CPU build (2.10.0): neither installs from PyPI with gen-launch (mindformers pins a MindSpore that PyPI
# does not have), so the user points validate at that interpreter. It runs isolated (-I) in a scratch folder: the
# import writes ./output/log, and nothing from the job folder may be imported.
LOADER_CHECK = """
import json, os, sys, types
path, world, mode = sys.argv[1], sys.argv[2], sys.argv[3]
os.environ["RANK_SIZE"] = world  # get_real_group_size() falls back to it without a cluster (tools/utils.py l. 449-453)
try:
    import mindspore as ms
    from mindformers.tools.register.config import MindFormerConfig
    from mindformers.tools.check_rules import check_rules
    from mindformers.core.parallel_config import build_parallel_config
    from mindformers.core.callback.build_callback import build_callback
    from mindformers.core.lr.build_lr import build_lr
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    if mode == "predict":
        from mindformers.parallel_core.inference import parallel_state
        from mindformers.parallel_core.inference.transformer.attention import Attention
except Exception as exc:
    print(json.dumps({"status": "env", "detail": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
try:
    if mode == "predict":
        # As run_mindformer.py loads a predict config (l. 246-247) and checks it before building the network
        # (check_rules predict mode, task text_generation); then Mcore inference's own checks: its world-size check
        # (parallel_state.py l. 240-265) with msrun's world standing in for the cluster's group, and its GQA split
        # on the model's heads at model_parallel (attention.py l. 206-224, a stand-in for the network it is in).
        config = MindFormerConfig(path, run_mode="predict")
        build_parallel_config(config)
        check_rules(config, mode="predict", task="text_generation")
        pc = config.parallel_config
        parallel_state.get_group_size = lambda *args, **kwargs: int(world)
        parallel_state._valid_parallel_config(
            tensor_model_parallel_size=pc.model_parallel, data_parallel_size=pc.data_parallel,
            pipeline_model_parallel_size=getattr(pc, "pipeline_stage", 1),
            context_parallel_size=getattr(pc, "context_parallel", 1))
        heads, kv_heads = int(sys.argv[4]), int(sys.argv[5])
        Attention._check_gqa_valid(types.SimpleNamespace(num_heads=heads, num_query_groups=kv_heads,
                                                         tp_group_size=pc.model_parallel))
        print(json.dumps({"status": "ok", "detail": ""}))
        sys.exit(0)
    config = MindFormerConfig(path)
    build_parallel_config(config)  # as BaseTrainer.set_config does first (trainer/base_trainer.py l. 180)
    if config.use_parallel:
        ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    if isinstance(config.get("metric"), dict):
        config.metric = [config.metric]  # the Trainer makes it a list before check_rules
    check_rules(config, mode="train")  # base_trainer.py l. 1232
    # The length and the schedule as MindFormers builds them: the TrainCallBack from the registry with its
    # stop_step, the lr_schedule class with the plan's keys (total_steps -1 is set from the data first, as
    # create_lr_scheduler does, base_trainer.py l. 700-708).
    for callback in config.callbacks:
        if not MindFormerRegister.is_exist(MindFormerModuleType.CALLBACK, callback["type"]):
            raise KeyError(f"callback {callback['type']} is not registered")
        if callback["type"] == "TrainCallBack":
            built = build_callback(callback)
            assert built.stop_step == callback["stop_step"], "TrainCallBack lost its stop_step"
    schedule = MindFormerConfig(**config.lr_schedule)
    if schedule.total_steps in (None, -1):
        schedule.total_steps = 1000
    lr = build_lr(schedule)
    for step in (1, schedule.total_steps):  # the schedule computes a rate (a bad lr_end fails here)
        float(lr(ms.Tensor(step, ms.int32)).asnumpy())
except Exception as exc:
    print(json.dumps({"status": "problem", "detail": f"{type(exc).__name__}: {str(exc).strip()[:400]}"}))
    sys.exit(0)
print(json.dumps({"status": "ok", "detail": ""}))
"""


def loader_check(python: str, yaml_path: Path, world: int, mode: str = "train",
                 model: Model | None = None) -> tuple[str, str]:
    """("ok" | "problem" | "env", detail) from MindFormerConfig + check_rules in the interpreter `python`; `mode`
    "predict": a predict config, with the inference GQA check on `model`'s heads."""
    heads = [str(model.heads), str(model.kv_heads)] if model is not None else []
    with tempfile.TemporaryDirectory() as scratch:
        return run_isolated(python, LOADER_CHECK, [str(yaml_path.resolve()), str(world), mode, *heads],
                            Path(scratch))


# ----------------------------------------------------------------------------------------------------------------
# predict.yaml (run_mode predict): upstream's keys and the inference rules (reference mindformers_predict.md s3)

# The key tree of upstream's configs/qwen3/predict_qwen3.yaml (master 167a50d; the v1.8.0 file seed 003 documents is
# byte-identical), every key with its parents, and model_config.seq_length (configs/telechat3/
# predict_telechat3_36b.yaml l. 20 writes it; without it Qwen3Config's default 4096 runs): predict.yaml holds these
# and no other.
PREDICT_KEYS = frozenset({"model.model_config.seq_length",
    "seed", "output_dir", "load_checkpoint", "use_parallel", "run_mode", "use_legacy", "load_ckpt_format", "trainer",
    "trainer.type", "trainer.model_name", "parallel_config", "parallel_config.data_parallel",
    "parallel_config.model_parallel", "pretrained_model_dir", "model", "model.model_config",
    "model.model_config.compute_dtype", "model.model_config.layernorm_compute_dtype",
    "model.model_config.softmax_compute_dtype", "model.model_config.rotary_dtype", "model.model_config.params_dtype",
    "context", "context.mode", "context.enable_graph_kernel", "context.ascend_config",
    "context.ascend_config.precision_mode", "context.max_device_memory", "context.save_graphs",
    "context.save_graphs_path", "parallel", "parallel.parallel_mode", "parallel.enable_alltoall"})
PREDICT_MAX_DEVICE_GB = 60  # seed 003 并行配置建议 note: at most 60GB on Atlas 800T A2 / Atlas 900 A3


def key_tree(doc: dict, prefix: str = "") -> set[str]:
    """Every key of a mapping with its parents' names, dotted."""
    out = set()
    for key, value in doc.items():
        out.add(f"{prefix}{key}")
        if isinstance(value, dict):
            out |= key_tree(value, f"{prefix}{key}.")
    return out


def _split_broken(v: View) -> bool:
    tp = v.size("model_parallel")
    return not isinstance(tp, int) or tp < 1 or split_problem(v.model.heads, v.model.kv_heads, tp) is not None


def _device_gb(v: View) -> float | None:
    found = MAX_DEVICE_MEMORY.match(str((v.doc.get("context") or {}).get("max_device_memory", "")))
    return float(found.group(0)[:-2]) if found else None


PREDICT_RULES: tuple[Rule, ...] = (
    Rule("P1", "configs/qwen3/predict_qwen3.yaml (the key tree); configs/telechat3/predict_telechat3_36b.yaml l. 20",
         "predict.yaml must hold upstream predict_qwen3.yaml's keys and model_config.seq_length, and no other",
         lambda v: key_tree(v.doc) != PREDICT_KEYS),
    Rule("P2", "run_mindformer.py l. 288 (run_mode choices); MindFormers' Qwen3 guide, 推理 parameter table",
         "run_mode must be 'predict'", lambda v: v.doc.get("run_mode") != "predict"),
    Rule("P3", "MindFormers' Qwen3 guide (configs/qwen3/README.md v1.8.0) 多卡推理 point 2",
         "predict supports no data parallelism: data_parallel must be 1", lambda v: v.size("data_parallel") != 1),
    Rule("P4", "parallel_core/inference/parallel_state.py l. 240-265; MindFormers' Qwen3 guide, 多卡推理 point 1",
         "data_parallel x model_parallel must equal the cards (model_parallel = the cards used)",
         lambda v: v.size("data_parallel") * v.size("model_parallel") != v.cards),
    Rule("P5", SPLIT_RULE, "model_parallel must divide the attention heads, and the KV heads or be a multiple of them "
         "where it exceeds them", _split_broken),
    Rule("P6", "MindFormers' Qwen3 guide, 推理 launch lines (--use_parallel False on one card, True on several)",
         "use_parallel must be True exactly when more than one card runs", lambda v: v.parallel != (v.cards > 1)),
    Rule("P7", "MindSpore runtime/memory.py l. 31, 98-108; MindFormers' Qwen3 guide, 并行配置建议 note",
         f"context.max_device_memory must read '<number>GB', at most {PREDICT_MAX_DEVICE_GB}GB",
         lambda v: (_device_gb(v) or PREDICT_MAX_DEVICE_GB + 1) > PREDICT_MAX_DEVICE_GB),
    Rule("P8", "configs/qwen3/predict_qwen3.yaml l. 3, 6, 18; models/build_config.py l. 125-136", "the weights "
         "load from pretrained_model_dir (a HuggingFace folder) with load_checkpoint '' and use_legacy False",
         lambda v: not v.doc.get("pretrained_model_dir") or v.doc.get("load_checkpoint") != ""
         or v.doc.get("use_legacy") is not False),
)


def predict_problems(doc: dict, cards: int, model: Model) -> list[str]:
    """Every predict rule `doc` breaks, naming the rule and where upstream (or the seed) states it."""
    view = View(doc, cards, model)
    return [f"{rule.message} ({rule.id}; mindformers {rule.source})" for rule in PREDICT_RULES if rule.broken(view)]
