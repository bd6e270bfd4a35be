"""What LLaMA-Factory 0.9.5's own k-bit load keeps in memory, measured with its real loader on CPU (bitsandbytes'
CPU backend): the quantized linear weights with their quant state, the parameters left unquantized and the LoRA
adapters, by dtype and bytes. Used by tests/test_qlora_kbit.py and bench/qlora_kbit.py.

The model is loaded as `llamafactory-cli train` loads it for a QLoRA job: LLaMA-Factory's ModelArguments and
FinetuningArguments parsed from the keys train.yaml holds, the compute dtype bf16 (hparams/parser.py l. 512-513:
train.yaml's `bf16: true`), then model/loader.py load_tokenizer and load_model(is_trainable=True), which quantize
on the fly through model_utils/quantization.py configure_quantization. The checkpoint is a tiny random-weight model
of the family's real architecture (tests/tiny_models.py), saved in bf16 as the real checkpoints are, widened so
that each quantized matrix holds at least 64 x 256 weights (one nested-absmax block; the per-matrix constants, the
16-entry NF4 map and the 256-entry nested map, are then under 0.1% of its bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tiny_models

STUBS = Path(__file__).parent / "stubs"
SCALE = 16  # hidden 1024, MLP 2048, 64 heads of 16: every linear matrix >= 64 x 256 weights


@dataclass
class Loaded:
    """Bytes LLaMA-Factory's loaded model holds, by kind of parameter."""

    family: str
    bits: int
    double_quant: bool
    quantized_params: int = 0  # weights of the quantized linear layers, counted unpacked
    quantized_bytes: int = 0  # their storage, packed, plus every tensor of their quant state
    # frozen parameters left unquantized: "embeddings" (input embeddings and an untied output head) or "other"
    # (norms, biases, a vision tower), each {dtype name: parameters}
    unquantized: dict[str, dict[str, int]] = field(default_factory=lambda: {"embeddings": {}, "other": {}})
    adapters: dict[str, int] = field(default_factory=dict)  # trainable LoRA parameters by dtype name
    quant_state: dict[str, str] = field(default_factory=dict)  # a quantized matrix's tensors: name -> dtype

    @property
    def bytes_per_quantized_param(self) -> float:
        return self.quantized_bytes / self.quantized_params


# What the execution tier's launch environment sets (llamafactory_exec.environment) that loading needs: offline, no
# version check, quiet; and tests/stubs on the path (the torchaudio stand-in LLaMA-Factory imports).
ENVIRONMENT = {"DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "LLAMAFACTORY_VERBOSITY": "WARN", "TOKENIZERS_PARALLELISM": "false"}


def write_model(family: str, models: Path) -> Path:
    folder = models / f"{family}-x{SCALE}"
    if not (folder / "config.json").exists():
        tiny_models.write_model(family, folder, scale=SCALE, dtype="bfloat16", processor=False)
    return folder


def build(family: str, bits: int | None, models: Path, double_quant: bool = True,
               checkpointing: bool = True):
    """The tiny `family` checkpoint as LLaMA-Factory's loader builds it for a QLoRA job of `bits` bits (None: LoRA
    on the bf16 base), rank 8 on every linear layer (lora_target all), with or without its gradient checkpointing.
    Needs ENVIRONMENT and STUBS on sys.path."""
    import torch
    from llamafactory.hparams import FinetuningArguments, ModelArguments
    from llamafactory.model import load_model, load_tokenizer
    from transformers import HfArgumentParser

    folder = write_model(family, models)
    keys = {"model_name_or_path": str(folder), "double_quantization": double_quant, "finetuning_type": "lora",
            "lora_rank": 8, "lora_target": "all", "disable_gradient_checkpointing": not checkpointing}
    if bits:
        keys["quantization_bit"] = bits
    model_args, finetuning_args = HfArgumentParser((ModelArguments, FinetuningArguments)).parse_dict(
        keys, allow_extra_keys=True)
    model_args.compute_dtype = torch.bfloat16  # hparams/parser.py l. 512-513 (bf16: true)
    model_args.device_map = {"": torch.device("cpu")}  # parser.py l. 517: get_current_device()
    tokenizer = load_tokenizer(model_args)["tokenizer"]
    return load_model(tokenizer, model_args, finetuning_args, is_trainable=True)


def load(family: str, bits: int, models: Path, double_quant: bool = True) -> Loaded:
    """What LLaMA-Factory's loader keeps for a QLoRA job of `bits` bits on the tiny `family` (build)."""
    return count(build(family, bits, models, double_quant), family, bits, double_quant)


def step_peak(model, seq: int, tracker) -> int:
    """Peak bytes of one training step (forward, loss, backward) on `seq` tokens beyond the model's weights, quant
    state and gradients, every allocation and release followed by `tracker` (bench/calibrate_activations.py
    _peak_tracker, as the activations the memory model counts were measured)."""
    import torch

    ids = torch.zeros((1, seq), dtype=torch.long)
    resident = [*model.parameters(), *model.buffers(), ids]
    for param in model.parameters():
        state = getattr(param, "quant_state", None)
        if state is not None:
            resident += [value for value in state.as_dict(packed=False).values() if torch.is_tensor(value)]
        if getattr(param, "SCB", None) is not None:
            resident.append(param.SCB)
    peak = tracker({tensor.untyped_storage()._cdata for tensor in resident})
    peak.follow_gradients(model)
    with peak:
        out = model(input_ids=ids, labels=ids)
        loss = out.loss
        del out  # the Trainer drops the logits before backward
        loss.backward()
        del loss
    return peak.peak()


def count(model, family: str, bits: int, double_quant: bool) -> Loaded:
    import torch

    out = Loaded(family, bits, double_quant)
    seen: set[int] = set()

    def storage(tensor) -> int:
        ptr = tensor.untyped_storage().data_ptr()
        if ptr in seen:
            return 0
        seen.add(ptr)
        return tensor.untyped_storage().nbytes()

    embeddings = {id(module.weight) for module in model.modules() if isinstance(module, torch.nn.Embedding)}
    output = model.get_output_embeddings()
    if output is not None:
        embeddings.add(id(output.weight))
    for _, param in model.named_parameters():
        state = getattr(param, "quant_state", None)
        if param.requires_grad:
            out.adapters[str(param.dtype)] = out.adapters.get(str(param.dtype), 0) + param.numel()
        elif state is not None:  # bitsandbytes Params4bit: packed weights + absmax (+ nested absmax) + maps
            out.quantized_params += state.shape.numel()
            out.quantized_bytes += storage(param)
            tensors = {name: value for name, value in state.as_dict(packed=False).items() if torch.is_tensor(value)}
            out.quantized_bytes += sum(storage(value) for value in tensors.values())
            out.quant_state = {"weight": str(param.dtype), **{name: str(t.dtype) for name, t in tensors.items()}}
        elif getattr(param, "SCB", None) is not None:  # bitsandbytes Int8Params: int8 weights + a scale per row
            out.quantized_params += param.numel()
            out.quantized_bytes += storage(param) + storage(param.SCB)
            out.quant_state = {"weight": str(param.dtype), "SCB": str(param.SCB.dtype)}
        else:
            kind = out.unquantized["embeddings" if id(param) in embeddings else "other"]
            kind[str(param.dtype)] = kind.get(str(param.dtype), 0) + param.numel()
    return out
