"""The memory model's k-bit terms against what LLaMA-Factory 0.9.5's own loader keeps (issue 26): a tiny Llama-3
loaded as `llamafactory-cli train` loads a QLoRA job (tests/kbit_loader.py: its load_tokenizer / load_model, on the fly
quantization through bitsandbytes' CPU backend). bench/qlora_kbit.py prints the same for every decoder family.

Tolerance 1%: at these widths (every matrix at least 1024 x 512 weights) the model leaves out under 0.5%: the
per-matrix constants of a 4-bit weight (the 16-entry NF4 map, the 256-entry nested map: 1,092 B, < 0.1%), the fp32
scale per output row of an 8-bit one (4 / 1024 B = 0.4%), the norms counted at the quantized rate (< 0.1% of the
parameters). The errors it must catch are larger: a 4-bit absmax counted in fp32 under double quantization (0.5625
for 0.516 B, +9%), the 8-bit layer's earlier 1.5 B (+50%), the unquantized parameters in fp32 (2x).

The activations: the memory model counts a QLoRA step's as a LoRA step's on a bf16 base (hf_activations.yaml's lora
coefficients), and one real step of the loaded 4-bit model keeps what LoRA on the bf16 base keeps, with and without
gradient checkpointing (bitsandbytes' 4-bit matmul saves only the quantized weight for backward,
autograd/_functions.py l. 358, and dequantizes it for each product)."""

from __future__ import annotations

import sys

import kbit_loader as Q
import pytest
import yaml
from conftest import REPO
from helpers import render_job, require

from generator.memory import ADAPTER_WEIGHT_BYTES, quant_bytes

TOLERANCE = 0.01
ITEMSIZE = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    require("llamafactory", "bitsandbytes")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in Q.ENVIRONMENT.items():
            patch.setenv(name, value)
        patch.syspath_prepend(str(Q.STUBS))
        yield tmp_path_factory.mktemp("kbit")


@pytest.mark.parametrize("bits,double_quant", [(4, True), (4, False), (8, True)])
def test_the_real_loader_keeps_what_the_memory_model_counts(models, tables, bits, double_quant):
    loaded = Q.load("llama3", bits, models, double_quant)
    counted = quant_bytes(bits, double_quant)
    assert abs(loaded.bytes_per_quantized_param - counted) <= TOLERANCE * counted, (loaded, counted)
    # What bitsandbytes keeps beside the weights: a uint8 absmax with its fp32 absmax under double quantization,
    # an fp32 absmax without it, an fp32 scale per row for int8.
    state = {4: {True: {"absmax": "torch.uint8", "nested_absmax": "torch.float32"},
                 False: {"absmax": "torch.float32"}}, 8: {True: {"SCB": "torch.float32"}}}[bits][double_quant]
    assert state.items() <= loaded.quant_state.items()
    # The parameters left unquantized (embeddings and output head, norms) stay in the checkpoint's bf16: the memory
    # model's embeddings term counts 2 B (frameworks.yaml kbit_fp32 false: no fp32 upcast).
    kbit_fp32 = tables.frameworks["llama-factory"].kbit_fp32
    assert loaded.unquantized["embeddings"] and loaded.unquantized["other"]
    for kind in loaded.unquantized.values():
        assert {ITEMSIZE[dtype] for dtype in kind} == {4 if kbit_fp32 else 2}, loaded.unquantized
    assert {ITEMSIZE[dtype] for dtype in loaded.adapters} == {ADAPTER_WEIGHT_BYTES}
    # The frozen weights as the memory model adds them (memory.py _deepspeed: everything but the embeddings at the
    # quantized rate), on the loaded model's own counts.
    embeddings = sum(loaded.unquantized["embeddings"].values())
    other = sum(loaded.unquantized["other"].values())
    measured = loaded.quantized_bytes + 2 * (embeddings + other)
    model = (loaded.quantized_params + other) * counted + embeddings * (4 if kbit_fp32 else 2)
    assert abs(model - measured) <= TOLERANCE * measured


@pytest.mark.parametrize("hardware,double_quant", [("rtx4090", True), ("snt9b", False)])
def test_the_plan_counts_the_double_quantization_its_train_yaml_sets(tables, hardware, double_quant):
    plan, files = render_job(tables, model="qwen2.5-7b", method="qlora", quantization_bit=4, hardware=hardware,
                             seq_len=1024, frameworks=["llama-factory"], cards=1)
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    assert train.get("double_quantization", True) is double_quant  # LLaMA-Factory's default: on
    note = next(n for n in plan.to_json()["notes"] if "memory of the 4-bit base" in n)
    assert f"{quant_bytes(4, double_quant):.4g} B per quantized weight" in note
    assert ("with double quantization" in note) is double_quant


@pytest.mark.parametrize("checkpointing", [True, False])
def test_a_4bit_step_keeps_what_lora_on_the_bf16_base_keeps(models, checkpointing):
    sys.path.insert(0, str(REPO / "bench"))
    from calibrate_activations import _peak_tracker

    peaks = {bits: Q.step_peak(Q.build("llama3", bits, models, checkpointing=checkpointing), 256, _peak_tracker())
             for bits in (None, 4)}
    assert abs(peaks[4] - peaks[None]) <= TOLERANCE * peaks[None], peaks
