"""MindSpeed-LLM 2.2.0: launch.sh NODE_RANK [MASTER_ADDR] in upstream's flag-group style (as bash arrays),
preprocess_data.sh (instruction or pretraining data), convert_ckpt.sh hf2mcore|mcore2hf, commands.txt.

Every flag is built here as a (flag, value) pair from the plan and the model table, then written by
generator/families/megatron/flags.py in the type the pinned parser of that program declares; the templates only lay
the words out, quoting each with the shell helper.
"""

from __future__ import annotations

import jinja2

from ...families.megatron.convert import Target, hf_to_mcore, model_flags, v2_model_flags
from ...families.megatron.extra import GROUP, extra_flags, refuse_broken, words
from ...families.megatron.flags import Flags, cp_algo, declarations, typed
from ...plan import FrameworkPlan, Plan
from ...render.common import commands_txt, launch_context, section_context
from .checks import training_problems

NAME = "mindspeed-llm"
VERSION = "MindSpeed-LLM 2.2.0 / MindSpeed 2.2.0_core_r0.12.1 / Megatron core_v0.12.1"
# The plan's LoRA targets in Megatron-core linear names (reference mindspeed_llm.md s2.3).
LORA_TARGETS = {"all": ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"],
                "attention": ["linear_qkv", "linear_proj"]}
TUNE_FLAGS = ("--stage", "--is-instruction-dataset", "--prompt-type", "--variable-seq-lengths")
HANDLER = {"alpaca": "AlpacaStyleInstructionHandler", "sharegpt": "SharegptStyleInstructionHandler",
           "text": "GeneralPretrainHandler"}


def checkpoint_dirs(plan: Plan) -> tuple[str, str]:
    """(what training loads: the converted base weights, where it saves)."""
    return plan.paths["mcore_ckpt_dir"].value, f"{plan.output_dir(NAME)}/ckpt"


def output_prefix(plan: Plan) -> str:
    """preprocess_data.py --output-prefix: tokenised data goes next to the job's other outputs."""
    return f"{plan.output_dir(NAME)}/data/{plan.job}"


def data_prefix(plan: Plan) -> str:
    """--data-path: the prefix preprocess_data.py wrote. Pretraining data gets `_text_document` (GeneralPretrainHandler
    with --json-keys text); instruction data is read through its bare prefix (docs/pytorch/solutions/finetune/
    instruction_finetune.md: DATA_PATH is the prefix before `_packed_input_ids_document`)."""
    return f"{output_prefix(plan)}_text_document" if plan.method == "pretrain" else output_prefix(plan)


def packed(plan: Plan, fp: FrameworkPlan) -> bool:
    """Fine-tuning with context parallel packs samples to seq_len: docs/pytorch/solutions/finetune/
    instruction_finetune.md l. 235 gives pack mode for sequence parallel, and variable-length batches are never
    combined with CP upstream. Neat pack on both sides (examples/mcore/qwen25/data_convert_qwen25_instruction_pack.sh,
    tune_qwen25_7b_4k_full_pack.sh): positions restart per sample from the attention mask's sample ids
    (decoder_packed_mtf_dataset.py l. 177-209), not at every EOS, which chat templates also put inside the prompt;
    the general mask with ring CP as examples/mcore/llama2/tune_llama2_7b_full_pack_16k.sh."""
    return plan.method != "pretrain" and fp.layout.cp > 1


def parallel_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    """The layout flags training and weight conversion must share (the saved per-rank layout must match)."""
    lay = fp.layout
    return [("--tensor-model-parallel-size", lay.tp), ("--pipeline-model-parallel-size", lay.pp),
            ("--num-layer-list", ",".join(map(str, lay.layers_per_stage)) if lay.uneven_layers else None),
            ("--expert-model-parallel-size", lay.ep if plan.shape.is_moe else None)]


