"""Issue 13: one training recipe, read back from each framework's files the way that framework reads them (LLaMA-Factory
and MindFormers YAML as their loaders parse it, MindSpeed-LLM's launch words through the parser built from the pinned
2.2.0 declarations), the same values in all three; defaults with their sources; resume in every launch script."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import make_spec, mindformers_run_config, note_lines, render_job

from generator.checks.shell import bash_arrays
from generator.families.megatron import flags
from generator.recipe import round_interval
from generator.tables import load_tables

T = load_tables()
RECIPE = dict(model="qwen3-8b", method="lora", seq_len=4096, hardware="snt9b", cards=8,
              frameworks=["mindformers", "mindspeed-llm", "llama-factory"],
              data={"samples": 20000, "tokens_per_sample": 1000}, global_batch_size=64,
              train={"learning_rate": 2.0e-4, "min_learning_rate": 2.0e-5, "lr_schedule": "cosine",
                     "warmup_steps": 30, "weight_decay": 0.05, "steps": 300, "save_every_steps": 100,
                     "keep_checkpoints": 2, "seed": 1234, "adam_betas": [0.9, 0.98], "max_grad_norm": 0.5},
              lora={"rank": 32, "alpha": 64, "dropout": 0.0, "targets": "attention"})


def read_back(files: dict[str, str]) -> dict[str, dict]:
    """Each framework's training values in one vocabulary, as its own reader sees the files."""
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    mf = yaml.safe_load(files["mindformers/train.yaml"])
    arrays = bash_arrays(files["mindspeed-llm/launch.sh"])
    words = [w for name, ws in arrays.items() if name not in ("DISTRIBUTED_ARGS", "RESUME_ARGS") for w in ws]
    ms = vars(flags.parse("train", words))
    monitor = next(c for c in mf["callbacks"] if c["type"] == "CheckpointMonitor")
    pet = mf["model"]["model_config"]["pet_config"]
    par = mf["parallel_config"]
    return {
        "llama-factory": {
            "lr": lf["learning_rate"], "min_lr": lf["learning_rate"] * lf["lr_scheduler_kwargs"]["min_lr_rate"],
            "schedule": lf["lr_scheduler_type"], "warmup": lf["warmup_steps"], "weight_decay": lf["weight_decay"],
            "steps": lf["max_steps"], "save": lf["save_steps"], "keep": lf["save_total_limit"], "seed": lf["seed"],
            "rank": lf["lora_rank"], "alpha": lf["lora_alpha"], "dropout": lf["lora_dropout"],
            "targets": lf["lora_target"], "betas": [lf["adam_beta1"], lf["adam_beta2"]], "clip": lf["max_grad_norm"],
            "batch": lf["per_device_train_batch_size"] * lf["gradient_accumulation_steps"] * 8},
        "mindspeed-llm": {
            "lr": ms["lr"], "min_lr": ms["min_lr"], "schedule": ms["lr_decay_style"], "warmup": ms["lr_warmup_iters"],
            "weight_decay": ms["weight_decay"], "steps": ms["train_iters"], "save": ms["save_interval"],
            "keep": None, "seed": ms["seed"], "rank": ms["lora_r"], "alpha": ms["lora_alpha"], "dropout": 0.0,
            "targets": ms["lora_target_modules"], "batch": ms["global_batch_size"],
            "betas": [ms["adam_beta1"], ms["adam_beta2"]], "clip": ms["clip_grad"]},
        "mindformers": {
            "lr": mf["lr_schedule"]["learning_rate"], "min_lr": mf["lr_schedule"]["lr_end"],
            "schedule": mf["lr_schedule"]["type"], "warmup": mf["lr_schedule"]["warmup_steps"],
            "weight_decay": mf["optimizer"]["weight_decay"],
            "steps": (_stop_step(mf), mf["lr_schedule"]["total_steps"]),
            "save": monitor["save_checkpoint_steps"], "keep": monitor["keep_checkpoint_max"], "seed": mf["seed"],
            "rank": pet["lora_rank"], "alpha": pet["lora_alpha"], "dropout": pet["lora_dropout"],
            "targets": pet["target_modules"], "betas": mf["optimizer"]["betas"],
            "clip": mf["runner_wrapper"]["max_grad_norm"],
            "batch": mf["runner_config"]["batch_size"] * par["data_parallel"] * par["micro_batch_num"]
            * mf["runner_config"]["gradient_accumulation_steps"]},
    }


def _stop_step(mf: dict) -> int | None:
    """Where MindFormers stops: the TrainCallBack callback (runner_config.stop_step is never added to the callbacks,
    trainer/base_trainer.py l. 1344-1347 of the 2.1.0 wheel)."""
    return next((c["stop_step"] for c in mf["callbacks"] if c["type"] == "TrainCallBack"), None)


@pytest.fixture(scope="module")
def recipe():
    plan, files = render_job(T, job="recipe", **RECIPE)
    return plan, read_back(files)


# Each framework's own spelling of the same schedule and targets.
SPELLING = {"llama-factory": {"schedule": "cosine_with_min_lr", "targets": "q_proj,k_proj,v_proj,o_proj"},
            "mindspeed-llm": {"schedule": "cosine", "targets": ["linear_qkv", "linear_proj"]},
            "mindformers": {"schedule": "CosineWithWarmUpLR", "targets": ".*linear_qkv|.*linear_proj"}}
