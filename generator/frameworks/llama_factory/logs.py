"""The LLaMA-Factory logs calibrate reads: its trainer_log.jsonl and the HuggingFace Trainer's launch log.

Format strings:
- LLaMA-Factory 0.9.5 src/llamafactory/train/callbacks.py l. 206-216 and l. 272-300 (LogCallback): one JSON
  object a logging step, `current_steps`, `elapsed_time` = str(timedelta(seconds=int(elapsed))) since training
  began (whole seconds: the mean over many steps is exact to a second in all), `eval_loss` on an evaluation,
  `vram_allocated` (GiB, with RECORD_VRAM) ; written to output_dir/trainer_log.jsonl (extras/constants.py l. 104).
- transformers 5.6.0 trainer.py l. 1473-1477: `"  Instantaneous batch size per device = {:,}"`, `"  Total train
  batch size (w. parallel, distributed & accumulation) = {:,}"`, `"  Gradient Accumulation steps = {}"`; l. 3815:
  `"Saving model checkpoint to {output_dir}"`, output_dir ending in `checkpoint-{global_step}` (the save runs after
  that step's log, so the next interval holds it; trainer_log.jsonl does not mark it).
"""

from __future__ import annotations

import json
import math
import re

from ...logs import LogFacts, Sample, whole

SOURCE = ("LLaMA-Factory 0.9.5 train/callbacks.py l. 206-216, 272-300 (trainer_log.jsonl); transformers 5.6.0 "
          "trainer.py l. 1473-1477")
_TRAINER = {"Instantaneous batch size per device": "micro_batch_size",
            "Total train batch size (w. parallel, distributed & accumulation)": "global_batch_size",
            "Gradient Accumulation steps": "grad_accum"}
_STATED = re.compile(r"  (Instantaneous batch size per device|Total train batch size \(w\. parallel, distributed "
                     r"& accumulation\)|Gradient Accumulation steps) = ([0-9,]{1,20})$")
_SAVED = re.compile(r"Saving model checkpoint to .*checkpoint-([0-9]{1,12})/?$")
_ELAPSED = re.compile(r"(?:([0-9]{1,6}) days?, )?([0-9]{1,2}):([0-9]{2}):([0-9]{2})")


def seconds(text: object) -> int | None:
    """timedelta's str() as whole seconds ("1 day, 2:03:04"), else None."""
    found = _ELAPSED.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        return None
    days, hours, minutes, secs = (int(part or 0) for part in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


def _finite(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and abs(value) < 1e300 else None


class LlamaFactoryLog:
    source = SOURCE

    def __init__(self) -> None:
        self.last: tuple[int, int] | None = None  # (step, elapsed seconds) of the previous jsonl line

    def read(self, line: str, facts: LogFacts) -> None:
        stated = _STATED.search(line)
        if stated:
            facts.state(_TRAINER[stated.group(1)], whole(stated.group(2)))
            self._cards(facts)
            return
        saved = _SAVED.search(line)
        if saved:
            facts.saved.add(int(saved.group(1)))
            return
        if not line.startswith("{") or '"current_steps"' not in line:
            return
        try:
            entry = json.loads(line)
        except ValueError:  # not JSON, or a number past Python's digit limit: not a line of this format
            return
        if isinstance(entry, dict):
            self._entry(entry, facts)

    def _entry(self, entry: dict, facts: LogFacts) -> None:
        step, elapsed = entry.get("current_steps"), seconds(entry.get("elapsed_time"))
        if not isinstance(step, int) or isinstance(step, bool) or elapsed is None or step < 1:
            return
        if "eval_loss" in entry:
            facts.pending = "validation"
        facts.peak(_finite(entry.get("vram_allocated")))
        if self.last is not None and step > self.last[0]:
            span = step - self.last[0]
            facts.add(Sample(step, span, (elapsed - self.last[1]) / span))
        self.last = (step, elapsed)

    @staticmethod
    def _cards(facts: LogFacts) -> None:
        """The world size the Trainer's batch lines imply: total / (per device x accumulation)."""
        per, total, accum = (facts.stated.get(key) for key in ("micro_batch_size", "global_batch_size", "grad_accum"))
        if per and total and accum and total % (per * accum) == 0:
            facts.state("cards", total // (per * accum))


def log_format() -> LlamaFactoryLog:
    return LlamaFactoryLog()
