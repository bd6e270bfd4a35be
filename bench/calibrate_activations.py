"""Measure what the real HuggingFace model code keeps for backward, per token per decoder layer, for the decoders
LLaMA-Factory's rows use: the memory model's LLaMA-Factory activation and logit terms
(generator/data/hf_activations.yaml) and the per-row figures tests/test_memory_hf.py holds them to
(tests/data/hf_activations.csv, tests/data/hf_step_peaks.csv).

Run by hand after a transformers, peft or LLaMA-Factory upgrade (about 17 minutes on 2 cores; nothing is
downloaded, no weight is allocated); it rewrites the three files:

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
The same models also run whole training steps (forward, loss, backward) with every allocation and release
followed (_peak_tracker), the parameters' gradients left out: the step's working set beyond what the layers keep
(working: 3 x the 2-layer peak less 2 x the 3-layer peak, at a small vocabulary, fitted like the kept bytes), the
peak bytes per logit while the loss runs (logit_bytes: two vocabulary sizes and two lengths, differenced twice, a
batch of two; with the loss in the logits' bf16 and in fp32), and every row's step peak at its real widths and
vocabulary with 2 and 3 layers (tests/data/hf_step_peaks.csv), which the test holds the memory model's
activations plus logits to. Baichuan 2 and ChatGLM3 compute their loss in their hub code, not in transformers:
HUB_LOSS runs the same operations on the measured decoder's logits. Under autocast (a run without DeepSpeed) the
loss runs in fp32; the fp32 column measures it with the output head's result upcast (LLaMA-Factory's
upcast_lmhead_output hook), where CUDA autocast casts the bf16 logits inside the loss: an fp32 copy either way.
Vision-language rows measure their language model (the vision tower is frozen; its activations are a few hundred
tokens' worth). The LoRA rank changes the adapters' own outputs only (4 x rank bytes per adapted layer).
"""

from __future__ import annotations

import contextlib
import csv
import os
import sys
import unittest.mock
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLAMAFACTORY_VERBOSITY", "WARN")  # its info lines go to stdout, where the table goes

SEQS = (1024, 2048)
STEP_SEQS = (1024, 4096)  # the whole step at each row's real widths, for the test
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


@contextlib.contextmanager
def built(w: dict, arch: str, layers: int, lora: bool, checkpointing: bool, fake: bool = True,
          vocab: int = SMALL_VOCAB, fp32_logits: bool = False):
    """The decoder set up for training as LLaMA-Factory 0.9.5 sets it up, under FakeTensorMode unless `fake` is
    false; `fp32_logits`: its upcast_lmhead_output (a forward hook casting the output head's result to fp32)."""
    import torch
    from llamafactory.model.model_utils.checkpointing import prepare_model_for_training
    from llamafactory.model.model_utils.misc import find_all_linear_modules
    from peft import LoraConfig, get_peft_model
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForCausalLM

    cfg = config(w, arch, layers)
    cfg.vocab_size = vocab
    cfg.use_cache = False  # as LLaMA-Factory trains (model_utils/kv_cache.py l. 40)
    # BLOOM's code has only its own attention (ALiBi), which keeps the scores: the quadratic column.
    cfg._attn_implementation = "eager" if arch == "bloom" else "sdpa"
    args = Args()
    args.disable_gradient_checkpointing = not checkpointing
    args.upcast_lmhead_output = fp32_logits
    # transformers looks for packed sequences in the position ids, a check on values that fake tensors do not have:
    # it would build an explicit seq x seq mask that a real run of unpacked sequences never does (masking_utils.py
    # find_packed_sequence_indices returns None for them).
    with FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext(), \
            unittest.mock.patch("transformers.masking_utils.find_packed_sequence_indices", lambda ids: None):
        torch.set_default_dtype(torch.bfloat16)  # built in bf16: module.to() cannot swap fake parameters
        try:
            model = AutoModelForCausalLM.from_config(cfg)
            model.train()
            # A head tied to the embedding holds its weight's gradient through the whole backward until the
            # embedding's is added to it; gradients are DeepSpeed's terms in the memory model, so the head gets a
            # weight of its own here and the step peaks count activations and the loss alone.
            head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
            if head is not None and head.weight is embedding.weight:
                head.weight = torch.nn.Parameter(head.weight.detach().clone())
            prepare_model_for_training(model, args)
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
        with contextlib.redirect_stderr(None):
            yield model


