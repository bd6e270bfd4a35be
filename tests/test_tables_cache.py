"""The parsed-table cache (tables.py _load_yaml, issue 26): a hit is the parse itself, and a cache that is stale,
corrupt or cannot be written changes nothing but the time."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator import kept
from generator import tables as tables_module
from generator.errors import TableError

REPO = Path(__file__).resolve().parent.parent
TABLE_FILES = sorted(p.name for p in tables_module.DATA_DIR.glob("*.yaml"))


def same(a, b) -> bool:
    """Equal, and of the same types all the way down, in the same order (1, 1.0 and True are == but not the same
    table)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(key, other) for key, other in zip(a, b)) \
            and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A copy of generator/data/ without its caches, which the loader reads instead."""
    folder = tmp_path / "data"
    shutil.copytree(tables_module.DATA_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(tables_module, "DATA_DIR", folder)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    tables_module.load_tables.cache_clear()
    yield folder
    tables_module.load_tables.cache_clear()


def parsed(folder: Path, name: str):
    return yaml.load((folder / name).read_text(encoding="utf-8"), Loader=tables_module.TABLE_LOADER)


def cache_of(folder: Path, name: str) -> Path:
    return kept.entry(folder, name, "marshal")


@pytest.mark.parametrize("name", TABLE_FILES)
def test_a_cached_table_is_the_parse_itself(data, name):
    first = tables_module._load_yaml(name)  # parses, and writes the cache
    assert cache_of(data, name).is_file()
    second = tables_module._load_yaml(name)  # reads it
    assert same(first, parsed(data, name)) and same(second, parsed(data, name))


def test_a_stale_cache_is_parsed_over(data):
    # The cache of the unedited table is there; an edit that breaks a row still fails at load, with row and key.
    tables_module.load_tables()
    stale = cache_of(data, "hardware.yaml").read_bytes()
    text = (data / "hardware.yaml").read_text(encoding="utf-8")
    (data / "hardware.yaml").write_text(text.replace("quantization_bits: [4]\n", "quantization_bits: [3]\n", 1),
                                        encoding="utf-8")
    tables_module.load_tables.cache_clear()
    with pytest.raises(TableError, match="hardware.yaml snt9b: quantization_bits 3 is not one of 4, 8"):
        tables_module.load_tables()
    assert cache_of(data, "hardware.yaml").read_bytes() != stale  # rewritten for the text it holds now


@pytest.mark.parametrize("damage", ["empty", "truncated", "flipped", "garbage"])
def test_a_corrupt_cache_is_ignored(data, damage):
    name = "models.yaml"
    tables_module._load_yaml(name)
    cache = cache_of(data, name)
    blob = cache.read_bytes()
    damaged = {"empty": b"", "truncated": blob[:-7], "flipped": blob[:-100] + bytes([blob[-100] ^ 1]) + blob[-99:],
               "garbage": b"\x00" * len(blob)}[damage]
    cache.write_bytes(damaged)
    assert same(tables_module._load_yaml(name), parsed(data, name))
    assert cache.read_bytes() == blob  # written anew


def test_an_unwritable_cache_folder_loads_as_parsed(data):
    # A read-only install: the cache folder cannot be made (a file holds its name, which a root user cannot write
    # through either), so nothing is cached and the tables load from the parse, silently.
    (data / "__pycache__").write_text("not a folder", encoding="utf-8")
    tables = tables_module.load_tables()
    assert (data / "__pycache__").read_text(encoding="utf-8") == "not a folder"
    assert set(tables.models) == {row["name"] for row in parsed(data, "models.yaml")["models"]}
    assert not list(data.glob("**/*.tmp"))


@pytest.mark.parametrize("case", ["-B", "prefix"])
def test_nothing_is_kept_where_python_would_keep_no_bytecode(case, data, tmp_path, monkeypatch):
    # The review found the tables kept under -B and PYTHONPYCACHEPREFIX ignored; both follow Python's rule (kept.py).
    if case == "-B":
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
    else:
        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    tables_module.load_tables()
    assert not (data / "__pycache__").exists()
    assert bool(list(tmp_path.glob("prefix/**/*.marshal"))) == (case == "prefix")


def test_the_cache_is_not_in_the_repository():
    # __pycache__/ is git-ignored, so git, the sdist and the wheel (hatch leaves ignored files out) never carry it.
    cache = cache_of(tables_module.DATA_DIR, "models.yaml").relative_to(REPO)
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "check-ignore", "-q", str(cache)], cwd=REPO)
    assert result.returncode == 0, f"{cache} is not git-ignored"


def test_a_plugins_and_a_familys_data_are_kept_as_the_tables_are(data):
    # verl's upstream examples were parsed on every RL plan: a tenth of `gen-launch plan` (issue 35).
    from generator.families.rl import rates
    from generator.frameworks.verl import examples

    for read in (examples.examples, rates.published):
        read.cache_clear()
    try:
        examples.examples()
        rates.published()
    finally:
        for read in (examples.examples, rates.published):
            read.cache_clear()
    for name in ("verl_0.7.0/examples.yaml", "rl/throughput.yaml"):
        path = data / name
        assert cache_of(path.parent, path.name).is_file(), name
        assert same(tables_module.load_data(name), parsed(data, name))
