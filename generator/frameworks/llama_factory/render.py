"""LLaMA-Factory: train.yaml, the DeepSpeed JSON it points at (upstream's examples/deepspeed), dataset_info.json,
launch.sh, commands.txt."""

from __future__ import annotations

import json
from typing import Any

import jinja2

from ...plan import FrameworkPlan, Plan
from ...render.common import commands_txt, launch_context, section_context
from .extra import options as extra_options
from .extra import replaced, with_options
from .planning import double_quantization

NAME = "llama-factory"
AUTO = "auto"  # a DeepSpeed key transformers fills from TrainingArguments
# The plan's schedule in transformers' SchedulerType names (trainer_utils.py at 5.6): cosine decays to 0, and to a
# floor through cosine_with_min_lr's min_lr; linear decays to 0; constant holds after warmup.
SCHEDULER = {"cosine": "cosine", "linear": "linear", "constant": "constant_with_warmup"}
# LoRA targets: LLaMA-Factory's "all" is every linear layer but the output head (model/model_utils/misc.py
# find_all_linear_modules); attention only: the projections by the family's module names (a model row's
# attention_modules where they differ, as BLOOM's and ChatGLM3's fused query_key_value and dense).
ATTENTION_MODULES = "q_proj,k_proj,v_proj,o_proj"
# train.yaml keys launch.sh's checks read as rendered (finished run, the checkpoint to resume from): an override
# after "--" would move the run away from what was checked, so launch.sh refuses one.
FIXED_KEYS = ("output_dir", "overwrite_output_dir", "resume_from_checkpoint")
# Upstream's example per method; QLoRA per accelerator: bitsandbytes on Ascend (qwen3_lora_sft_bnb_npu.yaml) or
# on-the-fly bitsandbytes quantization on a GPU (qwen3_lora_sft_otfq.yaml), both v0.9.5.
UPSTREAM_EXAMPLE: dict[str, str | dict[str, str]] = {
    "full": "train_full/qwen3_full_sft.yaml", "pretrain": "train_full/qwen3_full_sft.yaml",
    "lora": "train_lora/qwen3_lora_sft_ds3.yaml",
    "qlora": {"npu": "train_qlora/qwen3_lora_sft_bnb_npu.yaml", "gpu": "train_qlora/qwen3_lora_sft_otfq.yaml"}}
