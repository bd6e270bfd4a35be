"""Issue 22, run time: what a launch script reads when it runs (files earlier runs left in the output folder, its
arguments, the environment, the render mark) is data. Each generated launch.sh and every line of commands.txt runs
for real here, with stand-ins for msrun_launcher.sh / msrun, python, torchrun and llamafactory-cli that record how
they were started; hostile values are generated (hypothesis) for all three frameworks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helpers import check_script, make_spec, mindformers_run_config, render_job
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from generator.errors import SpecError
from generator.frameworks.mindformers.render import log_dir
from generator.render import write
from generator.tables import load_tables

T = load_tables()
FRAMEWORKS = ("mindformers", "mindspeed-llm", "llama-factory")
EXAMPLES = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KEPT_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "ASCEND_RT_VISIBLE_DEVICES")

# Stand-ins. Each records {"program", "argv", "env"} as a JSON line in $RECORD; python3 (launch.sh reading JSON and
# YAML) stays the real interpreter, `python` (MindFormers on one card) is recorded.
RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "a") as out:
    out.write(json.dumps({"program": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                          "env": {k: os.environ.get(k) for k in KEPT}}) + "\\n")
""".replace("KEPT", repr(KEPT_ENV))
PYTHON = '#!/bin/bash\nexec "$(dirname "$0")/recorded-python" "$@"\n'
# msrun_launcher.sh builds the msrun command and evals it, as upstream's does.
MSRUN_LAUNCHER = ('#!/bin/bash\n'
                  'MSRUN_CMD="msrun --worker_num=$2 --local_worker_num=$3 --master_addr=$4 --master_port=$5 '
                  '--node_rank=$6 --log_dir=$7 --join=$8 --cluster_time_out=$9"\n'
                  'eval "$MSRUN_CMD $1"\n')


@dataclass
class Stage:
    """A rendered job whose launch.sh runs for real against stand-ins in `root`."""
    framework: str
    plan: object
    folder: Path  # the framework's folder of the job (launch.sh, commands.txt)
    output: Path  # the framework's output folder (checkpoints, the render mark)
    env: dict
    record: Path

    def run(self, *args: str, env: dict | None = None, line: str | None = None) -> subprocess.CompletedProcess:
        """Run launch.sh with `args` (or one commands.txt `line` under bash -c); records are cleared first."""
        self.record.unlink(missing_ok=True)
        command = ["bash", "-c", line] if line is not None else ["bash", str(self.folder / "launch.sh"), *args]
        return subprocess.run(command, env={**self.env, **(env or {})}, capture_output=True, text=True,
                              cwd=self.folder.parent.parent, check=False)

    def calls(self) -> list[dict]:
        return [json.loads(l) for l in self.record.read_text().splitlines()] if self.record.exists() else []

    def reset_output(self) -> None:
        shutil.rmtree(self.output, ignore_errors=True)
        self.output.mkdir(parents=True)


def stage(root: Path, framework: str, cards: int = 16, out: Path | None = None, **fields) -> Stage:
    """Render a `framework` job of `cards` into root/job with every path in root (the output folder: `out`, default
    root/out), and the stand-ins on PATH."""
    root.mkdir(parents=True, exist_ok=True)
    bindir, checkout, weights = root / "bin", root / "mindformers", root / "mcore"
    for folder in (bindir, checkout / "scripts", weights, root / "mindspeed"):
        folder.mkdir(parents=True, exist_ok=True)
    for name in ("msrun", "torchrun", "llamafactory-cli", "recorded-python"):
        (bindir / name).write_text(RECORDER)
    (bindir / "python").write_text(PYTHON)
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    (checkout / "scripts" / "msrun_launcher.sh").write_text(MSRUN_LAUNCHER)
    (weights / "latest_checkpointed_iteration.txt").write_text("release")  # the converted weights
    paths = {"model_dir": "/m", "dataset": "/d.json", "output_dir": str(out or root / "out"),
             "mindformers_dir": str(checkout),
             "mindspeed_llm_dir": str(root / "mindspeed"), "mcore_ckpt_dir": str(weights)}
    model = "debug-tiny" if cards == 1 else "qwen3-8b"
    fields = {"model": model, "method": "full", "cards": cards, "global_batch_size": 16, "train": {"steps": 300},
              **fields}
    plan, files = render_job(T, frameworks=[framework], paths=paths, **fields)
    write(files, root / "job", plan.job, overwrite=True)
    env = {k: v for k, v in os.environ.items() if k not in KEPT_ENV and not k.endswith("SOCKET_IFNAME")}
    env.update(PATH=f"{bindir}:{os.environ['PATH']}", RECORD=str(root / "record.jsonl"))
    return Stage(framework, plan, root / "job" / plan.job / framework, (out or root / "out") / framework, env,
                 root / "record.jsonl")