WANTED = {"lr": 2.0e-4, "min_lr": 2.0e-5, "warmup": 30, "weight_decay": 0.05, "save": 100, "seed": 1234,
          "rank": 32, "alpha": 64, "dropout": 0.0, "batch": 64, "betas": [0.9, 0.98], "clip": 0.5}


@pytest.mark.parametrize("framework", list(SPELLING))
@pytest.mark.parametrize("value", [*WANTED, "schedule", "targets", "steps", "keep"])
def test_every_framework_trains_the_spec_recipe(recipe, framework, value):
    _, seen = recipe
    got = seen[framework][value]
    if value in WANTED:
        assert got == pytest.approx(WANTED[value]), (framework, value, got)
    elif value == "steps":
        assert got == ((300, 300) if framework == "mindformers" else 300)
    elif value == "keep":  # Megatron core_v0.12.1 keeps every checkpoint: no flag to write, PLAN.md says so
        assert got == (None if framework == "mindspeed-llm" else 2)
    else:
        assert got == SPELLING[framework][value]


def test_the_plan_states_every_value_and_where_it_came_from(recipe):
    plan, _ = recipe
    origin = plan.train.origin
    assert origin["learning_rate"] == "given" and origin["lora.rank"] == "given"
    assert origin["epochs"].startswith("derived") and plan.train.epochs == pytest.approx(300 * 64 / 20000)
    assert origin["resume"].startswith("default: ") and plan.train.resume is True


@pytest.mark.parametrize("method,size,lr,source", [
    ("pretrain", "llama3.1-70b", 1.25e-6, "examples/mcore/qwen3/pretrain_qwen3_8b_4K_ptd.sh l. 55"),
    ("full", "qwen3-8b", 1.0e-5, "examples/train_full/qwen3_full_sft.yaml"),
    ("lora", "qwen3-8b", 1.0e-4, "examples/train_lora/qwen3_lora_sft.yaml"),
])
def test_defaults_carry_their_source(method, size, lr, source):
    plan, files = render_job(T, model=size, method=method, hardware="snt9b", frameworks=["mindspeed-llm"],
                             data={"total_tokens": 10 ** 9})
    assert plan.train.learning_rate == lr and source in plan.train.origin["learning_rate"]
    words = [w for ws in bash_arrays(files["mindspeed-llm/launch.sh"]).values() for w in ws]
    assert float(words[words.index("--lr") + 1]) == lr  # the plan's rate
    assert "Training recipe" in files["PLAN.md"] and source in files["PLAN.md"]


def test_qlora_follows_seed_002():
    plan, files = render_job(T, model="qwen2.5-7b", method="qlora", quantization_bit=4, hardware="rtx4090",
                             frameworks=["llama-factory"])
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    assert (lf["lora_rank"], lf["lora_alpha"], lf["lora_dropout"], lf["optim"]) == (64, 16, 0.05, "paged_adamw_32bit")
    assert "measured GPU throughput table" in plan.train.origin["lora.alpha"]


def test_steps_and_epochs_are_one_or_the_other(spec_file):
    from click.testing import CliRunner

    from generator.cli import main
    path = spec_file({"job": "j", "model": "qwen3-8b", "method": "full", "seq_len": 4096, "hardware": "snt9b",
                      "data": {"samples": 1000, "tokens_per_sample": 100, "epochs": 2}, "train": {"steps": 10}})
    result = CliRunner().invoke(main, ["plan", str(path)])
    assert result.exit_code == 2 and "train.steps: give train.steps or data.epochs, not both" in result.stderr


@pytest.mark.parametrize("given", [True, False])
def test_the_plan_states_the_disk_mindspeed_checkpoints_fill(spec_file, given):
    # Megatron core_v0.12.1 has no keep-N option: every --save-interval checkpoint stays. A given keep_checkpoints it
    # cannot honour is a warning (exit 3 under --strict); the default is a note with the same numbers.
    from click.testing import CliRunner

    from generator.cli import main
    spec = {"job": "j", "model": "llama3.1-8b", "method": "full", "seq_len": 4096, "hardware": "snt9b", "cards": 8,
            "frameworks": ["mindspeed-llm"], "global_batch_size": 64, "train": {"steps": 1000, "save_every_steps": 100}}
    if given:
        spec["train"]["keep_checkpoints"] = 2
    result = CliRunner().invoke(main, ["plan", str(spec_file(spec)), "--strict", "--json"])
    assert result.exit_code == (3 if given else 0), result.stderr
    plan = json.loads(result.stdout)
    said = [line for line in note_lines(plan["warnings" if given else "notes"]) if "keeps every checkpoint" in line]
    # 10 saves (iterations 100, 200, ... 1000); 8.0e9 parameters x 14 bytes (bf16 weights, fp32 master, 2 moments)
    assert len(said) == 1 and "10 checkpoints of about 105 GiB, 1.0 TiB" in said[0], said


def test_mindspeed_checkpoint_size_is_known_for_every_method():
    # The checkpoint note's bytes per parameter was a dict of three methods: any other was a KeyError at plan time.
    from generator.frameworks.mindspeed_llm.planning import checkpoint_bytes_per_param
    from generator.tables import TRAINING_METHODS
    assert {method: checkpoint_bytes_per_param(method) for method in TRAINING_METHODS} == \
        {"full": 14, "lora": 2, "qlora": 2, "pretrain": 14, "full_vision": 14}


def test_lora_section_needs_an_adapter_method():
    from generator.errors import SpecError
    from generator.resolve import resolve
    with pytest.raises(SpecError, match="lora: is only used with method lora or qlora"):
        resolve(make_spec(method="full", lora={"rank": 8}), T)


