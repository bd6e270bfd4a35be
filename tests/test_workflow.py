"""Issue 22, the workflow (items 12-14): render, commit, `check` in CI. The options a folder was rendered with (--set
in order, --force) and the spec file that made it are recorded in plan.json and PLAN.md; check and a re-render apply
them; a hand-edited record is reported, never trusted; `render --dry-run` refuses exactly as render does; a folder
rendered from another spec file is refused unless --overwrite, which is a folder decision apart from --force."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from folder_ops import folder_files, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.jobdir import SEAL, _seal

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "qwen3-32b-full-snt9b-16c.yaml"
JOB = "qwen3-32b-full-snt9b-16c"
JOB_SMALL = "j"
SETS = ["train.seed=7", "cards=32", "train.learning_rate=2.0e-5"]
SMALL = {"job": "j", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b",
         "frameworks": ["mindformers", "llama-factory"]}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def with_sets(*args, sets=SETS):
    return [*args, *(w for s in sets for w in ("--set", s))]


def repo(root: Path, spec: dict | None = None) -> Path:
    """An experiment repository: jobs/a.yaml (the example, or `spec`); renders go to launch/."""
    (root / "jobs").mkdir(parents=True)
    text = EXAMPLE.read_text() if spec is None else yaml.safe_dump(spec)
    (root / "jobs" / "a.yaml").write_text(text)
    return root / "jobs" / "a.yaml"


def git_like_copy(source: Path, target: Path) -> None:
    """What a commit and a checkout elsewhere keep: the files' bytes and the executable bit, nothing else."""
    for path in sorted(source.rglob("*")):
        copy = target / path.relative_to(source)
        if path.is_dir():
            copy.mkdir(parents=True)
        else:
            copy.write_bytes(path.read_bytes())
            copy.chmod(0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644)


