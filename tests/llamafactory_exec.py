"""The LLaMA-Factory execution tier's machinery: which jobs to run, and running one as a user would, with the
generated launch.sh unchanged and the real `llamafactory-cli train`, on a tiny model of the row's family.

A job is a model row x method of the table. It is planned on one card where one card holds it (the first platform
in PLATFORMS with a layout), so the run is the files' own single-rank launch; jobs that need several cards keep
their planned world. Used by tests/test_llamafactory_exec.py and bench/llamafactory_exec_sweep.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import tiny_models
import yaml

from generator.errors import SpecError
from generator.frameworks.llama_factory.render import deepspeed_file, lora_target, schedule
from generator.resolve import resolve
from generator.spec import Spec
from generator.tables import load_tables

NAME = "llama-factory"
PLATFORMS = ("h800", "a800", "snt9b", "snt9b23", "rtx4090", "rtx3090")
SEQ_LEN = 1024
STUBS = Path(__file__).parent / "stubs"
# What a CPU needs and a cluster does not: two optimizer steps, no bf16 (the HF Trainer refuses it without an
# accelerator), short rows, no worker processes, nothing saved mid-run. Given after `--`, never written in the files.
CPU_OVERRIDES = ["max_steps=2", "bf16=false", "cutoff_len=64", "preprocessing_num_workers=1",
                 "dataloader_num_workers=0", "save_steps=1000", "logging_steps=1", "warmup_steps=0",
                 "plot_loss=false"]


@dataclass(frozen=True)
class Job:
    model: str
    method: str
    hardware: str | None  # None: refused by gen-launch
    cards: int | None  # 1, or None for the planned (auto) count
    data_format: str  # "alpaca" | "sharegpt" | "openai" | "text"
    refusal: str | None = None
    runnable: str | None = None  # why this machine cannot run it (None: it can)
    columns: tuple[str, ...] | None = None  # paths.dataset_columns (None: the default)
    variant: str = ""  # names a job of VARIANTS apart from the row x method job
    lora_targets: str | None = None  # lora.targets (None: the method's default, all)

    @property
    def name(self) -> str:
        return f"{self.model}-{self.method}{'-' + self.variant if self.variant else ''}"

    def spec(self, model_dir: Path, dataset: Path, output: Path, port: int) -> dict:
        spec = {"job": self.name.replace("_", "-"), "model": self.model, "method": self.method, "seq_len": SEQ_LEN,
                "hardware": self.hardware, "frameworks": [NAME], "cards": self.cards or "auto",
                "cluster": {"master_port": port},
                "paths": {"model_dir": str(model_dir), "dataset": str(dataset), "output_dir": str(output)}}
        if self.method == "qlora":
            spec["quantization_bit"] = 4
        if self.data_format != "text":
            spec["paths"]["dataset_format"] = self.data_format
        if self.columns is not None:
            spec["paths"]["dataset_columns"] = list(self.columns)
        if self.lora_targets is not None:
            spec["lora"] = {"targets": self.lora_targets}
        return spec

    def plan(self):
        return resolve(_spec(self.model, self.method, self.hardware, self.cards, self.data_format, self.columns,
                             self.lora_targets), load_tables())


def _spec(model: str, method: str, hardware: str, cards: int | None, data_format: str,
          columns: tuple[str, ...] | None = None, lora_targets: str | None = None) -> Spec:
    return Spec(job="j", model=model, method=method, seq_len=SEQ_LEN, hardware=hardware, frameworks=(NAME,),
                cards=cards, sha256="", quantization_bit=4 if method == "qlora" else None,
                dataset_format=None if data_format == "text" else data_format, dataset_columns=columns,
                lora={} if lora_targets is None else {"targets": lora_targets})


# What the row x method jobs (one GPU card where one card holds them) do not reach: the Ascend rendering
# (ASCEND_RT_VISIBLE_DEVICES, the NPU QLoRA keys), QLoRA under DeepSpeed (ZeRO-0 on several cards) and the optional
# data columns each format can have, LoRA on the attention projections only (PEFT refuses names the model lacks:
# BLOOM's are query_key_value and dense).
VARIANTS = [
    Job("qwen2-0.5b", "qlora", "snt9b", 2, "alpaca", variant="snt9b-2"),
    Job("qwen2-0.5b", "lora", "snt9b", 1, "alpaca", columns=("system", "history"), variant="system-history",
        lora_targets="attention"),
    Job("bloom-2b6", "lora", "h800", 1, "alpaca", variant="attention", lora_targets="attention"),
    Job("qwen2-0.5b", "full", "snt9b", 1, "sharegpt", columns=("system", "tools"), variant="system-tools"),
]


def data_format(model: str, method: str) -> str:
    """Both text formats across the methods; vision-language rows train on upstream's mllm_demo shape."""
    if method == "pretrain":
        return "text"
    if load_tables().model(model).vision:
        return "openai"
    return "sharegpt" if method == "full" else "alpaca"


