"""Issue 24: every value a framework file holds is decided in the resolver and stated on the plan, placeholders
included; the plan and the renderers read the recipe's types, never the resolver's logic."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import yaml
from helpers import render_job

from generator.render.core import plan_json
from generator.tables import load_tables

T = load_tables()
ROOT = Path(__file__).resolve().parent.parent
# No data size and no train.steps: the run's length is unknown, and both Megatron-based frameworks must write one.
NO_SIZE = {"model": "qwen3-8b", "method": "pretrain", "seq_len": 4096, "hardware": "snt9b", "cards": 16,
           "frameworks": ["mindformers", "mindspeed-llm"]}


def test_each_placeholder_is_on_the_plan_with_its_source_and_the_file_writes_that_value():
    plan, files = render_job(T, **NO_SIZE)
    train = json.loads(plan_json(plan))["train"]
    assert train["steps"] is None
    megatron, mindformers = train["by_framework"]["mindspeed-llm"], train["by_framework"]["mindformers"]
    words = shlex.split(files["mindspeed-llm/launch.sh"].split("--train-iters", 1)[1].split("\n", 1)[0])
    assert int(words[0]) == megatron["placeholder_steps"]
    assert megatron["origin"]["placeholder_steps"].startswith("placeholder: ")
    assert "--train-iters 2000" in megatron["origin"]["placeholder_steps"]  # upstream's value, named with its file
    sizes = yaml.safe_load(files["mindformers/train.yaml"])["train_dataset"]["data_loader"]["sizes"]
    assert sizes[0] == mindformers["placeholder_samples"]
    assert "pretrain_qwen3_32b_4k.yaml" in mindformers["origin"]["placeholder_samples"]
    rows = [line for line in files["PLAN.md"].splitlines() if "(placeholder)" in line]
    assert len(rows) == 2 and "mindspeed-llm" in rows[0] and "mindformers" in rows[1], rows


def test_a_run_of_known_length_has_no_placeholder():
    plan, _ = render_job(T, **NO_SIZE, train={"steps": 300})
    text = plan_json(plan)
    assert "placeholder_steps" not in text and "placeholder_samples" not in text


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_plan_and_the_renderers_do_not_import_the_resolvers_recipe_logic():
    readers = [ROOT / "generator" / "plan.py", *sorted((ROOT / "generator" / "render").rglob("*.py")),
               *sorted((ROOT / "generator" / "frameworks").rglob("render*.py"))]
    for path in readers:
        wrong = {name for name in _imports(path) if name.rsplit(".", 1)[-1] == "recipe"}
        assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


def _launch_scripts() -> dict[str, str]:
    """Every framework's launch.sh over layouts and resume settings that change what a relaunch does."""
    out = {}
    for model, cards in (("qwen3-8b", 16), ("debug-tiny", 1)):
        for resume in (True, False):
            for method, frameworks in (("full", ["mindformers", "mindspeed-llm", "llama-factory"]),
                                       ("pretrain", ["mindformers", "mindspeed-llm"])):
                _, files = render_job(T, model=model, method=method, cards=cards, frameworks=frameworks,
                                      data={"samples": 5000, "tokens_per_sample": 500},
                                      train={"steps": 300, "resume": resume}, global_batch_size=16)
                out.update({f"{model}/{cards}/{resume}/{method}/{k}": v for k, v in files.items()
                            if k.endswith("launch.sh")})
    return out


def test_no_launch_script_rewrites_a_config():
    # MindFormers' relaunch once edited train.yaml's stop_step with a sed (then a copy of it with YAML's writer); the
    # steps left now reach run_mindformer.py on its command line, and the rendered files stay as they are.
    scripts = _launch_scripts()
    for name, text in scripts.items():
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert not re.search(r"\bsed\b", code), name
        assert "safe_dump" not in code and "yaml.dump" not in code and "tempfile" not in code, name
    assert any("--callbacks" in text for text in scripts.values())  # the relaunch that stops early is among them


def test_the_launch_command_is_built_in_one_place():
    # launch.sh's usage line, its argument count, commands.txt and PLAN.md's launch commands were each written out
    # in a template or module of their own; now generator/render/common.py builds the command and the rest place it.
    builder = ROOT / "generator" / "render" / "common.py"
    sources = [*sorted((ROOT / "templates").rglob("*.j2")), *sorted((ROOT / "generator").rglob("*.py"))]
    for path in sources:
        # a module's docstring may name the usage; a template's text is what the files say
        pattern = r"bash [^\s`'\"]*launch\.sh" + (r"|launch\.sh NODE_RANK" if path.suffix == ".j2" else "")
        found = re.findall(pattern, path.read_text()) if path != builder else []
        assert not found, f"{path.relative_to(ROOT)} writes the launch command itself: {found}"


def test_every_launch_command_shown_is_the_one_launch_sh_takes():
    # Without cluster.master_addr launch.sh takes node 0's address as its second argument: PLAN.md's commands said
    # `bash mindformers/launch.sh N` without it, where commands.txt had it.
    for cluster, address in (({}, ' "$MASTER_ADDR"'), ({"master_addr": "10.0.0.1"}, "")):
        _, files = render_job(T, model="qwen3-8b", method="full", cards=16, cluster=cluster,
                              frameworks=["mindformers", "mindspeed-llm", "llama-factory"],
                              data={"samples": 5000, "tokens_per_sample": 500})
        for framework in ("mindformers", "mindspeed-llm", "llama-factory"):
            commands = [line for line in files[f"{framework}/commands.txt"].splitlines() if line.startswith("bash")]
            assert commands == [f'bash "${{JOB_DIR:?}}/launch.sh" {rank}{address}' for rank in (0, 1)]
            assert f"`bash {framework}/launch.sh N{address}`" in files["PLAN.md"]
            usage = f"bash launch.sh NODE_RANK{' [MASTER_ADDR]' if address else ''}"
            assert f"# Usage: {usage}" in files[f"{framework}/launch.sh"] and f"`{usage}" in files["PLAN.md"]
