"""Tiny randomly initialised models of each architecture family the LLaMA-Factory rows use, written to a folder as
a HuggingFace checkpoint (config.json, safetensors weights, a word-level tokenizer carrying the chat template's
special tokens, and for vision-language models an image processor), plus data files shaped like upstream's demo
data. Nothing is downloaded. Used by the execution tier (tests/test_llamafactory_exec.py)."""

from __future__ import annotations

import json
from pathlib import Path

# Model row -> (HuggingFace model_type, bos, eos, pad). Rows of one family share the tiny model.
FAMILIES = {
    "llama3": ("llama", "<|begin_of_text|>", "<|eot_id|>", "<|end_of_text|>"),
    "llama2": ("llama", "<s>", "</s>", "<unk>"),
    "qwen2": ("qwen2", None, "<|im_end|>", "<|endoftext|>"),
    "qwen3": ("qwen3", None, "<|im_end|>", "<|endoftext|>"),
    "glm4": ("glm", None, "<|endoftext|>", "<|endoftext|>"),
    "qwen2_vl": ("qwen2_vl", None, "<|im_end|>", "<|endoftext|>"),
    "qwen2_5_vl": ("qwen2_5_vl", None, "<|im_end|>", "<|endoftext|>"),
    "gemma3": ("gemma3", "<bos>", "<end_of_turn>", "<pad>"),
    "bloom": ("bloom", "<s>", "</s>", "<pad>"),
}
# Rows whose architecture needs code this test cannot write: the model's own modeling file from its hub repository
# (trust_remote_code), which is not a package and cannot be fetched here.
REMOTE_CODE = {"chatglm3-6b": "THUDM/chatglm3-6b runs its own modeling_chatglm.py (trust_remote_code); no package "
                              "ships it, so no tiny ChatGLM3 can be built offline"}


def family(model: str) -> str:
    """The tiny family of a model row of the table; KeyError for a row this file does not know yet."""
    prefixes = [("llama3", "llama3"), ("llama2", "llama2"), ("qwen2.5_vl", "qwen2_5_vl"), ("qwen2vl", "qwen2_vl"),
                ("qwen2", "qwen2"), ("qwen3", "qwen3"), ("debug-tiny", "qwen3"), ("glm4", "glm4"),
                ("gemma3", "gemma3"), ("bloom", "bloom")]
    for prefix, name in prefixes:
        if model.startswith(prefix):
            return name
    raise KeyError(f"tests/tiny_models.py has no tiny family for model row {model!r}: add one")


# Every chat template's special tokens (LLaMA-Factory data/template.py at v0.9.5), in one vocabulary: a template
# finds the ones it uses, the rest are never produced.
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
           "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
           "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
           "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
           "<image_soft_token>"]
WORDS = ("the a of to and in is for on with that this you it be are as at by from an or not we can what how why "
         "who give write describe list explain one two three four five hello world answer question picture shows "
         "red square user model assistant system INST SYS").split()


def tokenizer(fam: str):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    _, bos, eos, pad = FAMILIES[fam]
    vocab = {token: i for i, token in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    extra = {}
    if fam == "gemma3":  # Gemma3Processor reads these from the tokenizer
        extra = {"extra_special_tokens": {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                          "image_token": "<image_soft_token>"}}
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token=bos, eos_token=eos,
                                   pad_token=pad, additional_special_tokens=SPECIAL[4:], **extra)


def _config(fam: str, tok, scale: int = 1):
    from transformers import AutoConfig

    ids = tok.convert_tokens_to_ids
    # `scale` widens the model with more heads, not wider ones (Qwen2-VL's mrope sections need head_dim 16)
    text = {"vocab_size": len(tok), "hidden_size": 64 * scale, "intermediate_size": 128 * scale,
            "num_hidden_layers": 2, "num_attention_heads": 4 * scale, "num_key_value_heads": 2 * scale,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": True, "eos_token_id": ids(FAMILIES[fam][2]), "pad_token_id": ids(FAMILIES[fam][3])}
    if fam in ("qwen2_vl", "qwen2_5_vl"):
        vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "patch_size": 14,
                  "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 64 * scale,
                  "intermediate_size": 64}
        text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}  # head_dim 16: halves sum to 8
        return AutoConfig.for_model(fam, text_config=text, vision_config=vision,
                                    image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
                                    vision_start_token_id=ids("<|vision_start|>"),
                                    vision_end_token_id=ids("<|vision_end|>"), tie_word_embeddings=True)
    if fam == "gemma3":
        text.update(head_dim=16, sliding_window=64)
        vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "image_size": 28, "patch_size": 14}
        return AutoConfig.for_model("gemma3", text_config=text, vision_config=vision, mm_tokens_per_image=4,
                                    boi_token_index=ids("<start_of_image>"), eoi_token_index=ids("<end_of_image>"),
                                    image_token_index=ids("<image_soft_token>"))
    if fam == "bloom":
        return AutoConfig.for_model("bloom", vocab_size=len(tok), hidden_size=64 * scale, n_layer=2, n_head=4 * scale,
                                    eos_token_id=text["eos_token_id"], pad_token_id=text["pad_token_id"])
    return AutoConfig.for_model(FAMILIES[fam][0], **text)