def all_jobs() -> list[Job]:
    """Every model row x method the table offers LLaMA-Factory, planned as described above (or refused)."""
    tables = load_tables()
    jobs = []
    for model in (m for m in tables.models if tables.supports(NAME, m)):
        for method in tables.frameworks[NAME].methods:
            fmt = data_format(model, method)
            jobs.append(_place(model, method, fmt))
    return jobs + VARIANTS


def _place(model: str, method: str, fmt: str) -> Job:
    tables = load_tables()
    error = None
    for cards in (1, None):
        for hardware in PLATFORMS:
            try:
                resolve(_spec(model, method, hardware, cards, fmt), tables)
            except SpecError as exc:
                error = error or str(exc)
                continue
            return Job(model, method, hardware, cards, fmt, runnable=_runnable(model))
    return Job(model, method, None, None, fmt, refusal=error)


def _runnable(model: str) -> str | None:
    if model in tiny_models.REMOTE_CODE:
        return tiny_models.REMOTE_CODE[model]
    if tiny_models.family(model) in ("qwen2_vl", "qwen2_5_vl"):
        return ("transformers' Qwen2-VL processor needs torchvision's video processor, and the only torchvision for "
                "torch 2.13 this machine's registries offer is a CUDA build that does not import here")
    return None


def features(job: Job) -> set[tuple]:
    """What LLaMA-Factory's code paths depend on in a job: model family, template, method, data format and columns,
    DeepSpeed file, recompute, several ranks, accelerator. Jobs with the same features differ only in sizes and
    rates."""
    plan = job.plan()
    fp = plan.frameworks[NAME]
    return {("family", tiny_models.family(job.model)), ("template", fp.info["template"]), ("method", job.method),
            ("format", job.data_format), ("columns", plan.data.columns), ("deepspeed", deepspeed_file(fp)),
            ("recompute", fp.layout.recompute), ("ranks", fp.layout.cards > 1), ("accelerator", plan.accelerator),
            ("quantized deepspeed", job.method == "qlora" and deepspeed_file(fp) is not None),
            # the schedule and whether DeepSpeed wraps the optimizer it reads (cosine_with_min_lr broke under ZeRO-3)
            ("scheduler", schedule(plan)["lr_scheduler_type"], deepspeed_file(fp) is not None),
            ("lora target", lora_target(plan))}


def cost(job: Job) -> int:
    """Rough CPU cost of running a job here, in units of ~10 s on this machine: start-up (imports) dominates a
    two-step run; DeepSpeed starts slower, ZeRO-3 offload runs DeepSpeed's CPU Adam, every extra rank is another
    interpreter with its own imports."""
    lay = job.plan().frameworks[NAME].layout
    return 3 + (lay.zero_stage is not None) + 3 * lay.offload + 3 * (lay.cards - 1)


def covering(jobs: list[Job]) -> list[Job]:
    """Few, cheap runnable jobs that together have every feature of every runnable job (greedy weighted set cover:
    the most new features per unit of cost, table order on ties): what CI runs. bench/llamafactory_exec_sweep.py
    runs them all."""
    todo = [(job, features(job), cost(job)) for job in jobs if not (job.refusal or job.runnable)]
    missing = set().union(*(f for _, f, _ in todo))
    chosen = []
    while missing:
        job, have, _ = max(todo, key=lambda row: len(row[1] & missing) / row[2])
        chosen.append(job)
        missing -= have
    return chosen


def write_models(jobs: list[Job], models: Path) -> None:
    """The tiny checkpoint of each family `jobs` use, written once before jobs run side by side."""
    for fam in sorted({tiny_models.family(job.model) for job in jobs}):
        if not (models / fam / "config.json").exists():
            tiny_models.write_model(fam, models / fam)


@dataclass
class Result:
    job: Job
    returncode: int
    seconds: float
    log: str
    output: Path
    files: Path
    validate: subprocess.CompletedProcess | None  # `gen-launch validate` on the files after the run, if asked

    @property
    def trainer_state(self) -> dict:
        path = self.output / NAME / "trainer_state.json"
        return json.loads(path.read_text()) if path.exists() else {}


