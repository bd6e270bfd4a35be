"""Measure what the real HuggingFace model code keeps for backward, per token per decoder layer, for the decoders
LLaMA-Factory's rows use: the memory model's LLaMA-Factory activation term (generator/data/hf_activations.yaml) and
the per-row figures tests/test_memory_hf.py holds that term to (tests/data/hf_activations.csv).

Run by hand after a transformers, peft or LLaMA-Factory upgrade (about ten minutes on 2 cores; nothing is
downloaded, no weight is allocated); it rewrites both files:

    python bench/calibrate_activations.py

Each decoder (the `decoder` fact of LLaMA-Factory's rows in frameworks.yaml) is built with the installed
transformers at given widths with 2 and 3 decoder layers and a small vocabulary, under torch's FakeTensorMode
(shapes and dtypes only, as torchtitan's memory estimator does). One training forward runs under autograd's
saved-tensor hooks, which add up the distinct storages autograd keeps, parameters excluded. The 3-layer total less
the 2-layer total is one decoder layer; two sequence lengths separate the part linear in the sequence from a
quadratic one (attention scores kept). The coefficients of hidden, q, kv, MLP width and heads are fitted over
PROBES; every LLaMA-Factory row is then measured at its real widths for the test. The model is set up as
LLaMA-Factory 0.9.5 sets it up:
- bf16 weights (DeepSpeed's bf16 engine), SDPA attention (BLOOM has only its own attention, which keeps scores);
- LoRA: PEFT on every linear layer but the output head (llamafactory model_utils/misc.py find_all_linear_modules),
  rank 8, alpha 16, dropout 0, the adapters cast to fp32 (model/adapter.py l. 286-288: trainable parameters are
  upcast unless pure bf16 or ZeRO-3);
- gradient checkpointing: LLaMA-Factory's own prepare_model_for_training (model_utils/checkpointing.py: reentrant
  torch.utils.checkpoint per decoder layer).
Vision-language rows measure their language model (the vision tower is frozen; its activations are a few hundred
tokens' worth). The LoRA rank changes the adapters' own outputs only (4 x rank bytes per adapted layer).
"""

from __future__ import annotations

import contextlib
import csv
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLAMAFACTORY_VERBOSITY", "WARN")  # its info lines go to stdout, where the table goes

SEQS = (1024, 2048)
LORA_RANK, LORA_ALPHA = 8, 16
SMALL_VOCAB = 1024
# Decoders whose modeling code is not a package, measured as the nearest one.
MEASURED_AS = {"chatglm": ("glm", "ChatGLM3's hub code is not a package: measured as GLM, the same fused-QKV decoder"),
               "baichuan": ("llama", "Baichuan 2's hub code is not a package: measured as Llama, the same decoder")}
# Widths the per-decoder coefficients are fitted on: a base and one change of each width (and one of all), small
# enough to measure quickly, far enough apart to separate the terms.
PROBES = [dict(hidden=1024, heads=8, kv_heads=4, head_dim=64, ffn=2816), dict(hidden=2048, heads=8, kv_heads=4,
          head_dim=64, ffn=2816), dict(hidden=1024, heads=16, kv_heads=4, head_dim=64, ffn=2816),
          dict(hidden=1024, heads=8, kv_heads=2, head_dim=64, ffn=2816), dict(hidden=1024, heads=8, kv_heads=4,
          head_dim=128, ffn=2816), dict(hidden=1024, heads=8, kv_heads=4, head_dim=64, ffn=5632),
          dict(hidden=1536, heads=12, kv_heads=6, head_dim=96, ffn=4096)]
TERMS = ("hidden", "q", "kv", "ffn", "heads", "const")  # bytes per token per layer = sum(coefficient x term)


def widths(model) -> dict:
    return dict(hidden=model.hidden, heads=model.heads, kv_heads=model.kv_heads, head_dim=model.kv_channels,
                ffn=model.ffn, qkv_bias=model.qkv_bias)


def terms(w: dict) -> list[float]:
    return [w["hidden"], w["heads"] * w["head_dim"], w["kv_heads"] * w["head_dim"], w["ffn"], w["heads"], 1.0]


