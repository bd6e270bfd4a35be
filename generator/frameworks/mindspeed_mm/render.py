"""MindSpeed-MM v2.2.0 (Qwen2.5-VL): launch.sh NODE_RANK [MASTER_ADDR] in upstream's flag-group style (as bash
arrays), model.json and data.json (--mm-model / --mm-data), convert_ckpt.sh hf_to_mm|mm_to_hf, DATA.md,
commands.txt; as upstream's examples/qwen2.5vl/ (4c75a551) writes them.

Every flag is a (flag, value) pair built here from the plan and written by generator/families/megatron/flags.py in
the type pretrain_vlm.py's pinned parser declares; every JSON value goes through json.dumps.
"""

from __future__ import annotations

import copy
import json

import jinja2

from ...families.megatron.extra import GROUP, extra_flags, refuse_broken, words
from ...families.megatron.flags import Flags, typed
from ...plan import FrameworkPlan, Plan
from ...render.common import commands_txt, launch_context, section_context
from .checks import training_problems
from .planning import (
    CACHE_DIRS,
    DATA,
    DUMMY_OPTIMIZER,
    ENV,
    EVAL_ITERS,
    MM_TOOL,
    NO_SAVE_OPTIM,
    NO_SAVE_RNG,
    NUM_WORKERS,
    PROJECTOR_FREEZE,
    SOURCED,
    SWAP_ATTENTION,
    TEXT_SPLIT,
    VISION_FREEZE,
    VISION_SPLIT,
    MmSettings,
    data_files,
    upstream_models,
)

NAME = "mindspeed-mm"
VERSION = "MindSpeed-MM v2.2.0 (4c75a551) / MindSpeed 5176c6f5 / Megatron core_v0.12.1"


def checkpoint_dirs(plan: Plan) -> tuple[str, str]:
    """(the converted weights training loads, where it saves)."""
    return plan.paths["mm_ckpt_dir"].value, f"{plan.output_dir(NAME)}/ckpt"


def mm_settings(fp: FrameworkPlan) -> MmSettings:
    """The plugin's values on the plan (planning.py settings)."""
    if not isinstance(fp.settings, MmSettings):
        raise TypeError(f"{NAME}'s plan carries no MindSpeed-MM settings")
    return fp.settings


