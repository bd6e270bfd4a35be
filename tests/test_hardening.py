"""Issue 12, one test per defect the attack run found: render touches only OUT/<job>; check sees every difference;
hostile files (FIFOs, links, forged MANIFESTs) neither hang nor steer the tool; no traceback, documented exits.
Bad spec values (floats for integers, YAML 1.1 forms, NaN, aliases, nesting, ...) are tests/specs/bad/*.yaml."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from folder_ops import BOTH, ONE, cli, no_hang, snapshot, write_spec
from helpers import make_spec, render_job

from generator.render import render_files
from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()


@pytest.fixture
def rendered(tmp_path):
    """OUT/j rendered from BOTH in job.yaml; returns (the same spec file changed to ONE, out, job folder). A folder
    is re-rendered from the spec file that made it (another one is refused), so the tests change that file."""
    out = tmp_path / "out"
    assert cli("render", write_spec(tmp_path, BOTH), "-o", out).exit_code == 0
    return write_spec(tmp_path, ONE), out, out / "j"


def forge_manifest(job: Path, extra: list[str]) -> None:
    """Add lines to MANIFEST and recompute a sha256 of the lines above as its last line, as someone who read the
    format would."""
    lines = (job / "MANIFEST").read_text().splitlines(True)[:-1]
    body = "".join(lines) + "".join(f"{l}\n" for l in extra)
    (job / "MANIFEST").write_text(f"{body}# sha256 of the lines above: {hashlib.sha256(body.encode()).hexdigest()}\n")


# 1 ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("forged", [False, True], ids=["edited", "forged-self-hash"])
def test_manifest_paths_never_delete_outside_the_job_folder(tmp_path, rendered, forged):
    one, out, job = rendered
    victims = [tmp_path / "victim.txt", tmp_path / "keep" / "deep.txt"]
    victims[1].parent.mkdir()
    for victim in victims:
        victim.write_text("precious\n")
    digest = hashlib.sha256(b"precious\n").hexdigest()
    lines = [f"{digest}  ../../victim.txt", f"{digest}  {victims[1]}", f"{digest}  llama-factory/../../../victim.txt"]
    if forged:
        forge_manifest(job, lines)
    else:
        with open(job / "MANIFEST", "a") as manifest:
            manifest.write("".join(f"{l}\n" for l in lines))
    before = snapshot(tmp_path, job)
    result = cli("render", one, "-o", out)
    # An edited MANIFEST is a hand edit (refused); so is one with a recomputed hash (its seal is keyed).
    assert result.exit_code == 2, result.output
    forced = cli("render", one, "-o", out, "--overwrite")
    assert forced.exit_code == 0
    assert all(v.read_text() == "precious\n" for v in victims)
    assert snapshot(tmp_path, job) == before
    assert cli("check", one, "-o", out).exit_code == 0


# 2 ------------------------------------------------------------------------------------------------------------------
def test_validate_never_imports_from_the_job_folder(tmp_path, rendered):
    _, out, job = rendered
    marker = tmp_path / "ran"
    for folder in (job, job / "llama-factory", job / "mindformers"):
        (folder / "json.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
        (folder / "yaml.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    result = cli("validate", job)
    assert result.exit_code == 1 and "problem  json.py  not listed in MANIFEST" in result.output
    assert not marker.exists()


# 3, 7, 8, 9, 11, 12 and the merge keys of 14: the bad specs in tests/specs/bad/ (test_spec.py runs them); here
# what does not fit in a spec file.
def test_specs_that_are_not_regular_files_or_too_large(tmp_path):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    for path, message in ((fifo, "is not a regular file"), (Path("/dev/zero"), "is not a regular file")):
        result = cli("plan", path)
        assert result.exit_code == 2 and f"Error: {path}: (file): {message}" in result.stderr, result.output
    big = tmp_path / "big.yaml"
    big.write_text("job: t\n" + "".join(f"k{i}: {i}\n" for i in range(200_000)))
    result = cli("plan", big)
    assert result.exit_code == 2 and "(file): is larger than 1,048,576 bytes" in result.stderr


def test_a_spec_of_many_unknown_keys_lists_twenty_and_counts_the_rest(tmp_path):
    spec = tmp_path / "many.yaml"
    spec.write_text("job: t\nmodel: qwen3-8b\nmethod: lora\nseq_len: 4096\nhardware: snt9b\n" +
                    "".join(f"unknown{i:05d}: 1\n" for i in range(3_000)))
    result = cli("plan", spec)
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 21
    assert lines[-1] == f"Error: {spec}: (more): 2980 more problem(s) not listed; fix these first"


def test_integers_are_written_as_integers(tmp_path):
    # The spec loader refuses 4096.0; a value that is an integer reaches every file as one.
    plan, files = render_job(T, model="qwen3-8b", method="full", frameworks=["mindspeed-llm"], seq_len=4096,
                             global_batch_size=128, cluster={"master_addr": "10.0.0.1", "master_port": 29500})
    launch = files["mindspeed-llm/launch.sh"]
    for flag in ("--seq-length 4096", "--max-position-embeddings", "--global-batch-size 128", "MASTER_PORT=29500"):
        assert re.search(rf"^\s*{flag}( [0-9]+)?$", launch, re.M), flag


def test_plan_json_never_holds_a_non_finite_number():
    plan = resolve(make_spec(model="qwen3-8b", method="lora", frameworks=["llama-factory"],
                             data={"total_tokens": 10**9}, tokens_per_card_s=1000.0), T)
    json.loads(render_files(plan)["plan.json"], parse_constant=lambda c: pytest.fail(f"{c} in plan.json"))


# 4 (killed and failed re-renders): tests/test_render_atomic.py


# 5 ------------------------------------------------------------------------------------------------------------------
def test_a_job_folder_that_is_a_link_is_refused_and_is_drift(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "j").symlink_to(elsewhere)
    spec = write_spec(tmp_path, BOTH)
    result = cli("render", spec, "-o", out)
    assert result.exit_code == 2 and "is a symbolic link" in result.stderr
    assert not any(elsewhere.iterdir())
    assert cli("render", spec, "-o", out, "--overwrite").exit_code == 2 and not any(elsewhere.iterdir())
    check = cli("check", spec, "-o", out)
    assert check.exit_code == 1 and "is a symbolic link" in check.output


def test_a_linked_subfolder_is_never_written_through_or_emptied(tmp_path, rendered):
    one, out, job = rendered
    target = tmp_path / "target"
    (job / "llama-factory").rename(target)
    (job / "llama-factory").symlink_to(target)
    check = cli("check", write_spec(tmp_path, BOTH), "-o", out)
    assert check.exit_code == 1 and "not generated: llama-factory" in check.output
    one = write_spec(tmp_path, ONE)
    before = snapshot(tmp_path, job)
    assert cli("render", one, "-o", out).exit_code == 2
    forced = cli("render", one, "-o", out, "--overwrite")
    assert forced.exit_code == 0 and "kept the folder" in forced.stderr
    assert snapshot(tmp_path, job) == before  # the link's target: not one file removed or changed
    assert cli("render", one, "-o", out).exit_code == 0 and snapshot(tmp_path, job) == before


# 6 ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change,line", [
    (lambda job: (job / "mindformers" / "launch_old.sh").write_text("x"), "not generated: mindformers/launch_old.sh"),
    (lambda job: (job / "extra" / "deep").mkdir(parents=True), "not generated: extra/deep/"),
    (lambda job: (job / "mindformers" / "launch.sh").chmod(0o644), "mode differs: mindformers/launch.sh"),
    (lambda job: (job / "PLAN.md").chmod(0o755), "mode differs: PLAN.md"),
    (lambda job: os.mkfifo(job / "pipe"), "not generated: pipe"),
], ids=["stray-file", "stray-folder", "lost-x-bit", "gained-x-bit", "fifo"])
def test_check_reports_strays_and_mode_changes(tmp_path, rendered, change, line):
    _, out, job = rendered
    spec = write_spec(tmp_path, BOTH)
    assert cli("check", spec, "-o", out).exit_code == 0
    change(job)
    result = cli("check", spec, "-o", out)
    assert result.exit_code == 1 and line in result.output.splitlines(), result.output


# 10 -----------------------------------------------------------------------------------------------------------------
def test_commands_txt_lines_survive_msrun_launchers_eval(tmp_path):
    from test_render_mindformers import fake_mindformers

    from generator.render import write

    checkout = tmp_path / "mindformers"
    bindir = fake_mindformers(checkout)
    plan, files = render_job(T, model="qwen3-32b", method="full", frameworks=["mindformers"],
                             cluster={"master_addr": "10.0.0.1"},
                             paths={"mindformers_dir": str(checkout), "model_dir": "/m", "dataset": "/d",
                                    "output_dir": str(tmp_path / "o")})
    out = tmp_path / "my jobs $(touch pwned) 'q'"
    write(files, out, plan.job, overwrite=False)
    job_dir = (out / plan.job / "mindformers").resolve()
    record = tmp_path / "record.jsonl"
    line = next(l for l in files["mindformers/commands.txt"].splitlines() if l and not l.startswith("#"))
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": str(record), "JOB_DIR": str(job_dir)}
    result = subprocess.run(["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text().splitlines()[0])
    assert argv[argv.index("--config") + 1] == f"{job_dir}/train.yaml"
    assert not (tmp_path / "pwned").exists() and not (checkout / "pwned").exists()


# 11 -----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["MANIFEST", "PLAN.md", "llama-factory/train.yaml"])
def test_fifos_in_the_job_folder_never_hang(tmp_path, rendered, where):
    one, out, job = rendered
    (job / where).unlink()
    os.mkfifo(job / where)
    spec = write_spec(tmp_path, BOTH)
    with no_hang():
        assert cli("check", spec, "-o", out).exit_code == 1
        assert cli("validate", job).exit_code in (1, 2)
        assert cli("render", spec, "-o", out).exit_code == 2  # not ours: refused without --overwrite
        assert cli("render", spec, "-o", out, "--overwrite").exit_code == 0
        assert cli("check", spec, "-o", out).exit_code == 0


def test_a_manifest_that_is_a_folder(tmp_path, rendered):
    _, out, job = rendered
    (job / "MANIFEST").unlink()
    (job / "MANIFEST").mkdir()
    spec = write_spec(tmp_path, BOTH)
    assert cli("check", spec, "-o", out).exit_code == 1
    result = cli("validate", job)
    assert result.exit_code == 2 and "no MANIFEST" in result.stderr
    assert cli("render", spec, "-o", out).exit_code == 2
    assert cli("render", spec, "-o", out, "--overwrite").exit_code == 0


# 13 -----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["mindformers", "mindspeed-llm", "llama-factory"])
def test_launch_refuses_an_option_like_master_addr_from_the_environment(tmp_path, framework):
    _, files = render_job(T, model="qwen3-32b", method="lora", frameworks=[framework], cards=32)
    script = tmp_path / "launch.sh"
    script.write_text(files[f"{framework}/launch.sh"])
    for value in ("--nnodes", "-x"):
        env = {**os.environ, "MASTER_ADDR": value}
        result = subprocess.run(["bash", str(script), "1"], env=env, capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert "MASTER_ADDR: must be a host name or IPv4 address" in result.stderr, result.stderr


# 14 -----------------------------------------------------------------------------------------------------------------
def test_job_folders_are_readable_by_the_team(tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "out"
        assert cli("render", write_spec(tmp_path, BOTH), "-o", out).exit_code == 0
    finally:
        os.umask(old)
    for path in [out / "j", *(p for p in (out / "j").rglob("*"))]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        wanted = 0o755 if path.is_dir() or path.suffix == ".sh" else 0o644
        assert mode == wanted, (path, oct(mode))


def test_overwrite_keeps_a_copy_of_what_it_replaces(tmp_path, rendered):
    one, out, job = rendered
    (job / "PLAN.md").write_text("my notes\n")
    (job / "notes.txt").write_text("mine\n")
    forced = cli("render", one, "-o", out, "--overwrite")
    assert forced.exit_code == 0
    backups = sorted(out.glob("j+backup-*"))
    assert len(backups) == 1 and str(backups[0]) in forced.stderr
    assert (backups[0] / "PLAN.md").read_text() == "my notes\n" and (backups[0] / "notes.txt").read_text() == "mine\n"
    assert (backups[0] / "llama-factory" / "train.yaml").is_file()
    assert not (job / "notes.txt").exists() and cli("check", one, "-o", out).exit_code == 0


def test_a_second_render_while_one_holds_the_lock_is_refused(tmp_path, rendered):
    one, out, job = rendered
    before = {p: p.read_bytes() for p in job.rglob("*") if p.is_file()}
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result = cli("render", one, "-o", out)
    finally:
        os.close(fd)
    assert result.exit_code == 2 and "another gen-launch render is writing here" in result.stderr
    assert {p: p.read_bytes() for p in job.rglob("*") if p.is_file()} == before
    assert cli("render", one, "-o", out).exit_code == 0


def test_a_hand_edit_to_manifest_needs_overwrite(tmp_path, rendered):
    one, out, job = rendered
    manifest = job / "MANIFEST"
    manifest.write_text(manifest.read_text().replace("# Files gen-launch wrote", "# Files I wrote"))
    result = cli("render", one, "-o", out)
    assert result.exit_code == 2 and "MANIFEST" in result.stderr
    assert "# Files I wrote" in manifest.read_text()
    assert cli("validate", job).output.startswith(" problem  MANIFEST  edited since gen-launch render wrote it")
