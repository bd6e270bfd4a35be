"""MindSpeed-MM v2.2.0: launch.sh's command parses under pretrain_vlm.py's pinned parser (Megatron core_v0.12.1,
MindSpeed and MindSpeed-MM declarations: generator/data/mindspeed_mm_flags_kinds.tsv) and passes the start-up rules
below, each with its upstream file and line; model.json and convert_ckpt.sh agree with it."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

from ...api.frozen import frozen
from ...checks.job import text
from ...checks.shell import assignment, bash_arrays
from ...families.megatron import flags
from ...families.megatron.launch import LOADING, launch_line
from ...jobdir import read_regular
from ...tables import Model
from .planning import has_frozen_stage, sp_breaks

MM = "Ascend/MindSpeed-MM v2.2.0"
MEGATRON = "Megatron core_v0.12.1"


def _stages(layers) -> list[list[int]]:
    """pipeline_num_layers as virtual stages x stages (a flat list is one virtual stage)."""
    if layers and all(isinstance(x, list) for x in layers):
        return layers
    return [layers]


def _flat(layers) -> list[int]:
    return [n for chunk in _stages(layers) for n in chunk]


def _vpp(args) -> int:
    return args.virtual_pipeline_model_parallel_size or 1


def _dp(args) -> int:
    return args.world_size // (args.tensor_model_parallel_size * args.pipeline_model_parallel_size *
                               args.context_parallel_size)


def _list_shape_broken(args, layers) -> bool:
    # Without VPP a flat list of PP entries; with VPP, PP x VPP entries in total (vlm_model.py:151-160, 312-321)
    if _vpp(args) > 1:
        stages = _stages(layers)
        return args.pipeline_model_parallel_size * _vpp(args) != len(stages) * len(stages[0])
    return len(layers) != args.pipeline_model_parallel_size or any(isinstance(x, list) for x in layers)


def _vision_after_text(vision, text_) -> bool:
    # The stage order is virtual stage by virtual stage, then stage (vlm_model.py prefix sums); no vision layer may
    # come after the first stage that holds text layers.
    vis, txt = _flat(vision), _flat(text_)
    first_text = next((i for i, n in enumerate(txt) if n), len(txt))
    return any(n and i > first_text for i, n in enumerate(vis))


def _frozen_stage(args, model_json: dict) -> bool:
    encoder = model_json["image_encoder"]
    vision, text_ = encoder["vision_encoder"], model_json["text_decoder"]
    return not args.enable_dummy_optimizer and has_frozen_stage(
        _flat(vision["pipeline_num_layers"]), _flat(text_["pipeline_num_layers"]), vision.get("freeze", False),
        encoder.get("vision_projector", {}).get("freeze", False))


def _pipelined(args) -> bool:
    """Upstream reads pipeline_num_layers only with PP > 1: at PP 1 each module is built whole from num_layers
    (vlm_model.py:144-149, 298-311)."""
    return args.pipeline_model_parallel_size > 1


@frozen
class Rule:
    """One upstream rule: its id, its source, the error upstream raises, and what breaks it."""

    id: str
    source: str
    error: str
    broken: Callable  # (args, model json) -> bool


def _vision(m: dict) -> dict:
    return m["image_encoder"]["vision_encoder"]


RULES = (
    # MindSpeed-MM replaces Megatron's validate_args (validate_args_patch.py:773, force_patch): its check runs
    Rule("world_div_tp_pp_cp", f"{MM} mindspeed_mm/patchs/validate_args_patch.py:129-132",
         "world size is not divisible by TP x PP x CP",
         lambda a, m: a.world_size % (a.tensor_model_parallel_size * a.pipeline_model_parallel_size *
                                      a.context_parallel_size) != 0),
    Rule("gbs_div_mbs_dp", f"{MEGATRON} megatron/core/num_microbatches_calculator.py:339-345",
         "global batch size is not divisible by micro batch size x data-parallel size",
         lambda a, m: _dp(a) == 0 or a.global_batch_size % (a.micro_batch_size * _dp(a)) != 0),
    Rule("heads_div_tp", f"{MEGATRON} megatron/core/transformer/transformer_config.py:559-563",
         "num_attention_heads must be a multiple of tensor_model_parallel_size",
         lambda a, m: m["text_decoder"]["num_attention_heads"] % a.tensor_model_parallel_size != 0),
    Rule("groups_div_tp", f"{MEGATRON} megatron/core/transformer/transformer_config.py:574-578",
         "num_query_groups must be a multiple of tensor_model_parallel_size",
         lambda a, m: m["text_decoder"].get("num_query_groups", 1) % a.tensor_model_parallel_size != 0),
    Rule("ulysses_cp_heads", "Ascend/MindSpeed 5176c6f5 mindspeed/arguments.py:650-653",
         "with ulysses_cp_algo, seq_length must be divisible by CP and num_attention_heads by CP x TP",
         lambda a, m: a.context_parallel_size > 1 and a.context_parallel_algo == "ulysses_cp_algo" and (
             a.seq_length % a.context_parallel_size != 0 or m["text_decoder"]["num_attention_heads"] %
             (a.context_parallel_size * a.tensor_model_parallel_size) != 0)),
    Rule("sp_tp_divides_patches", f"{MM} mindspeed_mm/models/vision/vision_encoders/qwen2vl_vit_model.py:556-557; "
         f"{MEGATRON} megatron/core/tensor_parallel/mappings.py:66-69",
         "--sequence-parallel scatters each image's patches (a multiple of 4) over TP unpadded: TP must divide 4",
         lambda a, m: a.sequence_parallel and sp_breaks(a.tensor_model_parallel_size)),
    Rule("text_list_pp", f"{MM} mindspeed_mm/models/vlm_model.py:298, 312-321",
         "length of pipeline_num_layers must equal to pipeline-model-parallel-size (x vpp-size)",
         lambda a, m: _pipelined(a) and _list_shape_broken(a, m["text_decoder"]["pipeline_num_layers"])),
    Rule("vision_list_pp", f"{MM} mindspeed_mm/models/vlm_model.py:144, 151-160",
         "length of vision_encoder.pipeline_num_layers must equal to pipeline-model-parallel-size (x vpp-size)",
         lambda a, m: _pipelined(a) and _list_shape_broken(a, _vision(m)["pipeline_num_layers"])),
    Rule("text_layer_sum", f"{MM} mindspeed_mm/models/vlm_model.py:339-343",
         "text_decoder.pipeline_num_layers does not sum to num_layers (the last stage's post_process never holds)",
         lambda a, m: _pipelined(a) and
         sum(_flat(m["text_decoder"]["pipeline_num_layers"])) != m["text_decoder"]["num_layers"]),
    Rule("vision_layer_sum", f"{MM} mindspeed_mm/models/vlm_model.py:180-184",
         "vision_encoder.pipeline_num_layers does not sum to its num_layers",
         lambda a, m: _pipelined(a) and sum(_flat(_vision(m)["pipeline_num_layers"])) != _vision(m)["num_layers"]),
    Rule("vision_before_text", f"{MM} examples/qwen2.5vl/README.md:402",
         "vision_encoder layers must all be placed before the text_decoder's",
         lambda a, m: _pipelined(a) and
         _vision_after_text(_vision(m)["pipeline_num_layers"], m["text_decoder"]["pipeline_num_layers"])),
    Rule("vpp_nesting", f"{MM} mindspeed_mm/patchs/validate_args_patch.py:249-263",
         "vpp must be enabled by --virtual-pipeline-model-parallel-size and a nested pipeline_num_layers of that "
         "length",
         lambda a, m: (_vpp(a) > 1) != (len(_stages(m["text_decoder"]["pipeline_num_layers"])) > 1 or
                                         any(isinstance(x, list) for x in m["text_decoder"]["pipeline_num_layers"]))
         or (_vpp(a) > 1 and len(_stages(m["text_decoder"]["pipeline_num_layers"])) != _vpp(a))),
    Rule("vpp_needs_pp", f"{MM} mindspeed_mm/patchs/validate_args_patch.py:249-258",
         "the interleaved schedule needs pipeline-model-parallel size > 1, and > 2 with --no-overlap-p2p-communication",
         lambda a, m: _vpp(a) > 1 and a.pipeline_model_parallel_size <= (1 if a.overlap_p2p_comm else 2)),
    Rule("frozen_stage_dummy_optimizer", f"{MM} examples/qwen2.5vl/README.md:404",
         "a stage whose parameters are all frozen has no gradients: it needs --enable-dummy-optimizer",
         lambda a, m: _pipelined(a) and _frozen_stage(a, m)),
)


def rule_problems(args, model_json: dict) -> list[str]:
    problems = []
    for rule in RULES:
        try:
            broken = rule.broken(args, model_json)
        except (KeyError, TypeError, IndexError, ZeroDivisionError) as exc:
            problems.append(f"rule {rule.id} ({rule.source}) cannot be checked: {type(exc).__name__}: {exc}")
            continue
        if broken:
            problems.append(f"rule {rule.id} ({rule.source}): {rule.error}")
    return problems


def training_problems(argv: list[str], world_size: int, model_json: dict | None) -> list[str]:
    """Why pretrain_vlm.py would refuse `argv` with this model.json."""
    try:
        args = flags.parse("mm-train", argv)
    except flags.ParseError as exc:
        return [f"the pinned MindSpeed-MM v2.2.0 parser exits: {exc}"]
    args.world_size = world_size
    return rule_problems(args, model_json) if model_json is not None else []


CONVERT = f"{MM} checkpoint/vlm_model/config.py"


def _words(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _converter_config_problems(direction: str, llm, vit, tp: int, model_json: dict | None) -> list[str]:
    """mm-convert's own pydantic checks of its parallel config (the models' validators, reimplemented)."""
    if direction == "mm_to_hf":  # ParallelConfig: flat lists of the same length, at least 1 (l. 48-53)
        if not all(isinstance(x, int) for x in llm + vit):
            return [f"llm_pp_layers and vit_pp_layers must be flat lists of layer counts ({CONVERT}:16-23)"]
        if len(vit) != len(llm) or len(llm) < 1:
            return [f"vit_pp_layers and llm_pp_layers must have the same length, at least 1 ({CONVERT}:48-53)"]
        return []
    # VppParallelConfig: one list per virtual stage, each of PP entries (l. 97-115), then ConvertVppMMConfig's
    # policies (l. 236-268): KV heads divisible by TP, the flattened lists PP x VPP long and summing to the layers.
    if not all(isinstance(x, list) for x in llm + vit) or not llm or not llm[0]:
        return [f"hf_to_mm reads llm_pp_layers and vit_pp_layers as lists of lists ({CONVERT}:57-64)"]
    problems = []
    if len(vit) != len(llm):
        problems.append(f"vit_pp_layers and llm_pp_layers must have the same length ({CONVERT}:97-103)")
    if any(len(chunk) != len(llm[0]) for chunk in llm + vit):
        problems.append(f"every virtual stage's list must have the same length ({CONVERT}:105-115)")
    if model_json is not None:
        groups = model_json["text_decoder"].get("num_query_groups", model_json["text_decoder"]["num_attention_heads"])
        if groups % tp:
            problems.append(f"{groups} KV heads are not divisible by TP size {tp} ({CONVERT}:242-246)")
        for name, lists, total in (("vit", vit, _vision(model_json)["num_layers"]),
                                   ("llm", llm, model_json["text_decoder"]["num_layers"])):
            if sum(_flat(lists)) != total:
                problems.append(f"{name}_pp_layers sum to {sum(_flat(lists))}, not {total} ({CONVERT}:262-274)")
    return problems


def conversion_problems(direction: str, words: list[str], args: argparse.Namespace | None,
                        model_json: dict | None) -> list[str]:
    """Why mm-convert would refuse `words`, or write a layout training does not load: README.md l. 157-159, the
    lists must be model.json's pipeline_num_layers and tp_size the script's."""
    pairs = dict(zip(words[::2], words[1::2]))
    try:
        llm = json.loads(pairs["--cfg.parallel_config.llm_pp_layers"])
        vit = json.loads(pairs["--cfg.parallel_config.vit_pp_layers"])
        tp = int(pairs["--cfg.parallel_config.tp_size"])
    except (KeyError, ValueError) as exc:
        return [f"mm-convert needs llm_pp_layers, vit_pp_layers and tp_size ({exc})"]
    if not (_is_layer_lists(llm) and _is_layer_lists(vit)):
        return [f"llm_pp_layers {_words(llm)} and vit_pp_layers {_words(vit)} must be lists of layer counts "
                f"({CONVERT}:16-23, 57-64)"]
    problems = _converter_config_problems(direction, llm, vit, tp, model_json)
    if model_json is not None:
        if _flat(llm) != _flat(model_json["text_decoder"]["pipeline_num_layers"]):
            problems.append(f"llm_pp_layers {llm} differ from model.json's text_decoder.pipeline_num_layers "
                            f"(README.md:157)")
        if _flat(vit) != _flat(_vision(model_json)["pipeline_num_layers"]):
            problems.append(f"vit_pp_layers {vit} differ from model.json's vision_encoder.pipeline_num_layers "
                            f"(README.md:158)")
    if args is not None:
        if tp != args.tensor_model_parallel_size:
            problems.append(f"tp_size {tp} differs from training's --tensor-model-parallel-size "
                            f"{args.tensor_model_parallel_size} (README.md:159)")
        wanted = args.load if direction == "hf_to_mm" else args.save
        if pairs.get("--cfg.mm_dir") != wanted:
            problems.append(f"--cfg.mm_dir {pairs.get('--cfg.mm_dir')} is not training's "
                            f"{'--load' if direction == 'hf_to_mm' else '--save'} {wanted}")
    return problems


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_layer_lists(value) -> bool:
    """A pipeline split: layer counts, flat or one list per virtual stage."""
    return isinstance(value, list) and all(
        _is_count(x) or (isinstance(x, list) and all(_is_count(y) for y in x)) for x in value)


# What the rules read of model.json, and the type MindSpeed-MM reads it in (upstream's model_*.json).
_SHAPE = (("text_decoder.num_layers", _is_count, "a whole number"),
          ("text_decoder.num_attention_heads", _is_count, "a whole number"),
          ("text_decoder.pipeline_num_layers", _is_layer_lists, "a list of layer counts (or of such lists)"),
          ("image_encoder.vision_encoder.num_layers", _is_count, "a whole number"),
          ("image_encoder.vision_encoder.pipeline_num_layers", _is_layer_lists,
           "a list of layer counts (or of such lists)"))
_OPTIONAL = (("text_decoder.num_query_groups", _is_count, "a whole number"),
             ("image_encoder.vision_encoder.freeze", lambda v: isinstance(v, bool), "true or false"))


def _at(tree, key: str):
    """The value at a dotted key, or KeyError naming the first part that is missing or not an object."""
    node = tree
    for i, part in enumerate(key.split(".")):
        if not isinstance(node, dict):
            raise KeyError(f"{'.'.join(key.split('.')[:i]) or 'the file'} is not a JSON object")
        if part not in node:
            raise KeyError(f"{key} is missing")
        node = node[part]
    return node


def shape_problems(model_json) -> list[str]:
    """model.json's keys the rules read, each present (or optional) in its type; the rules run only without these."""
    problems = []
    for required, (key, ok, kind) in [(True, row) for row in _SHAPE] + [(False, row) for row in _OPTIONAL]:
        try:
            value = _at(model_json, key)
        except KeyError as exc:
            if required:  # an optional key's parents are required ones, reported there
                problems.append(f"{exc.args[0]} (upstream's model_*.json has {key}: {kind})")
            continue
        if not ok(value):
            problems.append(f"{key} is {json.dumps(value)}, must be {kind} (as upstream's model_*.json)")
    return list(dict.fromkeys(problems))