def config(w: dict, arch: str, layers: int):
    """The decoder at widths `w`, `layers` deep, with a small vocabulary."""
    from transformers import AutoConfig

    if arch == "bloom":  # BLOOM: head size = hidden / heads, MLP 4 x hidden, no GQA
        return AutoConfig.for_model("bloom", vocab_size=SMALL_VOCAB, hidden_size=w["hidden"], n_layer=layers,
                                    n_head=w["heads"], pad_token_id=0)
    cfg = {"vocab_size": SMALL_VOCAB, "hidden_size": w["hidden"], "intermediate_size": w["ffn"],
           "num_hidden_layers": layers, "num_attention_heads": w["heads"], "num_key_value_heads": w["kv_heads"],
           "head_dim": w["head_dim"], "max_position_embeddings": 8192, "tie_word_embeddings": False,
           "pad_token_id": 0}
    if arch == "gemma3_text":
        cfg["sliding_window"] = 8192  # every layer attends to the whole sequence, as at seq_len <= the window
    if arch in ("qwen2", "glm"):
        cfg["attention_bias"] = w.get("qkv_bias", True)
    return AutoConfig.for_model(arch, **cfg)


class Args:
    """The ModelArguments fields prepare_model_for_training reads, at LLaMA-Factory's defaults."""

    upcast_layernorm = False
    disable_gradient_checkpointing = False
    use_reentrant_gc = True
    use_unsloth_gc = False
    upcast_lmhead_output = False


def saved_bytes(w: dict, arch: str, layers: int, seq: int, lora: bool, checkpointing: bool, fake: bool = True) -> int:
    """Bytes of the distinct storages autograd keeps in one training forward, parameters excluded; under
    FakeTensorMode unless `fake` is false (real tensors: the check that the fake run counts what a real one keeps)."""
    import torch
    from llamafactory.model.model_utils.checkpointing import prepare_model_for_training
    from llamafactory.model.model_utils.misc import find_all_linear_modules
    from peft import LoraConfig, get_peft_model
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForCausalLM

    cfg = config(w, arch, layers)
    # BLOOM's code has only its own attention (ALiBi), which keeps the scores: the quadratic column.
    cfg._attn_implementation = "eager" if arch == "bloom" else "sdpa"
    with FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext():
        torch.set_default_dtype(torch.bfloat16)  # built in bf16: module.to() cannot swap fake parameters
        try:
            model = AutoModelForCausalLM.from_config(cfg)
            model.train()
            if checkpointing:
                prepare_model_for_training(model, Args())
            if lora:
                targets = find_all_linear_modules(model, freeze_vision_tower=True)
                # PEFT moves new adapters to the base layer's device and dtype with module.to(), which cannot swap
                # fake parameters; they are built on that device (the CPU) in bf16 already, and upcast below.
                to, torch.nn.Module.to = torch.nn.Module.to, lambda module, *args, **kwargs: module
                try:
                    model = get_peft_model(model, LoraConfig(r=LORA_RANK, lora_alpha=LORA_ALPHA, lora_dropout=0.0,
                                                             target_modules=targets, task_type="CAUSAL_LM"))
                finally:
                    torch.nn.Module.to = to
                for param in model.parameters():
                    if param.requires_grad:
                        param.data = param.data.to(torch.float32)
                if checkpointing:
                    model.enable_input_require_grads()
        finally:
            torch.set_default_dtype(torch.float32)
        params = {p.untyped_storage()._cdata for p in model.parameters()}
        kept: dict[int, int] = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            if storage._cdata not in params:
                kept.setdefault(storage._cdata, storage.nbytes())
            return tensor

        ids = torch.zeros((1, seq), dtype=torch.long)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), \
                contextlib.redirect_stderr(None):
            model(input_ids=ids, labels=ids)
    return sum(kept.values())


