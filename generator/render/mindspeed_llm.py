"""MindSpeed-LLM 2.2.0: launch.sh NODE_RANK [MASTER_ADDR] in upstream's flag-group style (as bash arrays),
preprocess_data.sh (fine-tuning data), convert_ckpt.sh hf2mcore|mcore2hf, commands.txt.

Every flag is built here as (flag, values) pairs from the plan and the model table; the template only lays them out,
quoting each value with the shell helper.
"""

from __future__ import annotations

import jinja2

from ..plan import FrameworkPlan, Plan
from .common import launch_context, master_addr, master_word

NAME = "mindspeed-llm"
VERSION = "MindSpeed-LLM 2.2.0 / MindSpeed 2.2.0_core_r0.12.1 / Megatron core_v0.12.1"
LORA_TARGETS = ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
# Learning rates of the upstream scripts: Qwen3 full fine-tune 1.25e-6, Qwen3-MoE LoRA 1.25e-5; min-lr = lr / 100.
LEARNING_RATE = {"full": 1.25e-6, "pretrain": 1.25e-6, "lora": 1.25e-5}
TRAIN_ITERS_PLACEHOLDER = 2000  # upstream's TRAIN_ITERS, when the spec has no data size
HANDLER = {"alpaca": "AlpacaStyleInstructionHandler", "sharegpt": "SharegptStyleInstructionHandler"}

Flags = list[tuple[str, list[str]]]


