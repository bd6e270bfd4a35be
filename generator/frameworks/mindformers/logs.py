"""The MindFormers log calibrate reads: MFLossMonitor's step line, once per step (or per sink of steps).

Format string (mindspore-lab/mindformers mindformers/core/callback/callback.py l. 485-506 at fd4deebc, the same
fields at r1.7.0 l. 545-554): `"{ Epoch:[%3d/%3d], step:[%5d/%5d], loss: %5.3f, per_step_time: %dms, ..."`, the
step counted within the epoch, per_step_time the whole milliseconds per step since the last line. The line states
no layout and no memory: the spec's layout is the one measured.
"""

from __future__ import annotations

import re

from ...logs import LogFacts, Sample, whole

SOURCE = "MindFormers mindformers/core/callback/callback.py l. 485-506 (MFLossMonitor step line)"
_STEP = re.compile(r"Epoch:\[ *([0-9]{1,9})/ *[0-9]{1,9}\], step:\[ *([0-9]{1,12})/ *([0-9]{1,12})\],.*?"
                   r"per_step_time: ([0-9]{1,12})ms")


class MindFormersLog:
    source = SOURCE

    def __init__(self) -> None:
        self.last = 0

    def read(self, line: str, facts: LogFacts) -> None:
        found = _STEP.search(line)
        if not found:
            return
        epoch, step, per_epoch, ms = (whole(found.group(i)) for i in range(1, 5))
        if epoch is None or step is None or per_epoch is None or ms is None or epoch < 1:
            return
        at = (epoch - 1) * per_epoch + step  # the step of the whole run
        facts.add(Sample(at, at - self.last if at > self.last else 1, ms / 1000.0))
        self.last = at


def log_format() -> MindFormersLog:
    return MindFormersLog()
