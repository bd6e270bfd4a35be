"""Issue 25, the launch: verl's launch.sh NODE_RANK [MASTER_ADDR] runs for real here against stand-in `ray`,
`python3` and `sleep` executables first on PATH, which record how they were called. Node 0 starts the Ray head,
waits until the cluster has every node's devices (`ray status`), and starts the job once with exactly the overrides
of overrides.txt; the other nodes join and start nothing; a step that fails ends launch.sh with a non-zero exit."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import check_script, render_job

from generator.cli import main
from generator.families.rl.ray import HEAD_MISSES, JOIN_ATTEMPTS
from generator.frameworks.verl.render import data_files
from generator.frameworks.verl.settings import hydra_value
from generator.render import write
from generator.tables import load_tables

T = load_tables()
ADDR = "10.0.0.1"
HOSTILE_PATH = "/data/a b/it's \"here\"/$(touch CANARY)/${HOME}/`touch CANARY`"

# The stand-ins. Each call leaves one file in $STUB/calls: the program's name, its working folder and its argv,
# NUL-separated. `ray` keeps the cluster's joined nodes in $STUB/nodes: `start --head` and `start --address` add
# one, `status` prints Ray's status report with STUB_DEVICES per node of STUB_RESOURCE (and, with JOIN_ON_STATUS, a node
# that was late joins on each call; with $STUB/answers, its next line says whether the head answers); FAIL_HEAD,
# FAIL_JOIN and PYTHON_RC make a step fail. Any call but `ray start` (and python3 -I, which asks where verl is)
# fails while RAY_ADDRESS is set: the job and `ray status` must reach the cluster node 0 started, not another.
RECORD = r'''
[ -z "${RAY_ADDRESS+set}" ] || [ "$1" = start ] || [ "$1" = -I ] || { echo "RAY_ADDRESS is set" >&2; exit 9; }
n=$(find "$STUB/calls" -type f | wc -l)
printf '%s\0' "$(basename "$0")" "$PWD" "$@" > "$STUB/calls/$(printf %05d "$n")"
'''
RAY = "#!/bin/bash\n" + RECORD + r'''
nodes=$(cat "$STUB/nodes" 2> /dev/null || echo 0)
case "$1 $2" in
  "start --head") [ -z "${FAIL_HEAD:-}" ] || exit 1; echo $((nodes + 1)) > "$STUB/nodes" ;;
  "start --address"*) [ -z "${FAIL_JOIN:-}" ] || exit 1; echo $((nodes + 1)) > "$STUB/nodes" ;;
  "status "*)
    if [ -s "$STUB/answers" ]; then  # the next answer of the head's: ok, or none
      answer=$(head -n 1 "$STUB/answers")
      sed -i 1d "$STUB/answers"
      [ "$answer" = ok ] || exit 1
    fi
    [ -s "$STUB/nodes" ] || { echo "ConnectionError: Could not find any running Ray instance." >&2; exit 1; }
    if [ -n "${JOIN_ON_STATUS:-}" ] && [ "$nodes" -lt "$JOIN_ON_STATUS" ]; then
      nodes=$((nodes + 1)); echo "$nodes" > "$STUB/nodes"
    fi
    cat << EOF
======== Autoscaler status: 2026-01-01 00:00:00.000000 ========
Node status
---------------------------------------------------------------
Active:
 $nodes node_0123456789abcdef
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/$((nodes * 192)).0 CPU
 0.0/$((nodes * STUB_DEVICES)).0 $STUB_RESOURCE
 0B/$((nodes * 100)).00GiB memory

Total Constraints:
 (no request_resources() constraints)
Total Demands:
 (no resource demands)
EOF
    ;;
esac
'''
# python3 -I -c (launch.sh asking where the verl it imports lives) answers $VERL_ROOT.
# python3 -I -c CODE IFNAME (launch.sh reading an interface's address) answers $STUB_IP, failing without it.
PYTHON3 = "#!/bin/bash\n" + RECORD + ('[ "$1" != -I ] || [ $# != 4 ] || { [ -n "${STUB_IP:-}" ] && echo "$STUB_IP"; '
                                      'exit; }\n[ "$1" != -I ] || { echo "$VERL_ROOT"; exit; }\n'
                                      'exit "${PYTHON_RC:-0}"\n')
SLEEP = "#!/bin/bash\n" + RECORD


@dataclass
class Job:
    plan: object
    folder: Path  # verl/ of the job
    stub: Path
    env: dict

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(self.folder / "launch.sh"), *args], env={**self.env, **env},
                              capture_output=True, text=True, cwd=self.stub, check=False)

    def calls(self) -> list[tuple[str, str, list[str]]]:
        """(program, working folder, argv) of every call, in order; cleared."""
        out = []
        for path in sorted((self.stub / "calls").iterdir()):
            program, cwd, *argv = path.read_bytes().decode().split("\0")[:-1]
            out.append((program, cwd, argv))
            path.unlink()
        return out


def job(tmp_path: Path, nodes: int, master_addr: str | None = ADDR, hardware: str = "snt9b", model_dir: str = "/m",
        model: str = "qwen3-8b", method: str = "grpo", **cluster: str) -> Job:
    """A verl job on `nodes` nodes of 8 cards, rendered and written as `render` does, and the stand-ins."""
    plan, files = render_job(T, frameworks=["verl"], model=model, method=method, hardware=hardware, cards=8 * nodes,
                             data={"samples": 6000, "tokens_per_sample": 1024},
                             paths={"model_dir": model_dir, "dataset": "/d.json", "output_dir": str(tmp_path / "out")},
                             cluster={**cluster, **({"master_addr": master_addr} if master_addr else {})})
    assert plan.frameworks["verl"].layout.nodes == nodes
    write(files, tmp_path, plan.job, overwrite=False)
    for path in data_files(plan.frameworks["verl"].settings):  # what prepare_data.py writes
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"PAR1")
    folder = tmp_path / plan.job / "verl"
    stub = tmp_path / "stub"
    (stub / "bin").mkdir(parents=True)
    (stub / "calls").mkdir()
    for name, text in (("ray", RAY), ("python3", PYTHON3), ("sleep", SLEEP)):
        (stub / "bin" / name).write_text(text)
        (stub / "bin" / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "ASCEND_RT_VISIBLE_DEVICES",
                                                            "CUDA_VISIBLE_DEVICES")}
    (stub / "site").mkdir()  # where the verl python3 imports lives (VERL_ROOT): the job starts there
    env.update(PATH=f"{stub / 'bin'}:{os.environ['PATH']}", STUB=str(stub), STUB_DEVICES="8",
               VERL_ROOT=str(stub / "site"),
               STUB_RESOURCE="NPU" if plan.accelerator == "npu" else "GPU", HCCL_SOCKET_IFNAME="eth0",
               NCCL_SOCKET_IFNAME="eth0")
    return Job(plan, folder, stub, env)


def overrides(j: Job) -> list[str]:
    return [line for line in (j.folder / "overrides.txt").read_text().splitlines() if line and line[0] != "#"]


def programs(calls) -> list[str]:
    return [f"{program} {argv[0]}" if program == "ray" else program for program, _, argv in calls]


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_node_0_starts_the_head_the_others_join_and_the_job_starts_once(tmp_path, nodes):
    j = job(tmp_path, nodes)
    check_script((j.folder / "launch.sh").read_text(), tmp_path)
    device = '--resources={"NPU": 8}'
    for rank in range(1, nodes):
        result = j.run(str(rank))
        assert result.returncode == 0, result.stderr
        calls = j.calls()
        assert [argv for _, _, argv in calls] == [["start", f"--address={ADDR}:6379", device]]
        assert "the job runs on node 0" in result.stderr
    result = j.run("0", RAY_ADDRESS="10.9.9.9:6379")  # another cluster's: not the one the job runs on
    assert result.returncode == 0, result.stderr
    calls = j.calls()
    assert programs(calls) == ["python3", "ray start", "ray status", "python3", "ray stop"]
    assert calls[1][2] == ["start", "--head", "--port=6379", "--dashboard-host=0.0.0.0", "--dashboard-port=8265",
                           device]
    _, cwd, argv = calls[3]
    assert argv == ["-m", "verl.trainer.main_ppo", *overrides(j)] and cwd == j.env["VERL_ROOT"]
    assert f"all {nodes} node(s) have joined ({8 * nodes} NPU)" in result.stderr


def test_the_head_waits_for_nodes_that_join_late(tmp_path):
    j = job(tmp_path, 4)
    result = j.run("0", JOIN_ON_STATUS="4")  # the head, then each `ray status` sees one more node
    assert result.returncode == 0, result.stderr
    assert programs(j.calls()) == ["python3", "ray start", *["ray status", "sleep"] * 2, "ray status", "python3",
                                   "ray stop"]
    assert "waiting for the other nodes to join: 16 of 32 NPU" in result.stderr


def test_the_head_gives_up_when_a_node_never_joins(tmp_path):
    j = job(tmp_path, 2)
    result = j.run("0")
    assert result.returncode == 1
    assert "has 8 of 16 NPU after 120 tries 5 s apart" in result.stderr and "ranks 1..1" in result.stderr
    assert not [argv for _, _, argv in j.calls() if argv[0] == "-m"]  # no job started


def test_a_failing_step_fails_the_launch(tmp_path):
    j = job(tmp_path, 2)
    result = j.run("0", FAIL_HEAD="1")
    assert result.returncode == 1 and "ray start --head failed" in result.stderr
    assert programs(j.calls()) == ["python3", "ray start"]
    result = j.run("1", FAIL_JOIN="1")
    assert result.returncode == 1 and "could not join the Ray head at 10.0.0.1:6379" in result.stderr
    assert programs(j.calls()) == ["ray start", "sleep"] * (JOIN_ATTEMPTS - 1) + ["ray start"]
    j.run("1")
    j.calls()
    result = j.run("0", PYTHON_RC="3")
    assert result.returncode == 3
    # Ray stops after a failure too
    assert programs(j.calls()) == ["python3", "ray start", "ray status", "python3", "ray stop"]


def test_a_scheduled_worker_stops_only_once_the_head_is_gone_for_minutes(tmp_path):
    # Issue 34 item 2: one unanswered `ray status` (a busy head, a slow network) must not stop a node of a running
    # job; HEAD_MISSES in a row, HEAD_POLL_S apart, do.
    j = job(tmp_path, 2, master_addr=None, scheduler="slurm")
    answers = ["none", "ok", *["none"] * (HEAD_MISSES - 1), "ok", *["none"] * HEAD_MISSES, "ok"]
    (j.stub / "answers").write_text("".join(f"{answer}\n" for answer in answers))
    result = j.run("1", ADDR)
    assert result.returncode == 0, result.stderr
    asked = programs(j.calls())
    assert asked[0] == "ray start" and asked[-1] == "ray stop" and asked.count("ray stop") == 1
    assert asked.count("ray status") == len(answers) - 1  # the last answer is never asked for
    assert asked.count("sleep") == len(answers) - 2
    assert "the Ray head at 10.0.0.1:6379 has stopped" in result.stderr


def test_a_multi_node_job_needs_the_master_address(tmp_path):
    j = job(tmp_path, 2, master_addr=None)
    result = j.run("1")
    assert result.returncode == 2 and "MASTER_ADDR is not set" in result.stderr
    assert j.calls() == []
    result = j.run("1", "fe80::1")  # ray reads an IPv6 address in brackets (ray._common.network_utils)
    assert result.returncode == 0, result.stderr
    assert j.calls()[0][2][1] == "--address=[fe80::1]:6379"
    result = j.run("0", MASTER_ADDR="node0.cluster")
    assert result.returncode == 0, result.stderr


def test_overrides_reach_python3_unchanged(tmp_path):
    canary = tmp_path / "canary"
    j = job(tmp_path, 1, model_dir=HOSTILE_PATH.replace("CANARY", str(canary)))
    result = j.run("0")
    assert result.returncode == 0, result.stderr
    argv = j.calls()[3][2]
    assert argv[2:] == overrides(j)
    path_override = next(word for word in argv if word.startswith("actor_rollout_ref.model.path="))
    assert path_override == "actor_rollout_ref.model.path=" + hydra_value(HOSTILE_PATH.replace("CANARY", str(canary)))
    assert not canary.exists()


def test_gpus_are_given_to_ray_as_gpus(tmp_path):
    j = job(tmp_path, 1, hardware="a800")
    assert j.run("0").returncode == 0
    assert j.calls()[1][2][-1] == "--num-gpus=8"


def test_dapo_runs_from_the_clone_of_verl_that_python3_imports(tmp_path):
    j = job(tmp_path, 1, model="qwen3-14b", method="dapo")
    check_script((j.folder / "launch.sh").read_text(), tmp_path)
    clone = tmp_path / "verl clone"
    result = j.run("0", VERL_ROOT=str(clone))
    assert result.returncode == 2 and "runs from a clone of verl v0.7.0 installed with pip install -e" in result.stderr
    assert programs(j.calls()) == ["python3"]  # asked where verl is; nothing started
    (clone / "recipe" / "dapo").mkdir(parents=True)
    (clone / "recipe" / "dapo" / "main_dapo.py").write_text("")
    result = j.run("0", VERL_ROOT=str(clone))
    assert result.returncode == 0, result.stderr
    _, cwd, argv = j.calls()[-2]
    assert cwd == str(clone) and argv == ["-m", "recipe.dapo.main_dapo", *overrides(j)]


@pytest.mark.parametrize("nodes, hardware", [(1, "snt9b"), (2, "a800")])
def test_validate_finds_no_shell_problem_in_the_verl_files(tmp_path, nodes, hardware):
    j = job(tmp_path, nodes, master_addr=None, hardware=hardware)
    # verl's own config check (checks.py) is tests/test_verl_config.py's: here an interpreter that is not there.
    result = CliRunner().invoke(main, ["validate", str(j.folder.parent), "--json", "--verl-python", "/nonexistent"])
    found = {item["path"]: item for item in json.loads(result.output)["results"]}
    assert {path for path in found if path.endswith((".sh", ".txt"))} == {
        "verl/launch.sh", "verl/merge.sh", "verl/commands.txt", "verl/overrides.txt"}
    for path in ("verl/launch.sh", "verl/merge.sh", "verl/commands.txt"):
        assert found[path]["status"] == "ok", found[path]


def test_node_0_starts_nothing_before_the_data_is_prepared(tmp_path):
    j = job(tmp_path, 2)
    train = Path(data_files(j.plan.frameworks["verl"].settings)[0])
    train.unlink()
    result = j.run("0")
    assert result.returncode == 2 and f"{train}: is not there: run python3 verl/prepare_data.py" in result.stderr
    assert j.calls() == []
    assert j.run("1").returncode == 0  # a worker node reads no data


def test_plan_shows_the_settings_with_their_sources(tmp_path):
    spec = tmp_path / "rl.yaml"
    spec.write_text(json.dumps({"job": "rl", "model": "qwen3-8b", "method": "grpo", "seq_len": 4096,
                                "hardware": "snt9b", "frameworks": ["verl"]}))
    result = CliRunner().invoke(main, ["plan", str(spec)])
    assert result.exit_code == 0, result.output
    shown = result.output.split("verl: the values its files hold beyond the layout and recipe", 1)[1].splitlines()
    rows = [line.split() for line in itertools.takewhile(lambda line: line.startswith("  "), shown[1:])]
    assert rows[0][:2] == ["algorithm.adv_estimator", "'grpo'"] and "run_qwen3-8b_npu.sh" in " ".join(rows[0])
    assert len(rows) == len(json.loads(CliRunner().invoke(main, ["plan", str(spec), "--json"]).stdout)
                            ["frameworks"]["verl"]["settings"]["overrides"])


def test_an_override_line_with_a_control_character_is_refused(tmp_path):
    j = job(tmp_path, 1)
    path = j.folder / "overrides.txt"
    path.chmod(0o644)
    path.write_text(path.read_text().replace("\n", "\r\n", 2))  # an editor's CRLF line end
    result = j.run("0")
    assert result.returncode == 2 and "an override is one line without control characters, got $'" in result.stderr
    assert j.calls() == []


def test_a_node_joins_by_the_address_of_the_planned_interface(tmp_path):
    # cluster.socket_ifname names one interface: every node exports it for Gloo and TensorPipe and gives Ray its
    # address (recipe/r1_ascend/ray_start_grpo_npu.sh l.19-24, 47, 70), read at run time as data.
    j = job(tmp_path, 2, socket_ifname="enp189s0f0")
    env = {item.key: item.value for item in j.plan.frameworks["verl"].settings.environment}
    assert env["GLOO_SOCKET_IFNAME"] == env["TP_SOCKET_IFNAME"] == "enp189s0f0"
    assert j.plan.frameworks["verl"].settings.node_ifname == "enp189s0f0"
    for rank, head in (("1", "--address=10.0.0.1:6379"), ("0", "--head")):
        result = j.run(rank, STUB_IP="10.0.0.7", JOIN_ON_STATUS="2")
        assert result.returncode == 0, result.stderr
        starts = [argv for program, _, argv in j.calls() if program == "ray" and argv[0] == "start"]
        assert head in starts[0] and starts[0][-1] == "--node-ip-address=10.0.0.7"
    result = j.run("1")  # no IPv4 address on that interface here
    assert result.returncode == 2 and "enp189s0f0: (cluster.socket_ifname) is not an interface" in result.stderr
    assert [program for program, _, _ in j.calls()] == ["python3"]


@pytest.mark.parametrize("ifname", [None, "eth,enp", "^docker,lo"])
def test_without_one_interface_ray_takes_the_host_names_address(tmp_path, ifname):
    j = job(tmp_path, 2, **({"socket_ifname": ifname} if ifname else {}))
    keys = [item.key for item in j.plan.frameworks["verl"].settings.environment]
    assert "GLOO_SOCKET_IFNAME" not in keys and j.plan.frameworks["verl"].settings.node_ifname is None
    result = j.run("1")
    assert result.returncode == 0, result.stderr
    assert not any("--node-ip-address" in " ".join(argv) for _, _, argv in j.calls())
