"""MindFormers: train.yaml (upstream's layout, the plan's values), launch.sh NODE_RANK and commands.txt."""

from __future__ import annotations

import jinja2

from ...plan import FrameworkPlan, Plan, RunLength
from ...render.common import commands_txt, launch_context, section_context
from .extra import options, replaced, with_options

NAME = "mindformers"
# Mcore data columns (configs/qwen3/*.yaml); the research families' own (input_columns, conversion scripts) are
# data: frameworks.yaml mindformers model_columns.family, checked when the tables load.
MCORE_COLUMNS = ["input_ids", "labels", "loss_mask", "position_ids"]
# The plan's schedule as MindFormers lr_schedule types (core/lr/lr_schedule.py).
LR_SCHEDULE = {"cosine": "CosineWithWarmUpLR", "linear": "LinearWithWarmUpLR", "constant": "ConstantWarmUpLR"}
# Seconds msrun waits for every node: a fixed upstream value, scripts/msrun_launcher.sh's default and
# configs/qwen3/README.md's multi-node example (`... output/msrun_log False 7200`).
CLUSTER_TIME_OUT = 7200
# msrun waits for its workers and fails when one does only with --join True (MindSpore parallel/cluster/
# process_entity/_api.py l. 272-276); with False it returns once they are spawned, and launch.sh could not tell a
# finished run from a started one.
JOIN = "True"


def run_mode(fp: FrameworkPlan) -> str:
    """Seed 003's validated Mcore commands run `--run_mode train` (the HuggingFace weights load through
    pretrained_model_dir); the research READMEs fine-tune with `--run_mode finetune`."""
    return "finetune" if fp.info["layout"] == "research" else "train"


def task_args(plan: Plan, fp: FrameworkPlan) -> str:
    """run_mindformer.py arguments after --config; fixed words only, no spec value (those live in the YAML)."""
    single = fp.layout.cards == 1
    return " ".join(["--run_mode", run_mode(fp), "--use_parallel", "False" if single else "True",
                     "--auto_trans_ckpt", "True" if _auto_trans(plan, fp) else "False"])


def fp_run(fp: FrameworkPlan) -> RunLength:
    """The run length the resolver decided (planning.py Planning.run_length); the renderer only reads it."""
    if fp.run is None:
        raise ValueError(f"{NAME}: the plan has no run length; resolve.py decides it")
    return fp.run


def lr_schedule(plan: Plan, run: RunLength) -> dict:
    """The plan's schedule, warmup and length as MindFormers' lr_schedule keys."""
    t = plan.train
    out: dict = {"type": LR_SCHEDULE[t.lr_schedule], "learning_rate": t.learning_rate}
    if t.lr_schedule == "cosine":
        out["lr_end"] = t.min_learning_rate
    # Exact warmup steps when given, or when MindFormers runs the plan's steps; else a share of its own count.
    own_count = run.total_steps == -1 or run.total_steps != t.steps
    if t.warmup_steps is not None and (not own_count or t.origin.get("warmup_steps") == "given"):
        out["warmup_steps"] = t.warmup_steps
    else:
        out["warmup_ratio"] = t.warmup_ratio
    out["total_steps"] = run.total_steps
    return out


def _auto_trans(plan: Plan, fp: FrameworkPlan) -> bool:
    # Every job loads the complete HuggingFace safetensors folder; with use_parallel MindFormers only slices it for
    # the layout with auto_trans_ckpt (utils/load_checkpoint_utils.py l. 387-392).
    return fp.layout.cards > 1


def data_prefix(plan: Plan) -> str:
    """Where preprocess_data.sh writes the tokenised data (pretraining and research layouts)."""
    return f"{plan.output_dir(NAME)}/data/{plan.job}"


def data_source(plan: Plan, fp: FrameworkPlan) -> str:
    """What train.yaml reads: Mcore fine-tuning reads the spec's JSON itself (HFDataLoader); pretraining reads the
    Megatron dataset preprocess_data.sh writes (`_text_document`, seed 003 l. 113-125); the research layout reads its
    MindRecord file."""
    if plan.method == "pretrain":
        return f"{data_prefix(plan)}_text_document"
    if fp.info["layout"] == "research":
        return f"{data_prefix(plan)}.mindrecord"
    return plan.paths["dataset"].value


