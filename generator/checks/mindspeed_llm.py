"""MindSpeed-LLM 2.2.0: a command line is accepted when the pinned parser parses it and no start-up rule fails.

The parser comes from the pinned declarations (generator/flags.py); the rules are rows of
generator/data/mindspeed_llm_rules.tsv, each a condition over the parsed arguments with its upstream file and line.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from functools import lru_cache

from .. import flags
from ..resources import DATA_DIR

# What a rule's condition may call: plain arithmetic and collection helpers, nothing that touches the machine.
_SAFE_BUILTINS = {"any": any, "all": all, "int": int, "len": len, "sum": sum, "set": set, "range": range,
                  "bool": bool, "isinstance": isinstance, "getattr": getattr}


@dataclass(frozen=True)
class Rule:
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


def _convert_table(program: str, argv: list[str]) -> str:
    """convert_ckpt.py picks its loader plugin from --load-model-type (convert_ckpt.py l. 16-34, 87-93)."""
    if program.endswith("convert_ckpt_deepseek3.py"):
        return "convert-deepseek3-hf2mcore"
    if program.endswith("convert_ckpt_deepseek3_mcore2hf.py"):
        return "convert-deepseek3-mcore2hf"
    direction = argv[argv.index("--load-model-type") + 1] if "--load-model-type" in argv[:-1] else "hf"
    return "convert-hf2mg" if direction == "hf" else "convert-mg2hf"


def command_problems(program: str, argv: list[str], world_size: int = 1, env: dict[str, str] | None = None) \
        -> list[str]:
    """Why `program` (the script MindSpeed-LLM runs: pretrain_gpt.py, posttrain_gpt.py, convert_ckpt.py, a
    DeepSeek-V3 converter, preprocess_data.py) would refuse `argv`, or silently change it."""
    if program in ("pretrain_gpt.py", "posttrain_gpt.py"):
        return training_problems(argv, world_size, env or {}, program)
    table = "preprocess" if program == "preprocess_data.py" else _convert_table(program, argv)
    try:
        flags.parse(table, argv)
    except flags.ParseError as exc:
        return [f"the pinned {program} parser exits: {exc}"]
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
    try:
        train = flags.parse("train", train_argv)
        convert = flags.parse(_convert_table(convert_program, convert_argv), convert_argv)
    except flags.ParseError:
        return []  # reported by command_problems
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
