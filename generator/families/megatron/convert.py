"""MindSpeed-LLM's checkpoint converter, HuggingFace -> mcore, as the plugins that train on MindSpeed-LLM's Megatron
call it (mindspeed-llm; mindspeed-rl, whose actor loads MindSpeed-LLM's checkpoints: reference mindspeed_rl.md
s5.2): the script upstream's ckpt_convert_*.sh runs for the model and its flags at the layout training loads (the
saved per-rank layout must match: same TP / PP / layer list / EP). Each plugin adds its direction back and its
own extra flags; flags.py writes them in the type the pinned parser declares."""

from __future__ import annotations

from ...api.frozen import frozen
from ...tables import Model
from .flags import Flags


@frozen
class Target:
    """The layout the converted checkpoint is written at: the one training loads."""

    tp: int
    pp: int
    ep: int
    layer_list: str | None  # --num-layer-list, where the stages hold uneven layers


def model_flags(info: dict, model: Model) -> Flags:
    """convert_ckpt.py's model flags, shared by both directions (examples/mcore/<family>/ckpt_convert_*.sh)."""
    return [("--use-mcore-models", True), ("--model-type", "GPT"), ("--model-type-hf", info["model_type_hf"]),
            ("--spec", info.get("spec")), ("--add-qkv-bias", model.qkv_bias),
            ("--moe-grouped-gemm", model.is_moe and bool(info.get("grouped_gemm"))), ("--params-dtype", "bf16")]


def v2_model_flags(info: dict) -> Flags:
    """convert_ckpt_v2.py's: it reads the rest of the model from config.json (convert_ckpt_v2.py l. 9-51)."""
    return [("--moe-grouped-gemm", bool(info.get("grouped_gemm"))), ("--model-type-hf", info["model_type_hf"])]


def hf_to_mcore(info: dict, model: Model, target: Target, hf: str, save: str) -> tuple[str, str, Flags]:
    """(script, its flag table in flags.TABLES, flags) converting the HuggingFace folder `hf` into `save` at
    `target`: examples/mcore/deepseek3's own converter (grouped GEMM, as training uses it), convert_ckpt_v2.py
    (layer by layer) where the model's row says `converter: v2`, else convert_ckpt.py."""
    if info.get("converter") == "deepseek3":
        return "examples/mcore/deepseek3/convert_ckpt_deepseek3.py", "convert-deepseek3-hf2mcore", [
            ("--moe-grouped-gemm", True), ("--target-tensor-parallel-size", target.tp),
            ("--target-pipeline-parallel-size", target.pp), ("--target-expert-parallel-size", target.ep),
            ("--num-layer-list", target.layer_list), ("--num-layers", model.layers), ("--load-dir", hf),
            ("--save-dir", save)]
    if info.get("converter") == "v2":
        return "convert_ckpt_v2.py", "convert-v2", [
            ("--load-model-type", "hf"), ("--save-model-type", "mg"), ("--target-tensor-parallel-size", target.tp),
            ("--target-pipeline-parallel-size", target.pp), ("--target-expert-parallel-size", target.ep),
            ("--num-layer-list", target.layer_list), ("--load-dir", hf), ("--save-dir", save), *v2_model_flags(info)]
    return "convert_ckpt.py", "convert-hf2mg", [
        ("--load-model-type", "hf"), ("--save-model-type", "mg"), *model_flags(info, model),
        ("--target-tensor-parallel-size", target.tp), ("--target-pipeline-parallel-size", target.pp),
        ("--num-layer-list", target.layer_list), ("--target-expert-parallel-size", target.ep if model.is_moe else None),
        ("--load-dir", hf), ("--save-dir", save), ("--tokenizer-model", f"{hf}/tokenizer.json")]
