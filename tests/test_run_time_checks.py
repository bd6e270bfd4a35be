"""The run-time checks every launch.sh carries (templates/_run_time_data.sh.j2, _checkpoint_resume.sh.j2), run in
bash one by one: what each accepts and refuses, with exit 2 and the message. The mutation run of issue 42
(bench/mutants.py) changed these unseen by the end-to-end launches of test_runtime_inputs.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from generator.templating import environment

CHECKS = environment().get_template("_run_time_data.sh.j2").render(reads_json=True)


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"{CHECKS}\n{script}"], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value,count", [("0", True), ("7", True), ("42", True), ("9" * 18, True), ("", False),
                                         ("9" * 19, False), ("007", False), ("00", False), ("-1", False),
                                         ("+1", False), ("1 ", False), ("1e3", False), ("$(id)", False),
                                         ("a[$(id)]", False), ("12x", False)])
def test_a_count_is_plain_digits_of_bashs_range(tmp_path, value, count):
    done = bash(f"is_count {value!r}", tmp_path)
    assert done.returncode == (0 if count else 1), done.stderr


def test_refuse_names_where_and_what_shows_the_value_quoted_and_exits_2(tmp_path):
    done = bash("refuse 'ckpt/x.json' 'must be digits' $'1\\n2'; echo still running", tmp_path)
    assert done.returncode == 2
    assert done.stderr == "ckpt/x.json: must be digits, got $'1\\n2'\n"
    assert done.stdout == ""


def test_exists_as_takes_its_kind_is_false_for_nothing_and_refuses_the_rest(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "empty").touch()
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for kind, path in (("file", "f"), ("file", "empty"), ("folder", "d")):
        assert bash(f"exists_as {kind} {path}", tmp_path).returncode == 0, (kind, path)
    assert bash("exists_as file missing; echo $?", tmp_path).stdout == "1\n"
    for kind, path, found in (("file", "d", "directory"), ("folder", "f", "regular file"),
                              ("file", "link", "symbolic link"), ("folder", "dangling", "symbolic link")):
        done = bash(f"exists_as {kind} {path}; echo still running", tmp_path)
        assert (done.returncode, done.stdout) == (2, ""), (kind, path)
        assert done.stderr == f"{path}: must be a {kind}, not a link or anything else; found a {found}\n"


def test_json_fields_read_each_key_as_one_json_line(tmp_path):
    (tmp_path / "s.json").write_text('{"step": 12, "name": "ckpt-12", "deep": {"a": 1}}')
    done = bash('json_fields s.json step name missing deep; printf "%s|" "${FIELDS[@]}"', tmp_path)
    assert done.stdout == '12|"ckpt-12"||{"a": 1}|'
    (tmp_path / "bad.json").write_text("{not json")
    refused = bash('json_fields bad.json step; echo still running', tmp_path)
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert "bad.json" in refused.stderr and "must be a JSON object of at most 64 MiB" in refused.stderr


def test_a_launch_that_reads_json_stops_without_python3(tmp_path):
    done = bash("PATH=/nonexistent; need_python3; echo still running", tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("python3 is not on PATH: this launch.sh reads the run's files")
    assert bash("need_python3; echo on", tmp_path).stdout == "on\n"


@pytest.mark.parametrize("raw,ok", [("12", True), ('"12"', False), ("", False), ("1.5", False), ("-3", False)])
def test_json_count_takes_digits_only(tmp_path, raw, ok):
    done = bash(f"json_count s.json step {raw!r}; echo $COUNT", tmp_path)
    if ok:
        assert (done.returncode, done.stdout) == (0, f"{raw}\n")
    else:
        assert done.returncode == 2
        assert done.stderr.startswith("s.json: step must be a whole number (digits), got ")


@pytest.mark.parametrize("raw,name", [('"ckpt-12"', "ckpt-12"), ('"model_0.pt"', "model_0.pt"), ('"a/b"', None),
                                      ('"../x"', None), ('".hidden"', None), ("12", None), ('"x y"', None),
                                      ('""', None), ('"-rf"', None)])
def test_json_name_takes_a_plain_file_name_only(tmp_path, raw, name):
    done = bash(f"json_name s.json latest {raw!r}; echo \"$NAME\"", tmp_path)
    if name is not None:
        assert (done.returncode, done.stdout) == (0, f"{name}\n")
    else:
        assert done.returncode == 2
        assert done.stderr.startswith("s.json: latest must be a file name (letters, digits, '.', '_' or '-'), got ")


def resume_script(save: Path, load: Path, resume: bool) -> str:
    body = environment().get_template("_checkpoint_resume.sh.j2").render(
        load_dir=str(load), save_dir=str(save), iters=100, resume=resume, convert_first="convert_ckpt.sh hf2mcore")
    return f"START_ARGS=(--start)\nRESUME_ARGS=(--resume)\n{body}\nprintf '%s\\n' \"${{CKPT_ARGS[@]}}\""


def checkpoint(tmp_path: Path, done: str | None, folders: tuple[int, ...] = ()) -> tuple[Path, Path]:
    load, save = tmp_path / "load", tmp_path / "save"
    load.mkdir(parents=True)
    (load / "latest_checkpointed_iteration.txt").write_text("release")
    if done is not None:
        save.mkdir()
        (save / "latest_checkpointed_iteration.txt").write_text(done)
    for n in folders:
        (save / f"iter_{n:07d}").mkdir()
    return save, load


def test_a_first_run_starts_and_a_relaunch_resumes_from_its_iteration_folder(tmp_path):
    save, load = checkpoint(tmp_path / "first", None)
    assert bash(resume_script(save, load, True), tmp_path).stdout == "--start\n"
    save, load = checkpoint(tmp_path / "again", "40", (40,))
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (0, "--resume\n")
    assert done.stderr == f"resuming from iteration 40 in {save}\n"


def test_without_converted_weights_the_launch_stops(tmp_path):
    save, load = checkpoint(tmp_path, None)
    (load / "latest_checkpointed_iteration.txt").unlink()
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"no converted weights in {load}: run bash convert_ckpt.sh hf2mcore first (see PLAN.md)\n"


@pytest.mark.parametrize("mark", ["100", "101"])
def test_a_finished_run_is_never_trained_over(tmp_path, mark):
    save, load = checkpoint(tmp_path, mark, (int(mark),))
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"{save} holds the finished run (iteration {mark} of 100); move it away to train again\n"


def test_the_last_iteration_before_the_end_resumes(tmp_path):
    save, load = checkpoint(tmp_path, "99", (99,))
    assert bash(resume_script(save, load, True), tmp_path).stdout == "--resume\n"


@pytest.mark.parametrize("mark", ["", "007", "1 2", "$(id)", "12\n13"])
def test_an_iteration_file_that_is_not_digits_is_refused(tmp_path, mark):
    save, load = checkpoint(tmp_path, mark)
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert "latest_checkpointed_iteration.txt: must hold the iteration of this job's last checkpoint (digits)" \
        in done.stderr


def test_an_iteration_without_its_folder_or_with_a_file_there_is_refused(tmp_path):
    save, load = checkpoint(tmp_path / "none", "40")
    done = bash(resume_script(save, load, True), tmp_path)
    assert done.returncode == 2
    assert f"names an iteration with no checkpoint folder {save}/iter_0000040, got 40" in done.stderr
    save, load = checkpoint(tmp_path / "file", "40")
    (save / "iter_0000040").write_text("not a folder")
    done = bash(resume_script(save, load, True), tmp_path)
    assert done.returncode == 2
    assert "must be a folder, not a link or anything else; found a regular file" in done.stderr


def test_a_save_folder_or_iteration_file_that_is_a_link_is_refused(tmp_path):
    save, load = checkpoint(tmp_path / "a", "40", (40,))
    (tmp_path / "elsewhere").symlink_to(save)
    done = bash(resume_script(tmp_path / "elsewhere", load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert "must be a folder, not a link or anything else; found a symbolic link" in done.stderr
    save, load = checkpoint(tmp_path / "b", None)
    save.mkdir()
    (tmp_path / "mark.txt").write_text("40")
    (save / "latest_checkpointed_iteration.txt").symlink_to(tmp_path / "mark.txt")
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert "must be a file, not a link or anything else; found a symbolic link" in done.stderr


def test_without_resume_a_save_folder_with_checkpoints_stops_the_launch(tmp_path):
    save, load = checkpoint(tmp_path, "40", (40,))
    done = bash(resume_script(save, load, False), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"{save} holds checkpoints (iteration 40) and train.resume is false; move them away to "
                           f"start again\n")


@pytest.mark.parametrize("size,shown", [(64, "0" * 64), (65, "65\\ bytes")])
def test_an_iteration_file_over_64_bytes_is_refused_by_its_size_before_it_is_read(tmp_path, size, shown):
    """_checkpoint_resume.sh.j2 l. 18: up to 64 bytes are read (and shown) as the count, a larger file only by its
    size, so a huge file is never taken into a shell variable."""
    save, load = checkpoint(tmp_path, "0" * size)
    done = bash(resume_script(save, load, True), tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"{save}/latest_checkpointed_iteration.txt: must hold the iteration of this job's last "
                           f"checkpoint (digits), got {shown}\n")
