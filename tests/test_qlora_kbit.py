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
autograd/_functions.py l. 358, and dequantizes it for each product). An 8-bit base keeps more: bitsandbytes' int8
matmul, MatMul8bitLt, stores each quantized linear's bf16 input (l. 186-187), which memory.int8_input_bytes counts; the
tests below count what its nodes hold on the loaded model. A CPU in training mode takes another class (MatMul8bitFp,
l. 401-403), so the model runs in eval mode there, which sends it through MatMul8bitLt, the class a GPU trains with,
with bitsandbytes' default-backend kernels (what it keeps is set in Python, not by the kernels)."""

from __future__ import annotations

import sys

import kbit_loader as Q
import pytest
import yaml
from conftest import REPO
from helpers import note_lines, render_job, require

from generator.memory import ADAPTER_WEIGHT_BYTES, GIB, MemoryJob, estimate, int8_input_bytes, quant_bytes
from generator.parallel import Parallel

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
    note = next(n for n in note_lines(plan.to_json()["notes"]) if "memory of the 4-bit base" in n)
    assert f"{quant_bytes(4, double_quant):.4g} B per quantized weight" in note
    assert ("with double quantization" in note) is double_quant


@pytest.mark.parametrize("checkpointing", [True, False])
def test_a_4bit_step_keeps_what_lora_on_the_bf16_base_keeps(models, checkpointing):
    sys.path.insert(0, str(REPO / "bench"))
    from calibrate_activations import _peak_tracker

    peaks = {bits: Q.step_peak(Q.build("llama3", bits, models, checkpointing=checkpointing), 256, _peak_tracker())
             for bits in (None, 4)}
    assert abs(peaks[4] - peaks[None]) <= TOLERANCE * peaks[None], peaks


def _int8_kept(output, stop=None) -> tuple[int, set[str]]:
    """Bytes of the distinct storages the int8 matmul nodes of `output`'s graph keep as ctx.tensors (up to the node
    `stop`), and the names of those nodes' classes."""
    import torch

    storages: dict[int, int] = {}
    classes: set[str] = set()
    todo, seen = [output.grad_fn], {id(stop)}
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if "MatMul8bit" in type(node).__name__:
            classes.add(type(node).__name__)
            for tensor in node.tensors:
                if torch.is_tensor(tensor) and tensor.numel():
                    storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        todo += [following for following, _ in node.next_functions]
    return sum(storages.values()), classes


def _tiny(tables, config):
    """The memory model's Model for the loaded tiny Llama: llama3.1-8b at the tiny checkpoint's widths."""
    from dataclasses import replace

    return replace(tables.models["llama3.1-8b"], layers=config.num_hidden_layers, hidden=config.hidden_size,
                   ffn=config.intermediate_size, heads=config.num_attention_heads,
                   kv_heads=config.num_key_value_heads, head_dim=config.head_dim)


def test_an_8bit_step_without_checkpointing_keeps_every_layers_inputs(models, tables):
    import torch

    model = Q.build("llama3", 8, models, checkpointing=False).eval()
    ids = torch.zeros((2, 128), dtype=torch.long)
    kept, classes = _int8_kept(model(input_ids=ids, labels=ids).loss)
    assert classes == {"MatMul8bitLtBackward"}
    assert kept == int8_input_bytes(_tiny(tables, model.config), "none", ids.numel())[0] > 0


def test_an_8bit_layer_recomputed_keeps_its_inputs_and_checkpointing_keeps_none_in_forward(models, tables):
    import torch

    model = Q.build("llama3", 8, models, checkpointing=True)
    ids = torch.zeros((2, 128), dtype=torch.long)
    # LLaMA-Factory's reentrant checkpointing runs the forward under no_grad: no int8 node is left for backward
    assert _int8_kept(model.train()(input_ids=ids, labels=ids).loss) == (0, set())
    # ... and recomputes each layer with its input requiring grad: what the last layer keeps, as one layer runs
    # with grad (eval mode: no checkpointing, MatMul8bitLt)
    layer, held = model.get_base_model().model.layers[-1], {}
    layer.register_forward_pre_hook(lambda module, args, kwargs: held.update(input=kwargs.get(
        "hidden_states", args[0] if args else None)), with_kwargs=True)
    layer.register_forward_hook(lambda module, args, output: held.update(output=output[0] if isinstance(
        output, tuple) else output))
    model.eval()(input_ids=ids, labels=ids)
    kept, classes = _int8_kept(held["output"], stop=held["input"].grad_fn)
    assert classes == {"MatMul8bitLtBackward"}
    assert int8_input_bytes(_tiny(tables, model.config), "full", ids.numel()) == (0.0, kept)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_the_estimate_counts_the_int8_inputs(tables, recompute):
    """Llama-3.1-8B, 2 x 1024 tokens: an 8-bit step keeps what a 4-bit one does plus the bf16 inputs of the int8
    linears, written out here from its widths (hidden 4096, 32 heads of 128, MLP 14336, 32 layers)."""
    model = tables.models["llama3.1-8b"]
    per_layer = 2 * 2048 * (4096 + 4096 + 4096 + 14336)  # q/k/v's input, o's, gate/up's, down's: bf16
    activations = tables.frameworks["llama-factory"].activations["llama"]
    layout = Parallel(cards=1, cards_per_node=1, global_batch_size=2, micro_batch_size=2, recompute=recompute,
                      num_layer_list=(model.layers,))
    kept = {bits: estimate(MemoryJob(model, "qlora", "deepspeed", 1024, 16, 0.0, quant_bits=bits,
                                     activations=activations), layout).activations for bits in (4, 8)}
    if recompute == "none":  # every layer's, but the first layer's attention input (needs no grad)
        assert (kept[8] - kept[4]) * (1 << 30) == pytest.approx(32 * per_layer - 2 * 2048 * 4096)
    else:  # one recomputed layer's, on its working set where that outweighs the logits
        assert 0 <= (kept[8] - kept[4]) * (1 << 30) <= per_layer


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_an_8bit_plan_says_what_its_int8_inputs_hold(tables, recompute):
    plan, _ = render_job(tables, model="llama3.1-8b", method="qlora", quantization_bit=8, hardware="a800",
                         seq_len=1024, frameworks=["llama-factory"], cards=1,
                         layout={"llama-factory": {"recompute": recompute, "micro_batch_size": 2}})
    note = next(n for n in note_lines(plan.to_json()["notes"]) if "activations of the 8-bit base" in n)
    held = int8_input_bytes(tables.models["llama3.1-8b"], recompute, 2048)[recompute == "full"]
    assert f"{held / GIB:.2f} GiB" in note and "not measured on a GPU" in note
