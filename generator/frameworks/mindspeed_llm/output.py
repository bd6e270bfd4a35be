"""mindspeed-llm: the files' side of the plugin."""

from __future__ import annotations


class Output:
    pass


OUTPUT = Output()