def per_layer(w: dict, arch: str, lora: bool, checkpointing: bool) -> tuple[float, float]:
    """(bytes per token per layer linear in the sequence, bytes per token^2 per layer)."""
    one = [saved_bytes(w, arch, 3, s, lora, checkpointing) - saved_bytes(w, arch, 2, s, lora, checkpointing)
           for s in SEQS]
    (s1, s2), (b1, b2) = SEQS, one
    quadratic = (b2 / s2 - b1 / s1) / (s2 - s1)
    return b1 / s1 - quadratic * s1, quadratic


def fit(arch: str, lora: bool, checkpointing: bool) -> dict:
    """Coefficients of TERMS (least squares over PROBES) and the kept attention scores per head per token^2."""
    import numpy

    probes = [dict(p, head_dim=p["hidden"] // p["heads"], kv_heads=p["heads"]) if arch == "bloom" else p
              for p in PROBES]
    measured = [per_layer(p, arch, lora, checkpointing) for p in probes]
    coefficients, *_ = numpy.linalg.lstsq(numpy.array([terms(p) for p in probes]),
                                          numpy.array([m[0] for m in measured]), rcond=None)
    scores = max(m[1] / p["heads"] for m, p in zip(measured, probes))
    return {**{t: round(float(c), 3) for t, c in zip(TERMS, coefficients)}, "scores_per_head": round(scores, 3)}


def decoders(tables) -> dict[str, tuple[str, str]]:
    """Decoder named by LLaMA-Factory's rows -> (architecture measured, note)."""
    names = {(info or {}).get("decoder") for info in tables.frameworks["llama-factory"].models.values()}
    return {name: MEASURED_AS.get(name, (name, "")) for name in sorted(n for n in names if n)}


def main() -> None:
    import peft
    import torch
    import transformers
    import yaml

    from generator.tables import DATA_DIR, load_tables

    tables = load_tables()
    fw = tables.frameworks["llama-factory"]
    how = (f"measured by bench/calibrate_activations.py (see its docstring) with torch {torch.__version__}, "
           f"transformers {transformers.__version__}, peft {peft.__version__}; bf16, SDPA (BLOOM: its own "
           f"attention); LoRA rank {LORA_RANK} on every linear layer, fp32 adapters, as LLaMA-Factory 0.9.5 sets "
           f"it up; gradient checkpointing as its prepare_model_for_training; sequence lengths {SEQS[0]} and "
           f"{SEQS[1]}")
    fitted = {}
    for name, (arch, note) in decoders(tables).items():
        fitted[name] = {"measured_as": arch, **({"note": note} if note else {}),
                        **{method: {("full" if gc else "none"): fit(arch, method == "lora", gc) for gc in (False, True)}
                           for method in ("full", "lora")}}
        print(f"fitted {name}", file=sys.stderr)
    (DATA_DIR / "hf_activations.yaml").write_text(
        f"# Bytes the real HuggingFace code keeps for backward per token per decoder layer, by recompute (none, or\n"
        f"# full: gradient checkpointing), as coefficients of {', '.join(TERMS)} (q = heads x head_dim, kv = KV\n"
        f"# heads x head_dim), plus attention scores kept per head per token^2; fitted on {len(PROBES)} widths per\n"
        f"# decoder, {how}.\n" + yaml.safe_dump({"decoders": fitted}, sort_keys=True), encoding="utf-8")
    rows = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf_activations.csv"
    with rows.open("w", encoding="utf-8", newline="") as handle:
        handle.write(f"# Per model row at its real widths, {how}.\n")
        out = csv.writer(handle, lineterminator="\n")
        out.writerow(["model", "decoder", "method", "checkpointing", "bytes_per_token_layer", "bytes_per_token2_layer"])
        for name, model in tables.models.items():
            info = fw.models.get(name) or {}
            if not tables.supports(fw.name, name) or fw.refusal(name) or name == "debug-tiny":
                continue
            arch = decoders(tables)[info["decoder"]][0]
            for method in ("full", "lora"):
                for gc in (False, True):
                    linear, quadratic = per_layer(widths(model), arch, method == "lora", gc)
                    out.writerow([name, info["decoder"], method, str(gc).lower(), f"{linear:.1f}", f"{quadratic:.4f}"])
            print(f"measured {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
