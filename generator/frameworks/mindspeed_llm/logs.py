"""The mindspeed-llm log calibrate reads: the Megatron family's iteration lines (frameworks/megatron_log.py)."""

from __future__ import annotations

from ..megatron_log import log_format

__all__ = ["log_format"]
