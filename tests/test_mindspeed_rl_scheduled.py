"""Issue 38 (c): a MindSpeed-RL job under Slurm, ModelArts and Volcano, as verl's: the scheduler starts the same
per-node launch.sh once on every node (the sbatch body through srun; ModelArts' boot command on each replica; one
Volcano pod a node), each node takes its rank and node 0's address from the scheduler's variables, node 0 starts the
Ray head and the job once, the other joins and stays until the head has stopped. Stand-in `ray`, `python3`, `sleep`,
`srun`, `scontrol` and `getent` record their calls; both nodes run at the same time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import check_script, render_job
from test_scheduler import GETENT, SCONTROL, SRUN, VALIDATOR
from test_verl_launch import RECORD

from generator.render import write
from generator.tables import load_tables

T = load_tables()
NAME = "mindspeed-rl"
# Both nodes run at once: each call is recorded under a name of its own (time and process), not the count of calls.
UNIQUE = RECORD.replace('"$STUB/calls/$(printf %05d "$n")"', '"$STUB/calls/$(date +%s%N)-$$"')
# ray's stand-in for nodes that start at once: each started node is a file of its own in $STUB/joined (no count
# two nodes could both read and write); `status` reports STUB_DEVICES per node as Ray does; the head's `ray stop`
# ends the cluster, so a worker's `ray status --address` then finds no head.
RAY_NODES = "#!/bin/bash\n" + UNIQUE + r'''
nodes=$(find "$STUB/joined" -type f 2> /dev/null | wc -l)
case "$1 $2" in
  "start --head"|"start --address"*) mkdir -p "$STUB/joined"; touch "$STUB/joined/$$" ;;
  "stop ") rm -rf "$STUB/joined" ;;
  "status "*)
    [ "$nodes" -gt 0 ] || exit 1
    printf 'Resources\n Total Usage:\n 0.0/%d.0 CPU\n 0.0/%d.0 %s\n' $((nodes * 192)) $((nodes * STUB_DEVICES)) \
      "$STUB_RESOURCE" ;;
esac
'''
PYTHON3 = "#!/bin/bash\n" + UNIQUE + 'exit "${PYTHON_RC:-0}"\n'
# sleep: the waits of the join and head polls pass quickly, yet long enough for the other node to come up
QUICK = "#!/bin/bash\ncommand -p sleep 0.05\n"


def scheduled(tmp_path: Path, cluster: dict) -> tuple[object, Path, dict]:
    """A 2-node Qwen2.5-7B GRPO job (16 snt9b cards) written as `render` does, and the stand-ins' environment."""
    paths = {"model_dir": "/m/qwen25-7b", "dataset": "/d/math17k.parquet", "output_dir": str(tmp_path / "out"),
             "mindspeed_rl_dir": str(tmp_path / "msrl"), "mindspeed_llm_dir": "/llm"}
    plan, files = render_job(T, frameworks=[NAME], model="qwen2.5-7b", method="grpo", hardware="snt9b", cards=16,
                             seq_len=4096, data={"samples": 17000, "tokens_per_sample": 400}, paths=paths,
                             cluster=cluster)
    assert plan.frameworks[NAME].layout.nodes == 2
    write(files, tmp_path / "jobs", plan.job, overwrite=False)
    (tmp_path / "msrl").mkdir()
    stub = tmp_path / "stub"
    (stub / "bin").mkdir(parents=True)
    (stub / "calls").mkdir()
    for name, text in (("ray", RAY_NODES), ("python3", PYTHON3), ("sleep", QUICK), ("srun", SRUN),
                       ("scontrol", SCONTROL), ("getent", GETENT)):
        (stub / "bin" / name).write_text(text)
        (stub / "bin" / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "RAY_ADDRESS")}
    env.update(PATH=f"{stub / 'bin'}:{os.environ['PATH']}", STUB=str(stub), STUB_DEVICES="8", STUB_RESOURCE="NPU")
    return plan, tmp_path / "jobs" / plan.job, env


def calls(stub: Path) -> list[tuple[str, str, list[str]]]:
    out = []
    for path in sorted((stub / "calls").iterdir()):
        program, cwd, *argv = path.read_bytes().decode().split("\0")[:-1]
        out.append((program, cwd, argv))
    return out


