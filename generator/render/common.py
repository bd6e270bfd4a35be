"""What every framework's launch.sh shares: node count, master address and port, the run-time checks (node rank,
address, visible devices, the render mark in the output folder), the paths it must not start with as placeholders;
and commands.txt, whose line for each node runs that node's launch.sh, so every check is made on every node."""

from __future__ import annotations

from functools import partial

import jinja2

from ..loopback import LOOPBACK_RULE, LOOPBACK_WHY
from ..plan import FrameworkPlan, Plan
from ..spec import schema_rule

# The variable that lists the devices a process may use, per accelerator.
DEVICE_ENV = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "gpu": "CUDA_VISIBLE_DEVICES"}
# One entry of that list, per accelerator, and how the refusal names it: an index (digits, as is_count takes them), or
# on NVIDIA also a GPU-<uuid> or MIG-<uuid> (MIG-GPU-<uuid>/<gi>/<ci> on older drivers), as CUDA and schedulers export.
INDEX = "0|[1-9][0-9]{0,17}"
DEVICE_RULE = {"npu": (f"^({INDEX})$", "distinct indices"),
               "gpu": (f"^({INDEX}|(GPU|MIG)-[0-9A-Za-z/-]+)$", "distinct indices or GPU-/MIG- UUIDs")}
RENDER_MARK = "SPEC_SHA256"  # in the framework's output folder: the render its first launch ran
# Stands in launch.sh for the hash of the framework's rendered files until render_files knows them all (a file
# cannot hold its own hash: launch.sh is hashed with this word in it).
FILES_DIGEST = "@FILES_SHA256@"


def master_addr(plan: Plan, fp: FrameworkPlan) -> str | None:
    """One node needs no address: the local host. Several need the spec's, or MASTER_ADDR at launch time (None)."""
    return plan.master_addr or ("127.0.0.1" if fp.layout.nodes == 1 else None)


def visible_devices(fp: FrameworkPlan) -> str:
    """A node's first devices, as many as the layout uses per node."""
    return ",".join(str(i) for i in range(fp.layout.local_cards))


def launch_context(plan: Plan, fp: FrameworkPlan, path_keys: list[str], overrides_to: str | None = None,
                   fixed_keys: tuple[str, ...] = (), sets_devices: bool = False, reads_json: bool = False,
                   overrides_source: str = "") -> dict:
    """The shared prologue's values; `overrides_to`: the program that takes the words after "--" (None: none),
    `overrides_source`: where that program joins and splits them again (its upstream file and line),
    `fixed_keys`: the keys no word after "--" may set (launch.sh's own checks read their rendered values);
    `sets_devices`: export the node's first devices when the environment names none; `reads_json`: the script reads
    JSON files at run time (the json_* helpers)."""
    address = master_addr(plan, fp)
    rule, hint = schema_rule("cluster", "master_addr")
    return {
        "nodes": fp.layout.nodes,
        "master_addr": address,
        "usage": launch_usage(plan, fp, "launch.sh", overrides_to is not None),
        "max_args": len(launch_args(plan, fp)),
        "master_port": plan.master_port,
        "address_rule": rule,
        "address_hint": hint,
        "loopback_rule": LOOPBACK_RULE,
        "loopback_why": LOOPBACK_WHY,
        "socket_ifname": plan.socket_ifname,
        "socket_ifname_env": plan.socket_ifname_env,
        "used_paths": [(key, plan.paths[key].value) for key in path_keys],
        "passes_overrides": overrides_to is not None,
        "overrides_to": overrides_to,
        "overrides_source": overrides_source,
        "fixed_keys": fixed_keys,
        "device_env": DEVICE_ENV[plan.accelerator],
        "device_rule": DEVICE_RULE[plan.accelerator][0],
        "device_hint": DEVICE_RULE[plan.accelerator][1],
        "local_devices": fp.layout.local_cards,
        "sets_devices": sets_devices,
        "default_devices": visible_devices(fp),
        "render_id": f"spec sha256 {plan.spec_sha256}, gen-launch {plan.version}, files sha256 {FILES_DIGEST}",
        "output_root": plan.output_dir(fp.name),
        "render_mark": f"{plan.output_dir(fp.name)}/{RENDER_MARK}",
        "reads_json": reads_json,
        "scheduler": plan.scheduler.run_time and {**plan.scheduler.run_time, "kind": plan.scheduler.kind},
        # Under a scheduler every node's launch.sh is one task of the job, which ends when they all have.
        "scheduled": plan.scheduler.kind != "none",
        # Volcano and ModelArts publish node 0's host name as its pod starts: a launcher that resolves it once waits.
        "master_wait": {"seconds": plan.scheduler.master_wait_s, "step": plan.scheduler.master_wait_step_s}
        if plan.scheduler.kind in ("volcano", "modelarts") and fp.layout.nodes > 1 else None,
    }


def launch_args(plan: Plan, fp: FrameworkPlan) -> list[str]:
    """launch.sh's arguments in order: the node's rank, and node 0's address when the spec has none (launch.sh then
    takes it, or MASTER_ADDR from the environment). launch.sh's usage line and argument count, commands.txt and
    PLAN.md's launch commands are all built from these, here."""
    return ["NODE_RANK"] if master_addr(plan, fp) else ["NODE_RANK", "MASTER_ADDR"]


def launch_usage(plan: Plan, fp: FrameworkPlan, script: str, overrides: bool = False) -> str:
    """How `script` (a framework's launch.sh) is run: `bash launch.sh NODE_RANK [MASTER_ADDR] [-- OVERRIDE ...]`;
    a one-node job's rank is optional (launch.sh takes 0)."""
    first, *optional = launch_args(plan, fp)
    first = f"[{first}]" if fp.layout.nodes == 1 else first
    return " ".join([f"bash {script}", first, *(f"[{word}]" for word in optional),
                     *(["[-- OVERRIDE ...]"] if overrides else [])])


def launch_command(plan: Plan, fp: FrameworkPlan, script: str, node: str) -> str:
    """The command that runs `script` on node `node` (a rank, or the word PLAN.md puts for one)."""
    values = {"NODE_RANK": node, "MASTER_ADDR": '"$MASTER_ADDR"'}
    return " ".join([f"bash {script}", *(values[word] for word in launch_args(plan, fp))])


def command_lines(plan: Plan, fp: FrameworkPlan) -> list[str]:
    """commands.txt: node N runs this folder's launch.sh with rank N, so the lines make every check launch.sh makes
    and cannot drift from it."""
    return [launch_command(plan, fp, '"${JOB_DIR:?}/launch.sh"', str(rank)) for rank in range(fp.layout.nodes)]


def commands_txt(plan: Plan, fp: FrameworkPlan, env: jinja2.Environment, framework: str) -> str:
    return env.get_template("commands.txt.j2").render(framework=framework, lines=command_lines(plan, fp),
                                                       master_addr=master_addr(plan, fp))


def section_context(plan: Plan, fp: FrameworkPlan, folder: str, overrides: bool = False) -> dict:
    """What a framework's PLAN.md section shows of its launch: the usage, `launch(node)` (the command for a node, run
    from the job folder) and commands.txt's lines."""
    return {"usage": launch_usage(plan, fp, "launch.sh", overrides), "lines": command_lines(plan, fp),
            "launch": partial(launch_command, plan, fp, f"{folder}/launch.sh")}
