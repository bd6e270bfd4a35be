"""A wheel built from the repo carries templates/ and schemas/ and works from a fresh virtual environment."""

from __future__ import annotations

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