def saved_bytes(w: dict, arch: str, layers: int, seq: int, lora: bool, checkpointing: bool, fake: bool = True) -> int:
    """Bytes of the distinct storages autograd keeps in one training forward, parameters excluded; under
    FakeTensorMode unless `fake` is false (real tensors: the check that the fake run counts what a real one keeps)."""
    import torch

    with built(w, arch, layers, lora, checkpointing, fake) as model:
        params = {p.untyped_storage()._cdata for p in model.parameters()}
        kept: dict[int, int] = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            if storage._cdata not in params:
                kept.setdefault(storage._cdata, storage.nbytes())
            return tensor

        ids = torch.zeros((1, seq), dtype=torch.long)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(input_ids=ids, labels=ids)
    return sum(kept.values())


def _baichuan_loss(logits, labels):
    """Baichuan 2's own loss (its hub code, modeling_baichuan.py BaichuanForCausalLM.forward): cross-entropy on a
    contiguous shifted copy of the logits in their own dtype (no upcast), plus a z-loss on each row's maximum."""
    import torch

    shifted = logits[..., :-1, :].contiguous().view(-1, logits.size(-1))
    z_loss = 2e-4 * (shifted.max(-1).values ** 2).mean()
    return torch.nn.functional.cross_entropy(shifted, labels[..., 1:].reshape(-1)) + z_loss, logits


def _chatglm_loss(logits, labels):
    """ChatGLM3's own loss (its hub code, modeling_chatglm.py ChatGLMForConditionalGeneration.forward): its
    sequence-first logits made contiguous batch-first (a copy), upcast to fp32, a contiguous shifted copy,
    cross-entropy; the logits it returns are cast back to bf16."""
    import torch

    logits = logits.transpose(0, 1).contiguous().transpose(0, 1).to(torch.float32)
    shifted = logits[..., :-1, :].contiguous()
    loss = torch.nn.functional.cross_entropy(shifted.view(-1, shifted.size(-1)), labels[..., 1:].reshape(-1))
    return loss, logits.to(torch.bfloat16)


# Decoders whose hub code computes its own loss; the others run transformers' own (the model's loss_function).
HUB_LOSS = {"baichuan": _baichuan_loss, "chatglm": _chatglm_loss}