def cli_process(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "generator", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def forge(job: Path, plan: object) -> None:
    """Write plan.json (`plan` as JSON, or these bytes) and a MANIFEST that lists its hash and seals itself, as
    someone who read the code would (the seal's key is in it): the record is then checked for what it says."""
    data = plan if isinstance(plan, bytes) else json.dumps(plan, indent=2).encode()
    (job / "plan.json").write_bytes(data)
    lines = [l for l in (job / "MANIFEST").read_text().splitlines(True)
             if not l.startswith(SEAL) and not l.endswith("  plan.json\n")]
    body = "".join(lines) + f"{hashlib.sha256(data).hexdigest()}  plan.json\n"
    (job / "MANIFEST").write_text(f"{body}{SEAL}{_seal(body)}\n")


# 12 -----------------------------------------------------------------------------------------------------------------
def test_a_committed_folder_made_with_set_checks_clean_without_it(tmp_path):
    spec = repo(tmp_path / "mine")
    made = cli_process(*with_sets("render", "jobs/a.yaml", "-o", "launch"), cwd=tmp_path / "mine")
    assert made.returncode == 0, made.stderr
    # CI: another checkout path, another working directory, no --set
    git_like_copy(tmp_path / "mine", tmp_path / "ci" / "checkout")
    ci = cli_process("check", "../jobs/a.yaml", "-o", ".", cwd=tmp_path / "ci" / "checkout" / "launch")
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert "up to date" in ci.stdout
    assert "Note: applying --set=train.seed=7 --set=cards=32 --set=train.learning_rate=2.0e-5" in ci.stderr
    job = tmp_path / "mine" / "launch" / JOB
    assert json.loads((job / "plan.json").read_text())["made_from"] == \
        {"spec_file": "jobs/a.yaml", "overrides": SETS, "force": False}
    plan_md = (job / "PLAN.md").read_text()
    assert "Rendered from `jobs/a.yaml`" in plan_md
    assert [plan_md.index(f"{i}. `{s}`") for i, s in enumerate(SETS, 1)] == \
        sorted(plan_md.index(f"{i}. `{s}`") for i, s in enumerate(SETS, 1))
    # until the spec changes: then drift, and the hint renders with the recorded overrides, in order
    spec = tmp_path / "ci" / "checkout" / "jobs" / "a.yaml"
    spec.write_text(spec.read_text().replace("epochs: 2", "epochs: 3"))
    stale = cli_process("check", spec, "-o", tmp_path / "ci" / "checkout" / "launch", cwd=tmp_path)
    assert stale.returncode == 1 and "differs: plan.json" in stale.stdout
    hint = shlex.split(stale.stderr.split("run ", 1)[1])
    assert hint[:3] == ["gen-launch", "render", str(spec)] and hint[3:6] == [f"--set={s}" for s in SETS], hint
    assert cli_process(*hint[1:], cwd=tmp_path).returncode == 0
    again = cli_process("check", spec, "-o", tmp_path / "ci" / "checkout" / "launch", cwd=tmp_path)
    assert again.returncode == 0, again.stdout
    assert json.loads((tmp_path / "ci" / "checkout" / "launch" / JOB / "plan.json").read_text())["train"]["seed"] == 7


def test_a_rerender_applies_the_recorded_options_and_says_so(tmp_path):
    spec = repo(tmp_path)
    out = tmp_path / "launch"
    assert run(*with_sets("render", spec, "-o", out)).exit_code == 0
    again = run("render", spec, "-o", out)
    assert again.exit_code == 0 and "Note: applying --set=train.seed=7" in again.stderr
    assert {line.split()[0] for line in again.stdout.splitlines()} == {"identical"}
    # a --set adds to the recorded ones, its key's last value winning (recorded in turn); --no-recorded drops them
    added = run("render", spec, "-o", out, "--set", "train.seed=8")
    assert added.exit_code == 0 and "Note: applying --set=train.seed=7" in added.stderr
    assert json.loads((out / JOB / "plan.json").read_text())["made_from"]["overrides"] == [*SETS[1:], "train.seed=8"]
    dropped = run("render", spec, "-o", out, "--no-recorded")
    assert dropped.exit_code == 0 and "Note:" not in dropped.stderr
    assert json.loads((out / JOB / "plan.json").read_text())["made_from"]["overrides"] == []
    assert "as written (no `--set`)" in (out / JOB / "PLAN.md").read_text()
    clean = run("check", spec, "-o", out)
    assert clean.exit_code == 0 and "Note:" not in clean.stderr
    (out / JOB / "plan.json").unlink()  # the record is gone: restored as written, and said so
    lost = run("render", spec, "-o", out)
    assert lost.exit_code == 0 and "plan.json is missing" in lost.stderr


def test_check_with_no_recorded_compares_the_spec_alone_and_its_hint_says_so(tmp_path):
    spec = repo(tmp_path)
    out = tmp_path / "launch"
    assert run(*with_sets("render", spec, "-o", out)).exit_code == 0
    bare = run("check", spec, "-o", out, "--no-recorded")
    assert bare.exit_code == 1 and "--no-recorded" in shlex.split(bare.stderr.split("run ", 1)[1])


def test_a_recorded_force_is_applied_by_check(tmp_path):
    spec = repo(tmp_path, {**SMALL, "model": "qwen3-32b", "method": "full", "frameworks": ["mindspeed-llm"],
                           "cards": 8})
    out = tmp_path / "launch"
    assert run("render", spec, "-o", out).exit_code == 2  # below the table's minimum
    assert run("render", spec, "-o", out, "--overwrite").exit_code == 2  # a folder option, not a plan one
    assert run("render", spec, "-o", out, "--force").exit_code == 0
    assert json.loads((out / "j" / "plan.json").read_text())["made_from"]["force"] is True
    checked = run("check", spec, "-o", out)
    assert checked.exit_code == 0 and "Note: applying --force" in checked.stderr


@pytest.mark.parametrize("comment", ["\x1b]52;c;eA==\x07", "\u3164", "\u2800"], ids=["escape", "hangul-filler",
                                                                                 "braille-blank"])
def test_an_override_that_is_not_printable_is_refused(tmp_path, comment):
    # The rule show_name applies (errors.plain_text): a blank-drawn character would hide in PLAN.md as well.
    spec = repo(tmp_path)
    result = run("render", spec, "-o", tmp_path / "launch", "--set", f"train.seed=7 # {comment}")
    assert result.exit_code == 2 and "(--set): " in result.stderr and comment not in result.stderr
    assert not (tmp_path / "launch").exists()


@pytest.mark.parametrize("tamper,words", [
    (lambda job: (job / "plan.json").write_text((job / "plan.json").read_text().replace('"cards=32"', '"cards=8"')),
     "plan.json was edited by hand"),
    (lambda job: (job / "MANIFEST").write_text((job / "MANIFEST").read_text() + "# mine\n"),
     "MANIFEST was edited by hand"),
    (lambda job: ((job / "plan.json").unlink(), (job / "plan.json").symlink_to(job / "PLAN.md")),
     "is not a regular file"),
    (lambda job: forge(job, {"made_from": {"overrides": [32]}}), "made_from.overrides: expected a list"),
    (lambda job: forge(job, {"made_from": {"spec_file": "jobs/a.yaml", "overrides": ["cards=32\x1b[2J"]}}),
     "non-printing character"),
    (lambda job: forge(job, b"[" * 100_000 + b"]" * 100_000), "is not JSON text"),
    (lambda job: forge(job, ["made_from"]), "expected a JSON object"),
    (lambda job: forge(job, b'{"made_from": {"overrides": ["\xff"]}}'), "is not JSON text"),
], ids=["edited", "manifest-edited", "link", "forged-type", "forged-escape", "forged-deep", "forged-list",
        "forged-bytes"])
def test_a_record_that_cannot_be_trusted_is_reported_never_applied(tmp_path, tamper, words):
    spec = repo(tmp_path)
    out = tmp_path / "launch"
    assert run(*with_sets("render", spec, "-o", out)).exit_code == 0
    tamper(out / JOB)
    before = folder_files(out / JOB)
    checked = run("check", spec, "-o", out)  # drift, with the reason the recorded options were left out
    assert checked.exit_code == 1 and "Note: " in checked.stderr and words in checked.stderr, checked.stderr
    assert "\x1b" not in checked.output and "Traceback" not in checked.output
    refused = run("render", spec, "-o", out)
    assert refused.exit_code == 2 and words in refused.stderr and "give them with --set" in refused.stderr
    assert folder_files(out / JOB) == before
    replaced = run("render", spec, "-o", out, "--overwrite")  # replaces the folder, without the untrusted options
    assert replaced.exit_code == 0 and words in replaced.stderr
    assert json.loads((out / JOB / "plan.json").read_text())["made_from"]["overrides"] == []


def test_a_forged_record_is_validated_like_the_command_line(tmp_path):
    spec = repo(tmp_path)
    out = tmp_path / "launch"
    assert run("render", spec, "-o", out).exit_code == 0
    forge(out / JOB, {"made_from": {"spec_file": "jobs/a.yaml", "overrides": ["train.lr=1"], "force": False}})
    result = run("render", spec, "-o", out)
    assert result.exit_code == 2 and "Note: applying --set=train.lr=1" in result.stderr
    assert f"Error: {spec}: train.lr: unknown key" in result.stderr


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                       max_size=4), max_leaves=12)
made_from = st.fixed_dictionaries({}, optional={"spec_file": st.just("jobs/a.yaml") | json_values,
                                                "overrides": st.lists(st.sampled_from(SETS) | st.text(max_size=30),
                                                                      max_size=4) | json_values,
                                                "force": st.booleans() | json_values})