def started(calls: list[dict]) -> tuple[str, str]:
    """(node rank, master address) the framework's launcher was given, as that launcher reads them."""
    call = next(c for c in calls if c["program"] in ("msrun", "torchrun", "llamafactory-cli", "recorded-python"))
    argv = call["argv"]
    if call["program"] == "msrun":
        flags = dict(w[2:].split("=", 1) for w in argv if w.startswith("--") and "=" in w)
        return flags["node_rank"], flags["master_addr"]
    if call["program"] == "torchrun":
        return argv[argv.index("--node_rank") + 1], argv[argv.index("--master_addr") + 1]
    return call["env"]["NODE_RANK"] or "0", call["env"]["MASTER_ADDR"]  # llamafactory-cli; python on one card


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    """Stages shared by the property tests (each example resets the output folder): per framework a 2-node job with
    cluster.master_addr (key: the framework) and one without (key: framework/no-addr); a one-card MindFormers job."""
    root = tmp_path_factory.mktemp("stages")
    found = {fw: stage(root / fw, fw, cluster={"master_addr": "10.0.0.1"}) for fw in FRAMEWORKS}
    found.update({f"{fw}/no-addr": stage(root / f"{fw}-no-addr", fw) for fw in FRAMEWORKS})
    found["mindformers/1"] = stage(root / "mindformers-1", "mindformers", cards=1)
    return found


# 1 --------------------------------------------------------------------------------------------------------------
# Values that are not a count of steps: what bash would evaluate, what it would misread, what it cannot read.
CANARY = "CANARY"  # replaced by an absolute path in the test
HOSTILE_WORDS = ["", "release", " 63", "63 ", "0063", "00", "3.5", "-1", "+5", "1e3", "0x10", "ARGS[$(touch CANARY)]",
                 "$(touch CANARY)", "`touch CANARY`", "a[$(touch CANARY)]", "1+1", "9" * 19, "99999999999999999999",
                 "\u0663", "٦٣", "6\n3", "63\r", "True"]
hostile_count = st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(max_size=30)).filter(
    lambda s: not re.fullmatch(r"(0|[1-9][0-9]{0,17})\n*", s) and "\0" not in s)


def plant(canary: Path, text: str) -> str:
    return text.replace(CANARY, str(canary))


