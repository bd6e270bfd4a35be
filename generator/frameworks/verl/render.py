"""verl 0.7.0: overrides.txt (the job's Hydra overrides, one a line), launch.sh NODE_RANK [MASTER_ADDR] (one Ray
cluster over the job's nodes, the job started once on node 0), the data-preparation and model-merge steps
(steps.py), commands.txt.

Every value comes from the plan's VerlSettings (planning.py decides them, each with its source); this module only
lays them out, and launch.sh reads overrides.txt as data at run time (each line one word of the job's command)."""

from __future__ import annotations

import json
import re
import unicodedata

import jinja2

from ...plan import FrameworkPlan, Plan
from ...render.common import commands_txt, launch_context, section_context
from .checks import ENTRIES
from .settings import Setting, Value, VerlSettings
from .steps import step_files

NAME = "verl"
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
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What each role does in a step, in PLAN.md's words (verl's hybrid engine: the rollout engine generates, the
# reference and critic score, the actor and critic update: verl/trainer/ppo/ray_trainer.py fit()).
PHASES = {"actor": "update (training)", "rollout": "generation (rollout engine)",
          "reference": "log-probs (forward only)", "critic": "values and update (training)"}


def settings_of(fp: FrameworkPlan) -> VerlSettings:
    """The plan's verl settings; the layout they were decided for must be the one launch.sh starts."""
    settings = fp.settings
    if not isinstance(settings, VerlSettings):
        raise ValueError(f"a verl plan carries VerlSettings, not {type(settings).__name__}")
    if (settings.nnodes, settings.gpus_per_node) != (fp.layout.nodes, fp.layout.local_cards):
        raise ValueError(f"verl settings for {settings.nnodes} x {settings.gpus_per_node} cards, layout "
                         f"{fp.layout.nodes} x {fp.layout.local_cards}")
    return settings


def override_lines(settings: VerlSettings) -> list[str]:
    """overrides.txt's lines; launch.sh reads one override a line, so none may hold a line break."""
    lines = settings.override_lines()
    broken = [line for line in lines if any(char in line for char in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")]
    if broken:
        raise ValueError(f"a verl override holds a line break: {broken[0]!r}")
    return lines


def environment(settings: VerlSettings) -> list[tuple[str, str]]:
    """(variable, value) launch.sh exports on every node before Ray starts, so Ray's workers inherit them."""
    return [(item.key, env_value(item)) for item in settings.environment]


def env_value(item: Setting) -> str:
    if not ENV_NAME.fullmatch(item.key):
        raise ValueError(f"{item.key!r} is not an environment variable name")
    if isinstance(item.value, bool) or not isinstance(item.value, (str, int)):
        raise ValueError(f"environment variable {item.key} takes a string or an integer, not {item.value!r}")
    return str(item.value)


def shown(value: Value) -> str:
    """A data-preparation or merge option's value as PLAN.md shows it."""
    if isinstance(value, tuple):
        return json.dumps(list(value), ensure_ascii=False)
    if isinstance(value, str) and any(unicodedata.category(char) == "Cc" for char in value):
        return json.dumps(value, ensure_ascii=False)  # a line break would end the table's row
    return "null" if value is None else str(value)


def data_files(settings: VerlSettings) -> list[str]:
    """The prepared parquet files the job reads (data.train_files, data.val_files: a path or a list of them)."""
    found: list[str] = []
    for key in ("data.train_files", "data.val_files"):
        value = settings.value(key)
        found += [str(item) for item in value] if isinstance(value, tuple) else [str(value)]
    return found


def device_flag(plan: Plan, fp: FrameworkPlan) -> str:
    """The `ray start` option that gives Ray the node's devices (RESOURCE's sources)."""
    count = fp.layout.local_cards
    if plan.accelerator == "npu":
        return "--resources=" + json.dumps({RESOURCE["npu"]: count})
    return f"--num-gpus={count}"


def in_clone(settings: VerlSettings) -> bool:
    """Whether the job's entry is a module of verl's clone (DAPO's recipe.dapo.main_dapo) rather than of its package
    `verl`: launch.sh then checks that the folder of the verl python3 imports is a clone holding it."""
    return not settings.entry.startswith("verl.")


def render(plan: Plan, env: jinja2.Environment) -> dict[str, str]:
    fp = plan.frameworks[NAME]
    settings = settings_of(fp)
    lay = fp.layout
    launch = env.get_template("verl/launch.sh.j2").render(
        **launch_context(plan, fp, list(plan.paths)),
        title=f"verl launch for job {plan.job}: {plan.model} {plan.method}, generated by gen-launch",
        cards=lay.cards, per_node=lay.local_cards, entry=settings.entry, environment=environment(settings),
        ray_port=RAY_PORT, dashboard_port=DASHBOARD_PORT, device_flag=device_flag(plan, fp),
        resource=RESOURCE[plan.accelerator], join_attempts=JOIN_ATTEMPTS, join_wait=JOIN_WAIT_S,
        head_poll=HEAD_POLL_S, head_misses=HEAD_MISSES,
        in_clone=in_clone(settings), data_files=data_files(settings),
        entry_file=settings.entry.replace(".", "/") + ".py", node_ifname=settings.node_ifname)
    return {
        "verl/overrides.txt": "".join(f"{line}\n" for line in override_lines(settings)),
        "verl/launch.sh": launch,
        "verl/commands.txt": commands_txt(plan, fp, env, "verl"),
        **step_files(plan, env),
    }


def plan_section(plan: Plan, env: jinja2.Environment) -> str:
    fp = plan.frameworks[NAME]
    settings = settings_of(fp)
    return env.get_template("verl/plan_section.md.j2").render(
        plan=plan, fp=fp, settings=settings, config_name=ENTRIES[settings.config][1], ray_port=RAY_PORT,
        dashboard_port=DASHBOARD_PORT,
        device_flag=device_flag(plan, fp), resource=RESOURCE[plan.accelerator],
        join_attempts=JOIN_ATTEMPTS, join_wait=JOIN_WAIT_S, head_poll=HEAD_POLL_S, head_misses=HEAD_MISSES,
        in_clone=in_clone(settings), phases=PHASES,
        steps=[("environment", settings.environment), ("data preparation", settings.prepare),
               ("model merge", settings.merge)], shown=shown,
        **section_context(plan, fp, NAME))