def assert_ran_once(plan, job: Path, stub: Path, master: str) -> None:
    """One head, one join at node 0's address, the job started once from the MindSpeed-RL root."""
    made = calls(stub)
    starts = [argv for program, _, argv in made if program == "ray" and argv[0] == "start"]
    assert sorted(argv[1].split("=")[0] for argv in starts) == ["--address", "--head"]
    assert [argv[1] for argv in starts if argv[1].startswith("--address")] == [f"--address={master}:6379"]
    jobs = [(cwd, argv) for program, cwd, argv in made if program == "python3"]
    name = plan.frameworks[NAME].settings.config_name
    assert jobs == [(str(job.parent.parent / "msrl"),
                     ["cli/train_grpo.py", "--config-dir", str((job / NAME / "config").resolve()), "--config-name",
                      name])]


def test_the_sbatch_body_starts_the_launch_once_per_node(tmp_path):
    plan, job, env = scheduled(tmp_path, {"scheduler": "slurm", "slurm": {"partition": "ascend"}})
    sbatch = (job / NAME / "submit.sbatch").read_text()
    check_script(sbatch, tmp_path, "submit.sbatch")
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in sbatch
    copy = tmp_path / "spool" / "slurm_script"  # sbatch runs a copy, from the folder it was submitted in
    copy.parent.mkdir()
    shutil.copy(job / NAME / "submit.sbatch", copy)
    done = subprocess.run(["bash", str(copy)], env={**env, "SLURM_SUBMIT_DIR": str(job)}, capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_ran_once(plan, job, tmp_path / "stub", "n1")


@pytest.mark.parametrize("failing", [False, True])
def test_modelarts_boot_command_runs_on_each_replica(tmp_path, failing):
    job_dir = tmp_path / "jobs" / "t"
    plan, job, env = scheduled(tmp_path, {"scheduler": "modelarts", "job_dir": str(job_dir)})
    assert job == job_dir
    plan_md = (job / "PLAN.md").read_text()
    command = plan_md.split("**Submit (modelarts).** `", 1)[1].split("`", 1)[0].split()
    assert command == ["bash", f"{job_dir}/{NAME}/launch.sh"]
    hosts = "modelarts-job-worker-0.modelarts-job,modelarts-job-worker-1.modelarts-job"
    running = [subprocess.Popen(command, env={**env, "VC_TASK_INDEX": str(rank), "VC_WORKER_NUM": "2",
                                              "VC_WORKER_HOSTS": hosts, **({"PYTHON_RC": "3"} if failing else {})},
                                cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for rank in (1, 0)]
    codes = [p.wait(timeout=120) for p in running]
    # the job's exit status is node 0's; the worker ends cleanly once the head has gone
    assert codes == [0, 3 if failing else 0], [p.stderr.read() for p in running if p.stderr]
    assert_ran_once(plan, job, tmp_path / "stub", hosts.split(",")[0])


def test_volcano_runs_the_same_launch_on_each_pod(tmp_path):
    cluster = {"scheduler": "volcano", "job_dir": "/shared/jobs/t",
               "volcano": {"image": "swr.example.com/ascend/msrl:2.3.0", "volume_claim": "shared",
                           "mount_path": "/shared"}}
    paths = {"model_dir": "/m", "dataset": "/d.parquet", "output_dir": "/shared/out"}
    plan, files = render_job(T, frameworks=[NAME], model="qwen2.5-7b", method="grpo", hardware="snt9b", cards=16,
                             seq_len=4096, data={"samples": 17000, "tokens_per_sample": 400}, paths=paths,
                             cluster=cluster)
    manifest = yaml.safe_load(files[f"{NAME}/volcano-job.yaml"])
    assert not sorted(VALIDATOR.iter_errors(manifest), key=str)
    task = manifest["spec"]["tasks"][0]
    assert manifest["spec"]["minAvailable"] == task["replicas"] == 2
    assert task["template"]["spec"]["containers"][0]["command"] == ["bash", f"/shared/jobs/t/{NAME}/launch.sh"]
