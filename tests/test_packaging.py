"""A wheel built from the repo carries templates/ and schemas/ and works from a fresh virtual environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_plans(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
                   check=True)
    wheel = next(dist.glob("gen_launch-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("generator/templates/PLAN.md.j2", "generator/schemas/job.schema.json",
                   "generator/data/min_cards.csv", "generator/data/models.yaml"):
        assert needed in names
    # no bytecode, parsed-table cache (tables.py) or compiled templates (render) kept in the checkout
    assert not [name for name in names if "__pycache__" in name]
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    bindir = env / ("Scripts" if sys.platform == "win32" else "bin")
    subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    example = REPO / "examples" / "qwen3-32b-full-snt9b-16c.yaml"
    result = subprocess.run([str(bindir / "gen-launch"), "plan", str(example)], cwd=elsewhere, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert "preset: validated" in result.stdout
    rendered = subprocess.run([str(bindir / "gen-launch"), "render", str(example), "-o", "out"], cwd=elsewhere,
                              capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    assert (elsewhere / "out" / "qwen3-32b-full-snt9b-16c" / "PLAN.md").is_file()


# LLaMA-Factory 0.9.5 requirements/deepspeed.txt (its `deepspeed` extra): what its users install beside it.
LLAMAFACTORY_DEEPSPEED = ">=0.10.0,<=0.18.4"


def test_deepspeed_pin_is_what_llamafactory_users_install():
    from importlib.metadata import PackageNotFoundError, version

    import tomllib
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = [Requirement(line) for name in ("validate", "test") for line in extras[name]
            if Requirement(line).name == "deepspeed"]
    assert len(pins) == 2
    for pin in pins:
        (exact,) = pin.specifier
        assert exact.operator == "==" and exact.version in SpecifierSet(LLAMAFACTORY_DEEPSPEED), pin
    try:
        installed = version("deepspeed")
    except PackageNotFoundError:
        pytest.skip("deepspeed is not installed")
    assert installed == exact.version, "the environment's DeepSpeed is not the pinned one: bash scripts/install.sh test"


def _readme_setup_command() -> str:
    """The first command of README.md's "Set up": the one that installs gen-launch and renders the main example."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Set up", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 1, lines  # one command: a harness or a reader runs it in one shell
    return lines[0]


@pytest.mark.slow
def test_the_readmes_setup_command_installs_and_renders_in_a_fresh_venv(tmp_path):
    # The README's set-up once began with a venv's activation on a line of its own: run line by line, the install
    # went into the venv while `gen-launch` came from whatever was on PATH before (a stale install's script failed with
    # "No module named 'generator.cli'"). Its one command must install into the Python it runs and then render.
    command = _readme_setup_command()
    assert "pip install ." in command and "gen-launch render examples/" in command
    clone = tmp_path / "clone"
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".git", ".venv*", "node_modules", "out", "__pycache__",
                                                               ".pytest_cache", ".mypy_cache", ".ruff_cache",
                                                               ".hypothesis"))
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    path = f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True,
                            env={**os.environ, "PATH": path, "VIRTUAL_ENV": str(env)})
    assert result.returncode == 0, result.stderr[-2000:]
    example = command.split("gen-launch render examples/", 1)[1].split(".yaml", 1)[0]
    assert (clone / "out" / example / "PLAN.md").is_file()
    assert (env / "bin" / "gen-launch").is_file()  # the command it ran is the one it installed
    # The installed command outlives the clone it came from: an editable install (-e) from a CI run's temporary clone
    # left the machine's `gen-launch` failing on every example with "No module named 'generator.__main__'".
    examples = shutil.copytree(clone / "examples", tmp_path / "examples")
    shutil.rmtree(clone)
    for spec in sorted(examples.glob("*.yaml")):
        done = subprocess.run([str(env / "bin" / "gen-launch"), "render", str(spec), "-o", str(tmp_path / "later")],
                              cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, f"{spec.name}: {done.stderr[-1000:]}"
    assert len(list((tmp_path / "later").glob("*/PLAN.md"))) == len(list(examples.glob("*.yaml")))