def gpt_flags(plan: Plan, fp: FrameworkPlan) -> Flags:
    lay, m, info = fp.layout, plan.shape, fp.info
    full = lay.recompute == "full"
    flags: Flags = [("--use-mcore-models", True), ("--spec", info.get("spec")), *parallel_flags(plan, fp),
                    ("--context-parallel-size", lay.cp if lay.cp > 1 else None),
                    ("--context-parallel-algo", cp_algo(lay.cp)),
                    # Megatron turns sequence parallel off with a warning at TP 1 (arguments.py l. 758-761).
                    ("--sequence-parallel", lay.sequence_parallel),
                    # LoRA keeps Megatron's plain optimizer, as upstream's LoRA scripts do: a relaunch restores the
                    # adapters' optimizer state from --lora-load, while the distributed optimizer's shard file
                    # would be looked for under --load, the base weights (checkpointing.py l. 1398-1410).
                    ("--use-distributed-optimizer", plan.method != "lora"), ("--overlap-grad-reduce", True),
                    ("--overlap-param-gather", plan.method != "lora"),
                    ("--recompute-granularity", "full" if full else None),
                    ("--recompute-method", "uniform" if full else None),
                    ("--recompute-num-layers", 1 if full else None),
                    # MindSpeed's activation-function recompute; takes no granularity or method.
                    ("--recompute-activation-function", lay.recompute == "selective"),
                    ("--use-flash-attn", True), ("--use-fused-rotary-pos-emb", info.get("fused_rope", True)),
                    ("--use-rotary-position-embeddings", True), ("--use-fused-swiglu", True),
                    ("--use-fused-rmsnorm", True), ("--no-masked-softmax-fusion", True),
                    ("--attention-softmax-in-fp32", True), ("--no-gradient-accumulation-fusion", True),
                    ("--num-layers", m.layers), ("--hidden-size", m.hidden), ("--ffn-hidden-size", m.ffn),
                    ("--num-attention-heads", m.heads)]
    if not info.get("mla"):
        flags += [("--group-query-attention", m.kv_heads < m.heads),
                  ("--num-query-groups", m.kv_heads if m.kv_heads < m.heads else None),
                  ("--kv-channels", m.head_dim), ("--qk-layernorm", m.qk_norm)]
    flags += [("--add-qkv-bias", m.qkv_bias),
              ("--max-position-embeddings", max(m.max_positions, plan.seq_len)), ("--seq-length", plan.seq_len),
              ("--make-vocab-size-divisible-by", 1),
              *((flag, m.vocab) for flag in info.get("vocab_flags", ["--padded-vocab-size"])),
              ("--rotary-base", m.rope_base), ("--norm-epsilon", m.norm_eps),
              ("--untie-embeddings-and-output-weights", not m.tied), ("--disable-bias-linear", True),
              ("--position-embedding-type", "rope"), ("--normalization", "RMSNorm"), ("--swiglu", True)]
    # Listed for a dense model too, left out there (None): the model decides them (the spec's extra cannot add them).
    moe = m.is_moe
    flags += [("--num-experts", m.experts if moe else None), ("--moe-router-topk", m.topk if moe else None),
              ("--moe-ffn-hidden-size", m.moe_ffn if moe else None),
              ("--moe-grouped-gemm", moe and bool(info.get("grouped_gemm")))]
    flags += list((info.get("flags") or {}).items())
    t = plan.train
    flags += [("--tokenizer-type", "PretrainedFromHF"), ("--tokenizer-name-or-path", plan.paths["model_dir"].value),
              ("--micro-batch-size", lay.micro_batch_size), ("--global-batch-size", lay.global_batch_size),
              ("--train-iters", plan.train.steps_written), ("--lr", t.learning_rate), ("--min-lr", t.min_learning_rate),
              ("--lr-decay-style", t.lr_schedule),
              # Megatron takes one of the two (arguments.py l. 633-635): exact steps when the plan knows them
              ("--lr-warmup-iters", t.warmup_steps), ("--lr-warmup-fraction",
                                                      t.warmup_ratio if t.warmup_steps is None else None),
              ("--weight-decay", t.weight_decay),
              ("--clip-grad", t.max_grad_norm), ("--adam-beta1", t.adam_betas[0]), ("--adam-beta2", t.adam_betas[1]),
              ("--initial-loss-scale", 4096),
              ("--init-method-std", 0.01), ("--attention-dropout", 0.0), ("--hidden-dropout", 0.0),
              ("--seed", t.seed), ("--bf16", True), ("--distributed-backend", "nccl")]
    return flags