def assert_refused(result: subprocess.CompletedProcess, calls: list[dict], names: str, canary: Path) -> None:
    """Exit 2 before anything started, a message naming the file, nothing evaluated, nothing raw on the terminal."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert names in result.stderr and ("got " in result.stderr or "found a " in result.stderr), result.stderr
    assert not calls, calls
    assert not canary.exists()
    assert "\x1b" not in result.stderr and "Traceback" not in result.stderr


@EXAMPLES
@given(value=hostile_count, as_json_text=st.booleans())
def test_mindformers_refuses_a_hostile_last_epoch(stages, tmp_path, value, as_json_text):
    s, canary = stages["mindformers"], tmp_path / CANARY
    if not as_json_text:  # the text is JSON: white space around a number is still that number
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        assume(not (type(parsed) is int and 0 <= parsed < 10 ** 18))
    s.reset_output()
    rank0 = s.output / "checkpoint" / "rank_0"
    rank0.mkdir(parents=True)
    (rank0 / "qwen3_rank_0-100_1.safetensors").write_text("")
    value = plant(canary, value)
    # As a JSON string, or written into the file as it is (a number, or text JSON reads otherwise).
    epoch = json.dumps(value) if as_json_text else value
    (rank0 / "meta.json").write_text(f'{{"last_epoch": {epoch}, "last_ckpt_file": "qwen3_rank_0-100_1.safetensors"}}')
    result = s.run("0")
    assert_refused(result, s.calls(), f"{rank0}/meta.json", canary)


HOSTILE_NAMES = ["../../../etc/passwd", "/etc/passwd", "..", ".", ".hidden", "a/b", "-rf", "", "x y", "$(touch CANARY)",
                 "link.safetensors", "folder.safetensors", "missing.safetensors", "a\nb"]


@EXAMPLES
@given(name=st.one_of(st.sampled_from(HOSTILE_NAMES), st.text(min_size=1, max_size=20)), cards=st.sampled_from([16, 1]))
def test_mindformers_loads_only_a_plain_file_of_its_rank_folder(stages, tmp_path, name, cards):
    # The file meta.json names is joined to the rank folder by MindFormers (and linked by launch.sh on one card).
    s = stages["mindformers" if cards > 1 else "mindformers/1"]
    canary, outside = tmp_path / CANARY, tmp_path / "outside.safetensors"
    outside.write_text("not this job's")
    s.reset_output()
    rank0 = s.output / "checkpoint" / "rank_0"
    rank0.mkdir(parents=True)
    (rank0 / "link.safetensors").symlink_to(outside)
    (rank0 / "folder.safetensors").mkdir()
    name = plant(canary, name)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) and name not in HOSTILE_NAMES:
        name = "link.safetensors"  # a plain name: plant it as a link
        (rank0 / "link.safetensors").unlink()
        (rank0 / name).symlink_to(outside)
    (rank0 / "meta.json").write_text(json.dumps({"last_epoch": 100, "last_ckpt_file": name}))
    result = s.run("0")
    assert_refused(result, s.calls(), str(rank0), canary)
    assert not (s.output / "checkpoint" / "resume").exists() or not any((s.output / "checkpoint" / "resume").iterdir())


@pytest.mark.parametrize("planted", ["rank_0", "resume", "FINISHED", "meta.json", "rank_1"])
def test_mindformers_follows_no_planted_link(tmp_path, planted):
    s = stage(tmp_path / "s", "mindformers", cards=1 if planted == "resume" else 16,
              cluster={"master_addr": "10.0.0.1"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checkpoint = s.output / "checkpoint"
    (checkpoint / "rank_0").mkdir(parents=True)
    (checkpoint / "rank_0" / "c-100_1.safetensors").write_text("")
    (elsewhere / "meta.json").write_text(json.dumps({"last_epoch": 100, "last_ckpt_file": "c-100_1.safetensors"}))
    (elsewhere / "c-100_1.safetensors").write_text("")
    if planted == "rank_0":
        shutil.rmtree(checkpoint / "rank_0")
        (checkpoint / "rank_0").symlink_to(elsewhere)
    else:
        (checkpoint / "rank_0" / "meta.json").write_text((elsewhere / "meta.json").read_text())
    target = {"resume": checkpoint / "resume", "FINISHED": s.output / "FINISHED",
              "meta.json": checkpoint / "rank_0" / "meta.json", "rank_1": checkpoint / "rank_1"}.get(planted)
    if target is not None:
        target.unlink(missing_ok=True)
        target.symlink_to(elsewhere if planted != "meta.json" else elsewhere / "meta.json")
    result = s.run("0")
    assert result.returncode == 2 and "not a link" in result.stderr and "found a symbolic link" in result.stderr, \
        result.stderr
    assert not s.calls() and sorted(p.name for p in elsewhere.iterdir()) == ["c-100_1.safetensors", "meta.json"]


def test_mindformers_clears_the_log_suffix_msrun_launcher_evals(tmp_path):
    # Issue 34 item 6: upstream's msrun_launcher.sh appends MF_LOG_SUFFIX from the environment to --log_dir inside
    # the command it evals (scripts/msrun_launcher.sh l. 32-37, 123, 153-160): the stand-in does the same.
    s = stage(tmp_path / "s", "mindformers", cluster={"master_addr": "10.0.0.1"})
    launcher = tmp_path / "s" / "mindformers" / "scripts" / "msrun_launcher.sh"
    launcher.write_text(MSRUN_LAUNCHER.replace('--log_dir=$7', '--log_dir=$7${MF_LOG_SUFFIX:+_$MF_LOG_SUFFIX}'))
    canary = tmp_path / "canary"
    result = s.run("0", env={"MF_LOG_SUFFIX": f"$(touch {canary})"})
    assert result.returncode == 0, result.stderr
    assert not canary.exists()
    (call,) = [c for c in s.calls() if c["program"] == "msrun"]
    assert f"--log_dir={log_dir(s.plan)}" in call["argv"]  # where launch.sh checked for planted links


def saved(s: Stage, step: int, ranks: int = 1) -> Path:
    """A MindFormers checkpoint of `step` in `ranks` rank folders, each with its meta.json; returns rank_0's folder."""
    for rank in range(ranks):
        folder = s.output / "checkpoint" / f"rank_{rank}"
        folder.mkdir(parents=True)
        (folder / f"c_rank_{rank}-{step}_1.safetensors").write_text("")
        (folder / "meta.json").write_text(json.dumps({"last_epoch": step,
                                                      "last_ckpt_file": f"c_rank_{rank}-{step}_1.safetensors"}))
    return s.output / "checkpoint" / "rank_0"


def stop_step(argv: list[str]) -> int:
    """The TrainCallBack's stop_step of the run MindFormers starts with these words."""
    doc = mindformers_run_config(argv)
    return next(c["stop_step"] for c in doc["callbacks"] if c["type"] == "TrainCallBack")


@pytest.mark.parametrize("reindented", [False, True])
def test_a_one_card_mindformers_relaunch_resumes_with_the_steps_that_remain(tmp_path, reindented):
    # The rule refuses only what is not a count: a valid relaunch resumes. The steps left reach MindFormers as
    # --callbacks, read from train.yaml by YAML's reader, not a sed on one indentation (issue 24): whatever the layout.
    s = stage(tmp_path / "s", "mindformers", cards=1)
    if reindented:
        train = s.folder / "train.yaml"
        train.write_text(yaml.safe_dump(yaml.safe_load(train.read_text()), indent=4, sort_keys=True))
    rank0 = saved(s, 120)
    result = s.run("0")
    assert result.returncode == 0, result.stderr
    argv = s.calls()[0]["argv"]
    loaded = Path(argv[argv.index("--load_checkpoint") + 1])
    assert loaded.is_symlink() and loaded.resolve() == rank0 / "c_rank_0-120_1.safetensors"
    assert stop_step(argv) == 180 and Path(argv[argv.index("--config") + 1]) == s.folder / "train.yaml"


