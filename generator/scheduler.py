"""How the job is submitted (cluster.scheduler): none (launch.sh by hand on each node), Slurm (an sbatch script per
framework), Volcano (a batch.volcano.sh/v1alpha1 Job per framework) or a Huawei Cloud ModelArts training job (one
command for every node). The resolver decides the values here (pure); render lays them out beside each framework's
launch.sh, which reads the node rank and node 0's address from the scheduler's own variables when they are not
given as arguments (templates/_launch_prologue.sh.j2)."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, field, replace
from typing import TYPE_CHECKING

from .api.frozen import frozen
from .api.notes import Note, warning
from .errors import Problem, SpecError

if TYPE_CHECKING:
    from .spec import Spec
    from .tables import Hardware

# The device resource a pod asks for per node: Huawei's Ascend device plugin advertises the training NPUs as
# huawei.com/Ascend910 (MindCluster's resource names, hiascend.com mindcluster 70rc1 dlug mxdlug_appendices_014:
# "huawei.com/Ascend910: Atlas 训练系列产品资源名称", the one name it lists for training NPUs; no page read here
# names another for the A3 series (snt9b23), so it asks for that one too: a cluster whose device plugin names its
# dies otherwise shows it in `kubectl describe node`); NVIDIA's device plugin advertises nvidia.com/gpu.
DEVICE_RESOURCE = {"npu": "huawei.com/Ascend910", "gpu": "nvidia.com/gpu"}
DEFAULT_GRES = {"npu": "npu", "gpu": "gpu"}  # slurm.conf's GresTypes names sites give the devices
DEFAULT_MARGIN = 0.25  # cluster.slurm.time_margin: share added to the plan's time estimate
STARTUP_MINUTES = 30  # added to the estimate: loading the weights, compiling, the first checkpoint's save
# sbatch --mem: without it a node gets DefMemPerNode (or DefMemPerCPU times its CPUs), --exclusive included (sbatch(1)
# 22.05, --exclusive: "is only allocated as much memory as it requested. To request all the memory on a node, use
# --mem=0"; --mem: "zero ... grants the job access to all of the memory on each node").
NODE_MEMORY = "0"
# sbatch --output by default: Slurm writes slurm-%j.out in the folder sbatch runs in (sbatch(1) 22.05, DESCRIPTION),
# here the job folder, where `check` and `render` would find a file they did not write. A relative name is taken
# from the batch script's working folder, the job folder: its parent holds the log (%x: the job name, %j: its id).
DEFAULT_OUTPUT = "../slurm-%x-%j.out"
# Volcano's one task: the svc plugin names the pods <job>-<task>-<index> (pkg/controllers/job/helpers/helpers.go
# l.35 at volcano-sh/volcano ed72c7c8) and exports VC_<TASK>_HOSTS and VC_<TASK>_NUM (plugins/svc/const.go l.22-25,
# svc.go l.337-341); ModelArts' training jobs name theirs "worker" too (VC_WORKER_HOSTS, below).
VOLCANO_TASK = "worker"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# The svc plugin names its Service after the Job (plugins/svc/svc.go l.228-231 at ed72c7c8), and Kubernetes takes a
# Service name only as a DNS-1035 label, which starts with a letter (pkg/apis/core/validation/validation.go:
# ValidateServiceName = NameIsDNS1035Label).
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# Volcano's plugins: env (VC_TASK_INDEX) and svc, asked to publish the pods' addresses before they are ready
# (--publish-not-ready-addresses, plugins/svc/svc.go l.65-66 and l.242): otherwise a pod's host name resolves only
# once it is ready, and a launcher that resolves node 0's name once at start (msrun) fails.
VOLCANO_PLUGINS: dict[str, list[str]] = {"env": [], "svc": ["--publish-not-ready-addresses"]}
# Volcano's admission webhook writes maxRetry 3 where a Job gives 0 or none (pkg/webhooks/admission/jobs/mutate/
# mutate_job.go l.43-46, l.161-164 at ed72c7c8): the manifest says what runs. A Job restarts only on a RestartJob
# action, and its policies abort instead, so no pod is retried.
VOLCANO_MAX_RETRY = 3
# How long launch.sh waits for node 0's host name to resolve under Volcano and ModelArts, where it is published as the
# pods start (MindFormers' msrun resolves it once, with no retry): seconds, checked every MASTER_WAIT_STEP_S.
MASTER_WAIT_S = 600
MASTER_WAIT_STEP_S = 5

# What launch.sh reads under each scheduler when the rank (and the address) are not given: the node's rank, the
# node count it must equal, and where node 0's host name is (the first host of a list).
RUN_TIME: dict[str, dict[str, str]] = {
    "slurm": {"rank": "SLURM_NODEID", "count": "SLURM_NNODES", "hosts": "SLURM_JOB_NODELIST",
              "source": "srun sets SLURM_NODEID (the node's index in the allocation), SLURM_NNODES and "
                        "SLURM_JOB_NODELIST for each task (srun(1), OUTPUT ENVIRONMENT VARIABLES); node 0 is the "
                        "first host `scontrol show hostnames` lists"},
    "volcano": {"rank": "VC_TASK_INDEX", "count": "VC_WORKER_NUM", "hosts": "VC_WORKER_HOSTS",
                "source": "Volcano's env plugin sets VC_TASK_INDEX (pkg/controllers/job/plugins/env/const.go l.27), "
                          "its svc plugin VC_WORKER_NUM and VC_WORKER_HOSTS, the pods' host names in index order "
                          "(plugins/svc/svc.go l.337-341, volcano-sh/volcano ed72c7c8)"},
    "modelarts": {"rank": "VC_TASK_INDEX", "count": "VC_WORKER_NUM", "hosts": "VC_WORKER_HOSTS",
                  "source": "ModelArts injects VC_TASK_INDEX, VC_WORKER_NUM and VC_WORKER_HOSTS (the nodes' domain "
                            "names in order, comma separated: node 0's is the first) into every training container "
                            "(support.huaweicloud.com/develop-modelarts/develop-modelarts-0104.html, table 2)"},
}


# The settings each scheduler reads (plan.json shows those of the chosen one).
OWN_KEYS = {"slurm": ("partition", "account", "time_limit_minutes", "time_margin", "devices", "gres", "output",
                      "cpus_per_task", "mem"),
            "volcano": ("image", "queue", "namespace", "volume_claim", "mount_path", "cpu", "memory",
                        "node_selector", "plugins", "max_retry", "master_wait_s", "master_wait_step_s"),
            "modelarts": ("master_wait_s", "master_wait_step_s")}


@frozen
class Scheduler:
    """cluster.scheduler and its settings, defaults filled in."""

    kind: str = "none"
    job_dir: str | None = None
    partition: str | None = None
    account: str | None = None
    time_limit_minutes: int | None = None  # given in the spec (None: from each framework's estimate)
    time_margin: float = DEFAULT_MARGIN
    devices: str = "gres"
    gres: str = "npu"
    output: str = DEFAULT_OUTPUT
    cpus_per_task: int | None = None
    mem: str = NODE_MEMORY  # sbatch --mem: "0", all of each node's memory
    image: str | None = None
    queue: str = "default"
    namespace: str = "default"
    volume_claim: str | None = None
    mount_path: str | None = None
    cpu: str | None = None  # each pod's CPU and memory request and limit (None: not asked, a BestEffort pod)
    memory: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)  # MindCluster's accelerator-type (hardware row)
    plugins: dict[str, list[str]] = field(default_factory=lambda: {k: list(v) for k, v in VOLCANO_PLUGINS.items()})
    max_retry: int = VOLCANO_MAX_RETRY
    master_wait_s: int = MASTER_WAIT_S  # Volcano, ModelArts: launch.sh's wait for node 0's name to resolve
    master_wait_step_s: int = MASTER_WAIT_STEP_S
    # Volcano: each framework's Job annotations (MindCluster's sp-block on a SuperPoD; resolve: pod_annotations)
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # Slurm: each framework's sbatch --time in minutes (None: the partition's DefaultTime) and why (resolve: time_limit)
    time_limits: dict[str, tuple[int | None, str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        own = OWN_KEYS.get(self.kind, ())
        fields = {k: v for k, v in asdict(self).items() if k == "job_dir" or k in own}
        limits = {name: {"minutes": minutes, "source": why} for name, (minutes, why) in self.time_limits.items()}
        return {"scheduler": self.kind, **fields, **({"time_limits": limits} if limits else {}),
                **({"annotations": self.annotations} if self.annotations else {})}

    @property
    def run_time(self) -> dict[str, str] | None:
        """The variables launch.sh reads under this scheduler (None: none)."""
        return RUN_TIME.get(self.kind)


def scheduler_of(spec: Spec, hw: Hardware) -> Scheduler:
    """The spec's cluster.scheduler settings (already schema-checked); a setting for another scheduler than the
    chosen one, or a missing one, is a SpecError at its key."""
    kind = spec.scheduler
    given = {"slurm": spec.slurm, "volcano": spec.volcano}
    problems = [Problem(f"cluster.{key}", f"is set but cluster.scheduler is {kind}: it applies to {key} only")
                for key, value in given.items() if value and key != kind]
    if kind in ("volcano", "modelarts") and not spec.job_dir:
        problems.append(Problem("cluster.job_dir", f"is required with cluster.scheduler {kind}: the job folder's "
                                                   f"path on the nodes, where every node runs <framework>/launch.sh"))
    if kind == "volcano" and not spec.volcano:
        problems.append(Problem("cluster.volcano.image", "is required with cluster.scheduler volcano"))
    if kind != "none" and spec.master_addr:
        problems.append(Problem("cluster.master_addr", f"is set, but under {kind} the scheduler picks the nodes: "
                                                       f"leave it out (node 0's address comes from {kind})"))
    if problems:
        raise SpecError(problems)
    slurm, volcano = spec.slurm, spec.volcano
    selector = {"accelerator-type": hw.volcano_accelerator_type} if hw.volcano_accelerator_type else {}
    return Scheduler(kind=kind, job_dir=spec.job_dir, partition=slurm.get("partition"),
                     account=slurm.get("account"), time_limit_minutes=slurm.get("time_limit_minutes"),
                     time_margin=slurm.get("time_margin", DEFAULT_MARGIN), devices=slurm.get("devices", "gres"),
                     gres=slurm.get("gres", DEFAULT_GRES[hw.accelerator]), output=slurm.get("output", DEFAULT_OUTPUT),
                     cpus_per_task=slurm.get("cpus_per_task"),
                     image=volcano.get("image"), queue=volcano.get("queue", "default"),
                     namespace=volcano.get("namespace", "default"), volume_claim=volcano.get("volume_claim"),
                     mount_path=volcano.get("mount_path"), cpu=volcano.get("cpu"), memory=volcano.get("memory"),
                     node_selector=selector)


def scheduler_notes(sched: Scheduler) -> list[Note]:
    """What the plan notes of the submission settings."""
    if sched.kind == "slurm" and sched.devices == "gres" and sched.cpus_per_task is None:
        return [Note("slurm.no_cpus_per_task",
                     "cluster.slurm.cpus_per_task is not set: each node's one task (the launcher and every training "
                     "process it starts) gets the partition's default CPUs, often 1; set it to the CPUs of a node "
                     "(or use cluster.slurm.devices: exclusive)")]
    if sched.kind == "volcano" and not (sched.cpu and sched.memory):
        return [Note("volcano.best_effort",
                     "cluster.volcano.cpu and memory are not both set: the pods ask for no CPU or memory "
                     "(BestEffort), so Kubernetes may place other pods beside them and evicts them first when the "
                     "node runs short; set both to a node's allocatable CPUs and memory")]
    return []


# MindCluster's SuperPoD annotation: the dies of a block that must sit in one SuperPoD (ascend910a3/superpod/frame.go
# l. 63-155 at mind-cluster 22bb3d98: one pod asks for exactly sp-block dies; a job on more pods asks for a multiple
# of it, each pod a whole node).
SP_BLOCK = "sp-block"


def with_super_pod_blocks(sched: Scheduler, super_pod: bool, pod_cards: dict[str, int]) -> Scheduler:
    """Under Volcano on a SuperPoD row, each framework's Job annotated with sp-block = one pod's dies: each node is a
    block, so the job may span SuperPoDs (the plan models traffic between nodes over RoCE either way)."""
    if sched.kind != "volcano" or not super_pod:
        return sched
    return replace(sched, annotations={name: {SP_BLOCK: str(cards)} for name, cards in pod_cards.items()})


def super_pod_notes(sched: Scheduler) -> list[Note]:
    return [Note("volcano.sp_block", f"Volcano Job annotated sp-block: {block[SP_BLOCK]} (MindCluster's SuperPoD "
                                     f"handler, one node's dies per block, so the job may span SuperPoDs; "
                                     f"MindCluster's 2 x 16 sample asks for the whole job, 32, to keep it in one)",
                 framework=name) for name, block in sched.annotations.items()]


def volume_checks(sched: Scheduler, paths: dict[str, str], multi_node: bool) -> list[Note]:
    """Under Volcano the pods see the image and the shared volume only: a job folder outside mount_path is refused
    (each pod would exit 127, its launch.sh not found), a given path outside it warned of (it may be
    in the image), and so is a multi-node job without a volume (each pod writes its own output folder)."""
    if sched.kind != "volcano":
        return []
    mount = (sched.mount_path or "").rstrip("/")
    if not sched.volume_claim:
        return [warning("volcano.no_volume", f"cluster.volcano.volume_claim is not set: the pods see only the image, "
                                             f"so cluster.job_dir ({sched.job_dir}) and every path must be in it" +
                        (", and each node writes an output folder of its own, which a multi-node job cannot resume "
                         "or merge from" if multi_node else ""))]
    if not _under(sched.job_dir or "", mount):
        raise SpecError.at("cluster.job_dir", f"{sched.job_dir} is outside cluster.volcano.mount_path ({mount}), "
                                              f"the only folder the pods share: put the job folder on the volume")
    return [warning("volcano.path_off_volume", f"paths.{key} ({path}) is outside cluster.volcano.mount_path "
                                               f"({mount}): the pods find it only if the image holds it")
            for key, path in sorted(paths.items()) if not _under(path, mount)]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(f"{folder}/")


def volcano_name(job: str, framework: str) -> str:
    return f"{job}-{framework}"


def check_names(sched: Scheduler, job: str, nodes: dict[str, int]) -> None:
    """Volcano names each pod <job>-<framework>-worker-<index>, its host name: a DNS-1123 label (at most 63); the
    svc plugin's Service takes the Job's name, a DNS-1035 label (a letter first)."""
    if sched.kind != "volcano":
        return
    if not DNS_1035_LABEL.match(job):
        raise SpecError.at("job", f"{job!r} cannot name a Volcano job: Volcano's svc plugin names a Kubernetes Service "
                                  f"after it, and a Service name must start with a lowercase letter; rename the job")
    for framework, count in nodes.items():
        host = f"{volcano_name(job, framework)}-{VOLCANO_TASK}-{count - 1}"
        if not DNS_LABEL.fullmatch(host):
            raise SpecError.at("job", f"{job!r} cannot name a Volcano job: its pods' host names ({host}) must be "
                                      f"Kubernetes DNS-1123 labels (at most 63 lowercase letters, digits or '-', "
                                      f"starting and ending with a letter or digit); rename the job")


def time_limit(sched: Scheduler, hours: float | None) -> tuple[int | None, str]:
    """sbatch --time in minutes and why: given, or the estimate's upper end (`hours`) times (1 + margin) plus the
    start-up allowance."""
    if sched.time_limit_minutes is not None:
        return sched.time_limit_minutes, "cluster.slurm.time_limit_minutes"
    if hours is None:
        # slurm.conf(5) 22.05, DefaultTime: "Run time limit used for jobs that don't specify a value. If not set then
        # MaxTime will be used."
        return None, "no time estimate: Slurm applies the partition's DefaultTime (its MaxTime where none is set)"
    minutes = math.ceil(hours * 60 * (1 + sched.time_margin)) + STARTUP_MINUTES
    return minutes, (f"the plan's estimate, its upper end ({hours * 60:.0f} min) x {1 + sched.time_margin:g} "
                     f"(cluster.slurm.time_margin) + {STARTUP_MINUTES} min to start")


def time_limit_warnings(sched: Scheduler) -> list[Note]:
    """A framework with no --time runs under the partition's DefaultTime, which may end it before it finishes (RL and
    predict have no time estimate)."""
    return [warning("slurm.no_time_limit", "no time estimate, so its submit.sbatch sets no --time and Slurm ends it "
                                           "at the partition's DefaultTime (its MaxTime where none is set), however "
                                           "long the run needs: set cluster.slurm.time_limit_minutes").about(name)
            for name, (minutes, _) in sched.time_limits.items() if minutes is None]


def slurm_time(minutes: int) -> str:
    """Minutes as sbatch's days-hours:minutes:seconds."""
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"
