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
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"  # YAML 1.1 needs a dot: 1.0e-05, not 1e-05
        return text
    if isinstance(value, str):
        return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1 << 30).rstrip("\n") \
            .removesuffix("\n...")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    raise TypeError(f"no YAML form for {type(value).__name__}")
