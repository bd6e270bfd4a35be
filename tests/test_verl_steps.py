"""verl's data-preparation and merge steps (generator/frameworks/verl/steps.py): the generated prepare_data.py run
for real on alpaca, ShareGPT, OpenAI and vision-language (images) data, its parquet read back by verl 0.7.0's own
RLHFDataset; merge.sh run with a recording python3."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import check_script, make_spec, run_recording

from generator.checks import child_answer
from generator.frameworks.verl.checks import stand_in_model, verl_python
from generator.frameworks.verl.planning import answer_settings
from generator.frameworks.verl.settings import Setting, VerlSettings
from generator.frameworks.verl.steps import step_files
from generator.plan import PathValue
from generator.resolve import resolve
from generator.tables import load_tables
from generator.templating import environment

needs_verl = pytest.mark.skipif(verl_python() is None and os.environ.get("CI", "").lower() != "true",
                                reason="verl's environment is not installed: run `bash scripts/install.sh verl` (or "
                                       "set GEN_LAUNCH_VERL_PYTHON)")

# A 1x1 PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
                       "AAAABJRU5ErkJggg==")


def verl_plan(tmp_path: Path, fmt: str, dataset: Path, image_column: str | None = None,
              placeholders: dict[str, str] | None = None, reward: str = "gsm8k", answer_column: str | None = None,
              rows: int | None = None):
    """A plan whose verl settings name `dataset` in `fmt` and an output folder under tmp_path; `placeholders`: paths
    left at their placeholder."""
    plan = resolve(make_spec(), load_tables())
    out = tmp_path / "out"
    source = {"gsm8k": "openai/gsm8k", "math": "lighteval/MATH", "math_dapo": "math_dapo",
              "geo3k": "hiyouga/geometry3k"}[reward]
    prepare = (Setting("data_source", source, "test"), Setting("ability", "math", "test"),
               Setting("format", fmt, "test"), Setting("columns", (), "test"),
               Setting("image_column", image_column, "test"), Setting("val_share", 0.25, "test"),
               Setting("input", str(dataset), "test"), Setting("output", str(out / "verl" / "data"), "test"),
               *answer_settings(reward, answer_column), Setting("rows", rows, "test"))
    merge = (Setting("backend", "fsdp", "test"),
             Setting("checkpoints", f"{out}/verl/checkpoints", "test"),
             Setting("target_dir", f"{out}/verl/merged", "test"))
    settings = VerlSettings(entry="verl.trainer.main_ppo", config="ppo", upstream="test", overrides=(),
                            environment=(), prepare=prepare, merge=merge, nnodes=1, gpus_per_node=8)
    fp = replace(next(iter(plan.frameworks.values())), settings=settings)
    values = {"dataset": PathValue(str(dataset), False), "output_dir": PathValue(str(out), False)}
    values.update({key: PathValue(value, True) for key, value in (placeholders or {}).items()})
    return replace(plan, frameworks={"verl": fp}, paths={**plan.paths, **values})


ALPACA = [{"instruction": "What is 2+3?", "input": "", "output": "2+3=5\n#### 5"},
          {"instruction": "Add", "input": "4 and 4", "output": "4+4=8\n#### 8", "system": "Be brief.",
           "history": [["Hi", "Hello"]]},
          {"instruction": "What is 1+1?", "input": "", "output": "#### 2"},
          {"instruction": "What is 9-3?", "input": "", "output": "#### 6"}]
SHAREGPT = [{"conversations": [{"from": "human", "value": f"q{i} 'quoted' \\ ${{x}}"},
                               {"from": "gpt", "value": f"a{i} #### {i}"}]} for i in range(4)]
OPENAI = [{"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": f"q{i}"},
                        {"role": "assistant", "content": f"a{i} #### {i}"}]} for i in range(3)]
VL = [{"messages": [{"role": "user", "content": f"<image>What is shown {i}?"},
                    {"role": "assistant", "content": f"dot{i} #### {i}"}], "images": ["img/dot.png"]} for i in range(4)]
GSM8K = " Let's think step by step and output the final answer after \"####\"."

# Runs in verl's interpreter: each parquet file read back with pyarrow, and the text ones through verl 0.7.0's
# RLHFDataset (verl/utils/dataset/rl_dataset.py), as its trainer builds it, on a three-word tokenizer.
READ_BACK = """
import json, sys
import pyarrow.parquet as pq
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.utils.dataset.rl_dataset import RLHFDataset
files, model, cache = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
out = {}
tokenizer = AutoTokenizer.from_pretrained(model)
for name, (path, load) in files.items():
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        for image in row.get("images") or []:
            image["bytes"] = len(image["bytes"])
    item = {"rows": rows, "columns": pq.read_schema(path).names}
    if load:
        config = OmegaConf.create({"cache_dir": cache, "filter_overlong_prompts": False})
        dataset = RLHFDataset(data_files=[path], tokenizer=tokenizer, config=config, processor=None)
        first = dataset[0]
        item["dataset"] = {"len": len(dataset), "raw_prompt": first["raw_prompt"], "index": first["index"],
                           "data_source": first["data_source"], "reward_model": first["reward_model"]}
    out[name] = item
