"""The one filter for values written into YAML templates: a real YAML serializer, one line, never a bare string.

Strings are always double-quoted (so `yes`, `1e-5`, `null` or `: ` inside a path stay strings); numbers use a form
every YAML 1.1 loader reads as a number (`1.0e-05`, never `1e-5`); booleans use upstream's `True` / `False`.
"""

from __future__ import annotations

import math

import yaml


def yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value} into YAML")
        text = repr(value)
        if 0 < abs(value) < 1e-3:  # learning rates read best as upstream writes them: 1.0e-4, not 0.0001
            mantissa, exponent = f"{value:.15e}".split("e")
            mantissa = mantissa.rstrip("0")
            text = f"{mantissa}0e{exponent}" if mantissa.endswith(".") else f"{mantissa}e{exponent}"
        if "e" in text:  # YAML 1.1 needs a dot and a signed exponent: 1.0e-5, not 1e-05 (a string to PyYAML)
            mantissa, exponent = text.split("e")
            mantissa = mantissa if "." in mantissa else f"{mantissa}.0"
            text = f"{mantissa}e{int(exponent):+d}"
        return text
    if isinstance(value, str):
        return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1 << 30).rstrip("\n") \
            .removesuffix("\n...")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_value(k)}: {yaml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no YAML form for {type(value).__name__}")