def model_problems(model_json: dict, model: Model) -> list[str]:
    """model.json's text decoder against the model table (the converted weights would not load otherwise)."""
    text_ = model_json["text_decoder"]
    expected = {"num_layers": model.layers, "hidden_size": model.hidden, "ffn_hidden_size": model.ffn,
                "num_attention_heads": model.heads, "num_query_groups": model.kv_heads, "vocab_size": model.vocab}
    return [f"model.json text_decoder.{k}={text_.get(k)} but {model.name} has {v}" for k, v in expected.items()
            if text_.get(k) != v]


def job_problems(folder: Path, model: Model | None) -> dict[str, list[str]]:
    texts = {name: text(folder / name) for name in ("launch.sh", "convert_ckpt.sh", "model.json")
             if read_regular(folder / name) is not None}
    problems: dict[str, list[str]] = {name: [] for name in texts}
    model_json = None
    if "model.json" in texts:
        model_json, problems["model.json"] = _read_model_json(texts["model.json"], model)
    args = None
    if "launch.sh" in texts:
        launch = texts["launch.sh"]
        entry, loadings, launch_problems = launch_line(launch)
        problems["launch.sh"] += launch_problems
        if entry and entry != "pretrain_vlm.py":
            problems["launch.sh"].append(f"{entry} is not MindSpeed-MM's entry pretrain_vlm.py")
        counts = {name: assignment(launch, name) or "0" for name in ("NPUS_PER_NODE", "NNODES")}
        for name, value in counts.items():
            if not value.isdigit():
                problems["launch.sh"].append(f"{name}={value}: must be a whole number of cards / nodes")
        world = math.prod(int(v) if v.isdigit() else 0 for v in counts.values())
        for name, argv in zip(LOADING, loadings):
            found = training_problems(argv, world, model_json)
            problems["launch.sh"] += [f"{'relaunch: ' if name == 'RESUME_ARGS' else ''}{p}" for p in found]
        if loadings:
            try:
                args = flags.parse("mm-train", loadings[0])
            except flags.ParseError:
                args = None
    if "convert_ckpt.sh" in texts:
        problems["convert_ckpt.sh"] += _conversions(texts["convert_ckpt.sh"], args, model_json)
    return problems


