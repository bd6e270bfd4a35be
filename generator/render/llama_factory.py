"""LLaMA-Factory: train.yaml, the DeepSpeed ZeRO-3 JSON it points at, dataset_info.json, launch.sh, commands.txt."""

from __future__ import annotations

import json

import jinja2

from ..plan import FrameworkPlan, Plan
from ..tables import trains_adapters
from .common import launch_context, master_addr, master_word

NAME = "llama-factory"
MAX_GRAD_NORM = 1.0  # transformers' default; written in the YAML and as the JSON's gradient_clipping
# Upstream examples: full SFT 1.0e-5 (train_full/qwen3_full_sft.yaml), LoRA 1.0e-4 (train_lora/qwen3_lora_sft.yaml).
LEARNING_RATE = {"full": 1.0e-5, "pretrain": 1.0e-5, "lora": 1.0e-4, "qlora": 1.0e-4}
UPSTREAM_EXAMPLE = {"full": "train_full/qwen3_full_sft.yaml", "pretrain": "train_full/qwen3_full_sft.yaml",
                    "lora": "train_lora/qwen3_lora_sft_ds3.yaml", "qlora": "train_qlora/qwen3_lora_sft_bnb_npu.yaml"}
DEVICE_ENV = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "gpu": "CUDA_VISIBLE_DEVICES"}
# LLaMA-Factory's dataset_info.json column maps (data/README.md): alpaca and sharegpt defaults, and plain text for
# pretraining.
DATASET_COLUMNS = {
    "alpaca": {"columns": {"prompt": "instruction", "query": "input", "response": "output", "system": "system",
                           "history": "history"}},
    "sharegpt": {"formatting": "sharegpt", "columns": {"messages": "conversations", "system": "system",
                                                        "tools": "tools"}},
    "pretrain": {"columns": {"prompt": "text"}},
}


def deepspeed_file(fp: FrameworkPlan) -> str | None:
    """Upstream's examples/deepspeed file name for the plan's stage; None: no DeepSpeed (one card, adapters only)."""
    lay = fp.layout
    if lay.zero_stage is None:
        return None
    return f"ds_z{lay.zero_stage}{'_offload' if lay.offload else ''}_config.json"


def deepspeed_config(fp: FrameworkPlan) -> dict:
    """Upstream's examples/deepspeed ds_z2 / ds_z3(_offload) config with the batch and precision keys written out:
    they must equal the YAML's (train_batch_size = micro x accumulation x world size), bf16 on, fp16 off. The
    hidden-size keys stay "auto": the HF integration fills them from the model's config.json."""
    lay = fp.layout
    zero: dict = {"stage": lay.zero_stage}
    if lay.zero_stage == 2:
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
        "train_batch_size": lay.global_batch_size,
        "train_micro_batch_size_per_gpu": lay.micro_batch_size,
        "gradient_accumulation_steps": lay.grad_accum,
        "gradient_clipping": MAX_GRAD_NORM,
        "zero_allow_untested_optimizer": True,
        "fp16": {"enabled": False, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                 "hysteresis": 2, "min_loss_scale": 1},
        "bf16": {"enabled": True},
        "zero_optimization": zero,
    }


def dataset_info(plan: Plan) -> dict:
    kind = "pretrain" if plan.method == "pretrain" else plan.dataset_format
    # An absolute file_name wins over dataset_dir in LLaMA-Factory's os.path.join.
    return {plan.job: {"file_name": plan.paths["dataset"].value, **DATASET_COLUMNS[kind]}}


def env_words(plan: Plan, fp: FrameworkPlan, rank: int) -> list[str]:
    """The environment words in front of `llamafactory-cli train train.yaml` on node `rank` (commands.txt)."""
    lay = fp.layout
    master = master_word(plan, fp)
    return ["FORCE_TORCHRUN=1", f"NNODES={lay.nodes}", f"NODE_RANK={rank}", f"NPROC_PER_NODE={lay.local_cards}",
            f"{DEVICE_ENV[plan.accelerator]}={visible_devices(fp)}", f"MASTER_ADDR={master}",
            f"MASTER_PORT={plan.master_port}"]


def visible_devices(fp: FrameworkPlan) -> str:
    return ",".join(str(i) for i in range(fp.layout.local_cards))


def command_line(plan: Plan, fp: FrameworkPlan, rank: int) -> str:
    return f'cd "$JOB_DIR" && {" ".join(env_words(plan, fp, rank))} llamafactory-cli train train.yaml'


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay = fp.layout
    ds_file = deepspeed_file(fp)
    train = env.get_template("llama-factory/train.yaml.j2").render(
        upstream_example=UPSTREAM_EXAMPLE[plan.method], model_dir=plan.paths["model_dir"].value,
        quantization_bit=plan.quantization_bit,
        # LLaMA-Factory's Ascend QLoRA example turns bitsandbytes' double quantization off; GPUs keep the default.
        double_quantization=False if plan.accelerator == "npu" else None,
        stage="pt" if plan.method == "pretrain" else "sft",
        finetuning_type="lora" if trains_adapters(plan.method) else "full",
        lora={"rank": lay.lora_rank, "alpha": lay.lora_alpha} if trains_adapters(plan.method) else None,
        deepspeed=ds_file, dataset_name=plan.job, template=fp.info["template"], cutoff_len=plan.seq_len,
        output_dir=plan.output_dir(NAME), micro_batch_size=lay.micro_batch_size,
        gradient_accumulation_steps=lay.grad_accum, learning_rate=LEARNING_RATE[plan.method],
        epochs=float(plan.epochs), max_grad_norm=MAX_GRAD_NORM, gradient_checkpointing=lay.recompute == "full")
    launch = env.get_template("llama-factory/launch.sh.j2").render(
        **launch_context(plan, fp, ["model_dir", "dataset", "output_dir"]),
        title=f"LLaMA-Factory launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        cards=lay.cards, nproc_per_node=lay.local_cards, visible_devices=visible_devices(fp),
        device_env=DEVICE_ENV[plan.accelerator])
    commands = env.get_template("commands.txt.j2").render(
        framework="LLaMA-Factory", lines=[command_line(plan, fp, rank) for rank in range(lay.nodes)],
        needs_job_dir=True, master_addr=master_addr(plan, fp))
    files = {
        "llama-factory/train.yaml": train,
        "llama-factory/dataset_info.json": json.dumps(dataset_info(plan), indent=2, ensure_ascii=False) + "\n",
        "llama-factory/launch.sh": launch,
        "llama-factory/commands.txt": commands,
    }
    if ds_file:
        files[f"llama-factory/{ds_file}"] = json.dumps(deepspeed_config(fp), indent=2) + "\n"
    return files


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    return env.get_template("llama-factory/plan_section.md.j2").render(
        plan=plan, fp=fp, deepspeed=deepspeed_file(fp), upstream_example=UPSTREAM_EXAMPLE[plan.method],
        lines=[command_line(plan, fp, rank) for rank in range(fp.layout.nodes)])
