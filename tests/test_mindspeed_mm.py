"""MindSpeed-MM v2.2.0 (Qwen2.5-VL): the seed rows plan and render, upstream's examples are reproduced as plans, the
files parse under the pinned pretrain_vlm.py parser, and each start-up rule refuses a file that breaks it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import check_script, make_spec, render_job, table_cells

from generator.checks.shell import bash_arrays
from generator.cli import main
from generator.errors import SpecError
from generator.families.megatron import flags
from generator.frameworks.mindspeed_mm import checks
from generator.frameworks.mindspeed_mm.planning import CALIBRATION, FACTOR, upstream_models
from generator.render import render_files
from generator.resolve import resolve
from generator.tables import load_tables
from generator.throughput import throughput

T = load_tables()
NAME = "mindspeed-mm"
SEED_CELLS = sorted(table_cells(T, NAME))


def test_every_seed_row_is_a_cell_on_both_hardware():
    # min_cards.csv's MindSpeed-MM rows (seed 000): 3B full 1024, 7B full 1024/4096/8192 and pretrain 4096, each
    # with 8 cards on snt9b and 8 dies on snt9b23.
    assert len(SEED_CELLS) == 10
    assert {hw for *_, hw in SEED_CELLS} == {"snt9b", "snt9b23"}


@pytest.mark.parametrize("model,method,seq,hw", SEED_CELLS)
def test_seed_rows_plan_render_and_validate(model, method, seq, hw, tmp_path):
    plan, files = render_job(T, model=model, method=method, seq_len=seq, hardware=hw, frameworks=[NAME])
    fp = plan.frameworks[NAME]
    assert fp.layout.cards == 8
    for name in ("launch.sh", "convert_ckpt.sh"):
        check_script(files[f"{NAME}/{name}"], tmp_path, name)
    folder = tmp_path / NAME
    folder.mkdir()
    for path, text in files.items():
        if path.startswith(f"{NAME}/"):
            (folder / Path(path).name).write_text(text, encoding="utf-8")
    problems = checks.job_problems(folder, T.models[model])
    assert problems == {"launch.sh": [], "convert_ckpt.sh": [], "model.json": []}
    model_json = json.loads(files[f"{NAME}/model.json"])
    assert model_json["text_decoder"]["pipeline_num_layers"] == list(fp.layout.layers_per_stage)
    assert model_json["text_decoder"]["seq_length"] == seq
    frozen = method != "full_vision"
    # plan.json carries what model.json holds beyond the layout, with sources
    own = plan.to_json()["frameworks"][NAME]["settings"]
    assert own["text_decoder.pipeline_num_layers"]["value"] == model_json["text_decoder"]["pipeline_num_layers"]
    assert own["image_encoder.vision_encoder.freeze"]["value"] is frozen
    assert model_json["image_encoder"]["vision_encoder"]["freeze"] is frozen
    assert model_json["image_encoder"]["vision_projector"]["freeze"] is frozen


# Upstream's examples (Ascend/MindSpeed-MM v2.2.0 examples/qwen2.5vl/finetune_qwen2_5_vl_*.sh and model_*.json):
# (model, cards, TP, PP, MBS, GBS = MBS x GRAD_ACC_STEP x DP, text split, vision split).
UPSTREAM = [
    ("qwen2.5_vl-3b", "snt9b", 8, 1, 1, 1, 256, [36], [32]),
    ("qwen2.5_vl-7b", "snt9b", 8, 1, 2, 1, 192, [12, 16], [32, 0]),
    ("qwen2.5_vl-32b", "snt9b", 16, 2, 8, 1, 96, [1, 9, 9, 9, 9, 9, 9, 9], [32, 0, 0, 0, 0, 0, 0, 0]),
]


@pytest.mark.parametrize("model,hw,cards,tp,pp,mbs,gbs,text,vision", UPSTREAM)
def test_upstream_examples_are_reproduced_when_pinned(model, hw, cards, tp, pp, mbs, gbs, text, vision):
    # Upstream's scripts leave sequence parallel off, and so does the plan unless the spec pins it.
    plan, files = render_job(T, model=model, method="full", seq_len=1024, hardware=hw, frameworks=[NAME],
                             cards=cards, global_batch_size=gbs,
                             layout={NAME: {"tp": tp, "pp": pp, "micro_batch_size": mbs}})
    lay = plan.frameworks[NAME].layout
    assert (lay.tp, lay.pp, lay.cp, lay.micro_batch_size, lay.global_batch_size) == (tp, pp, 1, mbs, gbs)
    assert list(lay.layers_per_stage) == text
    model_json = json.loads(files[f"{NAME}/model.json"])
    assert model_json["text_decoder"]["pipeline_num_layers"] == text
    assert model_json["image_encoder"]["vision_encoder"]["pipeline_num_layers"] == vision
    # Everything else of upstream's model JSON is kept as upstream writes it.
    upstream = upstream_models()[model]["model"]
    for key in ("img_context_token_id", "vision_start_token_id", "model_id"):
        assert model_json[key] == upstream[key]
    assert {k: v for k, v in model_json["text_decoder"].items() if k not in ("pipeline_num_layers", "seq_length")} \
        == {k: v for k, v in upstream["text_decoder"].items() if k not in ("pipeline_num_layers", "seq_length")}
    words = flags.parse("mm-train", [w for n in ("GPT_ARGS", "START_ARGS")
                                     for w in bash_arrays(files[f"{NAME}/launch.sh"])[n]])
    assert (words.tensor_model_parallel_size, words.pipeline_model_parallel_size, words.micro_batch_size,
            words.global_batch_size, words.sequence_parallel) == (tp, pp, mbs, gbs, False)
    convert = bash_arrays(files[f"{NAME}/convert_ckpt.sh"])["HF_TO_MM_ARGS"]
    pairs = dict(zip(convert[::2], convert[1::2]))
    # README.md "权重转换": the same lists as upstream's hf_to_mm commands
    assert json.loads(pairs["--cfg.parallel_config.llm_pp_layers"]) == [text]
    assert json.loads(pairs["--cfg.parallel_config.vit_pp_layers"]) == [vision]
    assert pairs["--cfg.parallel_config.tp_size"] == str(tp)


def test_72b_upstream_example_with_swap_attention_fits_as_upstream_ran_it():
    # examples/qwen2.5vl/model_72b.json: [6, 11 x 6, 8] on PP8, TP2, GRAD_ACC_STEP 96, on 4 A3 nodes of 16 dies
    # (README.md "4x8 (A3)"); finetune_qwen2_5_vl_72b.sh l. 91 passes --swap-attention, which the plan writes and
    # counts (the self-attention activations in host memory). The busiest stage still holds 53.6 GiB per die, within
    # the 58 GiB usable but over the 52.2 GiB budget (10% headroom): upstream ran it, so it fits (issue 39 item 4).
    layout = {NAME: {"tp": 2, "pp": 8, "micro_batch_size": 1, "recompute": "none"}}
    spec = make_spec(model="qwen2.5_vl-72b", method="full", seq_len=1024, hardware="snt9b23", frameworks=[NAME],
                     cards=64, global_batch_size=384, layout=layout)
    plan = resolve(spec, T)
    lay = plan.frameworks[NAME].layout
    assert lay.fits and lay.measured and any("upstream ran it" in note for note in plan.notes)
    assert list(lay.layers_per_stage) == [6, 11, 11, 11, 11, 11, 11, 8]
    assert lay.memory.total == pytest.approx(53.6, abs=0.05) and lay.budget_gb < lay.memory.total < lay.usable_gb
    files = render_files(plan)
    words = flags.parse("mm-train", bash_arrays(files[f"{NAME}/launch.sh"])["GPT_ARGS"])
    assert words.swap_attention and words.use_flash_attn
    # README.md's 322.96 tokens/s is per chip (4x8 chips = 64 dies): per die, half
    assert plan.frameworks[NAME].estimate.tokens_per_card_s == 161.48
    # Full recompute leaves nothing to swap (README.md l. 296 drops the flag with it); the 7B's script has none.
    layout[NAME]["recompute"] = "full"
    spec = make_spec(model="qwen2.5_vl-72b", method="full", seq_len=1024, hardware="snt9b23", frameworks=[NAME],
                     cards=64, global_batch_size=384, layout=layout)
    assert "--swap-attention" not in render_files(resolve(spec, T))[f"{NAME}/launch.sh"]


def test_published_throughput_only_for_the_layout_upstream_measured():
    # 7B on 8 A2 cards: upstream's TP1 PP2 MBS 1 is the published 18.82 samples/s; any other layout is the step
    # model scaled to the published rows, and so is another hardware, pretraining or a longer sequence.
    def estimate(hw="snt9b", method="full", seq=1024, **layout):
        plan, _ = render_job(T, model="qwen2.5_vl-7b", method=method, seq_len=seq, hardware=hw, frameworks=[NAME],
                             cards=8, global_batch_size=192, layout={NAME: {"micro_batch_size": 1, **layout}})
        return plan.frameworks[NAME].estimate
    rate = estimate(tp=1, pp=2)
    assert rate.tokens_per_card_s == 1324.5 and rate.tps_source.startswith("published, upstream's own layout")
    # Other layouts of the 7B on A2: the step model x the 7B's own ratio (published / step model at TP1 PP2)
    for other in (estimate(tp=2, pp=1), estimate(tp=1, pp=2, method="full_vision"), estimate(tp=1, pp=2, seq=4096)):
        assert other.tps_source.startswith("estimate: step model") and \
            "x 0.446: qwen2.5_vl-7b's published figure over the step model" in other.tps_source, other
    # No 7B row on A3: the 7B's own factor still (not the 72B's), saying A3 rests on one published row
    a3 = estimate(tp=1, pp=2, hw="snt9b23").tps_source
    assert "x 0.446: qwen2.5_vl-7b's published figure" in a3 and "one row on snt9b23 (qwen2.5_vl-72b)" in a3, a3


def test_the_calibration_is_upstreams_published_rows_over_the_step_model():
    # planning.FACTOR per model: published / step model at its published layout, on the hardware it ran on.
    for name, row in T.frameworks[NAME].models.items():
        published = row["published"]
        hw = "snt9b23" if "A3" in published["source"] else "snt9b"
        spec = make_spec(model=name, method="full", seq_len=1024, hardware=hw, frameworks=[NAME],
                         cards=published["cards"], global_batch_size=published["global_batch_size"],
                         layout={NAME: {"tp": published["tp"], "pp": published["pp"], "micro_batch_size": 1,
                                        "recompute": "none"}})
        fp = resolve(spec, T, force=True).frameworks[NAME]
        step = throughput(T.models[name], "full", 1024, T.frameworks[NAME], T.hardware[hw], None, fp.layout)
        assert FACTOR[name] == pytest.approx(published["tokens_per_card_s"] / step.tokens_per_card_s, abs=0.001)
    assert math.prod(FACTOR.values()) ** (1 / 4) == pytest.approx(CALIBRATION)


def test_layouts_rank_by_the_step_model():
    # 32B on 16 A2 cards: TP2 PP8 without recompute fits, so the search no longer takes full recompute on PP16.
    plan, _ = render_job(T, model="qwen2.5_vl-32b", method="full", seq_len=1024, hardware="snt9b", frameworks=[NAME],
                         cards=16)
    lay = plan.frameworks[NAME].layout
    assert (lay.tp, lay.pp, lay.recompute) == (2, 8, "none")


def test_vision_encoder_weighs_on_the_first_stage():
    # The first stage holds the vision encoder (0.67B): frozen in fine-tuning (bf16 weights only), trained in
    # pretraining (plus fp32 gradients and the distributed optimizer's 12 bytes over DP 8). One stage: 3B, PP 1.
    pins = {"layout": {NAME: {"tp": 1, "pp": 1, "micro_batch_size": 1}}, "global_batch_size": 256, "cards": 8}
    memory = {method: render_job(T, model="qwen2.5_vl-3b", method=method, seq_len=1024, hardware="snt9b",
                                 frameworks=[NAME], **pins)[0].frameworks[NAME].layout.memory
              for method in ("full", "full_vision")}
    vision = T.models["qwen2.5_vl-3b"].vision_params / 2 ** 30
    assert memory["full_vision"].weights == pytest.approx(memory["full"].weights)
    assert memory["full_vision"].gradients - memory["full"].gradients == pytest.approx(4 * vision)
    assert memory["full_vision"].optimizer - memory["full"].optimizer == pytest.approx(12 * vision / 8)


def test_a_stage_of_frozen_parameters_only_gets_the_dummy_optimizer(tmp_path):
    # PP 8 for the 7B: 28 + 4 layers over 8 stages leaves the first stage the frozen vision encoder alone
    # (README.md l. 404 asks for --enable-dummy-optimizer there); pretraining trains it, so no dummy optimizer.
    for method, dummy in (("full", True), ("full_vision", False)):
        folder = _rendered(tmp_path / method, method=method, cards=8, global_batch_size=64,
                           layout={NAME: {"tp": 1, "pp": 8, "micro_batch_size": 1}})
        model_json = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        assert model_json["text_decoder"]["pipeline_num_layers"] == [0, 4, 4, 4, 4, 4, 4, 4]
        assert ("--enable-dummy-optimizer" in (folder / "launch.sh").read_text(encoding="utf-8")) is dummy
        assert checks.job_problems(folder, T.models["qwen2.5_vl-7b"])["launch.sh"] == []


def _rendered(tmp_path, **fields) -> Path:
    fields = {"model": "qwen2.5_vl-7b", "method": "full", "seq_len": 1024, "hardware": "snt9b",
              "frameworks": [NAME], **fields}
    plan = resolve(make_spec(**fields), T)
    folder = tmp_path / NAME
    folder.mkdir(parents=True)
    for path, text in render_files(plan).items():
        if path.startswith(f"{NAME}/"):
            (folder / Path(path).name).write_text(text, encoding="utf-8")
    return folder


def _edit_json(folder: Path, change) -> None:
    model = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    change(model)
    (folder / "model.json").write_text(json.dumps(model), encoding="utf-8")


def _edit_launch(folder: Path, old: str, new: str) -> None:
    text = (folder / "launch.sh").read_text(encoding="utf-8")
    assert old in text
    (folder / "launch.sh").write_text(text.replace(old, new, 1), encoding="utf-8")


def _vision(model: dict) -> dict:
    return model["image_encoder"]["vision_encoder"]


def _set(path: list[str], value):
    def change(model):
        node = model
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


TEXT = ["text_decoder", "pipeline_num_layers"]
VISION = ["image_encoder", "vision_encoder", "pipeline_num_layers"]
# Each rule broken once on the pinned upstream 7B layout (TP1 PP2, [32,0] / [12,16], GBS 192 on 8 cards).
BREAKS = {
    "world_div_tp_pp_cp": ("launch", "NPUS_PER_NODE=8", "NPUS_PER_NODE=7"),
    "gbs_div_mbs_dp": ("launch", "--global-batch-size 192", "--global-batch-size 190"),
    "heads_div_tp": ("both", ("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 2"),
                     (["text_decoder", "num_attention_heads"], 27)),
    "groups_div_tp": ("launch", "--tensor-model-parallel-size 1", "--tensor-model-parallel-size 8"),
    "ulysses_cp_heads": ("both", ("--context-parallel-size 1", "--context-parallel-size 2"),
                         (["text_decoder", "num_attention_heads"], 27)),
    "sp_tp_divides_patches": ("launch", "--tensor-model-parallel-size 1",
                              "--tensor-model-parallel-size 8\n  --sequence-parallel"),
    "text_list_pp": ("json", TEXT, [28]),
    "vision_list_pp": ("json", VISION, [32]),
    "text_layer_sum": ("json", TEXT, [12, 15]),
    "vision_layer_sum": ("json", VISION, [30, 0]),
    "vision_before_text": ("json2", (VISION, [30, 2]), (TEXT, [1, 27])),
    "vpp_nesting": ("json", TEXT, [[6, 8], [6, 8]]),
    "frozen_stage_dummy_optimizer": ("json2", (VISION, [32, 0]), (TEXT, [0, 28])),
    "vpp_needs_pp": ("launch", "--pipeline-model-parallel-size 2", "--pipeline-model-parallel-size 2\n"
                     "  --virtual-pipeline-model-parallel-size 2\n  --no-overlap-p2p-communication"),
}


@pytest.mark.parametrize("rule", sorted(BREAKS))
def test_each_rule_refuses_a_file_that_breaks_it(rule, tmp_path):
    assert {r.id for r in checks.RULES} == set(BREAKS)
    folder = _rendered(tmp_path, cards=8, global_batch_size=192,
                       layout={NAME: {"tp": 1, "pp": 2, "micro_batch_size": 1}})
    assert checks.job_problems(folder, T.models["qwen2.5_vl-7b"])["launch.sh"] == []
    kind, first, second = BREAKS[rule]
    if kind == "launch":
        _edit_launch(folder, first, second)
    elif kind == "json":
        _edit_json(folder, _set(first, second))
    elif kind == "both":
        _edit_launch(folder, *first)
        _edit_json(folder, _set(*second))
    else:
        _edit_json(folder, lambda m: (_set(*first)(m), _set(*second)(m)))
    problems = checks.job_problems(folder, None)["launch.sh"]
    assert any(p.startswith(f"rule {rule} (") for p in problems), problems


def test_the_pinned_parser_refuses_an_unknown_flag(tmp_path):
    folder = _rendered(tmp_path)
    _edit_launch(folder, "  --use-flash-attn\n", "  --use-flash-attention\n")
    problems = checks.job_problems(folder, None)["launch.sh"]
    assert any("the pinned MindSpeed-MM v2.2.0 parser exits: unrecognized arguments: --use-flash-attention" in p
               for p in problems), problems


def test_conversion_must_match_training(tmp_path):
    folder = _rendered(tmp_path, layout={NAME: {"tp": 1, "pp": 2}})
    original = (folder / "convert_ckpt.sh").read_text(encoding="utf-8")
    assert "llm_pp_layers '[[12,16]]'" in original and "llm_pp_layers '[12,16]'" in original

    def problems_with(old: str, new: str) -> list[str]:
        assert old in original
        (folder / "convert_ckpt.sh").write_text(original.replace(old, new, 1), encoding="utf-8")
        return checks.job_problems(folder, None)["convert_ckpt.sh"]
    assert problems_with("tp_size 1", "tp_size 2") == \
        ["hf_to_mm: tp_size 2 differs from training's --tensor-model-parallel-size 1 (README.md:159)"]
    found = problems_with("vit_pp_layers '[[32,0]]'", "vit_pp_layers '[[32]]'")
    assert any("every virtual stage's list must have the same length" in p for p in found), found
    assert any("vit_pp_layers [[32]] differ" in p for p in found), found
    found = problems_with("llm_pp_layers '[[12,16]]'", "llm_pp_layers '[[12,15]]'")
    assert any("llm_pp_layers sum to 27, not 28" in p for p in found), found
    found = problems_with("vit_pp_layers '[32,0]'", "vit_pp_layers '[32]'")
    assert any(p.startswith("mm_to_hf: vit_pp_layers and llm_pp_layers must have the same length") for p in found)
    found = problems_with("llm_pp_layers '[12,16]'", "llm_pp_layers '[[12,16]]'")
    assert any(p.startswith("mm_to_hf: llm_pp_layers and vit_pp_layers must be flat") for p in found), found


def test_validate_runs_the_rules(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("job: mm7b\nmodel: qwen2.5_vl-7b\nmethod: full\nhardware: snt9b\nseq_len: 1024\n"
                    "frameworks: [mindspeed-mm]\nlayout: {mindspeed-mm: {tp: 1, pp: 2}}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["render", str(spec), "-o", str(out)]).exit_code == 0
    result = CliRunner().invoke(main, ["validate", str(out / "mm7b")])
    assert result.exit_code == 0, result.output
    model_json = out / "mm7b" / NAME / "model.json"
    model_json.write_text(model_json.read_text(encoding="utf-8").replace("[\n            12,", "[\n            11,"),
                          encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(out / "mm7b")])
    assert result.exit_code == 1 and re.search(r"rule text_layer_sum", result.output), result.output


def test_sequence_parallel_is_off_unless_pinned_and_needs_tp_dividing_4():
    # qwen2vl_vit_model.py:556-557 scatters the image patches (a multiple of 4) over TP unpadded; Megatron's split
    # needs them divisible (mappings.py:66-69). Upstream's scripts never pass --sequence-parallel.
    def sp(**layout):
        plan = resolve(make_spec(model="qwen2.5_vl-32b", method="full", seq_len=1024, hardware="snt9b",
                                 frameworks=[NAME], cards=16, global_batch_size=96, layout={NAME: layout}), T,
                       force=True)
        lay = plan.frameworks[NAME].layout
        return lay.tp, lay.sequence_parallel
    assert sp(tp=2, pp=8) == (2, False)
    assert sp(tp=2, pp=8, sequence_parallel=True) == (2, True)
    with pytest.raises(SpecError, match="sequence_parallel: true with TP 8"):
        sp(tp=8, pp=2, sequence_parallel=True)


def test_selective_recompute_is_refused():
    with pytest.raises(SpecError, match="recompute: selective"):
        resolve(make_spec(model="qwen2.5_vl-7b", method="full", seq_len=1024, hardware="snt9b", frameworks=[NAME],
                          layout={NAME: {"recompute": "selective"}}), T)


def test_each_node_has_its_own_cache_dir():
    # README.md l. 327 (examples/qwen2.5vl): nodes must not share a cache_dir. Two nodes: one data JSON per node rank.
    plan, files = render_job(T, model="qwen2.5_vl-32b", method="full", seq_len=1024, hardware="snt9b",
                             frameworks=[NAME], cards=16, global_batch_size=96, layout={NAME: {"tp": 2, "pp": 8}})
    caches = [json.loads(files[f"{NAME}/data_node{rank}.json"])["dataset_param"]["basic_parameters"]["cache_dir"]
              for rank in (0, 1)]
    assert f"{NAME}/data.json" not in files and len(set(caches)) == 2
    assert plan.to_json()["frameworks"][NAME]["settings"]["data.json basic_parameters.cache_dir"]["value"] == caches
    assert 'DATA_JSON="$JOB_DIR/data_node$NODE_RANK.json"' in files[f"{NAME}/launch.sh"]
    assert all(cache in files[f"{NAME}/DATA.md"] for cache in caches)


def test_upstream_values_are_written_and_on_the_plan():
    # finetune_qwen2_5_vl_72b.sh l. 3-13 and 76: the performance environment, --clip-grad 0.0; CPU_AFFINITY_CONF 2 there
    # (1 in the 7B's, which sets no PYTORCH_NPU_ALLOC_CONF).
    for model, affinity, alloc in (("qwen2.5_vl-72b", "2", True), ("qwen2.5_vl-7b", "1", False)):
        plan, files = render_job(T, model=model, method="full", seq_len=1024, hardware="snt9b23", frameworks=[NAME])
        launch = files[f"{NAME}/launch.sh"]
        own = plan.to_json()["frameworks"][NAME]["settings"]
        for name, value in (("TASK_QUEUE_ENABLE", "2"), ("CPU_AFFINITY_CONF", affinity), ("NPU_ASD_ENABLE", "0"),
                            ("COMBINED_ENABLE", "1"), ("ACLNN_CACHE_LIMIT", "100000")):
            assert f"\nexport {name}={value}\n" in launch
            assert own[f"env {name}"]["value"] == value and "finetune_qwen2_5_vl_" in own[f"env {name}"]["source"]
        assert ("PYTORCH_NPU_ALLOC_CONF" in launch) is alloc
        words = flags.parse("mm-train", [w for n in ("GPT_ARGS", "START_ARGS") for w in bash_arrays(launch)[n]])
        assert words.clip_grad == 0.0 and words.num_workers == own["--num-workers"]["value"] == 8
        assert own["data.json preprocess_parameters.image_max_pixels"]["value"] == 262144
    assert "mindspeed-llm/" not in Path("templates/mindspeed-mm/launch.sh.j2").read_text(encoding="utf-8")


def test_optimizer_states_are_saved_only_for_resume():
    # Upstream's scripts save neither optimizer nor RNG (7b.sh l. 80-81); a job that resumes needs both.
    for resume in (True, False):
        plan, files = render_job(T, model="qwen2.5_vl-72b", method="full", seq_len=1024, hardware="snt9b23",
                                 frameworks=[NAME], train={"resume": resume})
        output = bash_arrays(files[f"{NAME}/launch.sh"])["OUTPUT_ARGS"]
        assert ("--no-save-optim" in output and "--no-save-rng" in output) is not resume
        note = next(n for n in plan.notes if n.startswith("mindspeed-mm keeps every checkpoint"))
        assert ("optimizer states" in note) is resume
        assert "every one is kept" in files["PLAN.md"]


HAND_EDITS = [
    ("model.json", None, "[]", "the file is not a JSON object"),
    ("model.json", None, "{}", "text_decoder.num_layers is missing"),
    ("model.json", None, '{"text_decoder": 5}', "text_decoder is not a JSON object"),
    ("model.json", "num_attention_heads", None, "text_decoder.num_attention_heads is missing"),
    ("convert_ckpt.sh", "llm_pp_layers '[[12,16]]'", """llm_pp_layers '[[12,"a"]]'""", "must be lists of layer counts"),
    ("convert_ckpt.sh", "llm_pp_layers '[[12,16]]'", """llm_pp_layers '{"a":1}'""", "must be lists of layer counts"),
    ("launch.sh", "NPUS_PER_NODE=8", "NPUS_PER_NODE=eight", "NPUS_PER_NODE=eight: must be a whole number"),
]


@pytest.mark.parametrize("name,old,new,expected", HAND_EDITS)
def test_validate_reports_hand_edits_without_a_traceback(name, old, new, expected, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("job: mm7b\nmodel: qwen2.5_vl-7b\nmethod: full\nhardware: snt9b\nseq_len: 1024\n"
                    "frameworks: [mindspeed-mm]\nlayout: {mindspeed-mm: {tp: 1, pp: 2}}\n", encoding="utf-8")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["render", str(spec), "-o", str(out)]).exit_code == 0
    path = out / "mm7b" / NAME / name
    if name == "model.json" and old is not None:
        _edit_json(path.parent, lambda m: m["text_decoder"].pop(old))
    elif old is None:
        path.write_text(new, encoding="utf-8")
    else:
        text_ = path.read_text(encoding="utf-8")
        assert old in text_
        path.write_text(text_.replace(old, new), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(out / "mm7b")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1 and expected in result.output, result.output


def test_pipeline_lists_are_not_read_at_pp_1(tmp_path):
    # vlm_model.py:144, 298: with PP 1 each module is built whole; upstream never reads pipeline_num_layers.
    folder = _rendered(tmp_path, model="qwen2.5_vl-3b", cards=8, global_batch_size=256,
                       layout={NAME: {"tp": 1, "pp": 1, "micro_batch_size": 1}})
    _edit_json(folder, lambda m: (_set(TEXT, [30, 6])(m), _set(VISION, [32, 0])(m)))
    assert checks.job_problems(folder, None)["launch.sh"] == []


def test_a_trained_projector_is_not_a_frozen_stage(tmp_path):
    # The projector sits on the stage that ends the vision encoder (vlm_model.py:183-184): trained, that stage has
    # gradients even with the vision encoder frozen and no text layers.
    folder = _rendered(tmp_path, cards=8, global_batch_size=192, layout={NAME: {"tp": 1, "pp": 2}})
    _edit_json(folder, lambda m: (_set(VISION, [32, 0])(m), _set(TEXT, [0, 28])(m),
                                  _set(["image_encoder", "vision_projector", "freeze"], False)(m)))
    assert checks.job_problems(folder, None)["launch.sh"] == []
    _edit_json(folder, _set(["image_encoder", "vision_projector", "freeze"], True))
    assert any("frozen_stage_dummy_optimizer" in p for p in checks.job_problems(folder, None)["launch.sh"])


def test_plan_names_the_master_address_launch_sh_uses():
    # One node: launch.sh sets the local host, and PLAN.md says so (not "from the environment").
    _, files = render_job(T, model="qwen2.5_vl-7b", method="full", seq_len=1024, hardware="snt9b", frameworks=[NAME])
    assert "\nMASTER_ADDR=127.0.0.1\n" in files[f"{NAME}/launch.sh"]
    assert "- master: `127.0.0.1`" in files["PLAN.md"]