def model_json(plan: Plan, fp: FrameworkPlan) -> dict:
    """Upstream's model JSON with the plan's pipeline split, freeze flags, sequence length and recompute."""
    model = copy.deepcopy(upstream_models()[plan.model]["model"])
    lay, own = fp.layout, mm_settings(fp)
    frozen = own.switch(VISION_FREEZE)
    encoder = model["image_encoder"]
    encoder["vision_encoder"]["pipeline_num_layers"] = own.split(VISION_SPLIT)
    encoder["vision_encoder"]["freeze"] = frozen
    encoder["vision_projector"]["freeze"] = own.switch(PROJECTOR_FREEZE)
    text = model["text_decoder"]
    text["pipeline_num_layers"] = own.split(TEXT_SPLIT)
    text["seq_length"] = plan.seq_len
    text["max_position_embeddings"] = max(text["max_position_embeddings"], plan.seq_len)
    # Full recompute: the text decoder's as upstream's long-sequence 72B recipe sets it (README.md l. 300-304), and
    # a trained vision encoder's (README.md l. 406-430)
    if lay.recompute == "full":
        full = {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
        text.update(full)
        if not frozen:
            encoder["vision_encoder"].update(full)
    return model


def data_json(plan: Plan, fp: FrameworkPlan, rank: int) -> dict:
    """Upstream's data_*.json (examples/qwen2.5vl/data_7b.json) with the job's paths (the HF folder for the
    processor, the data file) and node `rank`'s own cache_dir; its processing values are the plan's."""
    own = mm_settings(fp)
    dataset = plan.paths["dataset"].value
    media = plan.paths["media_dir"].value if "media_dir" in plan.paths else dataset.rsplit("/", 1)[0]
    values: dict[str, dict] = {"preprocess_parameters": {}, "basic_parameters": {}}
    for key, value in own.prefixed(DATA):
        group, name = key.split(".")
        values[group][name] = value
    basic = values["basic_parameters"]
    caches = basic.pop("cache_dir")
    return {
        "dataset_param": {
            "dataset_type": "huggingface",
            "preprocess_parameters": {"model_name_or_path": plan.paths["model_dir"].value,
                                      **values["preprocess_parameters"]},
            # upstream's key order (data_7b.json l. 15-26)
            "basic_parameters": {"template": basic.pop("template"), "dataset_dir": media, "dataset": dataset,
                                 "cache_dir": caches[rank], **basic, "max_samples": None, "tool_format": None},
            "attr": {"system": None, "images": "images", "videos": None, "messages": "messages", "role_tag": "role",
                     "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                     "observation_tag": None, "function_tag": None, "system_tag": None}},
        "dataloader_param": {
            "dataloader_mode": "sampler", "drop_last": True, "sampler_type": "BaseRandomBatchSampler",
            "collate_param": {"model_name": "qwen2vl", "ignore_pad_token_for_loss": True},
            "pin_memory": True, "shuffle": True}}


def gpt_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    """GPT_ARGS as upstream's finetune_qwen2_5_vl_*.sh writes them; the model's shape lives in model.json."""
    lay, t, m, own = fp.layout, plan.train, plan.shape, mm_settings(fp)
    return [("--use-mcore-models", True), ("--tensor-model-parallel-size", lay.tp),
            ("--pipeline-model-parallel-size", lay.pp), ("--context-parallel-size", lay.cp),
            ("--context-parallel-algo", "ulysses_cp_algo"),
            # Off unless pinned, as upstream's finetune_qwen2_5_vl_*.sh (planning.py Space: a pin needs TP | 4)
            ("--sequence-parallel", lay.sequence_parallel),
            ("--micro-batch-size", lay.micro_batch_size), ("--global-batch-size", lay.global_batch_size),
            ("--tokenizer-type", "NullTokenizer"), ("--vocab-size", m.vocab), ("--seq-length", plan.seq_len),
            ("--make-vocab-size-divisible-by", 1), ("--normalization", "RMSNorm"), ("--use-fused-rmsnorm", True),
            ("--swiglu", True), ("--use-fused-swiglu", True), ("--no-masked-softmax-fusion", True),
            ("--lr", t.learning_rate), ("--min-lr", t.min_learning_rate), ("--lr-decay-style", t.lr_schedule),
            ("--weight-decay", t.weight_decay), ("--train-iters", plan.train.steps_written),
            # Megatron takes one of the two (arguments.py l. 633-635)
            ("--lr-warmup-iters", t.warmup_steps),
            ("--lr-warmup-fraction", t.warmup_ratio if t.warmup_steps is None else None),
            ("--clip-grad", t.max_grad_norm), ("--adam-beta1", t.adam_betas[0]), ("--adam-beta2", t.adam_betas[1]),
            ("--seed", t.seed), ("--bf16", True), ("--use-flash-attn", True), ("--variable-seq-lengths", True),
            ("--use-distributed-optimizer", True), ("--no-gradient-accumulation-fusion", True),
            ("--enable-dummy-optimizer", own.switch(DUMMY_OPTIMIZER)), ("--num-workers", own.value(NUM_WORKERS)),
            ("--swap-attention", own.switch(SWAP_ATTENTION))]


def groups(plan: Plan, fp: FrameworkPlan) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    own = mm_settings(fp)
    out: list[tuple[str, Flags]] = [
        ("GPT_ARGS", gpt_flags(plan, fp)),
        ("OUTPUT_ARGS", [("--log-interval", 1), ("--save-interval", plan.train.save_every_steps),
                         ("--eval-interval", plan.train.save_every_steps), ("--eval-iters", own.value(EVAL_ITERS)),
                         ("--save", checkpoint_dirs(plan)[1]), ("--no-save-optim", own.switch(NO_SAVE_OPTIM)),
                         ("--no-save-rng", own.switch(NO_SAVE_RNG)), ("--ckpt-format", "torch"),
                         ("--distributed-backend", "nccl")])]
    # The spec's extra flags last, refused where the plan decides the flag: the groups, MM_ARGS (the files the
    # template names) and the loading arrays.
    decided = [flag for _, flags in out for flag, _ in flags] + ["--mm-data", "--mm-model", "--mm-tool"] + \
        [flag for flags in (_start(plan), _resume(plan)) for flag, _ in flags]
    extra = extra_flags(plan, NAME, "mm-train", "MindSpeed-MM v2.2.0 pretrain_vlm.py", decided)
    if extra:
        out.append((GROUP, extra))
    return [(name, typed("mm-train", flags)) for name, flags in out]


def _start(plan: Plan) -> Flags:
    return [("--load", checkpoint_dirs(plan)[0]), ("--no-load-optim", True), ("--no-load-rng", True)]


def _resume(plan: Plan) -> Flags:
    return [("--load", checkpoint_dirs(plan)[1])]


def start_flags(plan: Plan) -> list[tuple[str, list[str]]]:
    """The first launch loads the converted weights without optimizer or RNG state (upstream's scripts)."""
    return typed("mm-train", _start(plan))


def resume_flags(plan: Plan) -> list[tuple[str, list[str]]]:
    """A relaunch that finds this job's checkpoint loads model, optimizer, RNG and iteration from it."""
    return typed("mm-train", _resume(plan))


def convert_args(plan: Plan, fp: FrameworkPlan) -> dict[str, list[tuple[str, str]]]:
    """mm-convert Qwen2_5_VLConverter hf_to_mm / mm_to_hf (README.md "权重转换", l. 113-195) with the same TP and
    pipeline lists as model.json (README.md l. 157-159 says they must match). hf_to_mm reads nested lists, one per
    virtual stage (VppParallelConfig, checkpoint/vlm_model/config.py l. 57-115: `[[12,16]]`); mm_to_hf flat ones
    (ParallelConfig, l. 16-55: `[12,16]`). Values are jsonargparse words, written by json.dumps."""
    lay, own = fp.layout, mm_settings(fp)
    load, save = checkpoint_dirs(plan)
    hf = plan.paths["model_dir"].value
    llm, vit = own.split(TEXT_SPLIT), own.split(VISION_SPLIT)

    def split(nest: bool) -> list[tuple[str, str]]:
        return [("--cfg.parallel_config.llm_pp_layers", _words([llm] if nest else llm)),
                ("--cfg.parallel_config.vit_pp_layers", _words([vit] if nest else vit)),
                ("--cfg.parallel_config.tp_size", str(lay.tp))]
    return {"hf_to_mm": [("--cfg.mm_dir", load), ("--cfg.hf_config.hf_dir", hf), *split(True)],
            "mm_to_hf": [("--cfg.save_hf_dir", f"{plan.output_dir(NAME)}/hf"), ("--cfg.mm_dir", save),
                         ("--cfg.hf_config.hf_dir", hf), *split(False)]}


def _words(value: list) -> str:
    return json.dumps(value, separators=(",", ":"))


def _json(value: dict) -> str:
    return json.dumps(value, indent=4, ensure_ascii=False) + "\n"


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay, own = fp.layout, mm_settings(fp)
    paths = ["model_dir", "dataset", "output_dir", "mindspeed_mm_dir", "mm_ckpt_dir"]
    load, save = checkpoint_dirs(plan)
    common = {"version": VERSION, "mindspeed_mm_dir": plan.paths["mindspeed_mm_dir"].value}
    trained = groups(plan, fp)
    if plan.extra.get(NAME):
        refuse_broken(plan, NAME, training_problems(words(*(flags for _, flags in trained), start_flags(plan)),
                                                    lay.cards, model_json(plan, fp)))
    launch = env.get_template("mindspeed-mm/launch.sh.j2").render(
        **launch_context(plan, fp, paths), **common,
        title=f"MindSpeed-MM launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        npus_per_node=lay.local_cards, cards=lay.cards, groups=trained, mm_tool=own.value(MM_TOOL),
        env=own.prefixed(ENV), sourced=own.prefixed(SOURCED), data_files=data_files(lay.nodes),
        log_dir=f"{plan.output_dir(NAME)}/logs",
        load_dir=load, save_dir=save,
        start=start_flags(plan), resume=resume_flags(plan) if plan.train.resume else None,
        iters=plan.train.steps_written)
    convert = env.get_template("mindspeed-mm/convert_ckpt.sh.j2").render(
        **common, job=plan.job, directions=convert_args(plan, fp),
        used_paths=[(k, plan.paths[k].value) for k in ("model_dir", "mm_ckpt_dir")])
    data_note = env.get_template("mindspeed-mm/DATA.md.j2").render(
        plan=plan, dataset=plan.paths["dataset"].value, data=data_json(plan, fp, 0), files=data_files(lay.nodes),
        caches=own.value(CACHE_DIRS))
    return {"mindspeed-mm/launch.sh": launch, "mindspeed-mm/model.json": _json(model_json(plan, fp)),
            **{f"mindspeed-mm/{name}": _json(data_json(plan, fp, rank))
               for rank, name in enumerate(data_files(lay.nodes))},
            "mindspeed-mm/convert_ckpt.sh": convert,
            "mindspeed-mm/DATA.md": data_note,
            "mindspeed-mm/commands.txt": commands_txt(plan, fp, env, "MindSpeed-MM")}


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    load, save = checkpoint_dirs(plan)
    return env.get_template("mindspeed-mm/plan_section.md.j2").render(
        plan=plan, fp=fp, version=VERSION, iters=plan.train.steps_written, iters_placeholder=plan.train.steps is None,
        load=load, save=save, own=mm_settings(fp), example=fp.info["example"], **section_context(plan, fp, NAME))
