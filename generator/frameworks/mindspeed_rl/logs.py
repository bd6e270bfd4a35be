"""The MindSpeed-RL log calibrate reads: the trainer's metrics line, once per iteration.

Format strings (v2.3.0, 4b30d034): mindspeed_rl/utils/loggers.py l. 30-45, Loggers.handle_msg: `[time] iteration:
{i} / {N} | ` then `{key} : {value:.4f} | ` for each metric (`{:e}` where the key holds "lr"), the last ` | ` cut,
after the logging prefix of l. 24. The GRPO trainer logs it after every iteration (trainer/grpo_trainer_hybrid.py
l. 240): `timing/all` is the iteration's timer (l. 165, utils/utils.py l. 276), `e2e_tps` the prompt + response
tokens of every sequence per second per device (l. 228-229, utils/utils.py l. 290-303). A device is a die on A3,
which is what the plan counts as a card on snt9b23 (hardware.yaml), so the figure is per card as logged (the A3
per-910C figure is twice it, docs/algorithms/grpo.md l. 210). The checkpoint save runs after the timer (l. 247-248)
and no validation runs in the loop, so no logged iteration holds one. The line states no layout and no memory.
"""

from __future__ import annotations

import re

from ...families.rl.metrics_log import MetricsLine, MetricsLog

LINE = MetricsLine(
    source="MindSpeed-RL v2.3.0 mindspeed_rl/utils/loggers.py l. 30-45, trainer/grpo_trainer_hybrid.py l. 228-240",
    step=re.compile(r"iteration: ([0-9]{1,12}) / [0-9]{1,12} \| "), items=" | ", pair=" : ", seconds="timing/all",
    rate="e2e_tps")


def log_format() -> MetricsLog:
    return MetricsLog(LINE)