def data_steps(plan: Plan, fp: FrameworkPlan) -> list[tuple[str, list[tuple[str, str]]]]:
    """preprocess_data.sh's commands (script from paths.mindformers_dir, its flags), as upstream documents them."""
    model_dir, prefix = plan.paths["model_dir"].value, data_prefix(plan)
    if plan.method == "pretrain":  # seed 003 (configs/qwen3/README.md), "jsonl -> bin"
        return [("toolkit/data_preprocess/megatron/preprocess_indexed_dataset.py",
                 [("--input", plan.paths["dataset"].value), ("--output-prefix", prefix),
                  ("--tokenizer-type", "HuggingFaceTokenizer"), ("--tokenizer-dir", model_dir)])]
    if fp.info["layout"] != "research":
        return []
    family, converted = fp.info["family"], f"{prefix}-conversation.json"
    facts = fp.info["facts"]["family"]  # its input columns, alpaca converter and tokenizer files
    # research/<family>/README.md: alpaca -> conversation JSON, then MindRecord padded to seq_length + 1 tokens
    # (qwen2_5_preprocess.py l. 154, llama3_1_preprocess.py l. 218), so it must be built at this job's seq_len.
    tokenizer = [(flag, f"{model_dir}/{name}") for flag, name in facts["tokenizer"].items()]
    return [(facts["converter"], [("--data_path", plan.paths["dataset"].value), ("--output_path", converted)]),
            (f"research/{family}/{family}_preprocess.py",
             [("--dataset_type", "qa"), ("--input_glob", converted), *tokenizer,
              ("--seq_length", str(plan.seq_len)), ("--output_file", f"{prefix}.mindrecord")])]


def yaml_context(plan: Plan, fp: FrameworkPlan) -> dict:
    lay, info, t, run = fp.layout, fp.info, plan.train, fp_run(fp)
    research = info["layout"] == "research"
    pipelined = lay.pp > 1
    even = not lay.uneven_layers
    return {
        "upstream": fp.upstream, "shape": plan.shape, "info": info, "family": info.get("family"),
        "hardware_label": plan.hardware_label, "cards": lay.cards,
        "output_dir": plan.output_dir(NAME), "model_dir": plan.paths["model_dir"].value,
        "dataset": data_source(plan, fp), "mtp_layers": plan.shape.mtp_layers if info.get("trains_mtp") else 0,
        # Fine-tuning keeps the checkpoint's config.json; these are the keys upstream's recipe sets on top of it.
        "model_config": {"position_embedding_type": "rope", **info.get("model_config", {})},
        "auto_trans_ckpt": _auto_trans(plan, fp), "use_parallel": lay.cards > 1,
        "model_name": info["model_name"], "prefix": info["prefix"],
        "epochs": run.epochs, "batch_size": lay.micro_batch_size, "stop_step": run.stop_step,
        "seed": plan.train.seed, "run_mode": run_mode(fp), "weight_decay": plan.train.weight_decay,
        "adam_betas": list(plan.train.adam_betas), "max_grad_norm": plan.train.max_grad_norm,
        "lr_schedule": lr_schedule(plan, run), "optimizer_learning_rate": info.get("family") == "qwen2_5",
        "save_every_steps": run.save_every_steps, "keep_checkpoints": plan.train.keep_checkpoints,
        # MindFormers accumulates through the pipeline's micro batches when pp > 1, else through the runner.
        "micro_batch_num": lay.grad_accum if pipelined else 1,
        "gradient_accumulation_steps": 1 if pipelined else lay.grad_accum,
        "learning_rate": plan.train.learning_rate,
        "input_columns": info["facts"]["family"]["input_columns"] if research else MCORE_COLUMNS,
        "create_attention_mask": info.get("attention_mask", False),
        "seq_len": plan.seq_len,
        "max_device_memory": f"{lay.usable_gb:g}GB",
        # Where the plan follows an upstream cap, the block size upstream sets with it (the 671B recipe l. 91).
        "mempool_block_size": f"{lay.usable_gb:g}GB" if "max_device_memory" in info else None,
        # MindSpore's parallel optimizer as upstream's recipe configures it; the memory model counts its shards.
        "parallel_optimizer": info.get("parallel_optimizer") if lay.optimizer_shard is not None else None,
        "parallel_speed_up_json_path": info.get("speed_up_json"),
        "data_parallel": lay.dp, "model_parallel": lay.tp, "context_parallel": lay.cp, "pipeline_stage": lay.pp,
        "expert_parallel": lay.ep, "moe": plan.shape.is_moe,
        "use_seq_parallel": lay.sequence_parallel,
        "gradient_aggregation_group": 1 if not research else 4,
        "vocab_emb_dp": lay.tp == 1,
        "recompute": lay.recompute == "full", "select_recompute": lay.recompute == "selective",
        "offset": 0 if even else list(lay.stage_offsets),
        "untie": not plan.shape.tied,
        "lora": None if plan.train.adapter is None else {
            "rank": plan.train.adapter.rank, "alpha": plan.train.adapter.alpha, "dropout": plan.train.adapter.dropout,
            "target_modules": info["facts"]["layout"]["lora_targets"][plan.train.adapter.targets]},
        # Pretraining writes the expert shape (upstream's qwen3_moe keys, the checkpoint's values). The router is
        # always the checkpoint's: every job loads the HF weights, and the YAML overrides config.json
        # (models/build_config.py l. 125-136 of the 2.1.0 wheel), so upstream's from-scratch norm_topk_prob False,
        # moe_router_pre_softmax True and routed_scaling_factor 1.5 (moe_router_topk_scaling_factor,
        # config_converter_qwen3_moe.py l. 32) would change the trained model's routing.
        "moe_architecture": plan.method == "pretrain",
        "moe_balancing": "gbs_aux_loss" if plan.method == "pretrain" else "seq_aux_loss",
        "moe_aux_loss_coeff": info.get("moe_aux_loss_coeff", 0.001),  # Qwen3-MoE's upstream configs: 0.001
        "print_separate_loss": plan.shape.is_moe, "topk_bias_callback": info.get("topk_bias_callback", False),
        "train_samples": pretrain_samples(plan) if plan.method == "pretrain" else None,
        "train_samples_placeholder": t.steps is None,
    }