# LLaMA-Factory's dataset_info.json vocabulary (data/README.md and data/dataset_info.json at v0.9.5): each format's
# required columns; the optional ones (system, history, tools, images) are registered only when the data has them,
# because a registered column is read from every row (data/converter.py: KeyError on a row without it).
DATASET_ENTRY: dict[str, dict[str, Any]] = {
    "alpaca": {"columns": {"prompt": "instruction", "query": "input", "response": "output"}},
    "sharegpt": {"formatting": "sharegpt", "columns": {"messages": "conversations"}},
    # upstream's mllm_demo entry: OpenAI-style messages
    "openai": {"formatting": "sharegpt", "columns": {"messages": "messages"},
               "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                        "assistant_tag": "assistant", "system_tag": "system"}},
    "text": {"columns": {"prompt": "text"}},  # upstream's c4_demo entry, for stage pt
}


def upstream_example(plan: Plan) -> str:
    example = UPSTREAM_EXAMPLE[plan.method]
    return example if isinstance(example, str) else example[plan.accelerator]


def deepspeed_file(fp: FrameworkPlan) -> str | None:
    """Upstream's examples/deepspeed file name for the plan's stage; None: no DeepSpeed (one card, adapters only)."""
    lay = fp.layout
    if lay.zero_stage is None:
        return None
    return f"ds_z{lay.zero_stage}{'_offload' if lay.offload else ''}_config.json"


def deepspeed_config(fp: FrameworkPlan) -> dict:
    """Upstream's examples/deepspeed ds_z0 / ds_z2 / ds_z3(_offload) config, "auto" where upstream has it. The batch,
    clipping and precision keys stay "auto" on purpose: transformers' HfTrainerDeepSpeedConfig fills them from
    train.yaml at the world size the job really starts with (integrations/deepspeed.py, trainer_config_process), so the
    YAML is their one source. A value written here is a second copy that can only disagree: a job started on fewer
    nodes, a YAML edited by hand, or bf16 switched off raises "DeepSpeed config values that mismatch" after the model
    has loaded. `gen-launch validate` fills them the same way at the planned world size and checks the result against
    the plan."""
    lay = fp.layout
    zero: dict = {"stage": lay.zero_stage}
    if lay.zero_stage in (0, 2):  # ds_z0_config.json is ds_z2_config.json with stage 0
        zero.update({"allgather_partitions": True, "allgather_bucket_size": 500000000, "overlap_comm": False,
                     "reduce_scatter": True, "reduce_bucket_size": 500000000, "contiguous_gradients": True,
                     "round_robin_gradients": True})
    else:
        if lay.offload:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        zero.update({
            "overlap_comm": False, "contiguous_gradients": True, "sub_group_size": 1000000000,
            "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1000000000,
            "stage3_max_reuse_distance": 1000000000, "stage3_gather_16bit_weights_on_model_save": True,
        })
    return {
        "train_batch_size": AUTO, "train_micro_batch_size_per_gpu": AUTO, "gradient_accumulation_steps": AUTO,
        "gradient_clipping": AUTO,
        "zero_allow_untested_optimizer": True,
        "fp16": {"enabled": AUTO, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                 "hysteresis": 2, "min_loss_scale": 1},
        "bf16": {"enabled": AUTO},
        "zero_optimization": zero,
    }


def dataset_info(plan: Plan) -> dict:
    entry = DATASET_ENTRY[plan.data.format]
    columns = {**entry["columns"], **{column: column for column in plan.data.columns}}
    # An absolute file_name wins over dataset_dir in LLaMA-Factory's os.path.join.
    return {plan.job: {"file_name": plan.paths["dataset"].value, **entry, "columns": columns}}


def schedule(plan: Plan) -> dict:
    """lr_scheduler_type and its kwargs, warmup, and the run's length in TrainingArguments' terms."""
    t = plan.train
    floor = t.lr_schedule == "cosine" and t.min_learning_rate > 0
    # The floor as a share of the peak: transformers turns min_lr into that share through optimizer.defaults,
    # which DeepSpeed's ZeRO-3 optimizer lacks (optimization.py get_cosine_with_min_lr_schedule_with_warmup:
    # AttributeError, found by the execution tier).
    out = {"lr_scheduler_type": "cosine_with_min_lr" if floor else SCHEDULER[t.lr_schedule],
           "lr_scheduler_kwargs": {"min_lr_rate": float(f"{t.min_learning_rate / t.learning_rate:.12g}")}
           if floor else None,
           # transformers 5 reads a warmup_steps below 1 as a share of the steps (warmup_ratio is deprecated)
           "warmup_steps": t.warmup_steps if t.warmup_steps is not None else t.warmup_ratio,
           "max_steps": t.steps, "num_train_epochs": t.epochs if t.steps is None else None}
    return out


def lora_target(plan: Plan) -> str | None:
    """The plan's LoRA targets as LLaMA-Factory's lora_target (None without adapters)."""
    lora = plan.train.adapter
    if lora is None:
        return None
    return "all" if lora.targets == "all" else plan.frameworks[NAME].info.get("attention_modules", ATTENTION_MODULES)


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay = fp.layout
    ds_file = deepspeed_file(fp)
    t = plan.train
    lora = t.adapter
    train = env.get_template("llama-factory/train.yaml.j2").render(
        upstream_example=upstream_example(plan), model_dir=plan.paths["model_dir"].value,
        quantization_bit=plan.quantization_bit,
        # written where it departs from LLaMA-Factory's default (on)
        double_quantization=None if double_quantization(plan.accelerator) else False,
        stage="pt" if plan.method == "pretrain" else "sft",
        finetuning_type="full" if lora is None else "lora",
        lora=None if lora is None else {"rank": lora.rank, "alpha": lora.alpha, "dropout": lora.dropout,
                                        "target": lora_target(plan)},
        deepspeed=ds_file, dataset_name=plan.job, template=fp.info["template"], cutoff_len=plan.seq_len,
        flash_attn=fp.info.get("flash_attn"),
        media_dir=plan.paths["media_dir"].value if "media_dir" in plan.paths else None,
        output_dir=plan.output_dir(NAME), micro_batch_size=lay.micro_batch_size,
        gradient_accumulation_steps=lay.grad_accum, learning_rate=t.learning_rate, weight_decay=t.weight_decay,
        **schedule(plan), save_steps=t.save_every_steps, save_total_limit=t.keep_checkpoints, seed=t.seed,
        resume=t.resume, optim=None if t.optimizer == "adamw" else t.optimizer, enable_thinking=t.enable_thinking,
        adam_betas=t.adam_betas, max_grad_norm=t.max_grad_norm, gradient_checkpointing=lay.recompute == "full")
    train = with_options(plan, train)
    launch = env.get_template("llama-factory/launch.sh.j2").render(
        **launch_context(plan, fp, [key for key in ("model_dir", "dataset", "media_dir", "output_dir")
                                    if key in plan.paths], overrides_to="llamafactory-cli train",
                         overrides_source="LLaMA-Factory launcher.py l.107 and l.127", fixed_keys=FIXED_KEYS,
                         sets_devices=True, reads_json=plan.train.resume),
        title=f"LLaMA-Factory launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        cards=lay.cards, nproc_per_node=lay.local_cards, output_dir=plan.output_dir(NAME), resume=plan.train.resume)
    files = {
        "llama-factory/train.yaml": train,
        "llama-factory/dataset_info.json": json.dumps(dataset_info(plan), indent=2, ensure_ascii=False) + "\n",
        "llama-factory/launch.sh": launch,
        "llama-factory/commands.txt": commands_txt(plan, fp, env, "LLaMA-Factory"),
    }
    if ds_file:
        files[f"llama-factory/{ds_file}"] = json.dumps(deepspeed_config(fp), indent=2) + "\n"
    return files


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    return env.get_template("llama-factory/plan_section.md.j2").render(
        plan=plan, fp=fp, deepspeed=deepspeed_file(fp), upstream_example=upstream_example(plan),
        extra=extra_options(plan), replaced=replaced(plan),
        **section_context(plan, fp, NAME, overrides=True))