def test_a_global_batch_no_layout_tiles_names_the_nearest():
    from generator.errors import SpecError
    from generator.resolve import resolve
    with pytest.raises(SpecError) as caught:
        resolve(make_spec(cards=16, frameworks=["llama-factory"], global_batch_size=100), T)
    assert "global_batch_size: 100 samples cannot be split" in str(caught.value)
    assert "nearest that work: 96 or 112" in str(caught.value)


def test_default_global_batch_is_the_target_where_layouts_tile_it():
    assert [round_interval(x) for x in (0.3, 7, 13, 260, 4999)] == [1, 5, 10, 200, 2000]
    for model, cards in (("qwen3-32b", 40), ("qwen3-8b", 24), ("qwen2.5-32b", 32)):
        plan, _ = render_job(T, model=model, cards=cards, frameworks=["mindspeed-llm", "llama-factory"])
        batches = {fp.layout.global_batch_size for fp in plan.frameworks.values()}
        assert batches == {plan.train.global_batch_size}, (model, batches)


@pytest.mark.parametrize("samples,steps", [(3300, 104), (100000, 782)])
def test_a_small_data_set_gets_a_smaller_default_batch(samples, steps):
    # 3,300 samples at the fine-tuning batch of 128 were 26 steps, too few for warmup and decay: the default aims
    # at 100 steps or more; a large data set keeps the method's 128.
    plan, files = render_job(T, model="qwen3-8b", method="lora", seq_len=2048, cards=8,
                             frameworks=["mindspeed-llm", "llama-factory"],
                             data={"samples": samples, "tokens_per_sample": 500})
    assert plan.train.steps == steps and plan.train.steps >= 100
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    assert lf["per_device_train_batch_size"] * lf["gradient_accumulation_steps"] * 8 == plan.train.global_batch_size


def _launch_text(files, framework):
    return files[f"{framework}/launch.sh"]


def test_mindspeed_relaunch_loads_its_own_checkpoint_with_optimizer_state():
    # The first launch loads the converted weights without optimizer or RNG (--finetune starts at step 0); a
    # relaunch that finds latest_checkpointed_iteration.txt in --save loads model, optimizer, RNG and iteration
    # from there (Megatron checkpointing.py: no --finetune, no --no-load-optim / --no-load-rng).
    for method in ("full", "lora"):
        plan, files = render_job(T, model="qwen3-8b", method=method, cards=8, frameworks=["mindspeed-llm"],
                                 data={"samples": 20000, "tokens_per_sample": 1000})
        arrays = bash_arrays(_launch_text(files, "mindspeed-llm"))
        save = arrays["OUTPUT_ARGS"][arrays["OUTPUT_ARGS"].index("--save") + 1]
        start, again = arrays["START_ARGS"], arrays["RESUME_ARGS"]
        assert {"--finetune", "--no-load-optim", "--no-load-rng"} <= set(start)
        assert not {"--finetune", "--no-load-optim", "--no-load-rng"} & set(again)
        if method == "lora":
            assert again[again.index("--lora-load") + 1] == save
        else:
            assert again[again.index("--load") + 1] == save
        for argv in (start, again):
            common = [w for name, ws in arrays.items() if name not in ("DISTRIBUTED_ARGS", "START_ARGS",
                                                                        "RESUME_ARGS") for w in ws]
            flags.parse("train", common + argv)  # the pinned parser takes both


