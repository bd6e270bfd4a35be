"""The scheduler's files beside each framework's launch.sh (cluster.scheduler): Slurm's sbatch script, Volcano's Job
manifest (YAML through the real serializer); ModelArts needs none, only the command PLAN.md gives. Every node runs
the framework's own launch.sh, which takes its rank and node 0's address from the scheduler's variables."""

from __future__ import annotations

import jinja2
import yaml

from ..api.frozen import frozen
from ..plan import FrameworkPlan, Plan
from ..scheduler import DEVICE_RESOURCE, VOLCANO_TASK, slurm_time, volcano_name
from ..shell import quote

SBATCH = "submit.sbatch"
VOLCANO = "volcano-job.yaml"


@frozen
class Submit:
    """What PLAN.md says of one framework's submission: the command, and what it asks for."""

    command: str
    details: tuple[str, ...]


def launch_path(plan: Plan, framework: str) -> str:
    """The framework's launch.sh on the nodes (cluster.job_dir)."""
    return f"{(plan.scheduler.job_dir or '').rstrip('/')}/{framework}/launch.sh"


def markdown_pairs(pairs: dict[str, str]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in pairs.items())


def submit_files(plan: Plan, fp: FrameworkPlan, env: jinja2.Environment,
                 framework: str) -> tuple[dict[str, str], Submit | None]:
    """{path: text} of `framework`'s scheduler files and PLAN.md's submit line (None: cluster.scheduler none)."""
    sched = plan.scheduler
    nodes, cards = fp.layout.nodes, fp.layout.local_cards
    if sched.kind == "slurm":
        minutes, why = sched.time_limits[framework]
        text = env.get_template("submit.sbatch.j2").render(
            name=f"{plan.job}-{framework}", nodes=nodes, cards=cards, s=sched, framework=framework,
            time=None if minutes is None else slurm_time(minutes), time_source=why)
        devices = f"--gres={sched.gres}:{cards}" if sched.devices == "gres" else "--exclusive"
        return {f"{framework}/{SBATCH}": text}, Submit(
            f"sbatch {framework}/{SBATCH}",
            ("run from the job folder: srun starts launch.sh from there on every node",
             f"{nodes} node(s), one task each, {devices}, --mem={sched.mem} (all of each node's memory)",
             f"time limit: {slurm_time(minutes) if minutes else 'not set'} ({why})",
             f"log: {sched.output} (relative: from the job folder)"))
    if sched.kind == "volcano":
        return {f"{framework}/{VOLCANO}": volcano_job(plan, fp, framework)}, Submit(
            f"kubectl create -f {framework}/{VOLCANO}",
            (f"{nodes} pod(s) gang-scheduled (minAvailable {nodes}), {cards} x {DEVICE_RESOURCE[plan.accelerator]} "
             f"each, image {sched.image}", f"each pod runs bash {launch_path(plan, framework)}",
             *([f"node selector {markdown_pairs(sched.node_selector)}"] if sched.node_selector else []),
             *([f"annotations {markdown_pairs(sched.annotations[framework])}"]
               if framework in sched.annotations else [])))
    if sched.kind == "modelarts":
        return {}, Submit(f"bash {quote(launch_path(plan, framework))}",
                          (f"the training job's boot command, the same on all {nodes} node(s) (instances): "
                           f"launch.sh reads VC_TASK_INDEX, VC_WORKER_NUM and VC_WORKER_HOSTS",))
    return {}, None


def volcano_job(plan: Plan, fp: FrameworkPlan, framework: str) -> str:
    """A batch.volcano.sh/v1alpha1 Job: one task of `nodes` pods, all scheduled together (gang: minAvailable, the
    Volcano Job's `spec.minAvailable`), each running launch.sh with the env plugin's VC_TASK_INDEX as its rank and
    the svc plugin's VC_WORKER_HOSTS (pod 0's host name first) for node 0's address (docs/user-guide/
    how_to_use_env_plugin.md, how_to_use_svc_plugin.md at volcano-sh/volcano ed72c7c8). No ssh plugin: launch.sh
    starts itself on every pod, nothing logs in to another."""
    sched = plan.scheduler
    nodes, cards = fp.layout.nodes, fp.layout.local_cards
    resource: dict = {DEVICE_RESOURCE[plan.accelerator]: cards}
    resource.update({key: value for key, value in (("cpu", sched.cpu), ("memory", sched.memory)) if value})
    container: dict = {"name": framework, "image": sched.image, "command": ["bash", launch_path(plan, framework)],
                       "resources": {"limits": resource, "requests": dict(resource)},
                       # The container runtime gives /dev/shm 64 MiB; Ray, vLLM and the data loaders' workers share
                       # tensors through it: a memory-backed emptyDir there, counted against the pod's memory.
                       "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    pod: dict = {"restartPolicy": "Never", "containers": [container],
                 "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
    if sched.node_selector:
        pod["nodeSelector"] = dict(sched.node_selector)
    if sched.volume_claim:
        container["volumeMounts"].append({"name": "shared", "mountPath": sched.mount_path})
        pod["volumes"].append({"name": "shared", "persistentVolumeClaim": {"claimName": sched.volume_claim}})
    metadata: dict = {"name": volcano_name(plan.job, framework), "namespace": sched.namespace}
    if framework in sched.annotations:
        metadata["annotations"] = dict(sched.annotations[framework])
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "schedulerName": "volcano",
            "queue": sched.queue,
            "minAvailable": nodes,
            "maxRetry": sched.max_retry,
            "plugins": {name: list(args) for name, args in sched.plugins.items()},
            # A pod that fails or is evicted ends the job, rather than leaving the others waiting for it (and the
            # job is not restarted: a run resumes from its checkpoints when submitted again, not blindly).
            "policies": [{"event": "PodFailed", "action": "AbortJob"},
                         {"event": "PodEvicted", "action": "AbortJob"}],
            "tasks": [{"name": VOLCANO_TASK, "replicas": nodes, "template": {"spec": pod}}],
        },
    }
    return yaml.safe_dump(job, sort_keys=False, default_flow_style=False, allow_unicode=True)