@EXAMPLES
@given(value=hostile_count)
def test_mindspeed_refuses_a_hostile_iteration_file(stages, tmp_path, value):
    s, canary = stages["mindspeed-llm"], tmp_path / CANARY
    s.reset_output()
    (s.output / "ckpt").mkdir()
    iteration = s.output / "ckpt" / "latest_checkpointed_iteration.txt"
    iteration.write_text(plant(canary, value))
    result = s.run("0")
    assert_refused(result, s.calls(), str(iteration), canary)


@pytest.mark.parametrize("content,resumed", [("63", True), ("63\n", True), ("300", False), ("0", True)])
def test_mindspeed_reads_its_own_iteration_file(tmp_path, content, resumed):
    s = stage(tmp_path / "s", "mindspeed-llm", cards=8)
    (s.output / "ckpt").mkdir(parents=True)
    (s.output / "ckpt" / "latest_checkpointed_iteration.txt").write_text(content)
    (s.output / "ckpt" / f"iter_{int(content):07d}").mkdir()
    result = s.run("0")
    if not resumed:
        assert result.returncode == 2 and "holds the finished run (iteration 300 of 300)" in result.stderr
        return
    assert result.returncode == 0 and f"resuming from iteration {content.strip()}" in result.stderr, result.stderr
    argv = s.calls()[0]["argv"]
    assert argv[argv.index("--load") + 1] == str(s.output / "ckpt") and "--finetune" not in argv


def megatron_reads(content: bytes) -> int | None:
    """The iteration Megatron reads from latest_checkpointed_iteration.txt (megatron/training/checkpointing.py
    read_metadata: int(f.read().strip()), text mode), None where it refuses it (or reads it as 'release')."""
    try:
        return int(content.decode().strip())
    except (ValueError, UnicodeDecodeError):
        return None


@pytest.mark.parametrize("content", [b"63", b"63\n", b"6\x003", b"\x0063", b"63\x00", b"63" + b"\n" * 70 + b"x",
                                     b"63" + b"\n" * 62 + b"x", b" 63", b"63 ", b"+63", b"0063", b"6_3"])
def test_mindspeed_takes_only_an_iteration_file_megatron_takes(tmp_path, content):
    # Issue 34 item 6: an iteration file is taken (resumed from) only where Megatron then reads the same iteration:
    # a NUL or text after the first 64 bytes is refused before anything starts (MindSpeed-MM shares this check).
    s = stage(tmp_path / "s", "mindspeed-llm", cards=8)
    (s.output / "ckpt" / "iter_0000063").mkdir(parents=True)
    iteration = s.output / "ckpt" / "latest_checkpointed_iteration.txt"
    iteration.write_bytes(content)
    result = s.run("0")
    if result.returncode == 0:
        assert "resuming from iteration 63" in result.stderr and megatron_reads(content) == 63, result.stderr
    else:
        assert result.returncode == 2 and not s.calls() and f"{iteration}: must hold the iteration" in result.stderr
    assert result.returncode == 0 or content not in (b"63", b"63\n")  # what Megatron writes is always taken


