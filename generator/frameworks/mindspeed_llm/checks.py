"""MindSpeed-LLM 2.2.0: a command line is accepted when the pinned parser parses it and no start-up rule fails.

The parser comes from the pinned declarations (generator/families/megatron/flags.py); the rules are rows of
generator/data/mindspeed_llm_rules.tsv, each a condition over the parsed arguments with its upstream file and line.
"""

from __future__ import annotations

from functools import lru_cache

from ...api.frozen import frozen
from ...families.megatron import flags
from ...resources import DATA_DIR

# What a rule's condition may call: plain arithmetic and collection helpers, nothing that touches the machine.
_SAFE_BUILTINS = {"any": any, "all": all, "int": int, "len": len, "sum": sum, "set": set, "range": range,
                  "bool": bool, "isinstance": isinstance, "getattr": getattr}


@frozen
class Rule:
    """One of MindSpeed-LLM's start-up rules, as the rule table holds it."""

    id: str
    kind: str  # fails | adjusts | legacy (see the table's header)
    stage: str
    fail_if: str
    upstream_error: str
    source: str  # repo path:line at the pinned commit

    def broken(self, namespace: dict) -> bool:
        # One globals dict: generator expressions inside a condition see `args` only through globals.
        return bool(eval(self.fail_if, {"__builtins__": _SAFE_BUILTINS, **namespace}))  # noqa: S307 - our table

    def describe(self) -> str:
        what = {"fails": "fails at start-up", "adjusts": "silently changed by upstream",
                "legacy": "never combined upstream"}[self.kind]
        return f"rule {self.id} ({what}; {self.source}): {self.upstream_error}"


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    text = (DATA_DIR / "mindspeed_llm_rules.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    header = rows[0]
    out = []
    for row in rows[1:]:
        rec = dict(zip(header, row))
        rule = Rule(rec["id"], rec["kind"], rec["stage"], rec["fail_if"], rec["upstream_error"],
                    f"{rec['repo']} {rec['path']}:{rec['line']}")
        compile(rule.fail_if, rule.id, "eval")  # a broken row fails at load, not in a user's validate
        out.append(rule)
    return tuple(out)


# preprocess_data.py looks the handler class up by name in mindspeed_llm/tasks/preprocess/data_handler.py
# (l. 997-1013; an unknown name fails there, after argparse): the classes defined at 2.2.0.
HANDLERS = frozenset({
    "GeneralPretrainHandler", "AlpacaPretrainHandler", "SharegptPretrainHandler", "LlamaFactoryInstructionHandler",
    "AlpacaStyleInstructionHandler", "SharegptStyleInstructionHandler", "HunyuanInstructionHandler",
    "AlpacaStylePairwiseHandler", "SharegptStylePairwiseHandler", "AlpacaStyleProcessRewardHandler",
    "PPOAlpacaStyleInstructionHandler", "R1AlpacaStyleInstructionHandler", "R1SharegptStyleInstructionHandler",
    "GeneralInstructionHandler", "BelleMultiTurnInstructionHandler", "MOSSMultiTurnHandler", "MOSSInstructionHandler",
    "LeetcodePythonInstructionHandler", "StackOverflowPythonPretrainHandler"})
PROGRAMS = ("pretrain_gpt.py", "posttrain_gpt.py", "convert_ckpt.py", "convert_ckpt_v2.py", "preprocess_data.py",
            "examples/mcore/deepseek3/convert_ckpt_deepseek3.py",
            "examples/mcore/deepseek3/convert_ckpt_deepseek3_mcore2hf.py")


def _convert_table(program: str, argv: list[str]) -> str:
    """convert_ckpt.py picks its loader plugin from --load-model-type (convert_ckpt.py l. 16-34, 87-93)."""
    if program == "examples/mcore/deepseek3/convert_ckpt_deepseek3.py":
        return "convert-deepseek3-hf2mcore"
    if program == "examples/mcore/deepseek3/convert_ckpt_deepseek3_mcore2hf.py":
        return "convert-deepseek3-mcore2hf"
    if program == "convert_ckpt_v2.py":  # one parser for both directions (convert_ckpt_v2.py l. 9-51)
        return "convert-v2"
    direction = argv[argv.index("--load-model-type") + 1] if "--load-model-type" in argv[:-1] else "hf"
    return "convert-hf2mg" if direction == "hf" else "convert-mg2hf"


def command_problems(program: str, argv: list[str], world_size: int = 1, env: dict[str, str] | None = None) \
        -> list[str]:
    """Why `program` (the script MindSpeed-LLM runs: pretrain_gpt.py, posttrain_gpt.py, convert_ckpt.py, a
    DeepSeek-V3 converter, preprocess_data.py) would refuse `argv`, or silently change it."""
    if program not in PROGRAMS:
        return [f"{program} is not a MindSpeed-LLM 2.2.0 entry point ({', '.join(PROGRAMS)})"]
    if program in ("pretrain_gpt.py", "posttrain_gpt.py"):
        return training_problems(argv, world_size, env or {}, program)
    table = "preprocess" if program == "preprocess_data.py" else _convert_table(program, argv)
    try:
        args = flags.parse(table, argv)
    except flags.ParseError as exc:
        return [f"the pinned {program} parser exits: {exc}"]
    if table == "preprocess" and args.handler_name not in HANDLERS:
        return [f"--handler-name {args.handler_name} is not a handler class of mindspeed_llm/tasks/preprocess/"
                f"data_handler.py (l. 997-1013 look it up by name)"]
    return []


def training_problems(argv: list[str], world_size: int, env: dict[str, str], script: str) -> list[str]:
    """Why pretrain_gpt.py / posttrain_gpt.py would refuse `argv` (the words after the script), or change it."""
    try:
        args = flags.parse("train", argv)
    except flags.ParseError as exc:
        return [f"the pinned MindSpeed-LLM 2.2.0 parser exits: {exc}"]
    args.world_size = world_size
    namespace = {"args": args, "env": env, "script": script}
    problems = []
    for rule in rules():
        try:
            if rule.broken(namespace):
                problems.append(rule.describe())
        except (TypeError, ZeroDivisionError, ValueError, AttributeError) as exc:
            # The condition needs a value the command line leaves unset (upstream would fail on it as well).
            problems.append(f"rule {rule.id} ({rule.source}) cannot hold: {exc}")
    return problems


def _parsed(table: str, argv: list[str]):
    try:
        return flags.parse(table, argv)
    except flags.ParseError:
        return None  # reported by command_problems


# Training and the converted checkpoint must agree on the per-rank layout: docs/pytorch/solutions/checkpoint/
# checkpoint_convert.md (2.2.0); a different TP/PP/EP or layer list misses shard files or loads wrong shapes.
_LAYOUT_PAIRS = (("tensor_model_parallel_size", "target_tensor_parallel_size"),
                 ("pipeline_model_parallel_size", "target_pipeline_parallel_size"),
                 ("expert_model_parallel_size", "target_expert_parallel_size"),
                 ("num_layer_list", "num_layer_list"),
                 # grouped GEMM stores the experts' weights in another layout
                 ("moe_grouped_gemm", "moe_grouped_gemm"))


def conversion_problems(train_argv: list[str], convert_program: str, convert_argv: list[str]) -> list[str]:
    """Where hf2mcore's output does not match what training loads (layout and folder)."""
    train = _parsed("train", train_argv)
    convert = _parsed(_convert_table(convert_program, convert_argv), convert_argv)
    if train is None or convert is None:
        return []
    problems = []
    for train_dest, convert_dest in _LAYOUT_PAIRS:
        if not hasattr(convert, convert_dest) or (train_dest.startswith(("expert", "moe")) and not train.num_experts):
            continue
        mine, theirs = getattr(train, train_dest), getattr(convert, convert_dest)
        if mine != theirs:
            problems.append(f"conversion writes {convert_dest}={theirs} but training uses {train_dest}={mine}")
    if train.load != convert.save_dir:
        problems.append(f"conversion saves to {convert.save_dir} but training loads {train.load}")
    return problems


def export_problems(train_argv: list[str], program: str, argv: list[str]) -> list[str]:
    """Where mcore2hf would not read what training saved (convert_ckpt.py's mg loader, or DeepSeek-V3's merge):
    the layout it reads, the folders and the LoRA shape."""
    train, back = _parsed("train", train_argv), _parsed(_convert_table(program, argv), argv)
    if train is None or back is None:
        return []
    lora = bool(train.lora_target_modules)
    problems = []
    if program.endswith("convert_ckpt_deepseek3_mcore2hf.py"):
        # The DeepSeek-V3 merge reads the saved ranks itself: the source layout must be training's
        # (examples/mcore/deepseek3/README.md, "2.1").
        pairs = [("tensor_model_parallel_size", "source_tensor_parallel_size"),
                 ("pipeline_model_parallel_size", "source_pipeline_parallel_size"),
                 ("expert_model_parallel_size", "source_expert_parallel_size"), ("num_layer_list", "num_layer_list")]
        wanted_load = train.save
    elif program == "convert_ckpt_v2.py":
        # Mg2HfConvert reads the layout from the saved checkpoint (convert_mg2hf.py l. 39-57); it has no LoRA flags.
        pairs = []
        wanted_load = train.save
        if lora:
            problems.append("convert_ckpt_v2.py has no LoRA flags: it cannot merge the adapters")
    else:
        # convert_ckpt.py reads the layout from the checkpoint and merges to TP = PP = 1 for HuggingFace.
        pairs = []
        problems += [f"mcore2hf writes {dest}={getattr(back, dest)}; HuggingFace export needs 1"
                     for dest in ("target_tensor_parallel_size", "target_pipeline_parallel_size")
                     if getattr(back, dest) != 1]
        wanted_load = train.load if lora else train.save
        if lora and back.lora_load != train.save:
            problems.append(f"mcore2hf reads the adapters from {back.lora_load}; training saves them in {train.save}")
    pairs.append(("moe_grouped_gemm", "moe_grouped_gemm"))
    if lora:
        pairs += [("lora_r", "lora_r"), ("lora_alpha", "lora_alpha")]
    for mine, theirs in pairs:
        if getattr(train, mine) != getattr(back, theirs):
            problems.append(f"mcore2hf uses {theirs}={getattr(back, theirs)} but training "
                            f"{mine}={getattr(train, mine)}")
    if back.load_dir != wanted_load:
        problems.append(f"mcore2hf loads {back.load_dir}; training's result is in {wanted_load}")
    return problems


def data_problems(train_argv: list[str], preprocess_argv: list[str]) -> list[str]:
    """Where training would not read what preprocess_data.sh writes: the file prefix (<prefix>_text_document for
    pretraining text, the bare prefix for instruction data: GeneralPretrainHandler / instruction handlers in
    mindspeed_llm/tasks/preprocess/data_handler.py), the prompt template, and packing."""
    train, pre = _parsed("train", train_argv), _parsed("preprocess", preprocess_argv)
    if train is None or pre is None:
        return []
    pretraining = not train.is_instruction_dataset
    expected = f"{pre.output_prefix}_text_document" if pretraining else pre.output_prefix
    problems = []
    if train.data_path != [expected]:
        problems.append(f"--data-path {' '.join(train.data_path or [])} is not what preprocessing writes ({expected})")
    if pretraining != (pre.handler_name in ("GeneralPretrainHandler", "AlpacaPretrainHandler",
                                            "SharegptPretrainHandler", "StackOverflowPythonPretrainHandler")):
        problems.append(f"training {'pre' if pretraining else 'fine-'}trains but preprocessing uses "
                        f"{pre.handler_name}")
    if not pretraining and pre.prompt_type != train.prompt_type:
        problems.append(f"training's --prompt-type {train.prompt_type} differs from preprocessing's {pre.prompt_type} "
                        f"(they must match, docs/pytorch/solutions/finetune/instruction_finetune.md)")
    if bool(train.neat_pack) != bool(pre.pack and pre.neat_pack):
        problems.append("packing differs: training's --neat-pack needs data made with --pack --neat-pack, and only "
                        "that data")
    if pre.pack and pre.seq_length != train.seq_length:
        problems.append(f"data packed to {pre.seq_length} tokens for --seq-length {train.seq_length}")
    return problems


def model_problems(train_argv: list[str], model) -> list[str]:
    """Shape values that differ from the model's config.json (the model table row): the converted weights would
    not load, or a different model would train."""
    train = _parsed("train", train_argv)
    if train is None:
        return []
    expected = {"num_layers": model.layers, "hidden_size": model.hidden, "ffn_hidden_size": model.ffn,
                "num_attention_heads": model.heads, "rotary_base": int(model.rope_base),
                "norm_epsilon": model.norm_eps, "add_qkv_bias": model.qkv_bias,
                "untie_embeddings_and_output_weights": not model.tied,
                "padded_vocab_size": model.vocab}
    if not train.multi_latent_attention:
        expected.update(qk_layernorm=model.qk_norm, kv_channels=model.head_dim,
                        num_query_groups=model.kv_heads if model.kv_heads < model.heads else 1)
    if model.is_moe:
        expected.update(num_experts=model.experts, moe_router_topk=model.topk, moe_ffn_hidden_size=model.moe_ffn)
    return [f"{dest}={getattr(train, dest)} but {model.name}'s config.json has {value}"
            for dest, value in expected.items() if getattr(train, dest) != value]