def groups(plan: Plan, fp: FrameworkPlan) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """The training command's flag groups (upstream's names), each as typed words."""
    pack = packed(plan, fp)
    out: list[tuple[str, Flags]] = [
        ("GPT_ARGS", gpt_flags(plan, fp)),
        ("DATA_ARGS", [("--data-path", [data_prefix(plan)]), ("--split", "100,0,0"),
                       # Each node builds the dataset index on its own disk (cluster.shared_storage: false)
                       ("--no-shared-storage", fp.layout.nodes > 1 and not plan.shared_storage),
                       # Packed samples keep their own positions; the mask is built per sample (general).
                       ("--reset-position-ids", pack), ("--neat-pack", pack),
                       ("--attention-mask-type", "general" if pack else None)]),
        ("OUTPUT_ARGS", [("--save", checkpoint_dirs(plan)[1]), ("--log-interval", 1),
                         ("--save-interval", plan.train.save_every_steps),
                         ("--eval-interval", plan.train.save_every_steps), ("--eval-iters", 0)]),
    ]
    if plan.method != "pretrain":
        out.append(("TUNE_ARGS", list(zip(TUNE_FLAGS, ("sft", True, fp.info["prompt_type"], not pack)))))
    if plan.method == "lora":
        out.append(("LORA_ARGS", lora_flags(plan) + [("--lora-fusion", True)]))
    # The spec's extra flags last, refused where the plan decides the flag (written or left out on purpose).
    # The method decides the tuning and LoRA flags in every plan, not only where it writes them: `lora-r` on a full
    # run would train adapters, `stage` on pretraining another entry's task.
    decided = [flag for _, flags in out for flag, _ in flags] + \
        [flag for flags in (_start(plan), _resume(plan)) for flag, _ in flags] + \
        [flag for flag in declarations("train") if flag.startswith("--lora-")] + list(TUNE_FLAGS)
    extra = extra_flags(plan, NAME, "train", "MindSpeed-LLM 2.2.0 pretrain_gpt.py / posttrain_gpt.py", decided)
    if extra:
        out.append((GROUP, extra))
    return [(name, typed("train", flags)) for name, flags in out]


def _start(plan: Plan) -> Flags:
    load, _ = checkpoint_dirs(plan)
    return [("--load", load), ("--no-load-optim", True), ("--no-load-rng", True),
            ("--finetune", plan.method != "pretrain"), ("--exit-on-missing-checkpoint", True)]


def _resume(plan: Plan) -> Flags:
    load, save = checkpoint_dirs(plan)
    if plan.method == "lora":
        return [("--load", load), ("--lora-load", save), ("--exit-on-missing-checkpoint", True)]
    return [("--load", save), ("--exit-on-missing-checkpoint", True)]


def start_flags(plan: Plan) -> list[tuple[str, list[str]]]:
    """Loading at the first launch: the converted base weights, without their optimizer or RNG state (upstream's
    CKPT_ARGS); fine-tuning starts its iteration count at 0 (--finetune)."""
    return typed("train", _start(plan))


def resume_flags(plan: Plan) -> list[tuple[str, list[str]]]:
    """Loading at a relaunch that finds this job's own checkpoint: model, optimizer, RNG and iteration from the
    save folder (Megatron checkpointing.py load_checkpoint without --finetune / --no-load-*). LoRA keeps loading
    the base from the converted weights and the adapters with their optimizer state from --lora-load."""
    return typed("train", _resume(plan))


def lora_flags(plan: Plan) -> Flags:
    lora = plan.train.adapter
    if lora is None:
        raise ValueError("lora_flags needs a plan that trains adapters")
    return [("--lora-r", lora.rank), ("--lora-alpha", lora.alpha),
            ("--lora-target-modules", LORA_TARGETS[lora.targets])]


