"""The mindspeed-mm log calibrate reads: the Megatron family's iteration lines (families/megatron/log.py)."""

from __future__ import annotations

from ...families.megatron.log import log_format

__all__ = ["log_format"]
