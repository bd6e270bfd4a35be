"""What every framework's launch.sh shares: node count, master address and port, the paths it must not start with
as placeholders."""

from __future__ import annotations

from ..plan import FrameworkPlan, Plan
from ..shell import quote


def master_addr(plan: Plan, fp: FrameworkPlan) -> str | None:
    """One node needs no address: the local host. Several need the spec's, or MASTER_ADDR at launch time (None)."""
    return plan.master_addr or ("127.0.0.1" if fp.layout.nodes == 1 else None)


def master_word(plan: Plan, fp: FrameworkPlan) -> str:
    """The master address as one shell word in commands.txt: quoted, or the environment's (required)."""
    addr = master_addr(plan, fp)
    return quote(addr) if addr else '"${MASTER_ADDR:?}"'


def launch_context(plan: Plan, fp: FrameworkPlan, path_keys: list[str], overrides_to: str | None = None) -> dict:
    """The shared prologue's values; `overrides_to`: the program that takes the words after "--" (None: none)."""
    address = master_addr(plan, fp)
    return {
        "nodes": fp.layout.nodes,
        "master_addr": address,
        "max_args": 1 if address else 2,  # NODE_RANK, and MASTER_ADDR when the spec has none
        "master_port": plan.master_port,
        "socket_ifname": plan.socket_ifname,
        "socket_ifname_env": plan.socket_ifname_env,
        "used_paths": [(key, plan.paths[key].value) for key in path_keys],
        "passes_overrides": overrides_to is not None,
        "overrides_to": overrides_to,
    }