@pytest.fixture(scope="module")
def small_repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small")
    assert run("render", repo(root, SMALL), "-o", root / "launch").exit_code == 0
    return root


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=st.fixed_dictionaries({"made_from": made_from}) | json_values)
def test_any_forged_record_ends_in_a_plan_or_a_clear_refusal(tmp_path_factory, small_repo, record):
    root = tmp_path_factory.mktemp("forged")
    shutil.copytree(small_repo, root, dirs_exist_ok=True)
    spec, out = root / "jobs" / "a.yaml", root / "launch"
    forge(out / "j", record)
    for command in ("check", "render"):
        result = run(command, spec, "-o", out)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output
        assert all(ch == "\n" or ch.isprintable() for ch in result.output)
        if result.exit_code == 2:
            assert result.stderr.startswith(("Error: ", "Note: "))


# 13 -----------------------------------------------------------------------------------------------------------------
def _hand_edit(tmp, spec, job):
    (job / "PLAN.md").write_text("my notes\n")


def _stray(tmp, spec, job):
    (job / "mindformers" / "notes.txt").write_text("mine\n")


def _link_inside(tmp, spec, job):
    (job / "llama-factory" / "train.yaml").unlink()
    (job / "llama-factory" / "train.yaml").symlink_to(tmp / "elsewhere")