@EXAMPLES
@given(value=hostile_count, where=st.sampled_from(["folder", "global_step"]))
def test_llama_factory_refuses_hostile_checkpoints(stages, tmp_path, value, where):
    s, canary = stages["llama-factory"], tmp_path / CANARY
    s.reset_output()
    value = plant(canary, value)
    if where == "folder":  # a folder name transformers' get_last_checkpoint might pick (\d+ takes any digits)
        if "/" in value or value in ("", ".", ".."):
            value = f"x{value.replace('/', '')}"
        folder = s.output / f"checkpoint-{value}"
        named = "checkpoint-"
    else:
        folder = s.output / "checkpoint-50"
        named = "trainer_state.json"
    folder.mkdir(parents=True)
    step = json.dumps(value) if where == "global_step" else "50"
    (folder / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    result = s.run("0")
    assert_refused(result, s.calls(), named, canary)


@pytest.mark.parametrize("case", ["link", "no-state", "wrong-step", "file"])
def test_llama_factory_resumes_only_from_a_whole_checkpoint(tmp_path, case):
    s = stage(tmp_path / "s", "llama-factory", cards=8)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "trainer_state.json").write_text('{"global_step": 90}')
    for step in (30, 60):
        (s.output / f"checkpoint-{step}").mkdir(parents=True)
        (s.output / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    ok = s.run("0")
    assert ok.returncode == 0 and "resuming from" in ok.stderr and "checkpoint-60 (step 60)" in ok.stderr
    if case == "link":
        (s.output / "checkpoint-90").symlink_to(elsewhere)
    elif case == "no-state":
        (s.output / "checkpoint-90").mkdir()
    elif case == "wrong-step":
        (s.output / "checkpoint-60" / "trainer_state.json").write_text('{"global_step": 6}')
    else:
        (s.output / "checkpoint-90").write_text("")
    result = s.run("0")
    assert result.returncode == 2 and not s.calls(), result.stderr
    assert "checkpoint-" in result.stderr


@pytest.mark.parametrize("state", ["long", "not json", "a list", "too large"])
def test_llama_factory_reads_a_long_trainer_state(tmp_path, state):
    # Issue 34 item 6: a real trainer_state.json of a long run is over 1 MiB (its log_history holds every logging
    # step, as transformers' TrainerState.save_to_json writes it: indent 2); one that is no JSON object is refused
    # as that, not as a wrong global_step.
    s = stage(tmp_path / "s", "llama-factory", cards=8, train={"steps": 100_000})
    folder = s.output / "checkpoint-70000"
    folder.mkdir(parents=True)
    path = folder / "trainer_state.json"
    if state == "long":
        history = [{"epoch": step / 1000, "grad_norm": 0.5, "learning_rate": 1e-5, "loss": 1.25, "step": step}
                   for step in range(1, 70_001)]
        path.write_text(json.dumps({"global_step": 70000, "log_history": history, "max_steps": 100000}, indent=2))
        assert path.stat().st_size > 1 << 20
    elif state == "too large":
        with open(path, "wb") as handle:
            handle.truncate((64 << 20) + 1)
    else:
        path.write_text({"not json": '{"global_step": 70000', "a list": "[70000]"}[state])
    result = s.run("0")
    if state == "long":
        assert result.returncode == 0 and "checkpoint-70000 (step 70000)" in result.stderr, result.stderr
        return
    assert result.returncode == 2 and not s.calls()
    assert f"{path}: must be a JSON object of at most 64 MiB" in result.stderr, result.stderr


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("mark", ["file", "folder", "link"])
def test_a_finished_run_is_refused_whatever_its_mark_is(tmp_path, framework, mark):
    s = stage(tmp_path / "s", framework, cards=8)
    path = {"mindformers": s.output / "FINISHED", "llama-factory": s.output / "train_results.json",
            "mindspeed-llm": s.output / "ckpt" / "latest_checkpointed_iteration.txt"}[framework]
    path.parent.mkdir(parents=True, exist_ok=True)
    if mark == "file":
        path.write_text("300")
    elif mark == "folder":
        path.mkdir()
    else:
        path.symlink_to(tmp_path)
    result = s.run("0")
    assert result.returncode == 2 and not s.calls(), result.stderr
    assert str(path.parent) in result.stderr


# 2 --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", FRAMEWORKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rank=st.one_of(st.sampled_from(["0", "1", "00", "01", "2", "-0", " 1", "1 ", "+1", "9" * 20,
                                       "18446744073709551617", "ARGS[$(touch CANARY)]", "0x1", "１"]),
                      st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                              max_size=25)))
@example(rank="00")
@example(rank="9" * 20)
def test_node_rank_is_a_plain_count_below_the_node_count(stages, tmp_path, framework, rank):
    s, canary = stages[framework], tmp_path / CANARY
    s.reset_output()
    rank = plant(canary, rank)
    result = s.run(rank)
    valid = rank in ("0", "1")
    assert result.returncode == (0 if valid else 2), (rank, result.stderr)
    assert not canary.exists() and "Traceback" not in result.stderr
    if valid:
        assert started(s.calls()) == (rank, "10.0.0.1")
    else:
        assert not s.calls() and ("NODE_RANK" in result.stderr)


def spec_takes(address: str) -> bool:
    """Whether the job spec takes `address` as cluster.master_addr."""
    try:
        make_spec(cluster={"master_addr": address})
    except SpecError:
        return False
    return True


@pytest.mark.parametrize("framework", FRAMEWORKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(address=st.one_of(
    st.sampled_from(["10.0.0.1", "node-0.cluster", "fe80::1", "2001:db8::7", "::1", "1.2.3.4:99", "host:8080",
                     "-x", "--nnodes", "a b", "$(touch CANARY)", "é.example", "10.0.0.1\n"]),
    st.text(alphabet="0123456789abcdefxyz.:-_ [$(", max_size=20),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=20)))
@example(address="::1")
@example(address="1.2.3.4:99")
def test_master_addr_at_run_time_follows_the_spec_rule(stages, tmp_path, framework, address):
    s, canary = stages[f"{framework}/no-addr"], tmp_path / CANARY  # no cluster.master_addr: the second argument
    s.reset_output()
    address = plant(canary, address)
    takes = spec_takes(address)
    result = s.run("1", address)
    assert not canary.exists() and "Traceback" not in result.stderr
    if takes:
        assert result.returncode == 0, (address, result.stderr)
        assert started(s.calls()) == ("1", address)
    else:
        assert result.returncode == 2 and "MASTER_ADDR" in result.stderr and not s.calls(), (address, result.stderr)


def test_the_spec_refuses_an_address_with_a_port():
    assert not spec_takes("1.2.3.4:99") and not spec_takes("::1") and spec_takes("fe80::1")


