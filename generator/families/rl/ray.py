"""The Ray cluster an RL job's nodes form (templates/rl/_ray_cluster.sh.j2): its ports, the devices each node gives
Ray, how long the nodes wait for each other, and the partial's values for one plan."""

from __future__ import annotations

import json

from ...plan import FrameworkPlan, Plan

# The Ray cluster's ports, as verl's multi-node guide starts it: the head's GCS address `ray start --address=` joins
# and the dashboard `ray job submit` talks to (docs/start/multinode.rst l.15-22 at v0.7.0 f9c855f7; GCS 6379 as in
# l.172-173 and l.223, Ray's own default).
RAY_PORT = 6379
DASHBOARD_PORT = 8265
# The devices each node gives Ray, and the resource name `ray status` and verl count them by: Ascend NPUs as a custom
# "NPU" resource (recipe/r1_ascend/ray_start_grpo_npu.sh l.47 and l.70; verl's ResourcePoolManager reads "GPU", else
# "NPU": verl/trainer/ppo/ray_trainer.py l.107-123; its workers ask Ray for "NPU": single_controller/ray/base.py
# l.322), NVIDIA GPUs through --num-gpus (docs/start/multinode.rst l.693-695).
RESOURCE = {"npu": "NPU", "gpu": "GPU"}
# How long node 0 waits for the other nodes, and a worker node for the head (a node started before it): polled every
# JOIN_WAIT_S seconds as upstream's NPU start script does (ray_start_grpo_npu.sh l.49-81, which waits forever),
# JOIN_ATTEMPTS times (10 minutes), then a clear failure.
JOIN_ATTEMPTS = 120
JOIN_WAIT_S = 5
# Under a scheduler a worker node's launch.sh stays while the head answers `ray status` (each a Python start), asked
# every HEAD_POLL_S seconds; the head is gone after HEAD_MISSES unanswered asks in a row (5 minutes: a head busy
# or a network slow for a while is no reason to stop a node of a running job), so a worker outlives it by that long.
HEAD_POLL_S = 30
HEAD_MISSES = 10


def device_flag(plan: Plan, fp: FrameworkPlan) -> str:
    """The `ray start` option that gives Ray the node's devices (RESOURCE's sources)."""
    count = fp.layout.local_cards
    if plan.accelerator == "npu":
        return "--resources=" + json.dumps({RESOURCE["npu"]: count})
    return f"--num-gpus={count}"


def ray_context(plan: Plan, fp: FrameworkPlan) -> dict:
    """The values templates/rl/_ray_cluster.sh.j2 reads that come from the Ray cluster itself (a launch adds
    node_ifname, per_node, nodes and scheduled: launch_context and its own settings)."""
    return {"ray_port": RAY_PORT, "dashboard_port": DASHBOARD_PORT, "device_flag": device_flag(plan, fp),
            "resource": RESOURCE[plan.accelerator], "join_attempts": JOIN_ATTEMPTS, "join_wait": JOIN_WAIT_S,
            "head_poll": HEAD_POLL_S, "head_misses": HEAD_MISSES}