def _run_launch_until_load(script: str, tmp_path: Path, checkpoint: str | None) -> subprocess.CompletedProcess:
    """Run a generated launch.sh with the framework's launcher replaced by `echo`, so the words it would pass are
    printed; `checkpoint`: the content of latest_checkpointed_iteration.txt in the save folder (None: no file)."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for tool in ("torchrun", "tee"):
        (fake / tool).write_text("#!/bin/sh\necho \"$@\"\n" if tool == "torchrun" else "#!/bin/sh\ncat\n")
        (fake / tool).chmod(0o755)
    script_path = tmp_path / "launch.sh"
    script_path.write_text(script)
    return subprocess.run(["bash", str(script_path), "0"], capture_output=True, text=True,
                          env={"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path)})


def test_mindspeed_launch_picks_resume_and_refuses_a_finished_run(tmp_path):
    out = tmp_path / "out"
    weights = out / "mcore"
    plan, files = render_job(T, model="qwen3-8b", method="full", cards=8, frameworks=["mindspeed-llm"],
                             data={"samples": 2000, "tokens_per_sample": 1000},
                             paths={"output_dir": str(out), "mcore_ckpt_dir": str(weights), "model_dir": "/m",
                                    "dataset": "/d.json", "mindspeed_llm_dir": str(tmp_path)})
    weights.mkdir(parents=True)
    (weights / "latest_checkpointed_iteration.txt").write_text("1")
    script = _launch_text(files, "mindspeed-llm")
    first = _run_launch_until_load(script, tmp_path, None)
    assert first.returncode == 0 and "--finetune" in first.stdout and "resuming" not in first.stderr, first.stderr
    save = out / "mindspeed-llm" / "ckpt"
    save.mkdir(parents=True)
    (save / "latest_checkpointed_iteration.txt").write_text("10")
    (save / "iter_0000010").mkdir()  # Megatron's folder of that iteration
    again = _run_launch_until_load(script, tmp_path, "10")
    assert again.returncode == 0 and "resuming from iteration 10" in again.stderr
    assert f"--load {save}" in again.stdout and "--finetune" not in again.stdout
    (save / "latest_checkpointed_iteration.txt").write_text(str(plan.train.steps))
    done = _run_launch_until_load(script, tmp_path, str(plan.train.steps))
    assert done.returncode == 2 and "holds the finished run" in done.stderr


# msrun_launcher.sh evals its first argument (scripts/msrun_launcher.sh, reference mindformers.md): this stand-in
# does the same and prints the words run_mindformer.py would get.
# Stand-ins that print the words msrun_launcher.sh (which evals its command) or python would get, then exit as the
# run did (FAKE_EXIT: 1 for a crash); python3, which launch.sh uses to read meta.json, stays the real one.
FAKE_MSRUN = 'eval "set -- $1"; printf "%s\\n" "$@"; exit "${FAKE_EXIT:-0}"\n'
FAKE_PYTHON = '#!/bin/bash\nprintf "%s\\n" "$@"; exit "${FAKE_EXIT:-0}"\n'


def _stand_ins(tmp_path: Path) -> tuple[Path, Path]:
    """A MindFormers checkout whose msrun_launcher.sh is FAKE_MSRUN, and a folder holding FAKE_PYTHON as python."""
    mf, bin_dir = tmp_path / "mindformers", tmp_path / "bin"
    (mf / "scripts").mkdir(parents=True)
    (mf / "scripts" / "msrun_launcher.sh").write_text(FAKE_MSRUN)
    bin_dir.mkdir()
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(0o755)
    return mf, bin_dir


@pytest.mark.parametrize("cards", [16, 1])
def test_mindformers_relaunch_resumes_from_its_checkpoint_folder(tmp_path, cards):
    # The generated launch.sh, run with msrun_launcher.sh (or python, on one card) replaced by a stand-in: the first
    # launch passes no resume words; once a crashed run left a checkpoint (rank_0/meta.json, as CheckpointMonitor
    # writes it) the relaunch passes --resume_training True --load_checkpoint ... --auto_trans_ckpt False as whole
    # words, even when the folder has a space (run_mindformer.py l. 132-156 reads them). Several cards load the
    # rank folders (resume_ckpt.py picks the file by meta.json); one card runs without use_parallel, which
    # MindFormers refuses with rank folders (load_checkpoint_utils.py l. 393-397), so it loads the one file
    # meta.json names from a folder of its own. A run that exited 0 is not trained over.
    out, mf, bin_dir = tmp_path / "out dir", *_stand_ins(tmp_path)
    model = "qwen3-8b" if cards > 1 else "debug-tiny"
    plan, files = render_job(T, model=model, method="full", cards=cards, frameworks=["mindformers"],
                             cluster={"master_addr": "10.0.0.1"},
                             paths={"output_dir": str(out), "mindformers_dir": str(mf), "model_dir": "/m",
                                    "dataset": "/d.json"})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["run_mode"] == "train" and "--run_mode train" in files["mindformers/launch.sh"]  # one run mode
    assert doc["use_parallel"] is (cards > 1)
    script = tmp_path / "launch.sh"
    script.write_text(files["mindformers/launch.sh"])

    def launch(code: int) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_EXIT": str(code)}
        return subprocess.run(["bash", str(script), "0"], capture_output=True, text=True, env=env)

    first = launch(1)
    assert first.returncode == 1 and "--resume_training" not in first.stdout, first.stderr
    checkpoint = out / "mindformers" / "checkpoint"
    (checkpoint / "rank_0").mkdir(parents=True)
    for step in (50, 100):
        (checkpoint / "rank_0" / f"qwen3_rank_0-{step}_1.safetensors").write_text("")
    (checkpoint / "rank_0" / "meta.json").write_text(
        json.dumps({"last_epoch": 100, "last_step": 1, "last_ckpt_file": "qwen3_rank_0-100_1.safetensors"}))
    again = launch(1)
    words = again.stdout.splitlines()
    assert "resuming from" in again.stderr, again.stderr
    at = words.index("--resume_training")
    load = words[at + 3]
    assert words[at:at + 3] == ["--resume_training", "True", "--load_checkpoint"]
    assert words[at + 4:at + 6] == ["--auto_trans_ckpt", "False"]
    if cards > 1:
        assert load == str(checkpoint)
    else:
        loaded = Path(load)
        assert loaded.parent.name != "rank_0" and not loaded.parent.name.startswith("rank_")
        assert loaded.resolve() == checkpoint / "rank_0" / "qwen3_rank_0-100_1.safetensors"
    assert words[words.index("--config") + 1].endswith("train.yaml")
    assert launch(0).returncode == 0  # the run finishes
    done = launch(0)
    assert done.returncode == 2 and "has finished" in done.stderr, done.stderr


@pytest.mark.parametrize("cards", [16, 1])
def test_a_mindformers_relaunch_trains_only_the_steps_that_remain(tmp_path, cards):
    # TrainCallBack counts from each launch (MindSpore's cur_step_num starts at 0 on a resume), so the relaunch
    # after step 100 of 300 passes train.yaml's callbacks with stop_step 200 as --callbacks (run_mindformer.py sets
    # it over the config); train.yaml is never rewritten (issue 24). At step 300 the run is finished. msrun joins
    # its workers, so "exit 0" is the run's end, not its start (MindSpore _api.py l. 272-276).
    out, mf, bin_dir = tmp_path / "out", *_stand_ins(tmp_path)
    plan, files = render_job(T, model="qwen3-8b" if cards > 1 else "debug-tiny", method="full", cards=cards,
                             frameworks=["mindformers"], cluster={"master_addr": "10.0.0.1"}, global_batch_size=16,
                             train={"steps": 300}, paths={"output_dir": str(out), "mindformers_dir": str(mf),
                                                          "model_dir": "/m", "dataset": "/d.json"})
    launch = files["mindformers/launch.sh"]
    if cards > 1:
        assert " False 7200" not in launch and "True 7200" in launch
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.yaml").write_text(files["mindformers/train.yaml"])
    (job / "launch.sh").write_text(launch)
    checkpoint = out / "mindformers" / "checkpoint" / "rank_0"
    checkpoint.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_EXIT": "1"}
    for done, left in ((100, 200), (300, None)):
        (checkpoint / f"qwen3_rank_0-{done}_1.safetensors").write_text("")
        (checkpoint / "meta.json").write_text(json.dumps({"last_epoch": done, "last_step": 1,
                                                          "last_ckpt_file": f"qwen3_rank_0-{done}_1.safetensors"}))
        run = subprocess.run(["bash", str(job / "launch.sh"), "0"], capture_output=True, text=True, env=env)
        if left is None:
            assert run.returncode == 2 and "holds a finished run (step 300 of 300)" in run.stderr, run.stderr
            continue
        words = run.stdout.splitlines()
        assert Path(words[words.index("--config") + 1]) == job / "train.yaml"
        resumed = mindformers_run_config(words)
        assert _stop_step(resumed) == left and resumed["lr_schedule"]["total_steps"] == 300
        assert (job / "train.yaml").read_text() == files["mindformers/train.yaml"]  # the job's file as rendered
        assert sorted(p.name for p in (out / "mindformers").iterdir()) == ["SPEC_SHA256", "checkpoint"]


def test_llama_factory_without_resume_refuses_old_checkpoints(tmp_path):
    out = tmp_path / "out"
    _, files = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["llama-factory"],
                          paths={"output_dir": str(out), "model_dir": "/m", "dataset": "/d.json"},
                          train={"resume": False})
    script = tmp_path / "launch.sh"
    script.write_text(_launch_text(files, "llama-factory"))
    (out / "llama-factory" / "checkpoint-20").mkdir(parents=True)
    result = subprocess.run(["bash", str(script), "0"], capture_output=True, text=True)
    assert result.returncode == 2 and "holds checkpoints and train.resume is false" in result.stderr


def _mindformers_steps(doc: dict, sequences: int) -> int:
    """The optimizer steps MindFormers takes over `sequences` per pass: epochs x whole global batches per pass
    (trainer/utils.py l. 191-214), cut at the TrainCallBack's stop_step."""
    par, run = doc["parallel_config"], doc["runner_config"]
    batch = run["batch_size"] * par["data_parallel"] * par["micro_batch_num"] * run["gradient_accumulation_steps"]
    steps = run["epochs"] * (sequences // batch)
    stop = _stop_step(doc)
    return steps if stop is None else min(steps, stop)


@pytest.mark.parametrize("model,data,packed", [
    ("qwen3-8b", {"samples": 20000, "tokens_per_sample": 1000}, 20000 * 1000 // 4096),  # Mcore packs to seq_len
    ("qwen3-8b", {"total_tokens": 10 ** 8}, 10 ** 8 // 4096),
    ("llama3.1-8b", {"samples": 20000, "tokens_per_sample": 1000}, 20000),  # research: one padded sample per row
])
def test_mindformers_stops_at_the_plans_steps(model, data, packed):
    # Given steps are the steps MindFormers takes: its epochs hold at least that many, the callback ends the run there,
    # and the schedule spans them. Before: runner_config.stop_step, which MindFormers never wires, and epochs from
    # unpacked samples (4 passes of 4882 packed sequences = 304 steps for 300 planned, or fewer with shorter samples).
    plan, files = render_job(T, model=model, method="lora", seq_len=4096, hardware="snt9b", cards=8,
                             frameworks=["mindformers"], data=data, global_batch_size=64, train={"steps": 300})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert "stop_step" not in doc["runner_config"]
    assert _stop_step(doc) == 300 and doc["lr_schedule"]["total_steps"] == 300
    assert _mindformers_steps(doc, packed) == 300
    assert doc["runner_config"]["epochs"] == math.ceil(300 * 64 / packed)  # no more passes than the steps need


def test_mindformers_without_a_data_size_runs_to_the_given_steps():
    plan, files = render_job(T, model="qwen3-8b", method="lora", hardware="snt9b", cards=8,
                             frameworks=["mindformers"], global_batch_size=64, train={"steps": 300})
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert _stop_step(doc) == 300 and _mindformers_steps(doc, 64) == 300  # even one global batch per pass
    assert "epochs 300 is an upper bound" in files["PLAN.md"]


def test_mindformers_whole_epochs_let_it_count_its_own_steps():
    # Two passes over packed data: MindFormers counts the steps in the packed data set, the schedule spans them and
    # warms up over the same share; no callback cuts the second pass short.
    plan, files = render_job(T, model="qwen3-8b", method="lora", seq_len=4096, hardware="snt9b", cards=8,
                             frameworks=["mindformers"], data={"samples": 20000, "tokens_per_sample": 1000,
                                                               "epochs": 2}, global_batch_size=64)
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    assert doc["runner_config"]["epochs"] == 2 and _stop_step(doc) is None
    assert doc["lr_schedule"]["total_steps"] == -1
    assert doc["lr_schedule"]["warmup_ratio"] == plan.train.warmup_ratio and "warmup_steps" not in doc["lr_schedule"]
    assert "counts the steps in its\npacked data" in files["PLAN.md"]


def test_mindformers_pretraining_sizes_its_data_from_the_steps():
    plan, files = render_job(T, model="qwen3-32b", method="pretrain", seq_len=4096, hardware="snt9b", cards=16,
                             frameworks=["mindformers"], data={"total_tokens": 10 ** 9}, global_batch_size=128)
    doc = yaml.safe_load(files["mindformers/train.yaml"])
    sizes = doc["train_dataset"]["data_loader"]["sizes"]
    assert sizes[0] == plan.train.steps * 128 and doc["runner_config"]["epochs"] == 1
    assert _stop_step(doc) == plan.train.steps == doc["lr_schedule"]["total_steps"]


def test_mindformers_research_lora_is_the_plans_shape():
    # The legacy LlamaForCausalLM's linear names (wq/wk/wv/wo, w1/w2/w3 with qkv_concat and ffn_concat off);
    # before: dropout 0.05 and the attention names whatever the plan said.
    plan, files = render_job(T, model="llama3.1-8b", method="lora", hardware="snt9b", cards=8,
                             frameworks=["mindformers"], lora={"dropout": 0.1, "targets": "all", "rank": 16})
    pet = yaml.safe_load(files["mindformers/train.yaml"])["model"]["model_config"]["pet_config"]
    assert (pet["lora_rank"], pet["lora_dropout"]) == (16, 0.1)
    assert pet["target_modules"] == ".*wq|.*wk|.*wv|.*wo|.*w1|.*w2|.*w3"


def test_llama_factory_resumes_and_refuses_a_finished_run():
    _, files = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["llama-factory"])
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    assert train["overwrite_output_dir"] is False and "resume_from_checkpoint" not in train
    assert train["save_only_model"] is False
    assert 'if exists_as file "$OUTPUT_DIR/train_results.json"; then' in _launch_text(files, "llama-factory")


@pytest.mark.parametrize("fields,message", [
    (dict(frameworks=["llama-factory"], train={"lr_schedule": "linear", "min_learning_rate": 1.0e-6}),
     "train.min_learning_rate: llama-factory' linear schedule decays to 0"),
    (dict(frameworks=["mindspeed-llm"], method="lora", lora={"dropout": 0.1}),
     "lora.dropout: 0.1: MindSpeed-LLM 2.2.0 builds its adapters with dropout 0"),
    (dict(frameworks=["llama-factory"], train={"min_learning_rate": 1.0}), "is above the peak learning_rate"),
    (dict(frameworks=["mindspeed-llm"], train={"warmup_steps": 2500}),  # no data size: --train-iters 2000
     "train.warmup_steps: 2500: without a data size or train.steps, MindSpeed-LLM trains the placeholder 2000"),
    (dict(frameworks=["llama-factory"], train={"enable_thinking": False}, method="pretrain"),
     "train.enable_thinking: pretraining reads plain text"),
    (dict(frameworks=["llama-factory"], train={"enable_thinking": False}, model="llama3.1-8b", hardware="h800"),
     "train.enable_thinking: applies to Qwen3's chat template only"),
])
def test_what_a_framework_cannot_express_is_refused(fields, message):
    from generator.errors import SpecError
    from generator.resolve import resolve
    with pytest.raises(SpecError) as caught:
        resolve(make_spec(**{"cards": 8, **fields}), T)
    assert message in str(caught.value)


def test_mindspeed_lora_keeps_the_optimizer_its_resume_can_restore():
    # Megatron looks for the distributed optimizer's shard file under --load (the base weights when --lora-load
    # carries the adapters: checkpointing.py l. 1398-1410), so LoRA runs keep the plain optimizer, as upstream's
    # LoRA scripts do; full runs keep the distributed one.
    for method, distributed in (("lora", False), ("full", True)):
        _, files = render_job(T, model="qwen3-8b", method=method, cards=8, frameworks=["mindspeed-llm"])
        words = bash_arrays(files["mindspeed-llm/launch.sh"])["GPT_ARGS"]
        assert ("--use-distributed-optimizer" in words) is distributed


@pytest.mark.parametrize("thinking", [True, False])
def test_qwen3_thinking_is_the_users_choice_in_both_frameworks(thinking):
    plan, files = render_job(T, model="qwen3-8b", method="lora", cards=8,
                             frameworks=["mindspeed-llm", "llama-factory"], train={"enable_thinking": thinking})
    assert yaml.safe_load(files["llama-factory/train.yaml"])["enable_thinking"] is thinking
    pre = bash_arrays(files["mindspeed-llm/preprocess_data.sh"])["PREPROCESS_ARGS"]
    assert pre[pre.index("--enable-thinking") + 1] == str(thinking).lower()  # preprocess_data.py l. 154-155
    assert flags.parse("preprocess", pre).enable_thinking is thinking


def test_the_plan_says_mindformers_has_no_qwen3_thinking():
    plan, _ = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["mindformers", "llama-factory"])
    assert plan.train.enable_thinking is True
    assert any(n.startswith("mindformers: its AlpacaInstructDataHandler") for n in plan.notes)


def test_validate_takes_the_scheduler_kwargs_llama_factory_takes():
    # Review of issue 13: the offline type check read {'min_lr_rate': 0.1} as a string and reported a problem that
    # LLaMA-Factory's own get_train_args accepts (lr_scheduler_kwargs: dict | str | None).
    from generator.frameworks.llama_factory.checks import llamafactory_problems
    _, files = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["llama-factory"],
                          train={"min_learning_rate": 1.0e-5})
    train = yaml.safe_load(files["llama-factory/train.yaml"])
    assert train["lr_scheduler_kwargs"] == {"min_lr_rate": 0.1}
    assert not [p for p in llamafactory_problems(train, None, 8, None) if "lr_scheduler_kwargs" in p]