def pretrain_samples(plan: Plan) -> int:
    """Pretraining's dataset `sizes`: one pass is the plan's steps; without them, the resolver's placeholder."""
    t = plan.train
    return t.placeholders["placeholder_samples"] if t.steps is None else t.steps * t.global_batch_size


def log_dir(plan: Plan) -> str:
    # msrun_launcher evals LOG_DIR inside its command: a fixed relative path (job names are [a-z0-9._-]) stays safe.
    return f"output/msrun_log/{plan.job}"


def parents(path: str) -> list[str]:
    """Each folder of the relative `path`, outermost first: a/b/c -> a, a/b, a/b/c."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay = fp.layout
    kind = "pretrain" if plan.method == "pretrain" else "finetune"
    yaml_text = with_options(plan, env.get_template(f"mindformers/{fp.info['layout']}_{kind}.yaml.j2").render(
        **yaml_context(plan, fp)))
    launch = env.get_template("mindformers/launch.sh.j2").render(
        **launch_context(plan, fp, ["model_dir", "dataset", "output_dir", "mindformers_dir"],
                         reads_json=plan.train.resume),
        title=f"MindFormers launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        run_mode="pretrain" if plan.method == "pretrain" else "fine-tune",
        mindformers_dir=plan.paths["mindformers_dir"].value,
        device_num_per_node=lay.cards_per_node if lay.cards_per_node != 8 else None,
        single_card=lay.cards == 1, task_args=task_args(plan, fp), worker_num=lay.cards, cards=lay.cards,
        local_worker=lay.local_cards, log_dir=log_dir(plan), log_folders=parents(log_dir(plan)),
        cluster_time_out=CLUSTER_TIME_OUT, join=JOIN, stop_step=fp_run(fp).stop_step,
        checkpoint_dir=f"{plan.output_dir(NAME)}/checkpoint", finished_marker=f"{plan.output_dir(NAME)}/FINISHED",
        resume=plan.train.resume)
    files = {"mindformers/train.yaml": yaml_text, "mindformers/launch.sh": launch,
             "mindformers/commands.txt": commands_txt(plan, fp, env, "MindFormers")}
    steps = data_steps(plan, fp)
    if steps:
        files["mindformers/preprocess_data.sh"] = env.get_template("mindformers/preprocess_data.sh.j2").render(
            job=plan.job, steps=steps, mindformers_dir=plan.paths["mindformers_dir"].value,
            prefix_dir=f"{plan.output_dir(NAME)}/data", family=fp.info.get("family"),
            used_paths=[(k, plan.paths[k].value) for k in ("model_dir", "dataset", "output_dir", "mindformers_dir")])
    return files


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    return env.get_template("mindformers/plan_section.md.j2").render(
        plan=plan, fp=fp, **section_context(plan, fp, NAME),
        auto_trans=_auto_trans(plan, fp), data=data_source(plan, fp), run=fp_run(fp),
        preprocess=bool(data_steps(plan, fp)), extra=options(plan), replaced=replaced(plan))
