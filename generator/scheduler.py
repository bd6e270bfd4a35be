"""How the job is submitted (cluster.scheduler): none (launch.sh by hand on each node), Slurm (an sbatch script per
framework), Volcano (a batch.volcano.sh/v1alpha1 Job per framework) or a Huawei Cloud ModelArts training job (one
command for every node). The resolver decides the values here (pure); render lays them out beside each framework's
launch.sh, which reads the node rank and node 0's address from the scheduler's own variables when they are not
given as arguments (templates/_launch_prologue.sh.j2)."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from .errors import Problem, SpecError

if TYPE_CHECKING:
    from .spec import Spec

# The device resource a pod asks for per node: Huawei's Ascend device plugin advertises the training NPUs as
# huawei.com/Ascend910 (MindCluster's resource names, hiascend.com mindcluster 70rc1 dlug mxdlug_appendices_014:
# "huawei.com/Ascend910: Atlas 训练系列产品资源名称", the one name it lists for training NPUs; no page read here
# names another for the A3 series (snt9b23), so it asks for that one too: a cluster whose device plugin names its
# dies otherwise shows it in `kubectl describe node`); NVIDIA's device plugin advertises nvidia.com/gpu.
DEVICE_RESOURCE = {"npu": "huawei.com/Ascend910", "gpu": "nvidia.com/gpu"}
DEFAULT_GRES = {"npu": "npu", "gpu": "gpu"}  # slurm.conf's GresTypes names sites give the devices
DEFAULT_MARGIN = 0.25  # cluster.slurm.time_margin: share added to the plan's time estimate
STARTUP_MINUTES = 30  # added to the estimate: loading the weights, compiling, the first checkpoint's save
# Volcano's one task: the svc plugin names the pods <job>-<task>-<index> (pkg/controllers/job/helpers/helpers.go
# l.35 at volcano-sh/volcano ed72c7c8) and exports VC_<TASK>_HOSTS and VC_<TASK>_NUM (plugins/svc/const.go l.22-25,
# svc.go l.337-341); ModelArts' training jobs name theirs "worker" too (VC_WORKER_HOSTS, below).
VOLCANO_TASK = "worker"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

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
                      "cpus_per_task"),
            "volcano": ("image", "queue", "namespace", "volume_claim", "mount_path")}


@dataclass(frozen=True)
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
    output: str | None = None
    cpus_per_task: int | None = None
    image: str | None = None
    queue: str = "default"
    namespace: str = "default"
    volume_claim: str | None = None
    mount_path: str | None = None
    # Slurm: each framework's sbatch --time in minutes (None: the partition's limit) and why (resolve: time_limit)
    time_limits: dict[str, tuple[int | None, str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        own = OWN_KEYS.get(self.kind, ())
        fields = {k: v for k, v in asdict(self).items() if k == "job_dir" or k in own}
        limits = {name: {"minutes": minutes, "source": why} for name, (minutes, why) in self.time_limits.items()}
        return {"scheduler": self.kind, **fields, **({"time_limits": limits} if limits else {})}

    @property
    def run_time(self) -> dict[str, str] | None:
        """The variables launch.sh reads under this scheduler (None: none)."""
        return RUN_TIME.get(self.kind)


def scheduler_of(spec: Spec, accelerator: str) -> Scheduler:
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
    return Scheduler(kind=kind, job_dir=spec.job_dir, partition=slurm.get("partition"),
                     account=slurm.get("account"), time_limit_minutes=slurm.get("time_limit_minutes"),
                     time_margin=slurm.get("time_margin", DEFAULT_MARGIN), devices=slurm.get("devices", "gres"),
                     gres=slurm.get("gres", DEFAULT_GRES[accelerator]), output=slurm.get("output"),
                     cpus_per_task=slurm.get("cpus_per_task"),
                     image=volcano.get("image"), queue=volcano.get("queue", "default"),
                     namespace=volcano.get("namespace", "default"), volume_claim=volcano.get("volume_claim"),
                     mount_path=volcano.get("mount_path"))


def scheduler_notes(sched: Scheduler) -> list[str]:
    """What the plan notes of the submission settings."""
    if sched.kind == "slurm" and sched.devices == "gres" and sched.cpus_per_task is None:
        return ["cluster.slurm.cpus_per_task is not set: each node's one task (the launcher and every training "
                "process it starts) gets the partition's default CPUs, often 1; set it to the CPUs of a node (or "
                "use cluster.slurm.devices: exclusive)"]
    return []


def volcano_name(job: str, framework: str) -> str:
    return f"{job}-{framework}"


def check_names(sched: Scheduler, job: str, nodes: dict[str, int]) -> None:
    """Volcano names each pod <job>-<framework>-worker-<index>, its host name: a DNS-1123 label (at most 63)."""
    if sched.kind != "volcano":
        return
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
        return None, "no time estimate: the partition's limit"
    minutes = math.ceil(hours * 60 * (1 + sched.time_margin)) + STARTUP_MINUTES
    return minutes, (f"the plan's estimate, its upper end ({hours * 60:.0f} min) x {1 + sched.time_margin:g} "
                     f"(cluster.slurm.time_margin) + {STARTUP_MINUTES} min to start")


def slurm_time(minutes: int) -> str:
    """Minutes as sbatch's days-hours:minutes:seconds."""
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"
