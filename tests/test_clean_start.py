"""Issue 34 item 1: no launch starts a framework's entry from a folder a run writes. Python puts the folder of the
script it runs, or the working folder for `python -m` and `-c`, first on sys.path (and Ray puts the driver's on
every worker's), so a `random.py` left in the output folder or the job folder would run as code.

Every launch (all five frameworks, MindFormers predict, on one card and one node) runs here for real under every
scheduler, started as that scheduler starts it, from a folder holding planted modules, with modules of the same
names planted in every folder the launch or a run can be in (the job folder, the framework's folder of it, the
output folder and the framework's output folder). The entries are stand-ins in a real virtual environment (its
python3 runs them, with Python's own sys.path rules): each imports the planted names and records where it started.
A planted module that is imported writes the canary."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest
import yaml
from helpers import render_job
from test_verl_launch import RAY

from generator.frameworks.verl.render import data_files
from generator.render import write
from generator.tables import load_tables

T = load_tables()
# What the entries import: the standard library's and PyYAML's modules every framework loads, and the framework's
# own package (planted as a module of that name).
PLANTED = ("random", "json", "yaml", "verl", "llamafactory", "mindformers", "megatron", "mindspeed_mm")
ENTRY = f"""
import os, sys
import {", ".join(PLANTED)}
with open(os.environ["STARTED"], "a") as out:
    out.write(os.getcwd() + "\\n")
"""
PLANT = 'import os\nwith open(os.environ["CANARY"], "a") as out:\n    out.write(__file__ + "\\n")\n'
# torchrun starts `python -u SCRIPT ARGS` in its own working folder (torch/distributed/run.py: the training script
# is a path, run by sys.executable); msrun starts `python run_mindformer.py` the same way.
TORCHRUN = '#!/bin/bash\nfor word; do case $word in *.py) exec "$VENV_PYTHON" -u "$word" ;; esac; done\nexit 9\n'
MSRUN_LAUNCHER = '#!/bin/bash\nset -- $1\nexec "$VENV_PYTHON" -u "$1"\n'
# srun runs its command as one task per node with the node's variables (srun(1)); one node here.
SRUN = '#!/bin/bash\nexport SLURM_NODEID=0 SLURM_NNODES=1 SLURM_JOB_NODELIST=node0\nexec "${@: -2}"\n'
SCONTROL = '#!/bin/bash\necho 127.0.0.1\n'  # `scontrol show hostnames`: the one node's
JOBS = {
    "mindformers": ("mindformers", {"model": "qwen3-8b", "method": "full", "cards": 8}),
    "mindformers/1": ("mindformers", {"model": "debug-tiny", "method": "full", "cards": 1}),
    "mindformers/predict": ("mindformers", {"model": "qwen3-8b", "method": "predict", "cards": 8}),
    "mindspeed-llm": ("mindspeed-llm", {"model": "qwen2.5-7b", "method": "full", "cards": 8}),
    "mindspeed-mm": ("mindspeed-mm", {"model": "qwen2.5_vl-7b", "method": "full", "cards": 8}),
    "llama-factory": ("llama-factory", {"model": "qwen2.5-7b", "method": "full", "cards": 8}),
    "verl": ("verl", {"model": "qwen3-8b", "method": "grpo", "cards": 8,
                      "data": {"samples": 6000, "tokens_per_sample": 1024}}),
    "verl/dapo": ("verl", {"model": "qwen3-14b", "method": "dapo", "cards": 8,
                           "data": {"samples": 6000, "tokens_per_sample": 1024}}),
}
SCHEDULERS = ("none", "slurm", "volcano", "modelarts")


def package(root: Path, module: str) -> None:
    """A package `module` (dotted) under root, its last part the entry."""
    *parents, last = module.split(".")
    folder = root
    for part in parents:
        folder = folder / part
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").touch()
    (folder / f"{last}.py").write_text(ENTRY)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A virtual environment (with this interpreter's packages, for launch.sh's own python3 -I calls) holding the
    stand-in entries, the frameworks' checkouts and the stand-in launchers; the environment to run launches in."""
    root = tmp_path_factory.mktemp("installed")
    env_dir = root / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=False, symlinks=True)
    python = env_dir / "bin" / "python3"
    site = Path(subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name in PLANTED[2:]:  # the frameworks' packages, as installed
        (site / name).mkdir()
        (site / name / "__init__.py").touch()
    package(site, "verl.trainer.main_ppo")
    package(site, "recipe.dapo.main_dapo")  # DAPO runs from a clone: its recipe beside verl (pip install -e)
    package(site, "llamafactory.cli")
    package(site, "verl.model_merger.__main__")
    checkouts = {"mindformers_dir": root / "mindformers", "mindspeed_llm_dir": root / "mindspeed-llm",
                 "mindspeed_mm_dir": root / "mindspeed-mm"}
    for folder in checkouts.values():
        folder.mkdir()
    (checkouts["mindformers_dir"] / "run_mindformer.py").write_text(ENTRY)
    (checkouts["mindformers_dir"] / "scripts").mkdir()
    (checkouts["mindformers_dir"] / "scripts" / "msrun_launcher.sh").write_text(MSRUN_LAUNCHER)
    for script in ("pretrain_gpt.py", "posttrain_gpt.py"):
        (checkouts["mindspeed_llm_dir"] / script).write_text(ENTRY)
    (checkouts["mindspeed_mm_dir"] / "pretrain_vlm.py").write_text(ENTRY)
    bindir = env_dir / "bin"
    tools = {"torchrun": TORCHRUN, "srun": SRUN, "scontrol": SCONTROL, "ray": RAY,
             # a console script: Python puts its own folder (bin/) first on sys.path, as pip's do
             "llamafactory-cli": f"#!{python}\nimport llamafactory.cli\n"}
    for name, text in tools.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MASTER_", "NODE_RANK", "SLURM_", "VC_", "PYTHON", "RAY_"))}
    # As CANN's set_env.sh leaves them: MindSpeed-MM's launch.sh checks them before it starts.
    env.update(PATH=f"{bindir}:{os.environ['PATH']}", VENV_PYTHON=str(python), STUB_DEVICES="8",
               STUB_RESOURCE="NPU", ASCEND_TOOLKIT_HOME=str(root), ATB_HOME_PATH=str(root))
    return {"env": env, "paths": {key: str(value) for key, value in checkouts.items()}}


def prepare(root: Path, framework: str, plan) -> None:
    """What the launch needs before it runs: converted weights, the prompts, verl's prepared data."""
    for key in ("mcore_ckpt_dir", "mm_ckpt_dir"):
        folder = Path(plan.paths[key].value) if key in plan.paths else None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "latest_checkpointed_iteration.txt").write_text("release")
    (root / "d.json").write_text("a prompt\n")
    if framework == "verl":
        for path in data_files(plan.frameworks["verl"].settings):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(b"PAR1")