def _job_folder_link(tmp, spec, job):
    shutil.rmtree(job)
    job.symlink_to(tmp / "elsewhere")


def _other_spec(tmp, spec, job):
    other = spec.with_name("b.yaml")
    other.write_text(spec.read_text())
    return other


def _edited_record(tmp, spec, job):
    plan = job / "plan.json"
    plan.write_text(plan.read_text().replace('"force": false', '"force": true'))


def _clean(tmp, spec, job):
    pass


@pytest.mark.parametrize("setup", [_hand_edit, _stray, _link_inside, _job_folder_link, _other_spec, _edited_record,
                                   _clean])
def test_dry_run_exits_and_says_what_render_would(tmp_path, setup):
    spec = repo(tmp_path, SMALL)
    out = tmp_path / "launch"
    (tmp_path / "elsewhere").mkdir()
    assert run("render", spec, "-o", out).exit_code == 0
    spec.write_text(yaml.safe_dump({**SMALL, "frameworks": ["mindformers"]}))
    spec = setup(tmp_path, spec, out / "j") or spec
    before = snapshot(tmp_path, tmp_path / "none")
    dry = run("render", spec, "-o", out, "--dry-run")
    assert snapshot(tmp_path, tmp_path / "none") == before  # wrote nothing
    real = run("render", spec, "-o", out)
    assert (dry.exit_code, dry.stderr.startswith("Error:")) == (real.exit_code, real.stderr.startswith("Error:"))
    assert dry.exit_code == (0 if setup is _clean else 2)
    assert dry.stderr == real.stderr
    if real.exit_code == 0:
        assert dry.stdout == real.stdout and "remove" in real.stdout


def test_dry_run_is_refused_while_a_render_holds_the_lock(tmp_path):
    spec = repo(tmp_path, SMALL)
    out = tmp_path / "launch"
    assert run("render", spec, "-o", out).exit_code == 0
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        dry, real = run("render", spec, "-o", out, "--dry-run"), run("render", spec, "-o", out)
    finally:
        os.close(fd)
    assert dry.exit_code == real.exit_code == 2 and dry.stderr == real.stderr
    assert "another gen-launch render is writing here" in dry.stderr


# 14 -----------------------------------------------------------------------------------------------------------------
def _out_under_a_file(tmp: Path) -> Path:
    (tmp / "outfile").write_text("")
    return tmp / "outfile" / "sub"


def _read_only_out(tmp: Path) -> Path:
    (tmp / "ro").mkdir(mode=0o555)
    return tmp / "ro"