print(json.dumps(out))
"""


def prepare(tmp_path: Path, name: str, fmt: str, rows: list, image_column: str | None = None) -> tuple[Path, str]:
    folder = tmp_path / name
    folder.mkdir()
    data = folder / "data.json"
    data.write_text(json.dumps(rows), encoding="utf-8")
    if image_column:
        (folder / "img").mkdir()
        (folder / "img" / "dot.png").write_bytes(PNG)
    files = step_files(verl_plan(folder, fmt, data, image_column), environment())
    script = folder / "prepare_data.py"
    script.write_text(files["verl/prepare_data.py"], encoding="utf-8")
    return folder, files["verl/prepare_data.py"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> dict:
    """Each format prepared by its generated script, then read back in one verl child."""
    python = verl_python()
    if python is None:
        pytest.fail("verl's environment is missing: bash scripts/install.sh verl")
    tmp = tmp_path_factory.mktemp("prepare")
    files = {}
    for name, fmt, rows, images in (("alpaca", "alpaca", ALPACA, None), ("sharegpt", "sharegpt", SHAREGPT, None),
                                    ("openai", "openai", OPENAI, None), ("vl", "openai", VL, "images")):
        folder, _ = prepare(tmp, name, fmt, rows, images)
        run = subprocess.run([python, "-I", str(folder / "prepare_data.py")], capture_output=True, text=True,
                             cwd=folder, timeout=120)
        assert run.returncode == 0, run.stderr
        for split in ("train", "val"):
            files[f"{name}/{split}"] = (str(folder / "out" / "verl" / "data" / f"{split}.parquet"), images is None)
    model = stand_in_model(tmp / "model", load_tables().model("qwen3-8b"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp / "hf")}
    answer = child_answer(python, READ_BACK, [json.dumps(files), str(model), str(tmp / "cache")], tmp, env)
    assert isinstance(answer, dict), answer
    return answer


COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]


@needs_verl
def test_alpaca_rows_become_verl_prompts(prepared):
    train, val = prepared["alpaca/train"], prepared["alpaca/val"]
    assert train["columns"] == COLUMNS and len(train["rows"]) == 3 and len(val["rows"]) == 1
    second = next(row for row in train["rows"] + val["rows"] if row["extra_info"]["index"] == 1)
    assert second == {
        "data_source": "openai/gsm8k", "ability": "math",
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Add\n4 and 4" + GSM8K}],
        "reward_model": {"style": "rule", "ground_truth": "8"},
        "extra_info": {"split": second["extra_info"]["split"], "index": 1, "answer": "4+4=8\n#### 8",
                       "question": "Add\n4 and 4"}}
    # verl's own dataset reads it: the chat messages, the reward's ground truth, the row's index.
    dataset = train["dataset"]
    assert dataset["len"] == 3 and dataset["data_source"] == "openai/gsm8k"
    assert dataset["raw_prompt"] == [{"role": "user", "content": "What is 2+3?" + GSM8K}]
    assert dataset["reward_model"] == {"style": "rule", "ground_truth": "5"} and dataset["index"] == 0


@needs_verl
@pytest.mark.parametrize("name", ["sharegpt", "openai"])
def test_conversations_end_in_the_answer(prepared, name):
    rows = prepared[f"{name}/train"]["rows"] + prepared[f"{name}/val"]["rows"]
    for row in rows:
        i = row["extra_info"]["index"]
        assert row["reward_model"] == {"style": "rule", "ground_truth": str(i)}
        assert row["prompt"][-1]["role"] == "user" and row["prompt"][-1]["content"].startswith(f"q{i}")
    first = SHAREGPT[0]["conversations"][0]["value"] + GSM8K
    assert rows[0]["prompt"][-1]["content"] == first if name == "sharegpt" else \
        rows[0]["prompt"][0] == {"role": "system", "content": "sys"}
    assert prepared[f"{name}/train"]["dataset"]["len"] == len(prepared[f"{name}/train"]["rows"])


@needs_verl
def test_vision_rows_carry_their_images(prepared):
    train = prepared["vl/train"]
    assert train["columns"] == COLUMNS + ["images"]
    for row in train["rows"]:
        assert row["images"] == [{"bytes": len(PNG), "path": "img/dot.png"}]
        assert row["prompt"][0]["content"].count("<image>") == 1


def run_prepare(tmp_path: Path, rows: list, fmt: str = "alpaca", image_column: str | None = None,
                placeholders: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    python = verl_python()
    if python is None:
        pytest.fail("verl's environment is missing: bash scripts/install.sh verl")
    data = tmp_path / "data.json"
    data.write_text(json.dumps(rows), encoding="utf-8")
    script = tmp_path / "prepare_data.py"
    script.write_text(step_files(verl_plan(tmp_path, fmt, data, image_column, placeholders), environment())
                      ["verl/prepare_data.py"], encoding="utf-8")
    return subprocess.run([python, "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)


@needs_verl
@pytest.mark.parametrize(("fmt", "rows", "words"), [
    ("alpaca", ALPACA[:1], "needs at least 2 rows"),
    ("alpaca", ALPACA[:1] + [{"instruction": "x"}], "row 1: KeyError: 'output'"),
    ("sharegpt", SHAREGPT[:1] + [{"conversations": [{"from": "human", "value": "q"}]}],
     "row 1: the last turns must be the user's prompt, then the assistant's answer"),
    ("sharegpt", SHAREGPT[:1] + [{"conversations": [{"from": "observation", "value": "q"}]}],
     "row 1: a 'observation' turn"),
])
def test_a_bad_row_is_named_and_nothing_written(tmp_path, fmt, rows, words):
    run = run_prepare(tmp_path, rows, fmt)
    assert run.returncode != 0 and words in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def prepare_file(tmp_path: Path, data: Path, fmt: str = "alpaca") -> subprocess.CompletedProcess:
    """prepare_data.py of a plan reading `data` (any file), run with verl's interpreter."""
    python = verl_python()
    if python is None:
        pytest.fail("verl's environment is missing: bash scripts/install.sh verl")
    script = tmp_path / "prepare_data.py"
    script.write_text(step_files(verl_plan(tmp_path, fmt, data), environment())["verl/prepare_data.py"],
                      encoding="utf-8")
    return subprocess.run([python, "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)


# Issue 34 item 3: rows of the wrong shape are refused with the row named, never turned into other data (a history
# entry that is an object gave its keys as prompt and reply, an images string its characters as file names).
HOSTILE_ROWS = [
    ("alpaca", {"instruction": "q", "output": "#### 1", "history": [{"q": "a", "r": "b"}]},
     "history must be a list of [prompt, reply] pairs"),
    ("alpaca", {"instruction": "q", "output": "#### 1", "history": "hi"}, "history must be a list"),
    ("alpaca", {"instruction": "q", "output": "#### 1", "history": [["hi", 5]]}, "a history reply must be text"),
    ("alpaca", {"instruction": "q", "output": float("nan")}, "output must be text, not NaN"),
    ("alpaca", {"instruction": "q", "output": 5}, "output must be text, not 5"),
    ("alpaca", {"instruction": "q", "output": "#### 1", "system": 5}, "system must be text"),
    ("alpaca", {"instruction": ["q"], "output": "#### 1"}, "instruction must be text"),
    ("alpaca", ["q", "#### 1"], "a row must be a JSON object"),
    ("sharegpt", {"conversations": [{"from": "human", "value": {"x": 1}}, {"from": "gpt", "value": "#### 1"}]},
     "a turn's value must be text"),
    ("sharegpt", {"conversations": ["human: q", "gpt: #### 1"]}, "a turn must be a JSON object"),
    ("openai", {"messages": {"role": "user"}}, "messages must be a list of turns"),
]
FIRST = {"alpaca": ALPACA[0], "sharegpt": SHAREGPT[0], "openai": OPENAI[0]}


@needs_verl
@pytest.mark.parametrize(("fmt", "row", "words"), HOSTILE_ROWS)
@pytest.mark.parametrize("index", [0, 7])  # a training row; a validation row (8 rows: 3 and 7 are held out)
def test_a_row_of_the_wrong_shape_is_named_and_nothing_written(tmp_path, fmt, row, words, index):
    rows = [FIRST[fmt]] * 8
    rows[index] = row
    data = tmp_path / "out" / "verl" / "data"
    data.mkdir(parents=True)
    for split in ("train", "val"):  # an earlier preparation's files stay as they were
        (data / f"{split}.parquet").write_bytes(b"old")
    run = run_prepare(tmp_path, rows, fmt)
    assert run.returncode == 1 and f"row {index}: {words}" in run.stderr and "Traceback" not in run.stderr
    assert sorted(path.name for path in data.iterdir()) == ["train.parquet", "val.parquet"]
    assert {(data / name).read_bytes() for name in ("train.parquet", "val.parquet")} == {b"old"}


@needs_verl
def test_images_are_a_list_of_file_names(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "dot.png").write_bytes(PNG)
    run = run_prepare(tmp_path, VL[:1] + [{**VL[1], "images": "img/dot.png"}], "openai", "images")
    assert run.returncode == 1 and "row 1: images must be a list of image file names" in run.stderr
    assert not (tmp_path / "out").exists()


@needs_verl
@pytest.mark.parametrize("kind", ["deep", "device", "fifo", "folder"])
def test_a_data_file_that_cannot_be_read_is_refused_at_once(tmp_path, kind):
    # JSON nested 100,000 deep (RecursionError), /dev/zero (read without end: MemoryError), a FIFO (waits for a
    # writer forever), a folder: one line, no traceback, nothing written.
    data = {"deep": tmp_path / "deep.json", "device": Path("/dev/zero"), "fifo": tmp_path / "fifo",
            "folder": tmp_path / "folder"}[kind]
    if kind == "deep":
        data.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "fifo":
        os.mkfifo(data)
    elif kind == "folder":
        data.mkdir()
    run = prepare_file(tmp_path, data)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"{data}: cannot read it as a JSON array or JSON lines: " in run.stderr
    assert not (tmp_path / "out").exists()


@needs_verl
@pytest.mark.parametrize("lines", [False, True])
def test_a_byte_order_mark_is_read_as_llama_factory_reads_it(tmp_path, lines):
    data = tmp_path / "data.json"
    text = "\n".join(json.dumps(row) for row in ALPACA) if lines else json.dumps(ALPACA)
    data.write_bytes("\ufeff".encode() + text.encode())
    run = prepare_file(tmp_path, data)
    assert run.returncode == 0, run.stderr
    assert "train.parquet: 3 rows" in run.stdout and "val.parquet: 1 rows" in run.stdout


@needs_verl
@pytest.mark.parametrize("planted", ["train.parquet.part", "train.parquet", "val.parquet.part"])
def test_prepare_writes_through_no_planted_link(tmp_path, planted):
    # Issue 34 item 4: a link left in the output folder is never written through (a linked train.parquet.part
    # overwrote the file it named).
    data = tmp_path / "out" / "verl" / "data"
    data.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (data / planted).symlink_to(victim)
    run = run_prepare(tmp_path, ALPACA)
    assert run.returncode == 0, run.stderr
    assert victim.read_bytes() == b"keep"
    assert sorted(path.name for path in data.iterdir()) == ["train.parquet", "val.parquet"]
    assert not any((data / name).is_symlink() for name in ("train.parquet", "val.parquet"))


@needs_verl
def test_prepare_refuses_a_linked_output_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out" / "verl").mkdir(parents=True)
    (tmp_path / "out" / "verl" / "data").symlink_to(elsewhere)
    run = run_prepare(tmp_path, ALPACA)
    assert run.returncode == 1 and "data: must be a folder, not a link" in run.stderr
    assert list(elsewhere.iterdir()) == []


@needs_verl
def test_an_image_per_mark(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "dot.png").write_bytes(PNG)
    rows = VL[:1] + [{"messages": VL[0]["messages"], "images": ["img/dot.png", "img/dot.png"]}]
    run = run_prepare(tmp_path, rows, "openai", "images")
    assert "row 1: 1 <image> mark(s) in the prompt for 2 image(s)" in run.stderr
    assert not (tmp_path / "out").exists()


@needs_verl
def test_a_placeholder_dataset_is_refused(tmp_path):
    run = run_prepare(tmp_path, ALPACA, placeholders={"dataset": "/path/to/data/train.json"})
    assert run.returncode == 1 and "paths.dataset is the placeholder /path/to/data/train.json" in run.stderr


def test_settings_are_data_in_the_script(tmp_path):
    # A value with quotes, backslashes and Python syntax reaches the script as a string, never as code.
    text = step_files(verl_plan(tmp_path, "alpaca", tmp_path / "x'''\"\\n__import__('os')"), environment())
    script = text["verl/prepare_data.py"]
    settings = script.split("SETTINGS = json.loads(", 1)[1].split(")\n", 1)[0]
    import ast
    assert json.loads(ast.literal_eval(settings))["input"] == str(tmp_path / "x'''\"\\n__import__('os')")
    compile(script, "prepare_data.py", "exec")


# python3 for merge.sh: `python3 -I -c` (where the verl it imports lives) answers $VERL_ROOT; any other call is
# recorded in $CALLS as its working folder and argv, NUL-separated, and makes the target folder as the merger would.
MERGE_PYTHON3 = r"""#!/bin/bash
[ "$1" != -I ] || { echo "$VERL_ROOT"; exit; }
printf '%s\0' "$PWD" "$@" > "$CALLS/$(find "$CALLS" -type f | wc -l)"
mkdir -p -- "${@: -1}"
"""


def run_merge(tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """merge.sh of a plan with its output under tmp_path/out, run with MERGE_PYTHON3 from tmp_path: its result and
    the merger's calls ([working folder, *argv]); the calls are cleared."""
    script, bindir, calls = tmp_path / "merge.sh", tmp_path / "bin", tmp_path / "calls"
    if not script.exists():
        script.write_text(step_files(verl_plan(tmp_path, "alpaca", tmp_path / "d.json"), environment())
                          ["verl/merge.sh"], encoding="utf-8")
        for folder in (bindir, calls, tmp_path / "site"):
            folder.mkdir()
        (bindir / "python3").write_text(MERGE_PYTHON3)
        (bindir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "CALLS": str(calls),
           "VERL_ROOT": str(tmp_path / "site")}
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, cwd=tmp_path,
                            check=False)
    found = [path.read_bytes().decode().split("\0")[:-1] for path in sorted(calls.iterdir())]
    for path in calls.iterdir():
        path.unlink()
    return result, found


def test_merge_runs_verls_model_merger_on_the_latest_saved_step(tmp_path):
    # verl records the latest saved step in default_local_dir/latest_checkpointed_iteration.txt
    # (ray_trainer.py l.1001-1005): merge.sh merges that step's actor, whatever step the run ended at, into a
    # folder of that step (issue 34 item 4: a later merge never writes over an earlier one), started from the
    # folder of the verl python3 imports (item 1: never the working folder).
    result, calls = run_merge(tmp_path)
    check_script((tmp_path / "merge.sh").read_text(), tmp_path, "merge.sh")
    assert result.returncode == 2 and "no checkpoint in" in result.stderr and calls == []
    checkpoints = tmp_path / "out" / "verl" / "checkpoints"
    actor = checkpoints / "global_step_7" / "actor"
    actor.mkdir(parents=True)
    (checkpoints / "global_step_5" / "actor").mkdir(parents=True)
    for text, words in (("12", "no actor checkpoint at"), ("7; touch x", "must hold the step"),
                        ("", "must hold the step")):
        (checkpoints / "latest_checkpointed_iteration.txt").write_text(text)
        result, calls = run_merge(tmp_path)
        assert result.returncode == 2 and words in result.stderr and calls == [], text
    merged = tmp_path / "out" / "verl" / "merged"
    for step, folder in (("7", actor), ("5", checkpoints / "global_step_5" / "actor")):
        (checkpoints / "latest_checkpointed_iteration.txt").write_text(step)
        result, calls = run_merge(tmp_path)
        assert result.returncode == 0, result.stderr
        assert calls == [[str(tmp_path / "site"), "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                          "--local_dir", str(folder), "--target_dir", str(merged / f"global_step_{step}")]]
    result, calls = run_merge(tmp_path)  # step 5 again: its merge is there
    assert result.returncode == 2 and "holds the merge of step 5 already" in result.stderr and calls == []
    assert sorted(path.name for path in merged.iterdir()) == ["global_step_5", "global_step_7"]


@pytest.mark.parametrize("planted", ["checkpoints", "latest_checkpointed_iteration.txt", "global_step_3", "actor",
                                     "merged", "merged/global_step_3"])
def test_merge_follows_no_planted_link(tmp_path, planted):
    # Issue 34 item 4: every folder and file merge.sh reads or writes in the output folder is what it says; a link
    # planted there (to another job's checkpoints, or to a folder the merge would write into) is refused.
    out = tmp_path / "out" / "verl"
    checkpoints = out / "checkpoints"
    (checkpoints / "global_step_3" / "actor").mkdir(parents=True)
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("3")
    (out / "merged").mkdir()
    path = next(path for path in (out / planted, checkpoints / planted, checkpoints / "global_step_3" / planted)
                if path.exists()) if planted != "merged/global_step_3" else out / planted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if path.exists():
        path.rename(elsewhere / path.name)
    else:
        (elsewhere / path.name).mkdir()
    path.symlink_to(elsewhere / path.name)
    result, calls = run_merge(tmp_path)
    assert result.returncode == 2 and calls == [], result.stderr
    assert f"{path}: must be a" in result.stderr and "not a link" in result.stderr


def test_merge_refuses_a_placeholder_output(tmp_path):
    files = step_files(verl_plan(tmp_path, "alpaca", tmp_path / "d.json"), environment())
    plan = verl_plan(tmp_path, "alpaca", tmp_path / "d.json", placeholders={"output_dir": "/path/to/output/t"})
    script = tmp_path / "merge.sh"
    script.write_text(step_files(plan, environment())["verl/merge.sh"], encoding="utf-8")
    result, calls = run_recording(script, [], tmp_path, programs=("python3",))
    assert result.returncode == 2 and "paths.output_dir is the placeholder" in result.stderr and calls == []
    assert files["verl/merge.sh"] != script.read_text(encoding="utf-8")


def test_the_steps_read_exactly_the_planned_settings(tmp_path):
    plan = verl_plan(tmp_path, "alpaca", tmp_path / "d.json")
    settings = plan.frameworks["verl"].settings
    broken = replace(plan, frameworks={"verl": replace(plan.frameworks["verl"], settings=replace(
        settings, prepare=settings.prepare[:1] + settings.prepare[2:]))})
    with pytest.raises(ValueError, match="prepare settings hold .* the step reads"):
        step_files(broken, environment())


@needs_verl
def test_a_planned_job_prepares_the_files_its_overrides_name(tmp_path):
    # A real plan (Qwen2.5-VL-7B GRPO, OpenAI-style rows with images): prepare_data.py writes the parquet files
    # data.train_files and data.val_files name, with the image column data.image_key names.
    from generator.render import render_files
    from generator.spec import parse_spec

    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "dot.png").write_bytes(PNG)
    (tmp_path / "data.json").write_text(json.dumps([{**row, "final": "12"} for row in VL * 5]), encoding="utf-8")
    spec = {"job": "rl", "model": "qwen2.5_vl-7b", "method": "grpo", "seq_len": 4096, "hardware": "snt9b",
            "frameworks": ["verl"], "rl": {"answer_column": "final"}, "paths": {"dataset": str(tmp_path / "data.json"),
                                              "output_dir": str(tmp_path / "out"), "model_dir": "/models/vl"}}
    plan = resolve(parse_spec(json.dumps(spec).encode()), load_tables())
    files = render_files(plan)
    settings = plan.frameworks["verl"].settings
    (tmp_path / "prepare_data.py").write_text(files["verl/prepare_data.py"], encoding="utf-8")
    run = subprocess.run([verl_python(), "-I", str(tmp_path / "prepare_data.py")], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    for key, rows in (("data.train_files", 19), ("data.val_files", 1)):
        path = Path(settings.value(key))
        assert path.is_file() and f"{path}: {rows} rows" in run.stdout
    assert settings.value("data.image_key") == "images" and '"image_column": "images"' in files["verl/prepare_data.py"]


# Runs in verl's interpreter: each prepared row's prompt, ground truth and verl 0.7.0's own default_compute_score
# (verl/utils/reward_score/__init__.py) of a correct and a wrong response.
SCORE = """
import importlib.util, json, sys
import pyarrow.parquet as pq
from verl.utils.reward_score import default_compute_score
out = {}
for name, (path, right, wrong) in json.loads(sys.argv[1]).items():
    if name == "geo3k" and importlib.util.find_spec("mathruler") is None:
        continue  # an environment built before scripts/verl-requirements.txt listed it
    row = pq.read_table(path).to_pylist()[0]
    truth = row["reward_model"]["ground_truth"]
    scores = [default_compute_score(row["data_source"], text, truth) for text in (right, wrong)]
    out[name] = {"truth": truth, "prompt": row["prompt"][-1]["content"],
                 "scores": [score["score"] if isinstance(score, dict) else score for score in scores]}
print(json.dumps(out))
"""
# rl.reward -> (the row's answer text, a correct response, a wrong one, what the prompt ends with).
REWARDS = {
    "gsm8k": ("Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether.\n#### 1,072",
              "48 + 24 = 72, and 1000 more.\n#### 1,072", "#### 72", 'output the final answer after "####".'),
    "math": ("So the ratio is $\\boxed{\\frac{1}{2}}$.", "Thus $\\boxed{\\frac12}$", "Thus $\\boxed{2}$",
             "output the final answer within \\boxed{}."),
    "math_dapo": ("The sum is 34.\nAnswer: 34", "a+b+c = 34\nAnswer: 34", "Answer: 35",
                  'Remember to put your answer on its own line after "Answer:".'),
    "geo3k": ("The angle is $\\boxed{72}$.", "<think>180 - 108</think> The angle is \\boxed{72}.", "\\boxed{7}",
              "The final answer MUST BE put in \\boxed{}."),
}


@needs_verl
def test_a_correct_response_earns_verls_reward_and_a_wrong_one_does_not(tmp_path):
    # The ground truth is the final answer only (gsm8k compares strings: reward_score/gsm8k.py l. 65-72), and the
    # prompt asks for the answer in the form the reward reads, as upstream's preprocessors do.
    python = verl_python()
    files = {}
    for reward, (answer, right, wrong, _) in REWARDS.items():
        folder = tmp_path / reward
        folder.mkdir()
        data = folder / "data.json"
        data.write_text(json.dumps([{"instruction": f"Question {i}?", "input": "", "output": answer}
                                    for i in range(3)]), encoding="utf-8")
        script = folder / "prepare_data.py"
        script.write_text(step_files(verl_plan(folder, "alpaca", data, reward=reward), environment())
                          ["verl/prepare_data.py"], encoding="utf-8")
        run = subprocess.run([python, "-I", str(script)], capture_output=True, text=True, cwd=folder, timeout=60)
        assert run.returncode == 0, run.stderr
        files[reward] = (str(folder / "out" / "verl" / "data" / "train.parquet"), right, wrong)
    answer = child_answer(python, SCORE, [json.dumps(files)], tmp_path, dict(os.environ))
    assert isinstance(answer, dict), answer
    assert answer["gsm8k"]["truth"] == "1072" and answer["math"]["truth"] == "\\frac{1}{2}"
    assert answer["math_dapo"]["truth"] == "34"
    for reward, (_, _, _, ending) in REWARDS.items():
        if reward not in answer:
            assert reward == "geo3k" and os.environ.get("CI", "").lower() != "true", "mathruler is missing"
            continue
        got = answer[reward]
        assert got["prompt"].endswith(ending), (reward, got["prompt"])
        # math_dapo scores a wrong answer -1 (math_dapo.py l. 265), the others 0.
        assert got["scores"] == [1.0, -1.0 if reward == "math_dapo" else 0.0], (reward, got)
    assert answer["math_dapo"]["prompt"].startswith("Solve the following math problem step by step.")


@needs_verl
@pytest.mark.parametrize(("reward", "output", "column", "words"), [
    ("gsm8k", "It is 72.", None, 'row 1: no final answer in the answer text (a number after "#### ")'),
    ("geo3k", "It is 72.", None, "row 1: no final answer in the answer text (a \\boxed{...})"),
    ("geo3k", "It is 72.", "final", "row 1: no final answer in its 'final' column (rl.answer_column)"),
    ("geo3k", "It is 72.", "nan", "row 1: no final answer in its 'nan' column (rl.answer_column)"),  # issue 34
])
def test_a_row_without_a_final_answer_is_refused(tmp_path, reward, output, column, words):
    rows = [{"instruction": "q", "input": "", "output": "#### 1 \\boxed{1}", "final": "1", "nan": 1.5},
            {"instruction": "q", "input": "", "output": output, "nan": float("nan")}]
    data = tmp_path / "data.json"
    data.write_text(json.dumps(rows), encoding="utf-8")
    script = tmp_path / "prepare_data.py"
    script.write_text(step_files(verl_plan(tmp_path, "alpaca", data, reward=reward, answer_column=column),
                                 environment())["verl/prepare_data.py"], encoding="utf-8")
    run = subprocess.run([verl_python(), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60)
    assert run.returncode == 1 and words in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


@needs_verl
def test_a_data_file_of_another_size_than_the_plans_is_refused(tmp_path):
    # The steps are sized for data.samples rows (planning.run_length): another count stops verl early or late.
    data = tmp_path / "data.json"
    data.write_text(json.dumps(ALPACA), encoding="utf-8")
    script = tmp_path / "prepare_data.py"
    script.write_text(step_files(verl_plan(tmp_path, "alpaca", data, rows=5), environment())["verl/prepare_data.py"],
                      encoding="utf-8")
    run = subprocess.run([verl_python(), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 1 and "has 4 rows, the plan's steps are sized for data.samples 5" in run.stderr
    assert not (tmp_path / "out").exists()


@needs_verl
@pytest.mark.parametrize("reward", ["math_dapo", "math"])
def test_answers_a_string_comparing_reward_may_misjudge_are_named(tmp_path, reward):
    # Issue 36 item 9: math_dapo compares the normalized strings (math_dapo.py l. 124-190), so a right response
    # that writes \dfrac{1}{2} as \frac{1}{2} or 0.5 scores -1; prepare_data.py names those rows and the reward.
    rows = [{"instruction": f"q{i}", "input": "", "output": f"so \\boxed{{{answer}}}"}
            for i, answer in enumerate(["\\dfrac{1}{2}", "34", "\\sqrt2", "1,000", "-2.5"])]
    data = tmp_path / "data.json"
    data.write_text(json.dumps(rows), encoding="utf-8")
    script = tmp_path / "prepare_data.py"
    files = step_files(verl_plan(tmp_path, "alpaca", data, reward=reward), environment())
    script.write_text(files["verl/prepare_data.py"], encoding="utf-8")
    run = subprocess.run([verl_python(), "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    if reward == "math":  # is_equiv normalizes \dfrac and the like first (math_reward.py l. 32, 162-174)
        assert "warning" not in run.stderr
        return
    assert "2 final answer(s) are not plain numbers (row 0: '\\\\dfrac{1}{2}', row 2: '\\\\sqrt2')" in run.stderr
    assert "math_dapo (verl 0.7.0 verl/utils/reward_score/math_dapo.py l. 124-190" in run.stderr
    assert "row 1" not in run.stderr and "row 3" not in run.stderr
