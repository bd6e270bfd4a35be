"""Shared fixtures: the real tables, a spec builder, and paths to the test data."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.tables import load_tables

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


@pytest.fixture(scope="session")
def tables():
    return load_tables()


@pytest.fixture
def spec_file(tmp_path):
    """Write a spec mapping (or raw text) to a file and return its path."""

    def write(content, name="job.yaml"):
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content), encoding="utf-8")
        return path

    return write