@pytest.mark.parametrize("where", [_out_under_a_file, pytest.param(_read_only_out, marks=pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into a read-only folder"))])
def test_dry_run_refuses_an_out_folder_render_cannot_write(tmp_path, where):
    spec = repo(tmp_path, SMALL)
    out = where(tmp_path)
    dry, real = run("render", spec, "-o", out, "--dry-run"), run("render", spec, "-o", out)
    assert dry.exit_code == real.exit_code == 2 and dry.stderr == real.stderr and dry.stdout == ""
    assert "cannot write" in dry.stderr


def test_every_command_escapes_the_paths_it_echoes(tmp_path):
    spec = repo(tmp_path, SMALL)
    out = tmp_path / "la\x1b[2Junch"
    said = [run("render", spec, "-o", out), run("check", spec, "-o", out)]
    (out / "j" / "stray").write_text("")
    (out / "k").mkdir()
    (out / "k" / "j").write_text("")
    said += [run("check", spec, "-o", out), run("validate", out / "j" / "mindformers"),
             run("render", spec, "-o", out / "k")]
    (out / "j" / "plan.json").write_text("{}")
    said += [run("check", spec, "-o", out), run("render", spec, "-o", out)]
    assert [r.exit_code for r in said] == [0, 0, 1, 2, 2, 1, 2]
    for result in said:
        assert "\x1b" not in result.output and "la\\x1b[2Junch" in result.output, result.output


def test_a_checkout_reached_through_a_link_is_the_same_spec(tmp_path):
    spec = repo(tmp_path / "repo", SMALL)
    (tmp_path / "repolink").symlink_to(tmp_path / "repo")
    assert cli_process(*with_sets("render", "jobs/a.yaml", "-o", "launch", sets=["train.seed=7"]),
                       cwd=tmp_path / "repolink").returncode == 0
    check = run("check", tmp_path / "repolink" / "jobs" / "a.yaml", "-o", tmp_path / "repo" / "launch")
    assert check.exit_code == 0, check.output
    assert run("render", spec, "-o", tmp_path / "repolink" / "launch").exit_code == 0
    assert json.loads((tmp_path / "repo" / "launch" / "j" / "plan.json").read_text())["made_from"]["spec_file"] \
        == "jobs/a.yaml"


@pytest.mark.parametrize("command", ["render", "check"])
def test_a_set_of_the_job_name_is_refused(tmp_path, command):
    spec = repo(tmp_path, SMALL)
    result = run(*with_sets(command, spec, "-o", tmp_path / "launch", sets=["job=variant-b"]))
    assert result.exit_code == 2 and "give the job name in the spec" in result.stderr
    assert not (tmp_path / "launch").exists()


def test_a_new_set_adds_to_the_recorded_ones_and_a_placeholder_step_count_warns(tmp_path):
    # Issue 37 item 1: a data size, a budget and a rate recorded, then one new --set: the job kept its 371-odd
    # steps only if the recorded ones still apply; without them it trained a placeholder and --strict passed.
    spec = repo(tmp_path, {**SMALL, "frameworks": ["mindspeed-llm"]})
    out = tmp_path / "launch"
    sets = ["data.samples=20000", "data.tokens_per_sample=1500", "tokens_per_card_s=900", "cards=8"]
    assert run(*with_sets("render", spec, "-o", out, "--force", sets=sets)).exit_code == 0
    steps = json.loads((out / JOB_SMALL / "plan.json").read_text())["train"]["steps"]
    assert isinstance(steps, int) and steps > 100
    again = run(*with_sets("render", spec, "-o", out, "--strict", sets=["train.learning_rate=2e-6", "cards=8"]))
    assert again.exit_code == 0, again.output
    record = json.loads((out / JOB_SMALL / "plan.json").read_text())
    assert record["made_from"] == {**record["made_from"], "force": True,
                                   "overrides": [*sets[:3], "train.learning_rate=2e-6", "cards=8"]}
    assert record["train"]["steps"] == steps and record["train"]["learning_rate"] == 2e-6
    assert run("check", spec, "-o", out).exit_code == 0
    # --no-recorded starts from none: the step count is then a placeholder, a warning that --strict refuses
    bare = run("render", spec, "-o", out, "--no-recorded", "--strict")
    assert bare.exit_code == 3, bare.output
    assert "train.steps: the spec gives no data size and no train.steps" in bare.stderr
    planned = run("plan", spec)
    assert "written as placeholders to edit before launch: " in planned.output
    assert "train.steps" in planned.output.split("written as placeholders to edit before launch: ")[1].splitlines()[0]


@pytest.mark.parametrize("setup", [_edited_record, _hand_edit, _stray, _clean])
def test_the_hint_of_check_is_a_render_that_works(tmp_path, setup):
    spec = repo(tmp_path, SMALL)
    out = tmp_path / "launch"
    assert run(*with_sets("render", spec, "-o", out, sets=["train.seed=7"])).exit_code == 0
    spec.write_text(yaml.safe_dump({**SMALL, "frameworks": ["mindformers"]}))
    setup(tmp_path, spec, out / "j")
    stale = run("check", spec, "-o", out)
    assert stale.exit_code == 1
    hint = shlex.split(stale.stderr.split("is out of date: run ", 1)[1])
    assert hint[:2] == ["gen-launch", "render"] and ("--overwrite" in hint) == (setup is not _clean), hint
    rendered = run(*hint[1:])
    assert rendered.exit_code == 0, rendered.output
    assert run("check", spec, "-o", out).exit_code == 0


def test_two_specs_with_one_job_name_do_not_overwrite_each_other(tmp_path, monkeypatch):
    spec = repo(tmp_path, SMALL)
    out = tmp_path / "launch"
    other = tmp_path / "jobs" / "b.yaml"
    other.write_text(yaml.safe_dump({**SMALL, "frameworks": ["mindformers"]}))
    assert run("render", spec, "-o", out).exit_code == 0
    before = folder_files(out / "j")
    for extra in ([], ["--force"]):  # --force is a plan decision: it does not lift a folder refusal
        refused = run("render", other, "-o", out, *extra)
        assert refused.exit_code == 2, refused.output
        assert "rendered from another spec file, 'jobs/a.yaml', not 'jobs/b.yaml'" in refused.stderr
        assert "--overwrite" in refused.stderr and folder_files(out / "j") == before
    stale = run("check", other, "-o", out)
    assert stale.exit_code == 1 and stale.stdout.startswith("rendered from another spec file: jobs/a.yaml\n")
    # the same spec from another working directory is the same spec: the key is its path from OUT's parent
    monkeypatch.chdir(tmp_path / "jobs")
    assert run("render", "a.yaml", "-o", "../launch").exit_code == 0
    replaced = run("render", other, "-o", out, "--overwrite")
    assert replaced.exit_code == 0 and "kept the folder as it was" in replaced.stderr
    assert folder_files(next(out.glob("j+backup-*"))) == before
    assert json.loads((out / "j" / "plan.json").read_text())["made_from"]["spec_file"] == "jobs/b.yaml"
    assert run("check", other, "-o", out).exit_code == 0
    assert run("render", spec, "-o", out).exit_code == 2  # now the other way round


def test_help_and_readme_name_the_two_options(tmp_path):
    text = run("render", "--help").output
    assert "--overwrite" in text and "--force" in text and "--no-recorded" in text
    readme = "".join(p.read_text() for p in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))))
    assert "--overwrite" in readme and "--no-recorded" in readme and "made_from" in readme


def test_help_and_readme_say_overwrite_moves_the_old_folder_aside_whole():
    text = " ".join(run("render", "--help").output.split())
    assert "a copy as" not in text and "keeping a copy" not in text
    assert "moves the old folder aside whole (not a copy) as OUT/<job>+backup-<time>" in text
    assert "moved aside whole (not copied) as OUT/<job>+backup-<time>" in text
    readme = " ".join((REPO / "docs" / "safety.md").read_text().split())
    assert "keeps the old folder whole as `OUT/<job>+backup-<UTC time>`: the old folder itself, moved aside" in readme
