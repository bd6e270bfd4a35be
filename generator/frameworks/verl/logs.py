"""The verl log calibrate reads: the console tracker's metrics line, once per step.

Format strings (verl 0.7.0, f9c855f7): verl/utils/logger/aggregate_logger.py l. 26-32, concat_dict_to_str:
`step:{step}` then `{k}:{pprint.pformat(v)}` for each numeric metric, joined by ` - `. The metrics
(verl/trainer/ppo/metric_utils.py l. 293-302, compute_throughout_metrics): `perf/time_per_step` (the step timer,
ray_trainer.py l. 1357, which also holds testing and save_checkpoint, l. 1567 and l. 1590), `perf/throughput`
(total_num_tokens / (time x n_gpus): prompt + response tokens of every sequence, per card) and
`perf/max_memory_allocated_gb` (fsdp_workers.py l. 926: bytes / 1024^3). A step with `timing_s/testing` or
`timing_s/save_checkpoint` is not steady state. The line states no layout.
"""

from __future__ import annotations

import re

from ...logs import LogFacts, Sample, number

SOURCE = "verl 0.7.0 verl/utils/logger/aggregate_logger.py l. 26-32, verl/trainer/ppo/metric_utils.py l. 293-302"
_LINE = re.compile(r"step:([0-9]{1,12}) - ")
_EXCLUDED = {"timing_s/testing": "validation", "timing_s/save_checkpoint": "checkpoint save"}


class VerlLog:
    source = SOURCE

    def __init__(self) -> None:
        self.last = 0

    def read(self, line: str, facts: LogFacts) -> None:
        found = _LINE.search(line)
        if not found:
            return
        metrics = {}
        for item in line[found.start():].split(" - ")[1:]:
            key, _, value = item.partition(":")
            metrics[key.strip()] = value
        seconds = number(metrics.get("perf/time_per_step", ""))
        if seconds is None:
            return
        step = int(found.group(1))
        facts.pending = next((why for key, why in _EXCLUDED.items() if key in metrics), None)
        facts.add(Sample(step, step - self.last if step > self.last else 1, seconds,
                         number(metrics.get("perf/throughput", ""))))
        facts.peak(number(metrics.get("perf/max_memory_allocated_gb", "")))
        self.last = step


def log_format() -> VerlLog:
    return VerlLog()
