"""Issue 29: submitting the job (cluster.scheduler). Each framework's launch.sh runs for real here as each scheduler
starts it, with stand-ins for the training programs: run without arguments, it takes the node rank and node 0's
address from the scheduler's variables (Slurm's SLURM_NODEID and the allocation's first host; Volcano's and
ModelArts' VC_TASK_INDEX and VC_WORKER_HOSTS), checked as data. The sbatch script is submitted to a real Slurm
(slurmctld and two slurmd on this host) when Slurm is installed; the Volcano Job validates against Volcano's own CRD
schema (tests/data/volcano/), whose pod template is Kubernetes' PodTemplateSpec schema."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from helpers import check_script, render_job
from test_runtime_inputs import stage, started
from test_verl_launch import job as verl_job
from test_verl_launch import programs

from generator.cli import main
from generator.errors import SpecError
from generator.scheduler import DEVICE_RESOURCE
from generator.tables import load_tables

T = load_tables()
SCHEDULERS = ("slurm", "volcano", "modelarts")
CRD = json.loads((Path(__file__).parent / "data" / "volcano" / "batch.volcano.sh_jobs.v1alpha1.json").read_text())
# A job of each framework that plans at 8, 16 and 128 cards of snt9b: 1, 2 and 16 nodes of 8.
JOBS = {"mindformers": {"model": "qwen3-8b", "method": "full"},
        "mindspeed-llm": {"model": "qwen2.5-7b", "method": "full"},
        "mindspeed-mm": {"model": "qwen2.5_vl-7b", "method": "full"},
        "llama-factory": {"model": "qwen2.5-7b", "method": "full"},
        "verl": {"model": "qwen3-8b", "method": "grpo", "data": {"samples": 6000, "tokens_per_sample": 1024}}}
CLUSTER = {"slurm": {"scheduler": "slurm", "slurm": {"partition": "ascend", "account": "team1"}},
           "volcano": {"scheduler": "volcano", "job_dir": "/shared/jobs/t",
                       "volcano": {"image": "swr.example.com/ascend/train:8.1", "queue": "training",
                                   "namespace": "llm", "volume_claim": "shared-data", "mount_path": "/shared"}},
           "modelarts": {"scheduler": "modelarts", "job_dir": "/home/ma-user/modelarts/user-job-dir/t"}}
STAGED = ("mindformers", "mindspeed-llm", "llama-factory")  # test_runtime_inputs' stand-ins run their launch.sh


def strict(schema):
    """The CRD schema as `kubectl create` (strict field validation, its default since Kubernetes 1.27) reads it: an
    unknown field is an error, not silently pruned, except where the schema preserves unknown fields."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


VALIDATOR = jsonschema.Draft7Validator(strict(CRD["openAPIV3Schema"]))


@pytest.mark.parametrize("framework", JOBS)
@pytest.mark.parametrize("nodes", [1, 2, 16])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_every_framework_renders_for_every_scheduler(tmp_path, framework, nodes, scheduler):
    plan, files = render_job(T, frameworks=[framework], cards=8 * nodes, cluster=CLUSTER[scheduler],
                             **JOBS[framework])
    fp = plan.frameworks[framework]
    assert (fp.layout.nodes, fp.layout.local_cards) == (nodes, 8)
    launch = files[f"{framework}/launch.sh"]
    check_script(launch, tmp_path)
    plan_md = files["PLAN.md"]
    assert f"**Submit ({scheduler}).**" in plan_md
    if scheduler == "slurm":
        sbatch = files[f"{framework}/submit.sbatch"]
        check_script(sbatch, tmp_path, "submit.sbatch")
        options = [line.split(None, 1)[1] for line in sbatch.splitlines() if line.startswith("#SBATCH")]
        assert {f"--nodes={nodes}", "--ntasks-per-node=1", "--gres=npu:8", "--partition=ascend",
                "--account=team1"} <= set(options)
        assert f"srun --nodes={nodes} --ntasks={nodes} --ntasks-per-node=1" in sbatch
        assert f"`sbatch {framework}/submit.sbatch`" in plan_md
    if scheduler == "volcano":
        manifest = yaml.safe_load(files[f"{framework}/volcano-job.yaml"])
        errors = sorted(VALIDATOR.iter_errors(manifest), key=str)
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
        spec = manifest["spec"]
        assert spec["minAvailable"] == nodes and spec["tasks"][0]["replicas"] == nodes
        container = spec["tasks"][0]["template"]["spec"]["containers"][0]
        assert container["command"] == ["bash", f"/shared/jobs/t/{framework}/launch.sh"]
        assert container["resources"]["limits"] == {"huawei.com/Ascend910": 8}
        assert set(spec["plugins"]) == {"env", "svc"} and spec["tasks"][0]["name"] == "worker"
    if scheduler == "modelarts":
        assert f"`bash /home/ma-user/modelarts/user-job-dir/t/{framework}/launch.sh`" in plan_md
        assert not [p for p in files if p.endswith((".sbatch", "-job.yaml"))]  # one command, no file


