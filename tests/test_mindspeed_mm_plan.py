"""Issue 39: what a MindSpeed-MM plan trains and how long it says it takes: the seed table's own row for the method,
samples counted where the framework does not pack, A3 throughput per chip, upstream's measured layouts as
candidates, and the run-time environment launch.sh checks."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import make_spec, render_job

from generator.render import write
from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-mm"


def plan_of(**fields):
    data = {"model": "qwen2.5_vl-7b", "method": "full", "seq_len": 1024, "hardware": "snt9b", "frameworks": [NAME]}
    return resolve(make_spec(**{**data, **fields}), T)


def test_the_seed_tables_own_method_row_is_read():
    # min_cards.csv l. 117 (seed 000): qwen2.5_vl-7b pretrain 4096 mindspeed-mm; it used to map to the full row (l. 116)
    minimum = plan_of(method="pretrain", seq_len=4096).frameworks[NAME].min_cards
    assert minimum.case == "exact row"
    assert minimum.source.startswith("min_cards.csv line 117: qwen2.5_vl-7b pretrain 4096"), minimum.source
    # A method without its own row still takes the row it trains like (qlora -> lora), and says so
    plan = resolve(make_spec(model="qwen3-8b", method="qlora", seq_len=4096, hardware="snt9b",
                             frameworks=["llama-factory"], quantization_bit=4), T)
    assert plan.frameworks["llama-factory"].min_cards.case.startswith("qlora uses the lora row")


@pytest.mark.parametrize("model,needed", [("qwen2.5_vl-7b", ["ASCEND_TOOLKIT_HOME", "ATB_HOME_PATH"]),
                                          ("qwen2.5_vl-72b", ["ASCEND_TOOLKIT_HOME"])])
def test_launch_sh_checks_canns_environment_and_names_the_script(model, needed, tmp_path):
    # Upstream's finetune_qwen2_5_vl_*.sh source set_env.sh at l. 2 (the 7B's also ATB's, l. 3); under srun nothing
    # has, and `import torch_npu` fails on every rank. launch.sh checks each and says what to source.
    paths = {"mindspeed_mm_dir": str(tmp_path / "mm"), "mm_ckpt_dir": str(tmp_path / "ckpt"), "model_dir": "/m",
             "dataset": "/d/train.json", "output_dir": str(tmp_path / "o")}
    plan, files = render_job(T, model=model, method="full", seq_len=1024, hardware="snt9b23", frameworks=[NAME],
                             paths=paths)
    settings = plan.to_json()["frameworks"][NAME]["settings"]
    assert [key[len("sourced "):] for key in settings if key.startswith("sourced ")] == needed
    assert settings["sourced ASCEND_TOOLKIT_HOME"]["value"] == "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    write(files, tmp_path / "out", plan.job, overwrite=False)
    script = tmp_path / "out" / plan.job / NAME / "launch.sh"
    clean = {k: v for k, v in os.environ.items() if k not in ("ASCEND_TOOLKIT_HOME", "ATB_HOME_PATH")}
    clean["MASTER_ADDR"] = "10.0.0.9"  # the 72B runs on 4 nodes
    given: dict[str, str] = {}
    for name in needed:
        result = subprocess.run(["bash", str(script), "0"], env={**clean, **given}, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{name} is not set: source {settings[f'sourced {name}']['value']}" in result.stderr, result.stderr
        given[name] = "/opt/cann"
    result = subprocess.run(["bash", str(script), "0"], env={**clean, **given}, capture_output=True, text=True,
                            timeout=60)
    assert "is not set: source" not in result.stderr, result.stderr


def test_plan_md_says_the_disallowed_directory_warning_is_expected():
    _, files = render_job(T, model="qwen2.5_vl-7b", method="full", seq_len=1024, hardware="snt9b", frameworks=[NAME])
    plan_md = " ".join(files["PLAN.md"].split())
    assert "attempts to traverse to an disallowed directory" in plan_md
    assert "expected and harmless, the check only warns" in plan_md