def environment(home: Path) -> dict:
    """The launch's environment: this interpreter's scripts first on PATH (llamafactory-cli, torchrun), offline,
    one thread per process, and the torchaudio stand-in (tests/stubs: LLaMA-Factory imports torchaudio at import
    time, and torchaudio has no CPU build for torch 2.13)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "PYTHONPATH": str(STUBS), "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home / "hf"), "OMP_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false", "WANDB_DISABLED": "true", "DS_ACCELERATOR": "cpu"})
    return env


def run(job: Job, root: Path, port: int, models: Path, validate: bool = False,
        overrides: tuple[str, ...] = tuple(CPU_OVERRIDES)) -> Result:
    """Render `job` with gen-launch into root and run its launch.sh on node 0 with the CPU overrides; with
    `validate`, then run `gen-launch validate` on the files."""
    write_models([job], models)
    model_dir = models / tiny_models.family(job.model)
    root.mkdir(parents=True, exist_ok=True)
    dataset = tiny_models.write_data(job.data_format, root / "data", job.columns or ())
    spec = job.spec(model_dir, dataset, root / "out", port)
    (root / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = environment(root)
    # DeepSpeed compiles its CPU ops (shm collectives, CPU Adam) on first use; a lock a killed build left in the
    # user's ~/.cache/torch_extensions would block every launch forever, so the runs of one session share their own.
    env["TORCH_EXTENSIONS_DIR"] = str(models.parent / "torch_extensions")
    render = subprocess.run([sys.executable, "-m", "generator", "render", str(root / "spec.yaml"), "-o",
                             str(root / "gen")], capture_output=True, text=True, env=env)
    files = root / "gen" / spec["job"]
    if render.returncode != 0:
        return Result(job, render.returncode, 0.0, render.stderr, root / "out", files, render)
    start = time.monotonic()
    returncode, log = _launch(["bash", str(files / NAME / "launch.sh"), "0", "--", *overrides], env, root)
    seconds = time.monotonic() - start
    (root / "launch.log").write_text(log, encoding="utf-8")
    checked = subprocess.run([sys.executable, "-m", "generator", "validate", str(files)], capture_output=True,
                             text=True, env=env) if validate else None
    return Result(job, returncode, seconds, log, root / "out", files, checked)


LAUNCH_TIMEOUT = 600  # seconds; a two-step run takes under two minutes here


def _launch(command: list[str], env: dict, cwd: Path, kill_when: Path | None = None) -> tuple[int, str]:
    """Run the launch in its own process group and return (exit status, log). The whole group (torchrun and its
    ranks) is killed with SIGKILL once `kill_when` exists (a crash mid-run), or past LAUNCH_TIMEOUT, so one stuck
    job fails its test instead of stalling the suite."""
    log = cwd / f"launch-{time.monotonic_ns()}.out"
    with log.open("w+", encoding="utf-8") as out, subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True) as proc:
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while proc.poll() is None:
            if time.monotonic() > deadline or (kill_when is not None and kill_when.exists()):
                _kill_tree(proc.pid)
                proc.wait()
                break
            time.sleep(0.05)
        out.seek(0)
        text = out.read()
    if time.monotonic() > deadline:
        text += f"\n[killed after {LAUNCH_TIMEOUT} s]"
    return proc.returncode, text


def _kill_tree(root: int) -> None:
    """SIGKILL `root` and every process below it, as a node failure would: torchrun starts its ranks in sessions
    of their own, so killing the launch's process group would leave them training."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    for pid in tree:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


RESUME_OVERRIDES = [word for word in CPU_OVERRIDES if not word.startswith(("max_steps=", "save_steps="))] + \
    ["max_steps=60", "save_steps=2"]


@dataclass
class Resumed:
    first: tuple[int, str]  # killed mid-run
    finished_first: bool  # the first launch had finished before the kill (then nothing was interrupted)
    second: tuple[int, str]  # the same command again
    third: tuple[int, str]  # once more, after it finished
    output: Path

    @property
    def trainer_state(self) -> dict:
        path = self.output / NAME / "trainer_state.json"
        return json.loads(path.read_text()) if path.exists() else {}


def run_resumed(job: Job, root: Path, port: int, models: Path) -> Resumed:
    """Render `job`, launch it with a checkpoint every two steps and kill the whole launch (SIGKILL) once checkpoint-2
    is written, then run the same command twice more: the second must continue from the last checkpoint and
    finish, the third must refuse to train over the finished run."""
    write_models([job], models)
    root.mkdir(parents=True, exist_ok=True)
    dataset = tiny_models.write_data(job.data_format, root / "data", job.columns or ())
    spec = job.spec(models / tiny_models.family(job.model), dataset, root / "out", port)
    (root / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    env = {**environment(root), "TORCH_EXTENSIONS_DIR": str(models.parent / "torch_extensions")}
    subprocess.run([sys.executable, "-m", "generator", "render", str(root / "spec.yaml"), "-o", str(root / "gen")],
                   check=True, capture_output=True, env=env)
    command = ["bash", str(root / "gen" / spec["job"] / NAME / "launch.sh"), "0", "--", *RESUME_OVERRIDES]
    first = _launch(command, env, root, kill_when=root / "out" / NAME / "checkpoint-2" / "trainer_state.json")
    finished_first = (root / "out" / NAME / "train_results.json").exists()
    second = _launch(command, env, root)
    third = _launch(command, env, root)
    return Resumed(first, finished_first, second, third, root / "out")