def cluster(scheduler: str, root: Path, job_dir: Path) -> dict:
    found: dict = {}
    if scheduler == "none":
        found.update(master_addr="127.0.0.1")
    elif scheduler == "slurm":
        found.update(scheduler="slurm", slurm={"partition": "ascend"})
    elif scheduler == "volcano":
        found.update(scheduler="volcano", job_dir=str(job_dir), volcano={
            "image": "swr.example.com/ascend/train:8.1", "queue": "training", "namespace": "llm",
            "volume_claim": "shared-data", "mount_path": str(root)})
    elif scheduler == "modelarts":
        found.update(scheduler="modelarts", job_dir=str(job_dir))
    return found


def command(scheduler: str, files: dict, framework: str, job_dir: Path) -> tuple[list[str], dict]:
    """How the scheduler starts the launch on node 0: (argv, its variables)."""
    launch = str(job_dir / framework / "launch.sh")
    if scheduler == "none":
        return ["bash", launch, "0"], {}
    if scheduler == "slurm":
        return ["bash", str(job_dir / framework / "submit.sbatch")], {"SLURM_SUBMIT_DIR": str(job_dir)}
    variables = {"VC_TASK_INDEX": "0", "VC_WORKER_NUM": "1", "VC_WORKER_HOSTS": "127.0.0.1"}
    if scheduler == "volcano":
        manifest = yaml.safe_load(files[f"{framework}/volcano-job.yaml"])
        return manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"], variables
    return ["bash", launch], variables


def run_planted(tmp_path: Path, argv: list[str], variables: dict, installed: dict, folders: list[Path]) -> Path:
    """Run argv from a folder of planted modules, with the same modules planted in `folders`: asserts that it ran
    its entry, no planted module, and exited 0; returns the folder the entry started in (never the one argv was)."""
    started_in = tmp_path / "submitted from"  # where the scheduler (or the user) starts the launch
    for folder in (started_in, *folders):
        folder.mkdir(parents=True, exist_ok=True)
        for module in PLANTED:
            (folder / f"{module}.py").write_text(PLANT)
    stub = tmp_path / "stub"
    (stub / "calls").mkdir(parents=True)
    canary, started = tmp_path / "canary", tmp_path / "started"
    result = subprocess.run(argv, cwd=started_in, capture_output=True, text=True, check=False, timeout=120,
                            env={**installed["env"], **variables, "STUB": str(stub), "CANARY": str(canary),
                                 "STARTED": str(started)})
    assert not canary.exists(), canary.read_text()
    assert result.returncode == 0, result.stderr
    cwd = Path(started.read_text().splitlines()[0])
    assert cwd != started_in
    return cwd


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("name", JOBS)
def test_no_entry_starts_where_a_run_writes(tmp_path, installed, name, scheduler):
    framework, fields = JOBS[name]
    root = tmp_path / "shared"
    job_dir = root / "jobs" / "t"
    out = root / "out"
    plan, files = render_job(T, frameworks=[framework], hardware="snt9b", cluster=cluster(scheduler, root, job_dir),
                             paths={"model_dir": str(root / "m"), "dataset": str(root / "d.json"),
                                    "output_dir": str(out), "mcore_ckpt_dir": str(root / "mcore"),
                                    "mm_ckpt_dir": str(root / "mm"), **installed["paths"]}, **fields)
    assert plan.frameworks[framework].layout.nodes == 1
    write(files, job_dir.parent, plan.job, overwrite=False)
    prepare(root, framework, plan)
    argv, variables = command(scheduler, files, framework, job_dir)
    cwd = run_planted(tmp_path, argv, variables, installed, [job_dir, job_dir / framework, out, out / framework])
    # The entry ran, from its checkout or installed package; LLaMA-Factory's from the job folder, which train.yaml's
    # dataset_dir (.) names and which llamafactory-cli, a console script, never puts on sys.path.
    assert not cwd.is_relative_to(out)
    assert cwd == job_dir / framework if framework == "llama-factory" else not cwd.is_relative_to(root / "jobs")