def test_gpus_ask_nvidias_device_resource():
    plan, files = render_job(T, frameworks=["llama-factory"], model="qwen2.5-7b", method="lora", hardware="a800",
                             cards=16, cluster=CLUSTER["volcano"])
    manifest = yaml.safe_load(files["llama-factory/volcano-job.yaml"])
    assert not list(VALIDATOR.iter_errors(manifest))
    limits = manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {DEVICE_RESOURCE["gpu"]: 8}


def test_the_manifest_schema_catches_a_misspelt_field():
    """The strict CRD schema is a real check: a field Volcano does not know is an error."""
    plan, files = render_job(T, frameworks=["llama-factory"], cards=16, cluster=CLUSTER["volcano"],
                             **JOBS["llama-factory"])
    manifest = yaml.safe_load(files["llama-factory/volcano-job.yaml"])
    manifest["spec"]["minAvailible"] = 2
    manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resource"] = {}
    assert len(list(VALIDATOR.iter_errors(manifest))) == 2


def _sbatch_minutes(sbatch: str) -> int:
    limit = next(line for line in sbatch.splitlines() if line.startswith("#SBATCH --time="))
    days, clock = limit.split("=")[1].split("-")
    h, m, _ = clock.split(":")
    return int(days) * 1440 + int(h) * 60 + int(m)