def test_pretraining_counts_packed_sequences_not_samples():
    # Issue 23 item 2: 200,000 samples of 2,048 tokens are 0.41B tokens, packed into 8,192-token sequences (Megatron's
    # GPTDataset, MindFormers' BlendedMegatronDatasetDataLoader, LLaMA-Factory's stage pt: data/processor/pretrain.py
    # l. 42-46): 50,000 sequences, 98 steps of 512. Before: 391 steps, sizes 200192, four passes over the corpus.
    plan, files = render_job(T, model="qwen3-8b", method="pretrain", seq_len=8192, hardware="snt9b", cards=16,
                             frameworks=["mindformers", "mindspeed-llm", "llama-factory"], global_batch_size=512,
                             data={"samples": 200000, "tokens_per_sample": 2048})
    steps = math.ceil(200000 * 2048 / 8192 / 512)
    mf = yaml.safe_load(files["mindformers/train.yaml"])
    assert mf["train_dataset"]["data_loader"]["sizes"][0] == steps * 512 and _stop_step(mf) == steps
    ms = flags.parse("train", [w for name, ws in bash_arrays(files["mindspeed-llm/launch.sh"]).items()
                               if name not in ("DISTRIBUTED_ARGS", "RESUME_ARGS") for w in ws])
    assert ms.train_iters == steps and yaml.safe_load(files["llama-factory/train.yaml"])["max_steps"] == steps
    for fp in plan.frameworks.values():  # the time is for the tokens the steps train
        assert fp.estimate.total_tokens == pytest.approx(steps * 512 * 8192, rel=0.01)


