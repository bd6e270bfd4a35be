"""Helpers shared by the test modules (imported as `helpers`: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import yaml

from generator.spec import parse_spec


def make_spec(**fields):
    """A Spec from keyword fields on top of a minimal valid one, through the real parser."""
    data = {"job": "t", "model": "qwen3-8b", "method": "full", "seq_len": 4096, "hardware": "snt9b"}
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    return parse_spec(yaml.safe_dump(data).encode())