def _read_model_json(body: str, model: Model | None) -> tuple[dict | None, list[str]]:
    """model.json parsed, and its problems; None where it is no JSON or lacks a key the rules read."""
    problems: list[str] = []
    model_json = None
    try:
        model_json = json.loads(body)
    except ValueError as exc:
        problems.append(f"not JSON: {exc}")
    if model_json is not None:
        shape = shape_problems(model_json)
        problems += shape
        model_json = None if shape else model_json  # the rules need the keys they read
    if model_json is not None and model is not None:
        problems += model_problems(model_json, model)
    return model_json, problems


def _conversions(body: str, args: argparse.Namespace | None, model_json: dict | None) -> list[str]:
    """convert_ckpt.sh's two conversions, each against the training launch's arguments and model.json."""
    problems: list[str] = []
    arrays = bash_arrays(body)
    for direction in ("hf_to_mm", "mm_to_hf"):
        words = arrays.get(f"{direction.upper()}_ARGS")
        call = f'mm-convert Qwen2_5_VLConverter {direction} "${{{direction.upper()}_ARGS[@]}}"'
        if words is None or call not in body:
            problems.append(f"{direction}: expected `{call}`")
            continue
        found = conversion_problems(direction, words, args, model_json)
        problems += [f"{direction}: {p}" for p in found]
    return problems