@pytest.mark.parametrize("rate", [None, 900.0])
def test_the_time_limit_is_the_upper_end_of_the_estimate_with_a_margin(rate):
    # Issue 37 item 4: an assumed 25% MFU sized --time with only the 1.25 margin. Where the rate is assumed, the
    # time is a range whose upper end assumes seed 004's spread of one framework's MFU (31.7% / 69.0%); a measured
    # rate has no range.
    plan, files = render_job(T, frameworks=["llama-factory"], cards=16, cluster=CLUSTER["slurm"],
                             data={"samples": 80000, "tokens_per_sample": 2048}, tokens_per_card_s=rate,
                             **JOBS["llama-factory"])
    estimate = plan.frameworks["llama-factory"].estimate
    high = estimate.time_hours / (0.317 / 0.690) if rate is None else estimate.time_hours
    assert estimate.time_high_hours == pytest.approx(high)
    assert _sbatch_minutes(files["llama-factory/submit.sbatch"]) == -(-high * 60 * 1.25 // 1) + 30
    fixed = {**CLUSTER["slurm"], "slurm": {"time_limit_minutes": 90, "devices": "exclusive"}}
    _, files = render_job(T, frameworks=["llama-factory"], cards=16, cluster=fixed, **JOBS["llama-factory"])
    sbatch = files["llama-factory/submit.sbatch"]
    assert "#SBATCH --time=0-01:30:00" in sbatch and "#SBATCH --exclusive" in sbatch and "--gres" not in sbatch


# Run time -------------------------------------------------------------------------------------------------------
def scheduler_env(scheduler: str, rank: int, nodes: int, bindir: Path) -> dict:
    """The variables the scheduler sets on node `rank` (and a stand-in scontrol on `bindir` for Slurm's host list)."""
    if scheduler == "slurm":
        scontrol = bindir / "scontrol"
        scontrol.write_text('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && [ "$3" = "n[1-16]" ] || exit 1\n'
                            'for i in $(seq 1 16); do echo "n$i"; done\n')
        scontrol.chmod(0o755)
        return {"SLURM_NODEID": str(rank), "SLURM_PROCID": str(rank), "SLURM_NNODES": str(nodes),
                "SLURM_JOB_NODELIST": "n[1-16]"}
    hosts = ",".join(f"t-fw-worker-{i}.t-fw" for i in range(nodes))
    return {"VC_TASK_INDEX": str(rank), "VC_WORKER_NUM": str(nodes), "VC_WORKER_HOSTS": hosts}


FIRST_HOST = {"slurm": "n1", "volcano": "t-fw-worker-0.t-fw", "modelarts": "t-fw-worker-0.t-fw"}


@pytest.mark.parametrize("framework", STAGED)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_each_node_takes_its_rank_and_master_from_the_scheduler(tmp_path, framework, scheduler):
    s = stage(tmp_path / "s", framework, cards=16, cluster=CLUSTER[scheduler])
    bindir = Path(s.env["PATH"].split(":")[0])
    for rank in (1, 0):  # node 0 last: MindFormers' marks the run finished
        result = s.run(env=scheduler_env(scheduler, rank, 2, bindir))
        assert result.returncode == 0, result.stderr
        assert started(s.calls()) == (str(rank), FIRST_HOST[scheduler])
    # An argument still wins: the same file works by hand.
    s.reset_output()
    result = s.run("1", "10.0.0.5", env=scheduler_env(scheduler, 0, 2, bindir))
    assert result.returncode == 0 and started(s.calls()) == ("1", "10.0.0.5")


CANARY = "CANARY"
BAD = {"VC_TASK_INDEX": ["$(touch CANARY)", "01", "2", "-1", " 1", "a[$(touch CANARY)]"],
       "VC_WORKER_NUM": ["3", "02", "$(touch CANARY)", ""],
       "VC_WORKER_HOSTS": ["", ",t-0", "$(touch CANARY),x", "a b,c", "h:99,x", "`touch CANARY`"]}


@pytest.mark.parametrize("variable,value", [(k, v) for k, values in BAD.items() for v in values])
def test_the_schedulers_variables_are_checked_as_data(tmp_path, variable, value):
    s = stage(tmp_path / "s", "llama-factory", cards=16, cluster=CLUSTER["volcano"])
    canary = tmp_path / "canary"
    env = {**scheduler_env("volcano", 1, 2, tmp_path), variable: value.replace(CANARY, str(canary))}
    result = s.run(env=env)
    assert result.returncode == 2 and not s.calls() and not canary.exists(), result.stderr
    assert variable in result.stderr or "NODE_RANK" in result.stderr or "MASTER_ADDR" in result.stderr


def test_slurms_node_list_is_read_by_scontrol_only(tmp_path):
    s = stage(tmp_path / "s", "mindspeed-llm", cards=16, cluster=CLUSTER["slurm"])
    bindir = Path(s.env["PATH"].split(":")[0])
    env = {**scheduler_env("slurm", 1, 2, bindir), "SLURM_JOB_NODELIST": "$(touch CANARY)"}
    result = s.run(env=env)
    assert result.returncode == 2 and "SLURM_JOB_NODELIST" in result.stderr and not s.calls()
    env = {**scheduler_env("slurm", 1, 3, bindir)}
    result = s.run(env=env)
    assert result.returncode == 2 and "SLURM_NNODES" in result.stderr and not s.calls()


def test_verl_workers_stay_until_the_head_ends_under_a_scheduler(tmp_path):
    j = verl_job(tmp_path, 2, master_addr=None, scheduler="slurm")
    # ray's stand-in: joins, then answers `ray status` three times before the head is gone.
    ray = j.stub / "bin" / "ray"
    ray.write_text(ray.read_text().replace('  "status "*)', '  "status --address"*)\n'
                                           '    n=$(cat "$STUB/asked" 2> /dev/null || echo 0)\n'
                                           '    echo $((n + 1)) > "$STUB/asked"\n'
                                           '    [ "$n" -lt 3 ] || exit 1\n    ;;\n  "status "*)'))
    result = j.run(**scheduler_env("slurm", 1, 2, j.stub / "bin"))
    assert result.returncode == 0, result.stderr
    calls = j.calls()
    assert programs(calls) == ["ray start", *["ray status", "sleep"] * 3, "ray status", "ray stop"]
    assert calls[0][2][1] == "--address=n1:6379"  # node 0: the allocation's first host
    # Without a scheduler the worker returns once it has joined, as before.
    j = verl_job(tmp_path / "none", 2, master_addr=None)
    result = j.run("1", "10.0.0.1")
    assert result.returncode == 0 and programs(j.calls()) == ["ray start"]


# Bad input ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cluster,key,words", [
    ({"scheduler": "slurm", "slurm": {"partition": "a;rm -rf /"}}, "cluster.slurm.partition", "Slurm name"),
    ({"scheduler": "slurm", "slurm": {"account": "$(id)"}}, "cluster.slurm.account", "Slurm name"),
    ({"scheduler": "slurm", "slurm": {"output": "/logs/$(id).out"}}, "cluster.slurm.output", "absolute path"),
    ({"scheduler": "slurm", "master_addr": "10.0.0.1"}, "cluster.master_addr", "scheduler picks the nodes"),
    ({"scheduler": "volcano", "job_dir": "/j", "slurm": {"partition": "p"}}, "cluster.slurm", "applies to slurm"),
    ({"scheduler": "volcano", "job_dir": "/j"}, "cluster.volcano.image", "required"),
    ({"scheduler": "volcano", "volcano": {"image": "img:1"}}, "cluster.job_dir", "required"),
    ({"scheduler": "volcano", "job_dir": "/j", "volcano": {"image": "Img With Space"}}, "cluster.volcano.image",
     "image reference"),
    ({"scheduler": "volcano", "job_dir": "/j", "volcano": {"image": "i", "namespace": "Team_A"}},
     "cluster.volcano.namespace", "DNS-1123"),
    ({"scheduler": "volcano", "job_dir": "/j", "volcano": {"image": "i", "volume_claim": "c"}},
     "cluster.volcano.mount_path", "required"),
    ({"scheduler": "modelarts"}, "cluster.job_dir", "required"),
    ({"scheduler": "pbs"}, "cluster.scheduler", "choose one of"),
])
def test_bad_scheduler_settings_are_refused_at_their_key(cluster, key, words):
    with pytest.raises(SpecError) as raised:
        render_job(T, frameworks=["llama-factory"], cards=16, cluster=cluster, **JOBS["llama-factory"])
    assert any(p.path == key and words in p.message for p in raised.value.problems), raised.value.problems


