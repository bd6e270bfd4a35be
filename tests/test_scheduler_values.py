"""The submission settings as values (generator/scheduler.py): each default, the gres and device resource of each
accelerator, the time limit's arithmetic, the refusals at their keys and the variables launch.sh reads. The mutation
run of issue 42 (bench/mutants.py) changed these unseen by test_scheduler.py's end-to-end runs."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import make_spec

from generator.errors import SpecError
from generator.scheduler import (
    DEFAULT_MARGIN,
    DEVICE_RESOURCE,
    RUN_TIME,
    STARTUP_MINUTES,
    Scheduler,
    check_names,
    scheduler_notes,
    scheduler_of,
    slurm_time,
    super_pod_notes,
    time_limit,
    time_limit_warnings,
    volume_checks,
    with_super_pod_blocks,
)
from generator.tables import load_tables

SLURM = {"scheduler": "slurm", "slurm": {"partition": "p"}}
VOLCANO = {"scheduler": "volcano", "job_dir": "/shared/jobs/t", "volcano": {"image": "registry/train:1"}}


def of(cluster: dict, accelerator: str = "npu") -> Scheduler:
    hardware = load_tables().hardware["snt9b" if accelerator == "npu" else "h800"]
    return scheduler_of(make_spec(cluster=cluster), hardware)


@pytest.mark.parametrize("accelerator,gres,resource", [("npu", "npu", "huawei.com/Ascend910"),
                                                        ("gpu", "gpu", "nvidia.com/gpu")])
def test_each_accelerator_asks_for_its_own_gres_and_device_resource(accelerator, gres, resource):
    assert of(SLURM, accelerator).gres == gres
    assert DEVICE_RESOURCE[accelerator] == resource
    assert of({"scheduler": "slurm", "slurm": {"gres": "gpu:a100"}}, "npu").gres == "gpu:a100"  # a site's own name


def test_the_defaults_of_each_setting():
    slurm = of(SLURM)
    assert (slurm.kind, slurm.partition, slurm.account, slurm.time_limit_minutes, slurm.time_margin, slurm.devices,
            slurm.output, slurm.cpus_per_task, slurm.mem) == ("slurm", "p", None, None, 0.25, "gres",
                                                              "../slurm-%x-%j.out", None, "0")
    assert DEFAULT_MARGIN == 0.25 and STARTUP_MINUTES == 30
    volcano = of(VOLCANO)
    assert (volcano.kind, volcano.job_dir, volcano.image, volcano.queue, volcano.namespace, volcano.volume_claim,
            volcano.mount_path, volcano.cpu, volcano.memory, volcano.max_retry) == (
        "volcano", "/shared/jobs/t", "registry/train:1", "default", "default", None, None, None, None, 3)
    none = of({})
    assert (none.kind, none.job_dir, none.run_time) == ("none", None, None)


def test_a_scheduler_is_a_value():
    with pytest.raises(dataclasses.FrozenInstanceError):
        of(SLURM).kind = "volcano"  # type: ignore[misc]


def test_the_plan_shows_the_chosen_schedulers_own_settings_only():
    assert of(SLURM).to_json() == {"scheduler": "slurm", "job_dir": None, "partition": "p", "account": None,
                                   "time_limit_minutes": None, "time_margin": 0.25, "devices": "gres", "gres": "npu",
                                   "output": "../slurm-%x-%j.out", "cpus_per_task": None, "mem": "0"}
    assert of(VOLCANO).to_json() == {"scheduler": "volcano", "job_dir": "/shared/jobs/t", "image": "registry/train:1",
                                     "queue": "default", "namespace": "default", "volume_claim": None,
                                     "mount_path": None, "cpu": None, "memory": None,
                                     "node_selector": {"accelerator-type": "module-910b-8"},
                                     "plugins": {"env": [], "svc": ["--publish-not-ready-addresses"]}, "max_retry": 3,
                                     "master_wait_s": 600, "master_wait_step_s": 5}
    limited = dataclasses.replace(of(SLURM), time_limits={"mindformers": (90, "why")})
    assert limited.to_json()["time_limits"] == {"mindformers": {"minutes": 90, "source": "why"}}


@pytest.mark.parametrize("kind,rank,count,hosts", [("slurm", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_NODELIST"),
                                                   ("volcano", "VC_TASK_INDEX", "VC_WORKER_NUM", "VC_WORKER_HOSTS"),
                                                   ("modelarts", "VC_TASK_INDEX", "VC_WORKER_NUM", "VC_WORKER_HOSTS")])
def test_launch_reads_each_schedulers_own_variables(kind, rank, count, hosts):
    assert {k: v for k, v in RUN_TIME[kind].items() if k != "source"} == {"rank": rank, "count": count, "hosts": hosts}
    assert Scheduler(kind=kind).run_time == RUN_TIME[kind]


@pytest.mark.parametrize("cluster,key,words", [
    ({"scheduler": "volcano", "volcano": {"image": "i"}}, "cluster.job_dir", "is required with cluster.scheduler "
                                                                             "volcano"),
    ({"scheduler": "modelarts"}, "cluster.job_dir", "is required with cluster.scheduler modelarts"),
    ({"scheduler": "volcano", "job_dir": "/j"}, "cluster.volcano.image", "is required"),
    ({"scheduler": "slurm", "volcano": {"image": "i"}}, "cluster.volcano", "is set but cluster.scheduler is slurm"),
    ({"scheduler": "none", "slurm": {"partition": "p"}}, "cluster.slurm", "is set but cluster.scheduler is none"),
    ({"scheduler": "slurm", "master_addr": "10.0.0.1"}, "cluster.master_addr", "under slurm the scheduler picks"),
])
def test_settings_that_do_not_go_together_are_refused_at_their_key(cluster, key, words):
    with pytest.raises(SpecError) as refused:
        of(cluster)
    assert [p.path for p in refused.value.problems] == [key]
    assert words in str(refused.value)


def test_a_modelarts_job_needs_only_its_folder():
    assert of({"scheduler": "modelarts", "job_dir": "/home/ma-user/j"}).job_dir == "/home/ma-user/j"


@pytest.mark.parametrize("kind,devices,cpus,noted", [("slurm", "gres", None, True), ("slurm", "gres", 16, False),
                                                     ("slurm", "exclusive", None, False),
                                                     ("volcano", "gres", None, False)])
def test_the_plan_notes_a_slurm_task_left_with_the_partitions_default_cpus(kind, devices, cpus, noted):
    notes = [n for n in scheduler_notes(Scheduler(kind=kind, devices=devices, cpus_per_task=cpus))
             if "cpus_per_task" in n]
    assert bool(notes) is noted
    assert all("cluster.slurm.cpus_per_task is not set" in n for n in notes)


@pytest.mark.parametrize("kind,cpu,memory,noted", [("volcano", None, None, True), ("volcano", "8", None, True),
                                                    ("volcano", None, "64Gi", True), ("volcano", "8", "64Gi", False),
                                                    ("slurm", None, None, False), ("modelarts", None, None, False)])
def test_the_plan_notes_a_volcano_pod_that_asks_for_no_cpu_or_memory(kind, cpu, memory, noted):
    """scheduler.py scheduler_notes: a pod without both requests is BestEffort (evicted first), Volcano's only."""
    notes = scheduler_notes(Scheduler(kind=kind, cpu=cpu, memory=memory, cpus_per_task=16))
    assert len(notes) == int(noted)
    assert all("cluster.volcano.cpu and memory are not both set" in str(n) and "BestEffort" in str(n) for n in notes)