def test_the_merge_starts_where_no_run_writes(tmp_path, installed):
    # verl's merge.sh runs `python3 -m verl.model_merger`, after training, from wherever the user is.
    out = tmp_path / "out"
    plan, files = render_job(T, frameworks=["verl"], hardware="snt9b", paths={"output_dir": str(out)},
                             **JOBS["verl"][1])
    write(files, tmp_path / "jobs", plan.job, overwrite=False)
    (out / "verl" / "checkpoints" / "global_step_2" / "actor").mkdir(parents=True)
    (out / "verl" / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    job_dir = tmp_path / "jobs" / plan.job
    cwd = run_planted(tmp_path, ["bash", str(job_dir / "verl" / "merge.sh")], {}, installed,
                      [job_dir, job_dir / "verl", out, out / "verl", out / "verl" / "checkpoints"])
    assert not cwd.is_relative_to(out) and not cwd.is_relative_to(job_dir)


@pytest.mark.parametrize("with_recipe", [True, False])
def test_dapo_runs_from_the_clone_on_pythonpath(tmp_path, installed, with_recipe):
    # Issue 34 item 6: verl used from its clone through PYTHONPATH (no pip install) is the verl `python3 -m` runs;
    # DAPO starts from that clone, or is refused by name (no traceback) when it holds no recipe.
    clone = tmp_path / "verl clone"
    clone.mkdir()
    package(clone, "verl.trainer.main_ppo")
    if with_recipe:
        package(clone, "recipe.dapo.main_dapo")
    out = tmp_path / "out"
    plan, files = render_job(T, frameworks=["verl"], hardware="snt9b", cluster={"master_addr": "127.0.0.1"},
                             paths={"model_dir": "/m", "dataset": "/d.json", "output_dir": str(out)},
                             **JOBS["verl/dapo"][1])
    write(files, tmp_path / "jobs", plan.job, overwrite=False)
    prepare(tmp_path, "verl", plan)
    (tmp_path / "stub" / "calls").mkdir(parents=True)
    started = tmp_path / "started"
    result = subprocess.run(["bash", str(tmp_path / "jobs" / plan.job / "verl" / "launch.sh"), "0"], cwd=tmp_path,
                            capture_output=True, text=True, check=False, timeout=120,
                            env={**installed["env"], "PYTHONPATH": str(clone), "STUB": str(tmp_path / "stub"),
                                 "STARTED": str(started), "CANARY": str(tmp_path / "canary")})
    assert "Traceback" not in result.stderr
    if with_recipe:
        assert result.returncode == 0, result.stderr
        assert started.read_text() == f"{clone}\n"
    else:
        assert result.returncode == 2 and not started.exists()
        assert f"{clone}: recipe.dapo.main_dapo runs from a clone of verl v0.7.0" in result.stderr, result.stderr


def test_the_data_preparation_imports_nothing_from_beside_it(tmp_path, installed):
    # verl's prepare_data.py runs as `python3 verl/prepare_data.py`: Python puts the job's verl/ folder first on
    # sys.path, so the script drops it before importing json, re or pyarrow.
    out = tmp_path / "out"
    plan, files = render_job(T, frameworks=["verl"], hardware="snt9b", paths={"dataset": str(tmp_path / "d.json"),
                                                                              "output_dir": str(out)},
                             **JOBS["verl"][1])
    job_dir = tmp_path / "jobs" / plan.job
    write(files, job_dir.parent, plan.job, overwrite=False)
    rows = [{"instruction": "q", "output": "#### 1"}, {"instruction": "q", "output": "#### 2"}]
    (tmp_path / "d.json").write_text(json.dumps(rows))
    started_in = tmp_path / "here"
    for folder in (started_in, job_dir, job_dir / "verl"):
        folder.mkdir(exist_ok=True)
        for module in (*PLANTED, "re", "math", "pyarrow"):
            (folder / f"{module}.py").write_text(PLANT)
    canary = tmp_path / "canary"
    result = subprocess.run([installed["env"]["VENV_PYTHON"], str(job_dir / "verl" / "prepare_data.py")],
                            cwd=started_in, capture_output=True, text=True, check=False, timeout=120,
                            env={**installed["env"], "CANARY": str(canary)})
    assert not canary.exists(), canary.read_text()
    assert result.returncode == 1 and "has 2 rows, the plan's steps are sized for data.samples 6000" in result.stderr