def convert_flags(plan: Plan, fp: FrameworkPlan) -> dict[str, tuple[str, list[tuple[str, list[str]]]]]:
    """Script and typed flags for each direction. hf2mcore writes the layout training loads (the Megatron family's
    converter command, families/megatron/convert.py); mcore2hf merges back to one HuggingFace checkpoint (with the
    LoRA adapters merged for LoRA runs)."""
    info, lay, m = fp.info, fp.layout, plan.shape
    load, save = checkpoint_dirs(plan)
    hf = plan.paths["model_dir"].value
    layer_list = ",".join(map(str, lay.layers_per_stage)) if lay.uneven_layers else None
    script, table, to_mcore = hf_to_mcore(info, m, Target(lay.tp, lay.pp, lay.ep, layer_list), hf, load)
    out = {"hf2mcore": (script, typed(table, to_mcore))}
    if info.get("converter") == "deepseek3":
        # examples/mcore/deepseek3: grouped GEMM in both directions, as training uses it (the weight layout must
        # match); a LoRA run's checkpoint holds base + adapters, which the merge reads from --load-dir alone
        # (README.md "2.1", ckpt_convert_deepseek3_merge_lora2hf.sh).
        merge: Flags = [("--moe-grouped-gemm", True),
                        ("--source-tensor-parallel-size", lay.tp), ("--source-pipeline-parallel-size", lay.pp),
                        ("--source-expert-parallel-size", lay.ep), ("--num-layer-list", layer_list),
                        ("--num-layers", m.layers), ("--load-dir", save),
                        ("--save-dir", f"{plan.output_dir(NAME)}/hf"),
                        *(lora_flags(plan) if plan.method == "lora" else [])]
        out["mcore2hf"] = ("examples/mcore/deepseek3/convert_ckpt_deepseek3_mcore2hf.py",
                           typed("convert-deepseek3-mcore2hf", merge))
        return out
    if info.get("converter") == "v2" and plan.method != "lora":
        # convert_ckpt_v2.py, as upstream's ckpt_convert_qwen3_moe_235b_mcore2hf.sh calls it: it reads the layout
        # from the saved checkpoint and writes safetensors into --save-dir. It has no LoRA flags, so a LoRA run
        # merges its adapters with convert_ckpt.py (below).
        back: Flags = [("--load-model-type", "mg"), ("--save-model-type", "hf"), ("--load-dir", save),
                       ("--save-dir", f"{plan.output_dir(NAME)}/hf"), *v2_model_flags(info)]
        return {**out, "mcore2hf": ("convert_ckpt_v2.py", typed("convert-v2", back))}
    trained = load if plan.method == "lora" else save
    lora_back: Flags = [("--lora-load", save), *lora_flags(plan)] if plan.method == "lora" else []
    # Back to HuggingFace: one shard (TP = PP = 1); results land in <save-dir>/mg2hf, so save-dir is the HF folder.
    to_hf: Flags = [("--load-model-type", "mg"), ("--save-model-type", "hf"), *model_flags(info, m),
                    ("--target-tensor-parallel-size", 1), ("--target-pipeline-parallel-size", 1),
                    ("--target-expert-parallel-size", 1 if m.is_moe else None),
                    ("--load-dir", trained), *lora_back, ("--save-dir", hf)]
    return {**out, "mcore2hf": ("convert_ckpt.py", typed("convert-mg2hf", to_hf))}


def preprocess_flags(plan: Plan, fp: FrameworkPlan) -> list[tuple[str, list[str]]]:
    """preprocess_data.py as upstream's data_convert_*.sh scripts call it: instruction data (Alpaca / ShareGPT
    handler, the training prompt type; neat-packed to seq_len for context parallel) writes
    <prefix>_packed_*_document.{bin,idx}; pretraining text (GeneralPretrainHandler, --json-keys text) writes
    <prefix>_text_document.{bin,idx}."""
    pretrain = plan.method == "pretrain"
    pack = packed(plan, fp)
    flags: Flags = [("--input", plan.paths["dataset"].value), ("--tokenizer-type", "PretrainedFromHF"),
                    ("--tokenizer-name-or-path", plan.paths["model_dir"].value),
                    ("--output-prefix", output_prefix(plan)),
                    ("--handler-name", HANDLER[plan.data.format]),
                    ("--json-keys", ["text"] if pretrain else None),
                    ("--prompt-type", None if pretrain else fp.info["prompt_type"]),
                    ("--pack", pack), ("--neat-pack", pack), ("--seq-length", plan.seq_len if pack else None),
                    # Qwen3's thinking template is applied when the data is tokenised (preprocess_data.py l. 154-155)
                    ("--enable-thinking", None if pretrain or plan.train.enable_thinking is None
                     else str(plan.train.enable_thinking).lower()),
                    ("--workers", 8), ("--log-interval", 1000)]
    return typed("preprocess", flags)