def test_the_time_limit_is_the_estimate_times_one_plus_the_margin_plus_the_start():
    assert time_limit(Scheduler(kind="slurm"), 10.0) == (
        750 + 30, "the plan's estimate, its upper end (600 min) x 1.25 (cluster.slurm.time_margin) + 30 min to start")
    assert time_limit(Scheduler(kind="slurm", time_margin=0.5), 1.01)[0] == 91 + 30  # 90.9 rounds up
    assert time_limit(Scheduler(kind="slurm", time_margin=0.0), 2.0)[0] == 120 + 30
    assert time_limit(Scheduler(kind="slurm", time_limit_minutes=45), 10.0) == (45, "cluster.slurm.time_limit_minutes")
    assert time_limit(Scheduler(kind="slurm"), None) == (
        None, "no time estimate: Slurm applies the partition's DefaultTime (its MaxTime where none is set)")


def test_the_spec_margin_reaches_the_limit():
    sched = of({"scheduler": "slurm", "slurm": {"time_margin": 1.0}})
    assert (sched.time_margin, time_limit(sched, 1.0)[0]) == (1.0, 120 + 30)


@pytest.mark.parametrize("minutes,text", [(0, "0-00:00:00"), (59, "0-00:59:00"), (61, "0-01:01:00"),
                                          (1440, "1-00:00:00"), (1501, "1-01:01:00"), (10081, "7-00:01:00")])
def test_minutes_as_sbatch_time(minutes, text):
    assert slurm_time(minutes) == text