def test_qlora_on_ascend_keeps_adamw():
    # Issue 23 item 3: bitsandbytes' paged optimizers allocate CUDA/XPU managed memory (0.50.2 optim/optimizer.py
    # l. 374-390, functional.py l. 91-99); upstream's Ascend QLoRA example sets no optim. GPUs keep seed 002's.
    plan, files = render_job(T, model="qwen3-8b", method="qlora", quantization_bit=4, hardware="snt9b", cards=8,
                             frameworks=["llama-factory"])
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    assert "optim" not in lf and plan.train.optimizer == "adamw"
    assert "qwen3_lora_sft_bnb_npu.yaml" in plan.train.origin["optimizer"]


@pytest.mark.parametrize("method,lora,alpha", [
    ("lora", {"rank": 32}, 64), ("lora", {}, 16), ("qlora", {}, 16), ("qlora", {"rank": 16}, 32),
    ("lora", {"rank": 32, "alpha": 8}, 8)])
def test_lora_alpha_follows_the_rank_as_its_source_says(method, lora, alpha):
    # Issue 23 item 5: a raised rank kept alpha 16 while the plan cited LLaMA-Factory's "2 x rank" default
    # (hparams/finetuning_args.py l. 568); QLoRA keeps seed 002's 16 at its rank 64.
    frameworks = ["llama-factory"] if method == "qlora" else ["mindformers", "mindspeed-llm", "llama-factory"]
    plan, files = render_job(T, model="qwen3-8b", method=method, hardware="rtx4090" if method == "qlora" else "snt9b",
                             quantization_bit=4 if method == "qlora" else None, cards=8, frameworks=frameworks,
                             lora=lora or None)
    assert yaml.safe_load(files["llama-factory/train.yaml"])["lora_alpha"] == alpha
    if method == "lora":
        pet = yaml.safe_load(files["mindformers/train.yaml"])["model"]["model_config"]["pet_config"]
        words = [w for ws in bash_arrays(files["mindspeed-llm/launch.sh"]).values() for w in ws]
        assert pet["lora_alpha"] == int(words[words.index("--lora-alpha") + 1]) == alpha
    said = plan.train.origin["lora.alpha"]
    twice = method == "lora" or "rank" in lora  # QLoRA's default rank keeps seed 002's pair
    assert said == "given" if "alpha" in lora else said.startswith("default: 2 x rank (") == twice