# 3 --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_nodes_of_different_renders_never_train_together(tmp_path, framework):
    # Rank 1 throughout: node 0 of MindFormers marks the run finished when its launcher exits 0.
    first = stage(tmp_path / "a", framework, out=tmp_path / "out", cluster={"master_addr": "10.0.0.1"})
    assert first.run("1").returncode == 0
    assert first.run("1").returncode == 0  # the same render again: a relaunch
    other = stage(tmp_path / "b", framework, out=tmp_path / "out", cluster={"master_addr": "10.0.0.1"},
                  train={"steps": 300, "learning_rate": 3.0e-5})
    refused = other.run("1")
    assert refused.returncode == 2 and not other.calls()
    assert first.plan.spec_sha256 in refused.stderr and other.plan.spec_sha256 in refused.stderr
    assert "remove" in refused.stderr and "move" in refused.stderr
    (other.output / "SPEC_SHA256").unlink()  # as the message says: continue that run with the new render
    assert other.run("1").returncode == 0
    assert first.run("1").returncode == 2


def test_the_render_mark_has_one_writer(tmp_path):
    # Launches of two renders started at once on a fresh output folder: the mark is written whole, once, and every
    # launch of the other render is refused.
    renders = [stage(tmp_path / str(lr), "llama-factory", out=tmp_path / "out", cluster={"master_addr": "10.0.0.1"},
                     train={"steps": 300, "learning_rate": lr}) for lr in (1.0e-5, 2.0e-5)]
    for attempt in range(3):
        shutil.rmtree(renders[0].output, ignore_errors=True)
        running = [subprocess.Popen(["bash", str(s.folder / "launch.sh"), str(rank)], env=s.env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for rank in (0, 1) for s in renders]
        codes = [p.wait() for p in running]
        for p in running:
            p.stderr.close()
        winner = (renders[0].output / "SPEC_SHA256").read_text()
        assert winner.count("spec sha256") == 1
        expected = [0 if s.plan.spec_sha256 in winner else 2 for rank in (0, 1) for s in renders]
        assert codes == expected, (attempt, codes)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_output_folder_without_hard_links_is_refused_with_why(tmp_path, framework):
    # The mark is claimed with link(2); where it fails (an object-store mount) the launch says what storage it needs.
    s = stage(tmp_path, framework, cluster={"master_addr": "10.0.0.1"})
    no_links = tmp_path / "nolinks"
    no_links.mkdir()
    (no_links / "ln").write_text("#!/usr/bin/env bash\nexit 1\n")
    (no_links / "ln").chmod(0o755)
    result = s.run("1", env={"PATH": f"{no_links}:{s.env['PATH']}"})
    assert result.returncode == 2 and not s.calls(), result.stderr
    assert ("SPEC_SHA256: cannot be created: the output folder must be on a file system with hard links, got "
            "link\\(2\\)\\ failed\n") in result.stderr, result.stderr  # the value as bash's %q shows it


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_spec_rendered_by_other_code_never_trains_together(tmp_path, monkeypatch, framework):
    # gen-launch's version stays 0.1.0 while its code changes: the mark names the rendered files, not only the spec.
    from generator import render

    first = stage(tmp_path / "a", framework, out=tmp_path / "out", cluster={"master_addr": "10.0.0.1"})
    assert first.run("1").returncode == 0
    header = render.header_text
    monkeypatch.setattr(render, "header_text", lambda plan: header(plan) + " (other code)")  # other files
    other = stage(tmp_path / "a", framework, out=tmp_path / "out", cluster={"master_addr": "10.0.0.1"})
    assert other.plan.spec_sha256 == first.plan.spec_sha256 and other.plan.version == first.plan.version
    refused = other.run("1")
    assert refused.returncode == 2 and not other.calls(), refused.stderr
    assert "What differs: files sha256." in refused.stderr and first.plan.spec_sha256 in refused.stderr


def test_llama_factory_nodes_with_other_overrides_never_train_together(tmp_path):
    s = stage(tmp_path / "s", "llama-factory", cluster={"master_addr": "10.0.0.1"})
    assert s.run("0", "--", "learning_rate=1e-3").returncode == 0
    assert s.run("1", "--", "learning_rate=1e-3").returncode == 0
    for words in ([], ["learning_rate=2e-3"]):
        refused = s.run("1", "--", *words)
        assert refused.returncode == 2 and not s.calls() and "What differs: overrides sha256." in refused.stderr, \
            refused.stderr


@pytest.mark.parametrize("word", ["output_dir=/elsewhere", "overwrite_output_dir=true", "resume_from_checkpoint=/x",
                                  "--output_dir=/elsewhere"])
def test_llama_factory_refuses_overrides_of_what_launch_checks(tmp_path, word):
    s = stage(tmp_path / "s", "llama-factory", cards=8)
    refused = s.run("0", "--", "learning_rate=1e-3", word)
    assert refused.returncode == 2 and not s.calls() and word.lstrip("-").split("=")[0] in refused.stderr, \
        refused.stderr


# 4 --------------------------------------------------------------------------------------------------------------
def test_mindformers_nodes_resume_with_the_steps_left_and_no_file_written(tmp_path):
    s = stage(tmp_path / "s", "mindformers", cluster={"master_addr": "10.0.0.1"})
    saved(s, 100, ranks=16)
    before = sorted(s.output.rglob("*"))
    rendered = (s.folder / "train.yaml").read_bytes()
    # Both nodes at once, as a relaunch starts them: each passes the steps left on its command line (issue 24).
    running = [subprocess.Popen(["bash", str(s.folder / "launch.sh"), str(rank)], env=s.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    for p in running:
        p.communicate()
    assert [p.returncode for p in running] == [0, 0]
    assert len(s.calls()) == 2
    for call in s.calls():
        argv = call["argv"]
        assert Path(argv[argv.index("--config") + 1]) == s.folder / "train.yaml"
        assert stop_step(argv) == 200
    assert (s.folder / "train.yaml").read_bytes() == rendered
    assert sorted(p for p in s.output.rglob("*") if p.name not in ("SPEC_SHA256", "FINISHED")) == before  # no config


# 5 --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("cards", [1, 8, 16])
@pytest.mark.parametrize("address", [None, "10.0.0.7"])
def test_every_line_of_commands_txt_runs(tmp_path, framework, cards, address):
    if cards == 1 and framework == "mindspeed-llm":
        pytest.skip("MindSpeed-LLM has no one-card layout for the stand-in model")
    fields = {"cluster": {"master_addr": address}} if address else {}
    if framework == "llama-factory" and cards == 1:
        fields["method"] = "lora"
    s = stage(tmp_path / "s", framework, cards=cards, **fields)
    lines = [l for l in (s.folder / "commands.txt").read_text().splitlines() if l and not l.startswith("#")]
    nodes = s.plan.frameworks[framework].layout.nodes
    assert len(lines) == nodes
    expected = address or ("127.0.0.1" if nodes == 1 else "10.0.0.9")
    env = {"JOB_DIR": str(s.folder), **({} if address or nodes == 1 else {"MASTER_ADDR": "10.0.0.9"})}
    for rank, line in reversed(list(enumerate(lines))):  # node 0 last: MindFormers' marks the run finished
        result = s.run(line=line, env=env)
        assert result.returncode == 0, (line, result.stderr)
        assert started(s.calls()) == (str(rank), expected), line
    # The lines make launch.sh's checks: a finished run is refused, and so is a line run without JOB_DIR.
    finished = {"mindformers": s.output / "FINISHED", "llama-factory": s.output / "train_results.json",
                "mindspeed-llm": None}[framework]
    if finished is not None:
        finished.write_text("")
        result = s.run(line=lines[0], env=env)
        assert result.returncode == 2 and "finished" in result.stderr and not s.calls()
    assert s.run(line=lines[0], env={**env, "JOB_DIR": ""}).returncode != 0 and not s.calls()


# 6 --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_scheduler_device_list_is_kept(tmp_path, framework):
    s = stage(tmp_path / "s", framework, cards=8)
    given_list = "8,9,10,11,12,13,14,15"
    result = s.run("0", env={"ASCEND_RT_VISIBLE_DEVICES": given_list})
    assert result.returncode == 0, result.stderr
    assert s.calls()[0]["env"]["ASCEND_RT_VISIBLE_DEVICES"] == given_list
    if framework == "llama-factory":  # unset: the node's first devices, as before
        assert s.run("0").returncode == 0 and s.calls()[0]["env"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


@pytest.mark.parametrize("framework", FRAMEWORKS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(devices=st.one_of(
    st.sampled_from(["", "0,1,2,3", "0,1,2,3,4,5,6,7,8", "0,0,1,2,3,4,5,6", "0,1,2,3,4,5,6,", ",0,1,2,3,4,5,6",
                     "0,1,2,3,4,5,6,07", "0 1 2 3 4 5 6 7", "0,1,2,3,4,5,6,$(touch CANARY)", "0-7", "all"]),
    st.lists(st.text(alphabet="0123456789 x-", max_size=3), min_size=1, max_size=10).map(",".join)))
@example(devices="0,1,2,3")
def test_a_device_list_that_is_not_the_planned_devices_is_refused(stages, tmp_path, framework, devices):
    s, canary = stages[framework], tmp_path / CANARY
    s.reset_output()
    devices = plant(canary, devices)
    ids = devices.split(",")
    valid = (len(ids) == 8 and len(set(ids)) == 8 and all(re.fullmatch(r"0|[1-9][0-9]{0,17}", i) for i in ids))
    result = s.run("0", env={"ASCEND_RT_VISIBLE_DEVICES": devices})
    assert not canary.exists()
    if valid:
        assert result.returncode == 0 and s.calls()[0]["env"]["ASCEND_RT_VISIBLE_DEVICES"] == devices
    else:
        assert result.returncode == 2 and "ASCEND_RT_VISIBLE_DEVICES" in result.stderr and not s.calls()


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("resume", [True, False])
@pytest.mark.parametrize("cards", [1, 16])
def test_launch_scripts_pass_bash_and_shellcheck(tmp_path, framework, resume, cards):
    if cards == 1 and framework == "mindspeed-llm":
        pytest.skip("MindSpeed-LLM has no one-card layout for the stand-in model")
    _, files = render_job(T, model="debug-tiny" if cards == 1 else "qwen3-8b", method="lora", cards=cards,
                          frameworks=[framework], train={"steps": 300, "resume": resume})
    check_script(files[f"{framework}/launch.sh"], tmp_path)


# Review of issue 22 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("planted", ["mindspeed-llm:logs", "mindspeed-llm:logs/train_node0.log",
                                     "mindformers:output", "mindformers:output/msrun_log",
                                     "mindformers:output/msrun_log/t", "mindformers:output/msrun_log/t/worker_0.log"])
def test_logs_are_written_through_no_planted_link(tmp_path, planted):
    framework, where = planted.split(":")
    s = stage(tmp_path / "s", framework, cards=8)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "train_node0.log").write_text("keep")
    root = s.output if framework == "mindspeed-llm" else tmp_path / "s" / "mindformers"  # msrun's: in the checkout
    link = root / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim / "train_node0.log" if where.endswith(".log") else victim)
    result = s.run("0")
    assert result.returncode == 2 and "found a symbolic link" in result.stderr and not s.calls(), result.stderr
    assert [p.name for p in victim.iterdir()] == ["train_node0.log"]
    assert (victim / "train_node0.log").read_text() == "keep"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_output_folder_is_no_planted_link(tmp_path, framework):
    s = stage(tmp_path / "s", framework, cards=8)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(s.output, ignore_errors=True)
    s.output.parent.mkdir(parents=True, exist_ok=True)
    s.output.symlink_to(elsewhere)
    result = s.run("0")
    assert result.returncode == 2 and "found a symbolic link" in result.stderr and not s.calls(), result.stderr
    assert not list(elsewhere.iterdir())


@pytest.mark.parametrize("case", ["save-link", "no-iter-folder", "iter-file"])
def test_mindspeed_resumes_only_from_its_own_iteration_folder(tmp_path, case):
    s = stage(tmp_path / "s", "mindspeed-llm", cards=8)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "iter_0000005").mkdir(parents=True)
    (elsewhere / "latest_checkpointed_iteration.txt").write_text("5")
    ckpt = s.output / "ckpt"
    if case == "save-link":
        s.output.mkdir(parents=True, exist_ok=True)
        ckpt.symlink_to(elsewhere)
    else:
        ckpt.mkdir(parents=True)
        (ckpt / "latest_checkpointed_iteration.txt").write_text("50")
        if case == "iter-file":
            (ckpt / "iter_0000050").write_text("")
    result = s.run("0")
    assert result.returncode == 2 and "resuming" not in result.stderr and not s.calls(), result.stderr
    assert str(ckpt) in result.stderr