def checkpoint_notes(plan: Plan, fp: FrameworkPlan) -> list[str]:
    """What the weights in paths.model_dir must be for convert_ckpt.sh to read them."""
    notes = []
    if fp.info.get("hf_checkpoint"):
        notes.append(f"paths.model_dir must hold {fp.info['hf_checkpoint']}, the layout the "
                     f"{fp.info['model_type_hf']} converter maps (configs/checkpoint/model_cfg.json), not {plan.hf_id}")
    if fp.info.get("fp8_weights"):
        notes.append(f"{plan.hf_id}'s official weights are FP8 and the converter reads bf16 only: dequantise them "
                     f"first, as examples/mcore/deepseek3/README.md l. 58, 120 says, with fp8_cast_bf16.py from the "
                     f"DeepSeek-V3 repository's inference/ folder (python fp8_cast_bf16.py --input-fp8-hf-path <fp8 "
                     f"folder> --output-bf16-hf-path <bf16 folder>), copy the tokenizer and config files beside the "
                     f"bf16 weights, and point paths.model_dir at that folder")
    return notes


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    lay = fp.layout
    paths = ["model_dir", "dataset", "output_dir", "mindspeed_llm_dir", "mcore_ckpt_dir"]
    common = {"version": VERSION, "mindspeed_llm_dir": plan.paths["mindspeed_llm_dir"].value}
    load, save = checkpoint_dirs(plan)
    entry, trained = "pretrain_gpt.py" if plan.method == "pretrain" else "posttrain_gpt.py", groups(plan, fp)
    if plan.extra.get(NAME):  # the template exports CUDA_DEVICE_MAX_CONNECTIONS=1
        refuse_broken(plan, NAME, training_problems(words(*(flags for _, flags in trained), start_flags(plan)),
                                                    lay.cards, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, entry))
    launch = env.get_template("mindspeed-llm/launch.sh.j2").render(
        **launch_context(plan, fp, paths), **common,
        title=f"MindSpeed-LLM launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        npus_per_node=lay.local_cards, cards=lay.cards, multi_node=lay.nodes > 1, entry=entry,
        groups=trained, log_dir=f"{plan.output_dir(NAME)}/logs", load_dir=load, save_dir=save,
        start=start_flags(plan), resume=resume_flags(plan) if plan.train.resume else None,
        iters=plan.train.steps_written)
    convert = env.get_template("mindspeed-llm/convert_ckpt.sh.j2").render(
        **common, job=plan.job, directions=convert_flags(plan, fp), lora=plan.method == "lora",
        notes=checkpoint_notes(plan, fp),
        used_paths=[(k, plan.paths[k].value) for k in ("model_dir", "mcore_ckpt_dir")])
    preprocess = env.get_template("mindspeed-llm/preprocess_data.sh.j2").render(
        **common, job=plan.job, flags=preprocess_flags(plan, fp), prefix_dir=f"{plan.output_dir(NAME)}/data",
        pretrain=plan.method == "pretrain",
        used_paths=[(k, plan.paths[k].value) for k in ("model_dir", "dataset", "output_dir")])
    return {"mindspeed-llm/launch.sh": launch, "mindspeed-llm/convert_ckpt.sh": convert,
            "mindspeed-llm/preprocess_data.sh": preprocess,
            "mindspeed-llm/commands.txt": commands_txt(plan, fp, env, "MindSpeed-LLM")}


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    return env.get_template("mindspeed-llm/plan_section.md.j2").render(
        plan=plan, fp=fp, version=VERSION, iters=plan.train.steps_written, iters_placeholder=plan.train.steps is None,
        load=checkpoint_dirs(plan)[0], save=checkpoint_dirs(plan)[1], prefix=data_prefix(plan),
        packed=packed(plan, fp), notes=checkpoint_notes(plan, fp),
        **section_context(plan, fp, NAME))