@pytest.mark.parametrize("thinking", [None, True, False])
def test_qwen3_thinking_does_not_depend_on_the_other_frameworks(thinking):
    # Issue 23 item 6: a MindSpeed-LLM-only Qwen3 job lost --enable-thinking (so its loss masking changed with the
    # neighbours planned beside it), and a given train.enable_thinking was refused as "not Qwen3's chat template".
    train = {} if thinking is None else {"enable_thinking": thinking}
    written = {}
    for frameworks in (["mindspeed-llm"], ["mindspeed-llm", "llama-factory"]):
        _, files = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=frameworks, train=train or None)
        pre = bash_arrays(files["mindspeed-llm/preprocess_data.sh"])["PREPROCESS_ARGS"]
        written[len(frameworks)] = flags.parse("preprocess", pre).enable_thinking  # preprocess_data.py l. 154-155
    assert written[1] is written[2] is (True if thinking is None else thinking)


def _mindspeed_args(files: dict[str, str]):
    """MindSpeed-LLM's training arguments as its parser (rebuilt from the pinned 2.2.0 declarations) reads them."""
    arrays = bash_arrays(files["mindspeed-llm/launch.sh"])
    return flags.parse("train", [w for name, ws in arrays.items() if name not in ("DISTRIBUTED_ARGS", "RESUME_ARGS")
                                 for w in ws])


