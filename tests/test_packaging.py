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
