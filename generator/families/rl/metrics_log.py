"""The per-step metrics line an RL framework's trainer prints (verl's console tracker, MindSpeed-RL's iteration
line): a step number, then `key<sep>value` items. Each plugin's logs.py names its line, separators and keys, with
their upstream source; this reads them as bounded data (generator/logs.py)."""

from __future__ import annotations

import re
from dataclasses import field

from ...api.frozen import frozen
from ...logs import LogFacts, Sample, number


@frozen
class MetricsLine:
    """Where a framework's metrics line starts (`step`: a regex whose group 1 is the step number), how its items are
    separated, and the keys of the step time, the rate, the peak memory (GiB) and the steps that are not steady."""

    source: str
    step: re.Pattern[str]
    items: str  # between two items
    pair: str  # between a key and its value
    seconds: str
    rate: str
    memory: str | None = None
    excluded: dict[str, str] = field(default_factory=dict)  # key -> why a step holding it is not steady state


class MetricsLog:
    """calibrate's reader of one MetricsLine format: a sample per step line that states its step time."""

    def __init__(self, line: MetricsLine) -> None:
        self.line = line
        self.source = line.source
        self.last = 0

    def read(self, text: str, facts: LogFacts) -> None:
        found = self.line.step.search(text)
        if not found:
            return
        metrics = {}
        for item in text[found.end():].split(self.line.items):
            key, _, value = item.partition(self.line.pair)
            metrics[key.strip()] = value
        seconds = number(metrics.get(self.line.seconds, ""))
        if seconds is None:
            return
        step = int(found.group(1))
        facts.pending = next((why for key, why in self.line.excluded.items() if key in metrics), None)
        facts.add(Sample(step, step - self.last if step > self.last else 1, seconds,
                         number(metrics.get(self.line.rate, ""))))
        if self.line.memory is not None:
            facts.peak(number(metrics.get(self.line.memory, "")))
        self.last = step