def test_a_volcano_pod_name_must_be_a_dns_label():
    volcano = Scheduler(kind="volcano")
    check_names(volcano, "job", {"mindformers": 16})
    check_names(Scheduler(kind="slurm"), "job_name", {"mindformers": 2})  # only Volcano names pods so
    with pytest.raises(SpecError, match=r"cannot name a Volcano job: its pods' host names \(job_name-"):
        check_names(volcano, "job_name", {"mindformers": 2})
    longest = "j" * (63 - len("-mindformers-worker-9"))
    check_names(volcano, longest, {"mindformers": 10})
    with pytest.raises(SpecError):
        check_names(volcano, longest, {"mindformers": 11})  # worker-10: one character too many


def test_a_superpod_row_annotates_each_volcano_job_with_one_nodes_dies():
    """MindCluster's sp-block (scheduler.py SP_BLOCK: ascend910a3/superpod/frame.go l. 63-155 at mind-cluster
    22bb3d98): Volcano on a SuperPoD row only."""
    volcano = Scheduler(kind="volcano")
    blocked = with_super_pod_blocks(volcano, True, {"mindformers": 16, "verl": 8})
    assert blocked.annotations == {"mindformers": {"sp-block": "16"}, "verl": {"sp-block": "8"}}
    notes = [str(n) for n in super_pod_notes(blocked)]
    assert len(notes) == 2 and "sp-block: 16" in notes[0] and "sp-block: 8" in notes[1]
    assert with_super_pod_blocks(volcano, False, {"mindformers": 16}) == volcano
    assert with_super_pod_blocks(Scheduler(kind="slurm"), True, {"mindformers": 16}).annotations == {}


SHARED = Scheduler(kind="volcano", job_dir="/shared/jobs/t", volume_claim="pvc", mount_path="/shared/")


def texts(notes) -> list[str]:
    return [str(note) for note in notes]


def test_without_a_volume_every_path_must_be_in_the_image():
    bare = Scheduler(kind="volcano", job_dir="/shared/jobs/t")
    assert texts(volume_checks(bare, {"dataset": "/data/x"}, False)) == [
        "cluster.volcano.volume_claim is not set: the pods see only the image, so cluster.job_dir (/shared/jobs/t) "
        "and every path must be in it"]
    assert texts(volume_checks(bare, {}, True)) == [
        "cluster.volcano.volume_claim is not set: the pods see only the image, so cluster.job_dir (/shared/jobs/t) "
        "and every path must be in it, and each node writes an output folder of its own, which a multi-node job "
        "cannot resume or merge from"]


def test_paths_off_the_volume_are_warned_of_by_key_and_the_mount_itself_is_on_it():
    paths = {"output_dir": "/shared", "model_dir": "/models/m", "dataset": "/shared2/d", "cache": "/shared/c/d"}
    assert texts(volume_checks(SHARED, paths, True)) == [
        "paths.dataset (/shared2/d) is outside cluster.volcano.mount_path (/shared): the pods find it only if the "
        "image holds it",
        "paths.model_dir (/models/m) is outside cluster.volcano.mount_path (/shared): the pods find it only if the "
        "image holds it"]
    assert volume_checks(dataclasses.replace(SHARED, job_dir="/shared"), {}, True) == []
    assert volume_checks(Scheduler(kind="slurm", job_dir="/home/j"), {"dataset": "/data"}, True) == []


@pytest.mark.parametrize("job_dir", ["/home/me/jobs/t", "/shared2/t", "shared/t"])
def test_a_job_folder_off_the_volume_is_refused_at_its_key(job_dir):
    with pytest.raises(SpecError) as refused:
        volume_checks(dataclasses.replace(SHARED, job_dir=job_dir), {}, True)
    assert [p.path for p in refused.value.problems] == ["cluster.job_dir"]
    assert f"{job_dir} is outside cluster.volcano.mount_path (/shared)" in str(refused.value)


@pytest.mark.parametrize("job", ["7b-run", "0", "-job"])
def test_a_volcano_job_name_must_start_with_a_letter(job):
    """Volcano's svc plugin names a Service after the Job, a DNS-1035 label (scheduler.py DNS_1035_LABEL)."""
    with pytest.raises(SpecError) as refused:
        check_names(Scheduler(kind="volcano"), job, {"mindformers": 1})
    assert [p.path for p in refused.value.problems] == ["job"]
    assert "must start with a lowercase letter" in str(refused.value)
    check_names(Scheduler(kind="slurm"), job, {"mindformers": 1})


def test_only_a_framework_without_a_time_limit_is_warned_of_the_partitions_default_time():
    sched = Scheduler(kind="slurm", time_limits={"verl": (None, "no estimate"), "mindformers": (90, "estimate")})
    warned = time_limit_warnings(sched)
    assert len(warned) == 1 and str(warned[0]).startswith("verl: no time estimate, so its submit.sbatch sets no --time")
