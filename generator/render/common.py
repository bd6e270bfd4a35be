"""What every framework's launch.sh shares: node count, master address and port, the paths it must not start with
as placeholders."""

from __future__ import annotations

from ..plan import FrameworkPlan, Plan


def launch_context(plan: Plan, fp: FrameworkPlan, path_keys: list[str]) -> dict:
    return {
        "nodes": fp.layout.nodes,
        # One node needs no address: the local host. Several need the spec's, or MASTER_ADDR at launch time.
        "master_addr": plan.master_addr or ("127.0.0.1" if fp.layout.nodes == 1 else None),
        "master_port": plan.master_port,
        "used_paths": [(key, plan.paths[key].value) for key in path_keys],
    }
