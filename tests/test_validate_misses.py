"""What validate missed (issue 23 item 14): each test renders a job with the CLI, breaks one file the way a user
would, and requires validate to name it; the unbroken folder passes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.frameworks.llama_factory import checks as llama_factory
from generator.jobdir import SEAL, _seal, sha256

ROW = {"instruction": "q", "input": "", "output": "a"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """LLaMA-Factory's own parser takes seconds per job in a child interpreter; these checks are gen-launch's."""
    monkeypatch.setattr(llama_factory, "llamafactory_installed", lambda: False)


def render(tmp_path: Path, **fields) -> Path:
    spec = {"job": "j", "model": "qwen3-8b", "method": "lora", "seq_len": 4096, "hardware": "snt9b", "cards": 16,
            "frameworks": ["llama-factory"], "data": {"samples": 4000, "tokens_per_sample": 1000},
            "paths": {"model_dir": "/m", "dataset": "/d/train.json", "output_dir": "/o", "mindformers_dir": "/mf",
                      "mindspeed_llm_dir": "/ms"},
            "cluster": {"master_addr": "10.0.0.1"}, **fields}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(main, ["render", str(tmp_path / "job.yaml"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return tmp_path / "out" / "j"


def validate(job: Path) -> tuple[int, dict[str, str]]:
    """(exit status, {path: "status  detail"})."""
    result = CliRunner().invoke(main, ["validate", "--json", str(job)])
    data = json.loads(result.stdout)
    return result.exit_code, {r["path"]: f"{r['status']}  {r['detail']}" for r in data["results"]}


def rewrite(job: Path, path: str, text: str) -> None:
    """Replace a file and keep MANIFEST in step (its line for the file and its own last line), so validate judges
    the content only."""
    (job / path).write_text(text)
    lines = [f"{sha256(text.encode())}  {path}" if line.endswith(f"  {path}") else line
             for line in (job / "MANIFEST").read_text().splitlines()[:-1]]
    body = "\n".join(lines) + "\n"
    (job / "MANIFEST").write_text(f"{body}{SEAL}{_seal(body)}\n")  # as render seals it


def edit(job: Path, path: str, old: str, new: str, count: int = 1) -> None:
    """A hand edit of `old` into `new`."""
    text = (job / path).read_text()
    assert old in text, (old, text)
    rewrite(job, path, text.replace(old, new, count))


def assert_passes(job: Path) -> None:
    status, lines = validate(job)
    assert status == 0, lines


def assert_problem(job: Path, path: str, *expected: str) -> None:
    status, lines = validate(job)
    assert status == 1 and lines[path].startswith("problem"), lines
    for text in expected:
        assert text in lines[path], (text, lines[path])


def test_a_hand_edited_file_is_still_checked(tmp_path):
    job = render(tmp_path, frameworks=["mindformers"], method="full")
    path = job / "mindformers" / "train.yaml"
    text = path.read_text()
    path.write_text(re.sub(r"model_parallel: \d+", "model_parallel: 3", text))  # a plain edit: MANIFEST differs
    status, lines = validate(job)
    assert status == 1 and lines["mindformers/train.yaml"].startswith("problem  changed since gen-launch render"), lines
    assert "(V1; mindformers tools/check_rules.py" in lines["mindformers/train.yaml"]
    path.write_text(text.replace("seed: ", "seed:  ", 1))  # an edit that breaks no rule is still reported
    status, lines = validate(job)
    assert status == 1
    assert lines["mindformers/train.yaml"].startswith("problem  changed since gen-launch render wrote it; its checks "
                                                      "pass"), lines


@pytest.mark.parametrize("line,expected", [
    ('template: "qwen4"', "'qwen4' is not a chat template LLaMA-Factory 0.9.5 registers"),
    ('template: "qwen"', "'qwen' is not qwen3-8b's chat template 'qwen3'"),
    ("", "template: none given, so LLaMA-Factory picks one from the tokenizer; qwen3-8b's is 'qwen3'"),
])
def test_llama_factory_template(tmp_path, line, expected):
    job = render(tmp_path)
    assert_passes(job)
    edit(job, "llama-factory/train.yaml", 'template: "qwen3"', line)
    assert_problem(job, "llama-factory/train.yaml", expected)


def test_lora_target_that_matches_no_module(tmp_path):
    job = render(tmp_path)
    edit(job, "llama-factory/train.yaml", 'lora_target: "all"', 'lora_target: "q_proj,v_proj"')
    assert_passes(job)  # real module names
    edit(job, "llama-factory/train.yaml", 'lora_target: "q_proj,v_proj"', 'lora_target: "q_proj,query_key_value"')
    assert_problem(job, "llama-factory/train.yaml", "lora_target: 'query_key_value' matches no module of qwen3-8b",
                   "modeling_qwen3.py")


def test_chatglm_attention_targets_are_its_own(tmp_path):
    job = render(tmp_path, model="chatglm3-6b", lora={"targets": "attention"}, cards=8)
    assert_passes(job)
    edit(job, "llama-factory/train.yaml", "query_key_value,dense", "q_proj,v_proj")
    assert_problem(job, "llama-factory/train.yaml", "'q_proj' matches no module of chatglm3-6b",
                   "'v_proj' matches no module")


def write_rows(path: Path, rows: list, jsonl: bool) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) if jsonl else json.dumps(rows, indent=1))


@pytest.mark.parametrize("jsonl", [False, True])
def test_dataset_columns_the_data_file_lacks(tmp_path, jsonl):
    data = tmp_path / ("train.jsonl" if jsonl else "train.json")
    write_rows(data, [ROW] * 4000, jsonl)
    job = render(tmp_path, paths={"dataset": str(data), "output_dir": "/o"})
    assert_passes(job)
    edit(job, "llama-factory/dataset_info.json", '"response": "output"', '"response": "answer"')
    assert_problem(job, "llama-factory/dataset_info.json", "columns.response: 'answer' is not a key of row 1")
    edit(job, "llama-factory/dataset_info.json", '"response": "answer"', '"response": "output"')
    write_rows(data, [ROW] * 3 + [{"instruction": "q", "output": "a"}] + [ROW] * 3996, jsonl)  # the data changed
    assert_problem(job, "llama-factory/dataset_info.json", "columns.query: 'input' is not a key of row 4")


def test_sharegpt_tags_the_messages_lack(tmp_path):
    data = tmp_path / "chat.jsonl"
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    write_rows(data, [{"conversations": turns}] * 4000, True)
    job = render(tmp_path, paths={"dataset": str(data), "output_dir": "/o", "dataset_format": "sharegpt"})
    assert_problem(job, "llama-factory/dataset_info.json", "row 1 of", "a message lacks 'from' or 'value' (role_tag / "
                   "content_tag)")
    good = {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"},
                              {"from": "gpt", "value": "a"}]}
    write_rows(data, [good] * 4000, True)
    assert_passes(job)
    # roles out of turn: LLaMA-Factory skips the row with a warning, training on less than planned
    write_rows(data, [good] * 9 + [{"conversations": [{"from": "gpt", "value": "a"}]}] + [good] * 3990, True)
    assert_problem(job, "llama-factory/dataset_info.json", "row 10 of", "turn 1's from 'gpt' is not one of "
                   "['human', 'observation']")


def test_columns_are_read_from_the_start_of_a_big_file_only(tmp_path):
    data = tmp_path / "big.json"
    with data.open("w") as out:  # about 12 MB, over the bytes the check reads
        out.write("[" + ",".join(json.dumps({**ROW, "output": "x" * 3000}) for _ in range(4000)) + "]")
    assert data.stat().st_size > llama_factory.SAMPLE_BYTES
    rows = llama_factory.first_rows(str(data))
    assert len(rows) == llama_factory.SAMPLE_ROWS and rows[0]["instruction"] == "q"
    assert len(llama_factory.first_rows(str(data), rows=10**6)) < 4000  # stops at the byte limit


@pytest.mark.parametrize("method,model,old,new,expected", [
    ("full", "qwen3-8b", "data_files: ", "data_file: ", "HFDataLoader lacks data_files"),
    ("full", "qwen3-8b", "    shuffle: False\n", "    shuffle: False\n    num_epochs: 2\n",
     "HFDataLoader has num_epochs, which it does not take (mindformers dataset/dataloader/hf_dataloader.py"),
    ("full", "qwen3-8b", 'data_files: "/d/train.json"', 'data_files: "/d/other.json"',
     "HFDataLoader reads '/d/other.json', but the job's data is '/d/train.json'"),
    ("pretrain", "qwen3-8b", "      seq_length: ", "      seq_len: ", "config lacks seq_length"),
    ("pretrain", "qwen3-8b", "/o/mindformers/data/j_text_document", "/o/mindformers/data/j",
     "reads '/o/mindformers/data/j', but the job's data is '/o/mindformers/data/j_text_document'"),
    ("full", "qwen2.5-7b", "    shuffle: True\n", "    shuffle: True\n    columns: [input_ids]\n",
     "MindDataset has columns, which it does not take"),
    ("full", "qwen2.5-7b", "/o/mindformers/data/j.mindrecord", "/o/mindformers/data/j",
     "MindDataset reads '/o/mindformers/data/j', but the job's data is '/o/mindformers/data/j.mindrecord'"),
])
def test_mindformers_data_loader(tmp_path, method, model, old, new, expected):
    job = render(tmp_path, frameworks=["mindformers"], method=method, model=model, cards=8)
    assert_passes(job)
    edit(job, "mindformers/train.yaml", old, new)
    assert_problem(job, "mindformers/train.yaml", expected)


def test_mindformers_router_values(tmp_path):
    # Fine-tuning loads the HF weights: a router key in model_config overrides their config.json.
    job = render(tmp_path, frameworks=["mindformers"], method="full", model="qwen3_moe-30b_a3b", cards=16)
    assert_passes(job)
    edit(job, "mindformers/train.yaml", "    moe_grouped_gemm: True\n",
         "    moe_grouped_gemm: True\n    norm_topk_prob: False\n    num_experts: 128\n")
    assert_problem(job, "mindformers/train.yaml", "model_config norm_topk_prob: False is not qwen3_moe-30b_a3b's "
                   "norm_topk_prob: True", "overrides the loaded checkpoint's config.json")


@pytest.mark.parametrize("framework", ["llama-factory", "mindspeed-llm", "mindformers"])
def test_commands_txt_node_ranks(tmp_path, framework):
    old, new = '/launch.sh" 1', '/launch.sh" 0'  # each line runs that node's launch.sh (render/common.py)
    job = render(tmp_path, frameworks=[framework], method="full", cards=16)
    assert_passes(job)
    path = f"{framework}/commands.txt"
    text = (job / path).read_text()
    edit(job, path, old, new)
    assert_problem(job, path, "node ranks [0, 0] for 2 node(s)", "repeated [0]", "missing [1]")
    rewrite(job, path, "\n".join(line for line in text.splitlines() if old not in line) + "\n")  # a line lost
    assert_problem(job, path, "node ranks [0] for 2 node(s)", "missing [1]")
