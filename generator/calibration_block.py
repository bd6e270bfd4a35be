"""A spec's `calibration:` block as the spec holds it: what `gen-launch calibrate` measured in a run's log, with
what it was measured under (calibration.py says how the plan uses it)."""

from __future__ import annotations

from typing import Any

from .api.frozen import frozen

# The layout fields a calibration records and compares: what the step model times, in the plan's vocabulary.
LAYOUT_KEYS = ("cards", "tp", "pp", "cp", "ep", "micro_batch_size", "global_batch_size", "recompute",
               "sequence_parallel")


@frozen
class Calibration:
    """The `calibration:` block (schemas/job.schema.json): figures measured in a run's log, with what they were
    measured under."""

    framework: str
    model: str
    method: str
    hardware: str
    seq_len: int
    tokens_per_card_s: float
    step_time_s: float
    peak_memory_gib: float | None
    steps: int  # steady-state steps the figures average over
    layout: dict[str, Any]  # LAYOUT_KEYS
    log_sha256: tuple[str, ...]
    gen_launch_version: str

    @classmethod
    def from_spec(cls, block: dict) -> Calibration:
        return cls(**{**block, "log_sha256": tuple(block["log_sha256"]), "layout": dict(block["layout"])})

    def to_spec(self) -> dict:
        """The block as the spec holds it, keys in a fixed order."""
        return {"framework": self.framework, "model": self.model, "method": self.method, "hardware": self.hardware,
                "seq_len": self.seq_len, "tokens_per_card_s": self.tokens_per_card_s,
                "step_time_s": self.step_time_s, "peak_memory_gib": self.peak_memory_gib, "steps": self.steps,
                "layout": {key: self.layout[key] for key in LAYOUT_KEYS}, "log_sha256": list(self.log_sha256),
                "gen_launch_version": self.gen_launch_version}

    def describe(self) -> str:
        lay = self.layout
        return f"tp{lay['tp']} pp{lay['pp']} cp{lay['cp']} ep{lay['ep']} mbs{lay['micro_batch_size']} on " \
               f"{lay['cards']:,} cards, global batch {lay['global_batch_size']:,}"