def test_a_job_name_volcano_cannot_use_is_refused(tmp_path):
    with pytest.raises(SpecError) as raised:
        render_job(T, job="qwen_job", frameworks=["llama-factory"], cards=16, cluster=CLUSTER["volcano"],
                   **JOBS["llama-factory"])
    assert raised.value.problems[0].path == "job" and "DNS-1123" in raised.value.problems[0].message


def test_the_cli_refuses_a_partition_with_shell_characters(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("job: t\nmodel: qwen2.5-7b\nmethod: full\nseq_len: 4096\nhardware: snt9b\ncards: 16\n"
                    "frameworks: [llama-factory]\ncluster: {scheduler: slurm, slurm: {partition: 'gpu`id`'}}\n")
    result = CliRunner().invoke(main, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "cluster.slurm.partition" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


# A real Slurm ---------------------------------------------------------------------------------------------------
SLURM_CONF = """ClusterName=genlaunch
SlurmctldHost=localhost
AuthType=auth/munge
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={port}
SlurmdPort={dport}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/ctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/ctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
GresTypes=npu
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={dport} CPUs=1 Gres=npu:8 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={dport2} CPUs=1 Gres=npu:8 State=UNKNOWN
PartitionName=ascend Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """slurmctld and two slurmd (nodes n1 and n2 on this host, Slurm's multiple-slurmd mode) with munge: a real
    two-node Slurm. Skipped where Slurm or munge is not installed (Debian: apt-get install slurm-wlm munge) or
    cannot start here (not root: slurmd runs jobs as their user)."""
    tools = [shutil.which(name) for name in ("slurmctld", "slurmd", "sbatch", "munged", "munge", "scontrol")]
    if not all(tools) or os.geteuid() != 0:
        pytest.skip("a real Slurm needs slurm-wlm and munge installed and root (apt-get install slurm-wlm munge)")
    root = tmp_path_factory.mktemp("slurm")
    (root / "state").mkdir()
    port = 20000 + os.getpid() % 10000
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(user="root", port=port, dport=port + 1, dport2=port + 2, root=root))
    (root / "gres.conf").write_text("NodeName=n[1-2] Name=npu Count=8\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
        pytest.skip("munged is not running (Slurm authenticates through it: start munged)")
    started_here = [subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)]
    time.sleep(1)
    started_here += [subprocess.Popen(["slurmd", "-D", "-f", str(conf), "-N", node], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for node in ("n1", "n2")]
    try:
        for _ in range(60):
            info = subprocess.run(["sinfo", "-h", "-o", "%t %D"], env=env, capture_output=True, text=True)
            if info.stdout.split() == ["idle", "2"]:
                break
            time.sleep(0.5)
        else:
            pytest.skip(f"the test Slurm did not come up: {info.stdout} {info.stderr}")
        yield env
    finally:
        for process in reversed(started_here):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


@pytest.mark.parametrize("framework", ["llama-factory", "mindspeed-llm"])
def test_the_sbatch_script_runs_under_a_real_slurm(tmp_path, slurm, framework):
    s = stage(tmp_path / "s", framework, cards=16, cluster=CLUSTER["slurm"])
    env = {**s.env, "SLURM_CONF": slurm["SLURM_CONF"]}
    test = subprocess.run(["sbatch", "--test-only", f"{framework}/submit.sbatch"], cwd=s.folder.parent, env=env,
                          capture_output=True, text=True, timeout=60)
    assert test.returncode == 0 and "to start at" in test.stderr, test.stderr
    result = subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/slurm-%j.out", f"{framework}/submit.sbatch"],
                            cwd=s.folder.parent, env=env, capture_output=True, text=True, timeout=120)
    log = "".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))
    assert result.returncode == 0, (result.stderr, log)
    assert sorted(started([call]) for call in s.calls()) == [("0", "n1"), ("1", "n1")], log


@pytest.mark.parametrize("framework", ["mindspeed-llm", "llama-factory"])
def test_nodes_started_together_all_start(tmp_path, framework):
    """A scheduler starts every node's launch.sh at once on the shared output folder: none may trip over a folder
    another node is making (MindSpeed-LLM's logs/ did, once in three real Slurm runs)."""
    s = stage(tmp_path / "s", framework, cards=32, global_batch_size=64, cluster=CLUSTER["modelarts"])
    nodes = s.plan.frameworks[framework].layout.nodes
    for _ in range(5):
        s.reset_output()
        s.record.unlink(missing_ok=True)
        running = [subprocess.Popen(["bash", str(s.folder / "launch.sh")], cwd=s.folder.parent.parent, text=True,
                                    env={**s.env, **scheduler_env("modelarts", rank, nodes, tmp_path)},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for rank in range(nodes)]
        failed = [p.communicate()[1] for p in running if p.wait() != 0]
        assert not failed, failed
        assert sorted(started([call])[0] for call in s.calls()) == [str(r) for r in range(nodes)]


@pytest.mark.parametrize("framework", STAGED)
@pytest.mark.parametrize("scheduler", ["volcano", "modelarts"])
def test_the_container_command_runs_on_each_replica(tmp_path, framework, scheduler):
    """The Volcano Job's container command (ModelArts: PLAN.md's boot command), as written, on every replica with the
    variables Volcano's env and svc plugins (ModelArts) give it: each starts its rank, with pod 0 as the master."""
    job_dir = tmp_path / "s" / "job" / "t"
    s = stage(tmp_path / "s", framework, cards=16, cluster={**CLUSTER[scheduler], "job_dir": str(job_dir)})
    if scheduler == "volcano":
        manifest = yaml.safe_load((s.folder / "volcano-job.yaml").read_text())
        name, task = manifest["metadata"]["name"], manifest["spec"]["tasks"][0]
        command, replicas = task["template"]["spec"]["containers"][0]["command"], task["replicas"]
        hosts = ",".join(f"{name}-{task['name']}-{i}.{name}" for i in range(replicas))  # svc.go l.320-341
    else:
        plan_md = (job_dir / "PLAN.md").read_text()
        command = plan_md.split("**Submit (modelarts).** `", 1)[1].split("`", 1)[0].split()
        replicas, hosts = 2, "modelarts-job-worker-0.modelarts-job,modelarts-job-worker-1.modelarts-job"
    assert command == ["bash", f"{job_dir}/{framework}/launch.sh"]
    for rank in reversed(range(replicas)):
        env = {**s.env, "VC_TASK_INDEX": str(rank), "VK_TASK_INDEX": str(rank), "VC_WORKER_NUM": str(replicas),
               "VC_WORKER_HOSTS": hosts}
        s.record.unlink(missing_ok=True)
        result = subprocess.run(command, env=env, capture_output=True, text=True, cwd="/")
        assert result.returncode == 0, result.stderr
        assert started(s.calls()) == (str(rank), hosts.split(",")[0])


SRUN = r'''#!/bin/bash
# Stand-in for srun inside an allocation of n[1-N]: runs the command once per node at the same time, with the
# variables srun sets for each task (SLURM_NODEID, SLURM_PROCID, SLURM_NNODES, SLURM_JOB_NODELIST).
nodes=
while [ "${1#--}" != "$1" ]; do
  case $1 in --nodes=*) nodes=${1#--nodes=} ;; esac
  shift
done
pids=()
for ((i = 0; i < nodes; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_NNODES=$nodes SLURM_JOB_NODELIST="n[1-$nodes]" "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit $rc
'''
SCONTROL = ('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] || exit 1\nlast=${3//[!0-9-]/}\n'
            'for ((i = 1; i <= ${last#*-}; i++)); do echo "n$i"; done\n')


@pytest.mark.parametrize("framework", STAGED)
@pytest.mark.parametrize("cards", [8, 16, 32])
def test_the_sbatch_body_runs_every_node_with_stand_in_srun(tmp_path, framework, cards):
    """Where no Slurm runs (CI): the sbatch script's body as sbatch runs it (SLURM_SUBMIT_DIR, a copy of the file
    elsewhere), with srun and scontrol stand-ins that set each node's variables as Slurm does."""
    s = stage(tmp_path / "s", framework, cards=cards, global_batch_size=64, cluster=CLUSTER["slurm"])
    bindir = Path(s.env["PATH"].split(":")[0])
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    copy = tmp_path / "spool" / "slurm_script"  # sbatch runs a copy, not the file in the job folder
    copy.parent.mkdir()
    shutil.copy(s.folder / "submit.sbatch", copy)
    result = subprocess.run(["bash", str(copy)], env={**s.env, "SLURM_SUBMIT_DIR": str(s.folder.parent)},
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    nodes = s.plan.frameworks[framework].layout.nodes
    master = "n1" if nodes > 1 else "127.0.0.1"  # one node needs no address
    assert sorted(started([call]) for call in s.calls()) == sorted((str(r), master) for r in range(nodes))
    moved = subprocess.run(["bash", str(copy)], env={**s.env, "SLURM_SUBMIT_DIR": str(tmp_path)},
                           capture_output=True, text=True, cwd=tmp_path)
    assert moved.returncode == 2 and "submit from the job folder" in moved.stderr
