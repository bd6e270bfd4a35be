"""Issue 39 item 5: a loopback cluster.master_addr on a multi-node job has every node rendezvous with itself; the plan
refuses it for every framework, and launch.sh refuses one given at run time."""

from __future__ import annotations

import ipaddress
import os
import subprocess

import pytest
from helpers import make_spec, render_job

from generator.errors import SpecError
from generator.loopback import is_loopback
from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()

# (framework, model, method, cards): each on two nodes of snt9b
TWO_NODES = [("mindformers", "qwen3-8b", "full", 16), ("mindspeed-llm", "qwen3-8b", "full", 16),
             ("llama-factory", "qwen3-8b", "full", 16), ("verl", "qwen3-8b", "grpo", 16),
             ("mindspeed-mm", "qwen2.5_vl-7b", "full", 16)]
LOOPBACK = ["127.0.0.1", "localhost", "LOCALHOST", "127.1.2.3", "::1", "0:0:0:0:0:0:0:1", "0.0.0.0", "::",
            "node.localhost"]
ELSEWHERE = ["10.0.0.1", "node-0", "localhost2", "127.0.0.1.example", "fe80::1", "::2", "1::"]


@pytest.mark.parametrize("address", LOOPBACK + ELSEWHERE)
def test_the_rule_agrees_with_the_ip_parser(address):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        expected = address.lower().rstrip(".").split(".")[-1] == "localhost"
    else:
        expected = ip.is_loopback or ip.is_unspecified
    assert is_loopback(address) is expected


@pytest.mark.parametrize("framework,model,method,cards", TWO_NODES)
def test_a_loopback_master_is_refused_on_several_nodes(framework, model, method, cards):
    fields = dict(model=model, method=method, frameworks=[framework], cards=cards)
    for address in ("127.0.0.1", "localhost"):
        with pytest.raises(SpecError) as refused:
            resolve(make_spec(**fields, cluster={"master_addr": address}), T)
        assert refused.value.problems[0].path == "cluster.master_addr", refused.value.problems
        assert "names the node itself" in str(refused.value) and f"{framework} on 2 nodes" in str(refused.value)
    plan = resolve(make_spec(**fields, cluster={"master_addr": "10.0.0.1"}), T)
    assert plan.frameworks[framework].layout.nodes == 2


def test_one_node_keeps_the_local_host():
    plan = resolve(make_spec(model="qwen3-8b", frameworks=["mindspeed-llm"], cards=8,
                             cluster={"master_addr": "127.0.0.1"}), T)
    assert plan.frameworks["mindspeed-llm"].layout.nodes == 1


@pytest.mark.parametrize("framework,model,method,cards", TWO_NODES)
def test_launch_sh_refuses_a_loopback_master_at_run_time(framework, model, method, cards, tmp_path):
    _, files = render_job(T, model=model, method=method, frameworks=[framework], cards=cards)
    script = tmp_path / "launch.sh"
    script.write_text(files[f"{framework}/launch.sh"])
    for address in ("127.0.0.1", "LocalHost", "0:0:0:0:0:0:0:1", "10.0.0.1"):
        env = {**os.environ, "MASTER_ADDR": address}
        result = subprocess.run(["bash", str(script), "1"], env=env, capture_output=True, text=True,
                                cwd=tmp_path, timeout=60)
        refused = "MASTER_ADDR: names the node itself" in result.stderr
        assert refused is (address != "10.0.0.1"), (address, result.stderr)
        if refused:
            assert result.returncode == 2