def _peak_tracker():
    """A dispatch mode that logs every storage allocated while it is on and its release, in order (as torch's
    MemTracker follows them), so that the peak can be computed afterwards leaving out the parameters' gradients,
    which autograd names only once it hands them over."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Peak(TorchDispatchMode):
        def __init__(self, existing: set[int]):
            super().__init__()
            self.existing = existing  # storages there before the step: parameters, buffers, inputs
            self.events: list[tuple[int, int]] = []  # (allocation serial, +bytes on allocation | -bytes on release)
            self.live: dict[int, int] = {}  # storage -> its allocation serial
            self.grads: set[int] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for tensor in tree_leaves(out):
                if isinstance(tensor, torch.Tensor):
                    self._allocated(tensor.untyped_storage())
            return out

        def _allocated(self, storage) -> None:
            key = storage._cdata
            if key in self.live or key in self.existing:
                return
            serial, nbytes = len(self.events), storage.nbytes()
            self.live[key] = serial
            self.events.append((serial, nbytes))
            weakref.finalize(storage, self._released, key, serial, nbytes)

        def _released(self, key: int, serial: int, nbytes: int) -> None:
            if self.live.get(key) == serial:
                del self.live[key]
            self.events.append((serial, -nbytes))

        def gradient(self, tensor) -> None:
            serial = self.live.get(tensor.untyped_storage()._cdata)
            if serial is not None:
                self.grads.add(serial)

        def follow_gradients(self, model) -> None:
            """Mark each trainable parameter's gradient as one, and free it once accumulated (as an optimizer step
            with gradients set to None does)."""
            def drop(param) -> None:
                self.gradient(param.grad)
                param.grad = None

            for param in model.parameters():
                if param.requires_grad:
                    param.register_hook(self.gradient)
                    param.register_post_accumulate_grad_hook(drop)

        def peak(self) -> int:
            current = highest = 0
            for serial, nbytes in self.events:
                if serial not in self.grads:
                    current += nbytes
                    highest = max(highest, current)
            return highest

    return Peak


def step_bytes(w: dict, arch: str, layers: int, seq: int, lora: bool, checkpointing: bool, vocab: int,
               fp32_logits: bool = False, hub_loss=None, fake: bool = True, batch: int = 1) -> int:
    """Peak bytes of one training step (forward, loss, backward) beyond the parameters and their gradients, under
    FakeTensorMode: every allocation and release is followed, and the gradients are left out (DeepSpeed moves
    them out of the way; the memory model counts them apart, with the largest layer's gathered for ZeRO-3). As in
    the Trainer, the model's outputs (the logits) live until the loss is computed and are dropped before
    backward. `fake` false: real tensors (the check that the fake run peaks where a real one does)."""
    import torch

    with built(w, arch, layers, lora, checkpointing, fake, vocab, fp32_logits) as model:
        ids = torch.zeros((batch, seq), dtype=torch.long)
        existing = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers(), ids]}
        tracker = _peak_tracker()(existing)
        tracker.follow_gradients(model)
        with tracker:
            if hub_loss is None:
                out = model(input_ids=ids, labels=ids)
                loss = out.loss
            else:  # the hub code holds no other reference to the output head's result
                loss, out = hub_loss(model(input_ids=ids).logits, ids)
            del out
            loss.backward()
            del loss
    return tracker.peak()


def logit_bytes(decoder: str, arch: str, fp32_logits: bool) -> float:
    """Peak bytes per logit while the loss runs forward and backward: the step's peak at two vocabulary sizes and two
    sequence lengths, differenced twice, so the layers (which do not grow with the vocabulary) and the output head's
    weight (which does not grow with the sequence) drop out. A batch of two: with one sequence, the shifted logits
    the hub code copies are contiguous already, and no copy is made."""
    (s1, s2), (v1, v2), w, batch = SEQS, (32768, 65536), PROBES[0], 2
    peak = {(s, v): step_bytes(w, arch, 2, s, False, True, v, fp32_logits, HUB_LOSS.get(decoder), batch=batch)
            for s in (s1, s2) for v in (v1, v2)}
    return (peak[s2, v2] - peak[s2, v1] - peak[s1, v2] + peak[s1, v1]) / ((s2 - s1) * (v2 - v1) * batch)


def _split(measure) -> tuple[float, float]:
    """(bytes per token linear in the sequence, bytes per token^2) of `measure(seq)` over the two SEQS."""
    (s1, s2), (b1, b2) = SEQS, [measure(s) for s in SEQS]
    quadratic = (b2 / s2 - b1 / s1) / (s2 - s1)
    return b1 / s1 - quadratic * s1, quadratic


def per_layer(w: dict, arch: str, lora: bool, checkpointing: bool) -> tuple[float, float]:
    """What autograd keeps for one decoder layer: the 3-layer total less the 2-layer total."""
    return _split(lambda s: saved_bytes(w, arch, 3, s, lora, checkpointing)
                  - saved_bytes(w, arch, 2, s, lora, checkpointing))


def working(w: dict, arch: str, lora: bool, checkpointing: bool) -> tuple[float, float]:
    """The step's peak beyond what every layer keeps, at the small vocabulary (so the loss is not the peak): one
    layer's backward, with checkpointing its recomputed forward too. With P(L) = L x kept + working at L layers,
    working = 3 P(2) - 2 P(3)."""
    def measure(seq: int) -> int:
        two, three = (step_bytes(w, arch, layers, seq, lora, checkpointing, SMALL_VOCAB) for layers in (2, 3))
        return 3 * two - 2 * three

    return _split(measure)


def fit(arch: str, lora: bool, checkpointing: bool, quantity=per_layer) -> dict:
    """Coefficients of TERMS (least squares over PROBES) and the attention scores per head per token^2 of
    `quantity` (per_layer: what one layer keeps; working: the step's working set)."""
    import numpy

    probes = [dict(p, head_dim=p["hidden"] // p["heads"], kv_heads=p["heads"]) if arch == "bloom" else p
              for p in PROBES]
    measured = [quantity(p, arch, lora, checkpointing) for p in probes]
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
                           for method in ("full", "lora")},
                        "working": {method: {("full" if gc else "none"): fit(arch, method == "lora", gc, working)
                                             for gc in (False, True)} for method in ("full", "lora")},
                        "logit_bytes": {("fp32" if up else "bf16"): round(logit_bytes(name, arch, up), 3)
                                        for up in (False, True)}}
        print(f"fitted {name}", file=sys.stderr)
    (DATA_DIR / "hf_activations.yaml").write_text(
        f"# Bytes the real HuggingFace code keeps for backward per token per decoder layer, by recompute (none, or\n"
        f"# full: gradient checkpointing), as coefficients of {', '.join(TERMS)} (q = heads x head_dim, kv = KV\n"
        f"# heads x head_dim), plus attention scores kept per head per token^2; fitted on {len(PROBES)} widths per\n"
        f"# decoder. working: the same coefficients for a step's peak beyond what the layers keep (one layer's\n"
        f"# backward; with checkpointing its recomputed forward too), the parameters' gradients left out.\n"
        f"# logit_bytes: the peak bytes per logit while the loss runs forward and backward, in bf16 or in fp32\n"
        f"# (the output head's result upcast, as autocast computes the loss), by transformers' loss or the\n"
        f"# decoder's hub code (HUB_LOSS); {how}.\n" + yaml.safe_dump({"decoders": fitted}, sort_keys=True),
        encoding="utf-8")
    data = Path(__file__).resolve().parent.parent / "tests" / "data"
    with (data / "hf_activations.csv").open("w", encoding="utf-8", newline="") as kept_file, \
            (data / "hf_step_peaks.csv").open("w", encoding="utf-8", newline="") as peak_file:
        kept_file.write(f"# Per model row at its real widths, {how}.\n")
        peak_file.write(f"# Per model row at its real widths and vocabulary, one sequence of `seq` tokens: the peak "
                        f"bytes of a training step beyond the parameters and their gradients (step_bytes), with 2 "
                        f"and 3 decoder layers; {how} (the step: the lengths in its seq column).\n")
        kept, peaks = csv.writer(kept_file, lineterminator="\n"), csv.writer(peak_file, lineterminator="\n")
        kept.writerow(["model", "decoder", "method", "checkpointing", "bytes_per_token_layer",
                       "bytes_per_token2_layer"])
        peaks.writerow(["model", "decoder", "method", "checkpointing", "seq", "bytes_2_layers", "bytes_3_layers"])
        for name, model in tables.models.items():
            info = fw.models.get(name) or {}
            if not tables.supports(fw.name, name) or fw.refusal(name) or name == "debug-tiny":
                continue
            arch = decoders(tables)[info["decoder"]][0]
            for method in ("full", "lora"):
                for gc in (False, True):
                    row = [name, info["decoder"], method, str(gc).lower()]
                    linear, quadratic = per_layer(widths(model), arch, method == "lora", gc)
                    kept.writerow(row + [f"{linear:.1f}", f"{quadratic:.4f}"])
                    for seq in STEP_SEQS:
                        hub_loss = HUB_LOSS.get(info["decoder"])
                        peaks.writerow(row + [seq] + [step_bytes(widths(model), arch, layers, seq, method == "lora",
                                                                 gc, model.vocab, hub_loss=hub_loss)
                                                      for layers in (2, 3)])
            print(f"measured {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
