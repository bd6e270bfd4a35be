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

from ...families.rl.metrics_log import MetricsLine, MetricsLog

LINE = MetricsLine(
    source="verl 0.7.0 verl/utils/logger/aggregate_logger.py l. 26-32, verl/trainer/ppo/metric_utils.py l. 293-302",
    step=re.compile(r"step:([0-9]{1,12}) - "), items=" - ", pair=":", seconds="perf/time_per_step",
    rate="perf/throughput", memory="perf/max_memory_allocated_gb",
    excluded={"timing_s/testing": "validation", "timing_s/save_checkpoint": "checkpoint save"})


def log_format() -> MetricsLog:
    return MetricsLog(LINE)
