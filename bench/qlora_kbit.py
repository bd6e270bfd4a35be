"""What LLaMA-Factory 0.9.5's own k-bit load keeps, for a tiny model of every decoder family the table plans with
QLoRA, against the memory model's terms (not a test; tests/test_qlora_kbit.py holds one family to them). Each family
is loaded as `llamafactory-cli train` loads a QLoRA job (tests/kbit_loader.py: LLaMA-Factory's load_tokenizer and
load_model, quantizing through bitsandbytes' CPU backend) in 4 bits with and without double quantization and in
8 bits, and the table gives, per load: bytes per quantized weight with its quant state, the memory model's figure
(memory.quant_bytes) and its error, the dtype of the parameters left unquantized (embeddings and output head; norms,
biases, a vision tower's patch embedding) and of the LoRA adapters.

With --steps it also runs one training step (256 tokens, with and without gradient checkpointing) of each family
loaded in 4 and 8 bits and as LoRA on its bf16 base, every allocation followed as the activations the memory model
counts were measured (bench/calibrate_activations.py), and prints the k-bit step's peak beyond the weights against
the bf16 base's: the memory model counts a 4-bit step's activations as LoRA's, an 8-bit one's plus the bf16 inputs
its int8 matmul keeps (memory.int8_input_bytes). On CPU bitsandbytes trains its 8-bit layers through a dequantizing
matmul (autograd/_functions.py MatMul8bitFp, which keeps those inputs too, l. 269), not the int8 one a GPU runs, so
the 8-bit column does not stand for a GPU.

Needs the test extra (README). `python bench/qlora_kbit.py [--steps] [FAMILY ...]`; about two minutes on 2 cores
(ten with --steps).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import kbit_loader as Q  # noqa: E402
import tiny_models  # noqa: E402

from generator.memory import quant_bytes  # noqa: E402
from generator.tables import load_tables  # noqa: E402

LOADS = [(4, True), (4, False), (8, True)]
STEP_SEQ = 256


def families() -> dict[str, list[str]]:
    """Each tiny family the table's QLoRA rows use -> those rows; rows with no tiny family are listed under a
    reason."""
    tables = load_tables()
    fw = tables.frameworks["llama-factory"]
    out: dict[str, list[str]] = {}
    for model in (m for m in tables.models if tables.supports("llama-factory", m) and "qlora" in fw.methods):
        refused = (fw.models.get(model) or {}).get("refuse")
        if refused:
            key = f"refused by gen-launch: {refused}"
        elif model in tiny_models.REMOTE_CODE:
            key = f"not loaded: {tiny_models.REMOTE_CODE[model]}"
        else:
            key = tiny_models.family(model)
        out.setdefault(key, []).append(model)
    return out


def dtypes(counts: dict[str, int]) -> str:
    return "+".join(sorted(name.removeprefix("torch.") for name in counts)) or "-"


def main(names: list[str], steps: bool) -> int:
    os.environ.update(Q.ENVIRONMENT)
    sys.path.insert(0, str(Q.STUBS))
    rows = families()
    print("families the table plans with QLoRA (LLaMA-Factory 0.9.5), by tiny model:")
    for family, models in rows.items():
        print(f"  {family}: {', '.join(models)}")
    print(f"\n{'family':11s} {'bits':>4s} {'dq':>3s} {'B/weight':>9s} {'model':>7s} {'error':>7s} "
          f"{'embeddings':>10s} {'other unq.':>10s} {'share unq.':>10s} {'adapters':>8s}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for family in (f for f in rows if f in tiny_models.FAMILIES and (not names or f in names)):
            for bits, double in LOADS:
                loaded = Q.load(family, bits, Path(tmp), double)
                counted = quant_bytes(bits, double)
                error = counted / loaded.bytes_per_quantized_param - 1
                worst = max(worst, abs(error))
                unquantized = sum(sum(kind.values()) for kind in loaded.unquantized.values())
                share = unquantized / (unquantized + loaded.quantized_params)
                print(f"{family:11s} {bits:4d} {'on' if double and bits == 4 else '-':>3s} "
                      f"{loaded.bytes_per_quantized_param:9.4f} {counted:7.4f} {error:+7.2%} "
                      f"{dtypes(loaded.unquantized['embeddings']):>10s} {dtypes(loaded.unquantized['other']):>10s} "
                      f"{share:10.2%} {dtypes(loaded.adapters):>8s}", flush=True)
    print(f"\nlargest error of the memory model's bytes per quantized weight: {worst:.2%}")
    if steps:
        print_steps([f for f in rows if f in tiny_models.FAMILIES and (not names or f in names)])
    return 0


def print_steps(fams: list[str]) -> None:
    from calibrate_activations import _peak_tracker

    print(f"\none step's peak beyond the weights, {STEP_SEQ} tokens, MiB: LoRA on the bf16 base, then 4-bit and 8-bit "
          f"(CPU matmul) with their difference")
    with tempfile.TemporaryDirectory() as tmp:
        for family in fams:
            for checkpointing in (True, False):
                peaks = {bits: Q.step_peak(Q.build(family, bits, Path(tmp), checkpointing=checkpointing), STEP_SEQ,
                                           _peak_tracker()) / 2**20 for bits in (None, 4, 8)}
                print(f"{family:11s} {'checkpointing' if checkpointing else 'no recompute':13s} "
                      f"bf16 {peaks[None]:8.2f}  4-bit {peaks[4]:8.2f} {peaks[4] / peaks[None] - 1:+6.1%}  "
                      f"8-bit {peaks[8]:8.2f} {peaks[8] / peaks[None] - 1:+6.1%}", flush=True)


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--steps"], "--steps" in sys.argv[1:]))