def test_each_framework_keeps_its_own_adam_beta2():
    # Issue 23 item 16: LLaMA-Factory trained with adam_beta2 0.95, MindSpeed-LLM's scripts' value, where its
    # examples and transformers use 0.999. A given value still applies to every framework.
    plan, files = render_job(T, model="qwen3-8b", method="lora", cards=8,
                             frameworks=["mindformers", "mindspeed-llm", "llama-factory"])
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    assert (lf["adam_beta1"], lf["adam_beta2"]) == (0.9, 0.999)
    ms = _mindspeed_args(files)
    assert (ms.adam_beta1, ms.adam_beta2) == (0.9, 0.95)
    assert yaml.safe_load(files["mindformers/train.yaml"])["optimizer"]["betas"] == [0.9, 0.95]
    assert "[0.9, 0.999]` | llama-factory: default: transformers 5.6 training_args.py" in files["PLAN.md"]
    assert plan.to_json()["train"]["by_framework"]["llama-factory"]["adam_betas"] == [0.9, 0.999]
    _, given = render_job(T, model="qwen3-8b", method="lora", cards=8, frameworks=["mindspeed-llm", "llama-factory"],
                          train={"adam_betas": [0.9, 0.98]})
    assert yaml.safe_load(given["llama-factory/train.yaml"])["adam_beta2"] == _mindspeed_args(given).adam_beta2 == 0.98


def test_continued_pretraining_takes_each_frameworks_own_recipe():
    # Issue 23 item 4: pretraining loads the HF weights but took the Llama 2 paper's from-scratch 3e-4 -> 3e-5.
    # Each framework now trains with its own examples' values, and the plan says it continues from the weights.
    plan, files = render_job(T, model="qwen3-8b", method="pretrain", cards=16, global_batch_size=512,
                             frameworks=["mindformers", "mindspeed-llm", "llama-factory"],
                             data={"total_tokens": 10 ** 9})
    steps = plan.train.steps
    ms = _mindspeed_args(files)  # examples/mcore/qwen3/pretrain_qwen3_8b_4K_ptd.sh l. 55-59
    assert (ms.lr, ms.min_lr, ms.lr_decay_style, ms.weight_decay) == (1.25e-6, 1.25e-7, "cosine", 0.1)
    assert ms.lr_warmup_iters == round(0.01 * steps)
    mf = yaml.safe_load(files["mindformers/train.yaml"])  # configs/qwen3/pretrain_qwen3_32b_4k.yaml l. 29-35
    assert mf["lr_schedule"]["type"] == "ConstantWarmUpLR" and mf["lr_schedule"]["learning_rate"] == 1.0e-6
    assert mf["lr_schedule"]["warmup_steps"] == 0 and mf["optimizer"]["weight_decay"] == 0.0
    lf = yaml.safe_load(files["llama-factory/train.yaml"])
    assert (lf["learning_rate"], lf["lr_scheduler_type"], lf["warmup_steps"]) == (1.0e-5, "cosine", round(0.1 * steps))
    assert any(n.startswith("continued pretraining: every framework starts from") for n in plan.notes)
    assert "mindspeed-llm: default: MindSpeed-LLM 2.2.0 examples/mcore/qwen3/pretrain_qwen3_8b_4K_ptd.sh" \
        in files["PLAN.md"]
    _, given = render_job(T, model="qwen3-8b", method="pretrain", cards=16, global_batch_size=512,
                          frameworks=["mindformers", "mindspeed-llm", "llama-factory"], data={"total_tokens": 10 ** 9},
                          train={"learning_rate": 2.0e-5})
    assert _mindspeed_args(given).lr == yaml.safe_load(given["llama-factory/train.yaml"])["learning_rate"] == \
        yaml.safe_load(given["mindformers/train.yaml"])["lr_schedule"]["learning_rate"] == 2.0e-5


def test_the_pretraining_note_names_the_planned_frameworks_in_the_plans_order():
    # Issue 24: the note named every framework of the tables, by name from the last, planned or not.
    plan, _ = render_job(T, model="qwen3-8b", method="pretrain", cards=16, global_batch_size=512,
                         frameworks=["mindspeed-llm", "mindformers"], data={"total_tokens": 10 ** 9})
    starts = {"mindformers": "MindFormers through pretrained_model_dir",
              "mindspeed-llm": "MindSpeed-LLM after convert_ckpt.sh"}
    assert sorted(plan.frameworks) == sorted(starts)
    assert f"paths.model_dir ({', '.join(starts[name] for name in plan.frameworks)}), so" in \
        next(n for n in plan.notes if n.startswith("continued pretraining: every framework starts")), plan.notes


def test_thinking_for_a_job_no_framework_applies_it_to_says_why():
    # Issue 23 item 6: a MindFormers-only Qwen3 job was told Qwen3 is "not Qwen3's chat template".
    from generator.errors import SpecError
    from generator.resolve import resolve
    with pytest.raises(SpecError) as caught:
        resolve(make_spec(cards=8, frameworks=["mindformers"], method="lora", train={"enable_thinking": False}), T)
    assert "which no planned framework applies to qwen3-8b" in str(caught.value)
    # Issue 24: it names the planned frameworks' templates only (it listed every framework of the tables).
    assert "qwen3-8b (MindFormers writes the Alpaca prompt); leave it out" in str(caught.value)