def _num(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _pairs(tokens: list[str]) -> Flags:
    """['--a', 'x', '--b', '--c', '1'] -> [('--a', ['x']), ('--b', []), ('--c', ['1'])]."""
    flags: Flags = []
    for token in tokens:
        if token.startswith("--"):
            flags.append((token, []))
        else:
            flags[-1][1].append(token)
    return flags


def train_iters(plan: Plan) -> int:
    return plan.train_iters(NAME) or TRAIN_ITERS_PLACEHOLDER


def checkpoint_dirs(plan: Plan) -> tuple[str, str]:
    """(what training loads: the converted base weights, where it saves)."""
    return plan.paths["mcore_ckpt_dir"].value, f"{plan.output_dir(NAME)}/ckpt"


def data_prefix(plan: Plan) -> str:
    """--data-path: the spec's prefix for pretraining; preprocess_data.sh's output prefix for fine-tuning."""
    if plan.method == "pretrain":
        return plan.paths["dataset"].value
    return f"{plan.output_dir(NAME)}/data/{plan.job}"


def parallel_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    """The layout flags training and weight conversion must share (the saved per-rank layout must match)."""
    lay = fp.layout
    flags: Flags = [("--tensor-model-parallel-size", [str(lay.tp)]),
                    ("--pipeline-model-parallel-size", [str(lay.pp)])]
    if lay.uneven_layers:
        flags.append(("--num-layer-list", [",".join(map(str, lay.num_layer_list))]))
    if plan.shape.is_moe:
        flags.append(("--expert-model-parallel-size", [str(lay.ep)]))
    return flags


def gpt_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    lay, m, info = fp.layout, plan.shape, fp.info
    flags: Flags = [("--use-mcore-models", [])]
    if info.get("spec"):
        flags.append(("--spec", list(info["spec"])))
    flags += parallel_flags(plan, fp)
    if lay.cp > 1:
        flags += [("--context-parallel-size", [str(lay.cp)]), ("--context-parallel-algo", [lay.cp_algo])]
    if lay.sequence_parallel:  # only with TP > 1 (Megatron turns it off with a warning otherwise)
        flags.append(("--sequence-parallel", []))
    flags.append(("--use-distributed-optimizer", []))
    flags.append(("--overlap-grad-reduce", []))
    if plan.method != "lora":
        flags.append(("--overlap-param-gather", []))
    if lay.recompute == "full":
        flags += [("--recompute-granularity", ["full"]), ("--recompute-method", ["uniform"]),
                  ("--recompute-num-layers", ["1"])]
    elif lay.recompute == "selective":  # MindSpeed's activation-function recompute; takes no granularity/method
        flags.append(("--recompute-activation-function", []))
    flags += [("--use-flash-attn", []), ("--use-fused-rotary-pos-emb", []), ("--use-rotary-position-embeddings", []),
              ("--use-fused-swiglu", []), ("--use-fused-rmsnorm", []), ("--no-masked-softmax-fusion", []),
              ("--attention-softmax-in-fp32", []), ("--no-gradient-accumulation-fusion", [])]
    flags += [("--num-layers", [str(m.layers)]), ("--hidden-size", [str(m.hidden)]),
              ("--ffn-hidden-size", [str(m.ffn)]), ("--num-attention-heads", [str(m.heads)])]
    if not info.get("mla"):
        if m.kv_heads < m.heads:
            flags += [("--group-query-attention", []), ("--num-query-groups", [str(m.kv_heads)])]
        if m.head_dim is not None:
            flags.append(("--kv-channels", [str(m.head_dim)]))
        if m.qk_norm:
            flags.append(("--qk-layernorm", []))
    if m.qkv_bias:
        flags.append(("--add-qkv-bias", []))
    flags += [("--max-position-embeddings", [str(max(m.max_positions, plan.seq_len))]),
              ("--seq-length", [str(plan.seq_len)]),
              ("--make-vocab-size-divisible-by", ["1"]),
              (info.get("vocab_flag", "--padded-vocab-size"), [str(m.vocab)]),
              ("--rotary-base", [_num(m.rope_base)]), ("--norm-epsilon", [_num(m.norm_eps)])]
    if not m.tied:
        flags.append(("--untie-embeddings-and-output-weights", []))
    flags += [("--disable-bias-linear", []), ("--position-embedding-type", ["rope"]),
              ("--normalization", ["RMSNorm"]), ("--swiglu", [])]
    if m.is_moe:
        flags += [("--num-experts", [str(m.experts)]), ("--moe-router-topk", [str(m.topk)]),
                  ("--moe-ffn-hidden-size", [str(m.moe_ffn)])]
        if info.get("grouped_gemm"):
            flags.append(("--moe-grouped-gemm", []))
        flags += _pairs(info.get("moe", []))
    flags += _pairs(info.get("extra", []))
    lr = LEARNING_RATE[plan.method]
    flags += [("--tokenizer-type", ["PretrainedFromHF"]),
              ("--tokenizer-name-or-path", [plan.paths["model_dir"].value]),
              ("--micro-batch-size", [str(lay.micro_batch_size)]),
              ("--global-batch-size", [str(lay.global_batch_size)]),
              ("--train-iters", [str(train_iters(plan))]),
              ("--lr", [_num(lr)]), ("--min-lr", [_num(lr / 100)]), ("--lr-decay-style", ["cosine"]),
              ("--lr-warmup-fraction", ["0.01"]), ("--weight-decay", ["0.1"]), ("--clip-grad", ["1.0"]),
              ("--adam-beta1", ["0.9"]), ("--adam-beta2", ["0.95"]), ("--initial-loss-scale", ["4096"]),
              ("--init-method-std", ["0.01"]), ("--attention-dropout", ["0.0"]), ("--hidden-dropout", ["0.0"]),
              ("--seed", ["42"]), ("--bf16", [])]
    return flags


def groups(plan: Plan, fp: FrameworkPlan) -> list[tuple[str, Flags]]:
    load, save = checkpoint_dirs(plan)
    iters = train_iters(plan)
    interval = str(min(iters, 1000))
    out: list[tuple[str, Flags]] = [
        ("GPT_ARGS", gpt_flags(plan, fp)),
        ("DATA_ARGS", [("--data-path", [data_prefix(plan)]), ("--split", ["100,0,0"])]),
        ("CKPT_ARGS", [("--load", [load]), ("--save", [save]), ("--no-load-optim", []), ("--no-load-rng", []),
                       ("--exit-on-missing-checkpoint", [])]),
        ("OUTPUT_ARGS", [("--log-interval", ["1"]), ("--save-interval", [interval]),
                         ("--eval-interval", [interval]), ("--eval-iters", ["0"])]),
    ]
    if plan.method != "pretrain":
        out.append(("TUNE_ARGS", [("--finetune", []), ("--stage", ["sft"]), ("--is-instruction-dataset", []),
                                  ("--prompt-type", [fp.info["prompt_type"]]), ("--variable-seq-lengths", [])]))
    if plan.method == "lora":
        out.append(("LORA_ARGS", lora_flags(fp) + [("--lora-fusion", [])]))
    return out


def lora_flags(fp: FrameworkPlan) -> Flags:
    return [("--lora-r", [str(fp.layout.lora_rank)]), ("--lora-alpha", [str(fp.layout.lora_alpha)]),
            ("--lora-target-modules", list(LORA_TARGETS))]


def convert_flags(plan: Plan, fp: FrameworkPlan) -> dict[str, tuple[str, Flags]]:
    """Script and flags for each direction. hf2mcore writes the layout training loads (same TP / PP / layer list /
    EP); mcore2hf merges back to one HuggingFace checkpoint (with the LoRA adapters merged for LoRA runs)."""
    info, lay, m = fp.info, fp.layout, plan.shape
    load, save = checkpoint_dirs(plan)
    hf = plan.paths["model_dir"].value
    trained = load if plan.method == "lora" else save
    lora_back = ([("--lora-load", [save])] + lora_flags(fp)) if plan.method == "lora" else []
    if info.get("converter") == "deepseek3":
        layer_list = [("--num-layer-list", [",".join(map(str, lay.num_layer_list))])] if lay.uneven_layers else []
        to_mcore = [("--moe-grouped-gemm", [])] if plan.method != "lora" else []
        to_mcore += [("--target-tensor-parallel-size", [str(lay.tp)]),
                     ("--target-pipeline-parallel-size", [str(lay.pp)]),
                     ("--target-expert-parallel-size", [str(lay.ep)]), *layer_list,
                     ("--num-layers", [str(m.layers)]), ("--load-dir", [hf]), ("--save-dir", [load])]
        back = [("--source-tensor-parallel-size", [str(lay.tp)]),
                ("--source-pipeline-parallel-size", [str(lay.pp)]),
                ("--source-expert-parallel-size", [str(lay.ep)]), *layer_list,
                ("--num-layers", [str(m.layers)]), ("--load-dir", [trained]),
                ("--save-dir", [f"{plan.output_dir(NAME)}/hf"]), *lora_back]
        return {"hf2mcore": ("examples/mcore/deepseek3/convert_ckpt_deepseek3.py", to_mcore),
                "mcore2hf": ("examples/mcore/deepseek3/convert_ckpt_deepseek3_mcore2hf.py", back)}
    common: Flags = [("--use-mcore-models", []), ("--model-type", ["GPT"]),
                     ("--model-type-hf", [info["model_type_hf"]])]
    if info.get("spec"):
        common.append(("--spec", list(info["spec"])))
    if m.qkv_bias:
        common.append(("--add-qkv-bias", []))
    if m.is_moe and info.get("grouped_gemm"):
        common.append(("--moe-grouped-gemm", []))
    common.append(("--params-dtype", ["bf16"]))
    to_mcore = [("--load-model-type", ["hf"]), ("--save-model-type", ["mg"]), *common,
                ("--target-tensor-parallel-size", [str(lay.tp)]), ("--target-pipeline-parallel-size", [str(lay.pp)])]
    if lay.uneven_layers:
        to_mcore.append(("--num-layer-list", [",".join(map(str, lay.num_layer_list))]))
    if m.is_moe:
        to_mcore.append(("--target-expert-parallel-size", [str(lay.ep)]))
    to_mcore += [("--load-dir", [hf]), ("--save-dir", [load]), ("--tokenizer-model", [f"{hf}/tokenizer.json"])]
    # Back to HuggingFace: one shard (TP = PP = 1); results land in <save-dir>/mg2hf, so save-dir is the HF folder.
    back = [("--load-model-type", ["mg"]), ("--save-model-type", ["hf"]), *common,
            ("--target-tensor-parallel-size", ["1"]), ("--target-pipeline-parallel-size", ["1"])]
    if m.is_moe:
        back.append(("--target-expert-parallel-size", ["1"]))
    back += [("--load-dir", [trained]), *lora_back, ("--save-dir", [hf])]
    return {"hf2mcore": ("convert_ckpt.py", to_mcore), "mcore2hf": ("convert_ckpt.py", back)}


def preprocess_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    """preprocess_data.py for instruction data (reference s2.4): writes <prefix>_packed_*_document.{bin,idx}."""
    return [("--input", [plan.paths["dataset"].value]), ("--tokenizer-type", ["PretrainedFromHF"]),
            ("--tokenizer-name-or-path", [plan.paths["model_dir"].value]),
            ("--output-prefix", [data_prefix(plan)]), ("--handler-name", [HANDLER[plan.dataset_format]]),
            ("--prompt-type", [fp.info["prompt_type"]]), ("--workers", ["8"]), ("--log-interval", ["1000"])]


def command_line(plan: Plan, fp: FrameworkPlan, rank: int) -> str:
    master = master_word(plan, fp)
    return f'bash "$JOB_DIR/launch.sh" {rank} {master}'


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay = fp.layout
    paths = ["model_dir", "dataset", "output_dir", "mindspeed_llm_dir", "mcore_ckpt_dir"]
    common = {"version": VERSION, "mindspeed_llm_dir": plan.paths["mindspeed_llm_dir"].value}
    launch = env.get_template("mindspeed-llm/launch.sh.j2").render(
        **launch_context(plan, fp, paths), **common,
        title=f"MindSpeed-LLM launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        npus_per_node=lay.local_cards, cards=lay.cards, multi_node=lay.nodes > 1,
        entry="pretrain_gpt.py" if plan.method == "pretrain" else "posttrain_gpt.py",
        groups=groups(plan, fp), log_dir=f"{plan.output_dir(NAME)}/logs")
    convert = env.get_template("mindspeed-llm/convert_ckpt.sh.j2").render(
        **common, job=plan.job, directions=convert_flags(plan, fp), lora=plan.method == "lora", used_paths=[(k, plan.paths[k].value) for k in
                                                                               ("model_dir", "mcore_ckpt_dir")])
    files = {"mindspeed-llm/launch.sh": launch, "mindspeed-llm/convert_ckpt.sh": convert,
             "mindspeed-llm/commands.txt": env.get_template("commands.txt.j2").render(
                 framework="MindSpeed-LLM", lines=[command_line(plan, fp, r) for r in range(lay.nodes)],
                 needs_job_dir=True, master_addr=master_addr(plan, fp))}
    if plan.method != "pretrain":
        files["mindspeed-llm/preprocess_data.sh"] = env.get_template("mindspeed-llm/preprocess_data.sh.j2").render(
            **common, job=plan.job, flags=preprocess_flags(plan, fp), prefix_dir=f"{plan.output_dir(NAME)}/data",
            used_paths=[(k, plan.paths[k].value) for k in ("model_dir", "dataset", "output_dir")])
    return files


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    return env.get_template("mindspeed-llm/plan_section.md.j2").render(
        plan=plan, fp=fp, version=VERSION, iters=train_iters(plan), iters_placeholder=plan.train_iters(NAME) is None,
        load=checkpoint_dirs(plan)[0], save=checkpoint_dirs(plan)[1], prefix=data_prefix(plan),
        lines=[command_line(plan, fp, r) for r in range(fp.layout.nodes)])
