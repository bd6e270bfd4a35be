"""Issue 28: MindFormers inference (`method: predict`), the first `serve` role. Every Qwen3 size plans and renders
at 1 to 8 cards and on 2 nodes (or is refused with the split rule it breaks); seed 003's own predict examples come
out of the planner; predict.yaml keeps upstream predict_qwen3.yaml's keys; each predict rule broken once on a
generated predict.yaml is refused by `gen-launch validate`; launch.sh starts msrun_launcher.sh (a stand-in that
evals the command as upstream's does, test_render_mindformers.fake_mindformers) with the whole command as one
argument, the prompts file given as it is."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import check_script, flat_keys, render_job
from test_render_mindformers import fake_mindformers

from generator.cli import main
from generator.errors import SpecError
from generator.frameworks.mindformers.checks import PREDICT_KEYS, predict_problems
from generator.render import write
from generator.tables import load_tables

T = load_tables()
UPSTREAM = Path(__file__).parent / "data" / "upstream" / "mindformers" / "configs__qwen3__predict_qwen3.yaml"
QWEN3 = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b")
# (hardware, cards): one node at 1 to 8 cards, and two nodes (snt9b: 8 cards each; snt9b23: 16 dies each).
COUNTS = [("snt9b", 1), ("snt9b", 2), ("snt9b", 4), ("snt9b", 8), ("snt9b", 16), ("snt9b23", 2), ("snt9b23", 8),
          ("snt9b23", 32)]
# What the rules refuse, and why: model_parallel must divide the heads (attention.py l. 148); the KV heads (8) must
# divide by it or it by them (l. 206-224) for 3 cards; Qwen3-32B's 64 GB of bf16 weights do not fit one card.
REFUSED = {("qwen3-14b", 16): "num_attention_heads 40 must divide by model_parallel 16",
           ("qwen3-14b", 32): "num_attention_heads 40 must divide by model_parallel 32",
           ("qwen3-0.6b", 32): "num_attention_heads 16 must divide by model_parallel 32",
           ("qwen3-1.7b", 32): "num_attention_heads 16 must divide by model_parallel 32",
           ("qwen3-32b", 1): "1 is below the minimum of 2"}


def predict_job(**fields):
    return render_job(T, method="predict", frameworks=["mindformers"], **fields)


@pytest.mark.parametrize("model", QWEN3)
@pytest.mark.parametrize("hardware,cards", COUNTS)
def test_every_qwen3_size_plans_and_renders_at_each_count(model, hardware, cards):
    if (model, cards) in REFUSED:
        with pytest.raises(SpecError) as refused:
            predict_job(model=model, hardware=hardware, cards=cards)
        assert REFUSED[(model, cards)] in str(refused.value)
        return
    plan, files = predict_job(model=model, hardware=hardware, cards=cards)
    fp = plan.frameworks["mindformers"]
    lay = fp.layout
    assert list(fp.roles) == ["serve"] and not fp.primary.trains
    # Data parallel 1, model_parallel = the cards (seed 003 多卡推理; parallel_state.py l. 240-265), no pipeline.
    assert (lay.tp, lay.dp, lay.pp, lay.cp, lay.nodes) == (cards, 1, 1, 1, -(-cards // plan.cards_per_node))
    assert lay.fits and lay.memory.total <= lay.budget_gb
    doc = yaml.safe_load(files["mindformers/predict.yaml"])
    assert doc["parallel_config"] == {"data_parallel": 1, "model_parallel": cards}
    assert doc["use_parallel"] is (cards > 1) and doc["run_mode"] == "predict"
    assert predict_problems(doc, cards, plan.shape) == []
    launch = files["mindformers/launch.sh"]
    if cards == 1:
        assert "python run_mindformer.py --config \"$CONFIG\" --run_mode predict --use_parallel False " in launch
    else:
        assert f"\n  {cards} {lay.local_cards} \"$MASTER_ADDR\" \"$MASTER_PORT\" \"$NODE_RANK\" " in launch
    lines = [line for line in files["mindformers/commands.txt"].splitlines() if line and not line.startswith("#")]
    assert len(lines) == lay.nodes
    assert {path for path in files if path.startswith("mindformers/")} == {
        "mindformers/predict.yaml", "mindformers/launch.sh", "mindformers/commands.txt"}


def test_launch_scripts_pass_bash_and_shellcheck(tmp_path):
    for cards in (1, 2, 16):
        _, files = predict_job(model="qwen3-8b", cards=cards)
        check_script(files["mindformers/launch.sh"], tmp_path)


@pytest.mark.parametrize("model,cards,level", [("qwen3-32b", 2, "Released"), ("qwen3-0.6b", 1, "Validated"),
                                               ("qwen3-8b", 1, "Validated")])
def test_seed_003_predict_examples_are_what_the_planner_chooses(model, cards, level):
    # Seed 003's 推理 table (Atlas 800T A2): Qwen3-32B on 2 cards (model_parallel 2), 0.6B and 8B on one card, all
    # data_parallel 1. The planner finds the same card count from memory alone, and pinned it writes the same values.
    plan, _ = predict_job(model=model)
    assert (plan.cards, plan.frameworks["mindformers"].layout.tp) == (cards, cards), level
    pinned, files = predict_job(model=model, cards=cards, layout={"mindformers": {"tp": cards}})
    doc = yaml.safe_load(files["mindformers/predict.yaml"])
    assert doc["parallel_config"] == {"data_parallel": 1, "model_parallel": cards}


def test_predict_yaml_keeps_upstreams_keys_and_values():
    # Upstream's predict_qwen3.yaml, key for key; its values, except those the plan decides (each on plan.json).
    upstream = yaml.safe_load(UPSTREAM.read_text(encoding="utf-8"))
    plan, files = predict_job(model="qwen3-32b", cards=2, paths={"model_dir": "/w/Qwen3-32B"})
    doc = yaml.safe_load(files["mindformers/predict.yaml"])
    # Plus seq_length, which upstream's qwen3 file leaves to Qwen3Config's 4096 (issue 34 item 13).
    assert flat_keys(doc) == flat_keys(upstream) | {"model.model_config.seq_length"} == PREDICT_KEYS
    settings = plan.frameworks["mindformers"].settings.to_json()
    planned = {"output_dir": plan.output_dir("mindformers"), "use_parallel": True,
               "parallel_config": {"data_parallel": 1, "model_parallel": 2},
               "pretrained_model_dir": "/w/Qwen3-32B",
               "model": {"model_config": {"seq_length": plan.seq_len, **upstream["model"]["model_config"]}},
               "context": {**upstream["context"], "max_device_memory": settings["max_device_memory"]}}
    assert doc == {**upstream, **planned}
    assert settings["pretrained_model_dir"] == "/w/Qwen3-32B" and settings["predict_batch_size"] == 1
    # The memory breakdown: weights split over 2 cards, the KV cache for batch x seq_len; no time.
    fp = json.loads(json.dumps(plan.to_json()))["frameworks"]["mindformers"]
    parts = fp["memory_breakdown_gib"]
    model = plan.shape
    cache = model.layers * 2 * (model.kv_heads // 2) * model.kv_channels * 2 * 1 * plan.seq_len / 2**30
    assert parts["KV cache (batch x seq_len)"] == pytest.approx(cache, abs=0.01)
    assert parts["weights"] == pytest.approx(2 * model.params / 2 / 2**30, rel=0.01)
    assert fp["estimate"]["time_hours"] is None


def test_the_batch_is_the_whole_batch_at_once_and_the_cache_grows_with_it():
    small, _ = predict_job(model="qwen3-8b", cards=1)
    plan, files = predict_job(model="qwen3-8b", global_batch_size=8, seq_len=32768)
    lay = plan.frameworks["mindformers"].layout
    assert (lay.micro_batch_size, lay.global_batch_size, lay.grad_accum) == (8, 8, 1)
    assert plan.cards > small.cards  # 8 x 32768 tokens of cache need more cards
    assert "--predict_batch_size 8" in files["mindformers/launch.sh"]


def test_other_frameworks_and_qwen3_moe_refuse_predict():
    with pytest.raises(SpecError) as refused:
        render_job(T, model="qwen3-8b", method="predict", frameworks=["mindspeed-llm"])
    assert "mindspeed-llm does not offer method predict" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        predict_job(model="qwen3_moe-30b_a3b")
    assert "follows no upstream mindformers predict config for qwen3_moe-30b_a3b" in str(refused.value)
    # A pin that is not model parallel is refused at its key.
    with pytest.raises(SpecError) as refused:
        predict_job(model="qwen3-8b", cards=4, layout={"mindformers": {"tp": 2}})
    assert "layout.mindformers.tp" in str(refused.value) and "tp must be 4" in str(refused.value)


# The rules, each broken once on a generated predict.yaml: (rule id, edit).
BREAKS = [
    ("P1", lambda doc: doc.update(predict_batch_size=4)),
    ("P2", lambda doc: doc.update(run_mode="train")),
    ("P3", lambda doc: doc["parallel_config"].update(data_parallel=2, model_parallel=1)),
    ("P4", lambda doc: doc["parallel_config"].update(model_parallel=4)),
    ("P5", lambda doc: doc["parallel_config"].update(model_parallel=3)),
    ("P6", lambda doc: doc.update(use_parallel=False)),
    ("P7", lambda doc: doc["context"].update(max_device_memory="61GB")),
    ("P8", lambda doc: doc.update(load_checkpoint="/w/ckpt")),
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("predict")
    spec = out / "spec.yaml"
    spec.write_text(yaml.safe_dump({"job": "qwen3-32b-predict", "model": "qwen3-32b", "method": "predict",
                                    "seq_len": 4096, "hardware": "snt9b", "frameworks": ["mindformers"],
                                    "cards": 2}), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(out / "out")])
    assert result.exit_code == 0, result.stderr
    return out / "out" / "qwen3-32b-predict"


def test_validate_accepts_the_generated_predict_yaml(rendered):
    result = CliRunner().invoke(main, ["validate", str(rendered)])
    assert result.exit_code == 0, result.output
    assert "ok  mindformers/predict.yaml" in result.output


@pytest.mark.parametrize("rule,edit", BREAKS, ids=[rule for rule, _ in BREAKS])
def test_validate_refuses_each_broken_predict_rule(rendered, rule, edit):
    path = rendered / "mindformers" / "predict.yaml"
    original = path.read_text(encoding="utf-8")
    doc = yaml.safe_load(original)
    edit(doc)
    try:
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        result = CliRunner().invoke(main, ["validate", str(rendered)])
    finally:
        path.write_text(original, encoding="utf-8")
    line = next(l for l in result.output.splitlines() if "mindformers/predict.yaml" in l)
    assert result.exit_code == 1 and line.lstrip().startswith("problem") and f"({rule};" in line, result.output


@pytest.mark.parametrize("hardware,cards", [("snt9b", 1), ("snt9b", 2), ("snt9b", 4), ("snt9b", 16)])
def test_launch_runs_msrun_launcher_with_the_whole_command_quoted(tmp_path, hardware, cards):
    # msrun_launcher.sh evals its first argument: the whole run_mindformer.py command must be that one argument, or
    # (upstream's multi-node example) the flags after --config become launcher arguments. Hostile paths stay literal.
    checkout = tmp_path / "mf $(touch pwned) 'x'"
    bindir = fake_mindformers(checkout)
    prompts = tmp_path / "prompts it's $(touch pwned).txt"
    prompts.write_text("帮助我制定一份去上海的旅游攻略\n", encoding="utf-8")
    paths = {"mindformers_dir": str(checkout), "model_dir": "/w/Qwen3-8B", "dataset": str(prompts),
             "output_dir": str(tmp_path / "o")}
    plan, files = predict_job(model="qwen3-8b", hardware=hardware, cards=cards, paths=paths)
    write(files, tmp_path / "out", plan.job, overwrite=False)
    job = tmp_path / "out" / plan.job
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "MASTER_ADDR": "10.0.0.9"}
    nodes = plan.frameworks["mindformers"].layout.nodes
    for rank in range(nodes):
        record = tmp_path / f"record{rank}.jsonl"
        result = subprocess.run(["bash", str(job / "mindformers" / "launch.sh"), str(rank)], cwd=tmp_path,
                                env={**env, "RECORD": str(record)}, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        argv = json.loads(record.read_text().splitlines()[0])
        assert argv[argv.index("--config") + 1] == str((job / "mindformers" / "predict.yaml").resolve())
        assert argv[argv.index("--predict_data") + 1] == str(prompts)
        assert argv[argv.index("--run_mode") + 1] == "predict"
        assert argv[argv.index("--use_parallel") + 1] == ("True" if cards > 1 else "False")
        if cards > 1:
            flags = dict(w[2:].split("=", 1) for w in argv if w.startswith("--") and "=" in w)
            assert (flags["worker_num"], flags["local_worker_num"], flags["node_rank"]) == \
                (str(cards), str(min(cards, 8)), str(rank))
            assert argv[argv.index("run_mindformer.py") - 1].startswith("--cluster_time_out=")
    assert not (tmp_path / "pwned").exists()
    # commands.txt runs launch.sh once per node.
    lines = [l for l in files["mindformers/commands.txt"].splitlines() if l and not l.startswith("#")]
    assert [shlex.split(l)[2] for l in lines] == [str(rank) for rank in range(nodes)]


def test_launch_refuses_a_missing_prompts_file(tmp_path):
    checkout = tmp_path / "mf"
    bindir = fake_mindformers(checkout)
    paths = {"mindformers_dir": str(checkout), "model_dir": "/w/m", "dataset": str(tmp_path / "none.txt"),
             "output_dir": str(tmp_path / "o")}
    plan, files = predict_job(model="qwen3-8b", cards=1, paths=paths)
    write(files, tmp_path / "out", plan.job, overwrite=False)
    result = subprocess.run(["bash", str(tmp_path / "out" / plan.job / "mindformers" / "launch.sh"), "0"],
                            env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": "/dev/null"},
                            capture_output=True, text=True)
    assert result.returncode == 2 and "paths.dataset: the prompts file" in result.stderr


@pytest.mark.parametrize("seq_len", [1024, 4096, 32768])
def test_seq_len_reaches_mindformers(seq_len):
    """predict.yaml's model_config overrides HuggingFace's config.json (build_config.py l. 125-136): seq_length is
    the spec's seq_len, not Qwen3Config's default 4096 (configuration_qwen3.py l. 148)."""
    plan, files = predict_job(model="qwen3-8b", cards=2, seq_len=seq_len)
    doc = yaml.safe_load(files["mindformers/predict.yaml"])
    assert doc["model"]["model_config"]["seq_length"] == seq_len == plan.seq_len
    assert plan.frameworks["mindformers"].settings.to_json()["seq_length"] == seq_len
    assert predict_problems(doc, 2, plan.shape) == []


@pytest.mark.parametrize("cards", [1, 2])
def test_a_second_predict_with_other_prompts_runs(tmp_path, cards):
    """Predict is not resumable training: a predict of other prompts (another spec, another render) into the same
    output folder runs, as does the first one again (issue 34 item 13)."""
    checkout = tmp_path / "mf"
    bindir = fake_mindformers(checkout)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "MASTER_ADDR": "10.0.0.9"}
    for name in ("a.txt", "b.txt", "a.txt"):
        prompts = tmp_path / name
        prompts.write_text(f"prompt of {name}\n", encoding="utf-8")
        paths = {"mindformers_dir": str(checkout), "model_dir": "/w/Qwen3-8B", "dataset": str(prompts),
                 "output_dir": str(tmp_path / "o")}
        plan, files = predict_job(model="qwen3-8b", cards=cards, paths=paths)
        write(files, tmp_path / "out", plan.job, overwrite=True)
        record = tmp_path / f"record-{name}.jsonl"
        result = subprocess.run(["bash", str(tmp_path / "out" / plan.job / "mindformers" / "launch.sh"), "0"],
                                cwd=tmp_path, env={**env, "RECORD": str(record)}, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        argv = json.loads(record.read_text().splitlines()[0])
        assert argv[argv.index("--predict_data") + 1] == str(prompts)