def test_a_relaunch_resumes_without_a_python_command(tmp_path):
    # Debian and Ubuntu without python-is-python3 have no `python`: launch.sh reads the checkpoints with python3.
    s = stage(tmp_path / "s", "mindformers", cluster={"master_addr": "10.0.0.1"})
    (s.folder.parent.parent.parent / "bin" / "python").write_text("#!/bin/sh\necho 'python: not found' >&2\nexit 127\n")
    saved(s, 100, ranks=16)
    result = s.run("1")
    assert result.returncode == 0 and "resuming from" in result.stderr, result.stderr


GPU_UUID = "GPU-5d2a1c3e-8f7b-4c1d-9e2a-0b1c2d3e4f5{}"


@pytest.mark.parametrize("devices,valid", [
    (",".join(GPU_UUID.format(i) for i in range(8)), True),
    (",".join(f"MIG-{GPU_UUID.format(i)[4:]}" for i in range(8)), True),
    (",".join(["MIG-GPU-5d2a1c3e/1/0", *(str(i) for i in range(1, 8))]), True),
    (",".join(GPU_UUID.format(i % 7) for i in range(8)), False),  # one repeated
    (",".join(GPU_UUID.format(i) for i in range(7)), False),
    (",".join([*(GPU_UUID.format(i) for i in range(7)), "GPU-$(touch x)"]), False),
])
def test_gpu_uuids_are_taken_as_devices(tmp_path, devices, valid):
    s = stage(tmp_path / "s", "llama-factory", cards=8, hardware="rtx3090", model="debug-tiny", method="lora")
    result = s.run("0", env={"CUDA_VISIBLE_DEVICES": devices})
    if valid:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2 and "CUDA_VISIBLE_DEVICES" in result.stderr and not s.calls(), result.stderr


def test_ascend_takes_only_indices(tmp_path):
    s = stage(tmp_path / "s", "llama-factory", cards=8)
    result = s.run("0", env={"ASCEND_RT_VISIBLE_DEVICES": ",".join(GPU_UUID.format(i) for i in range(8))})
    assert result.returncode == 2 and "distinct indices separated" in result.stderr and not s.calls(), result.stderr


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_one_node_job_starts_without_a_rank(tmp_path, framework):
    # Issue 37 item 7: a one-node job still needed `launch.sh 0`; its usage line now says the rank is optional.
    s = stage(tmp_path, framework, cards=1)
    assert s.plan.frameworks[framework].layout.nodes == 1
    assert "# Usage: bash launch.sh [NODE_RANK]" in (s.folder / "launch.sh").read_text()
    result = s.run()
    assert result.returncode == 0, result.stderr
    assert started(s.calls())[0] == "0"