def _processor(fam: str, tok):
    if fam in ("qwen2_vl", "qwen2_5_vl"):
        from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor

        images = Qwen2VLImageProcessor(min_pixels=28 * 28, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                       temporal_patch_size=2)
        return Qwen2VLProcessor(image_processor=images, tokenizer=tok)
    if fam == "gemma3":
        from transformers import Gemma3ImageProcessor, Gemma3Processor

        images = Gemma3ImageProcessor(size={"height": 28, "width": 28})
        return Gemma3Processor(image_processor=images, tokenizer=tok, image_seq_length=4)
    return None


def write_model(fam: str, folder: Path, scale: int = 1, dtype: str | None = None, processor: bool = True) -> Path:
    """Write the tiny checkpoint of `fam` into `folder` (created) and return it: `scale` x the widths, in `dtype`
    ("bfloat16" as the real checkpoints; None: torch's default fp32), with the image processor of a
    vision-language family unless `processor` is False (the tokenizer alone: enough to load the model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(fam)
    config = _config(fam, tok, scale)
    loader = AutoModelForImageTextToText if fam in ("qwen2_vl", "qwen2_5_vl", "gemma3") else AutoModelForCausalLM
    model = loader.from_config(config)
    (model.to(getattr(torch, dtype)) if dtype else model).save_pretrained(folder)
    ((_processor(fam, tok) if processor else None) or tok).save_pretrained(folder)
    return folder


# Data shaped as upstream's demo files (data/alpaca_en_demo.json, data/glaive_toolcall-like ShareGPT rows,
# data/mllm_demo.json, data/c4_demo.jsonl): only the columns those files have.
def write_data(fmt: str, folder: Path, columns: tuple[str, ...] = (), rows: int = 16) -> Path:
    """Write `rows` rows of `fmt` data ("alpaca", "sharegpt", "openai" with images, "text") with the optional
    `columns` (alpaca: system, history; sharegpt: system, tools, as data/README.md describes them) and return the
    file."""
    folder.mkdir(parents=True, exist_ok=True)
    extra = {"system": "you are a model", "history": [["hello", "hello world"]],
             "tools": json.dumps([{"name": "answer", "description": "give one answer",
                                   "parameters": {"type": "object", "properties": {}}}])}
    if fmt == "alpaca":
        data = [{"instruction": "give one answer", "input": "", "output": "hello world"} for _ in range(rows)]
    elif fmt == "sharegpt":
        data = [{"conversations": [{"from": "human", "value": "what is this"},
                                   {"from": "gpt", "value": "hello world"}]} for _ in range(rows)]
    elif fmt == "openai":
        _write_image(folder / "images" / "1.png")
        data = [{"messages": [{"role": "user", "content": "<image>what picture is this"},
                              {"role": "assistant", "content": "a red square"}],
                 "images": ["images/1.png"]} for _ in range(rows)]
    else:
        path = folder / "train.jsonl"
        path.write_text("".join(json.dumps({"text": "the answer is one two three " * 8}) + "\n"
                                for _ in range(rows)), encoding="utf-8")
        return path
    data = [{**row, **{column: extra[column] for column in columns}} for row in data]
    path = folder / ("train.jsonl" if fmt == "sharegpt" else "train.json")
    if fmt == "sharegpt":
        path.write_text("".join(json.dumps(row) + "\n" for row in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write_image(path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (56, 56), (255, 0, 0)).save(path)
