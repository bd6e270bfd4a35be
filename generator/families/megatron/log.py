"""The log of a Megatron-style job, as the family writes it (mindspeed-llm through Megatron core_v0.12.1, which
MindSpeed-LLM 2.2.0 carries; mindspeed-mm through its own copy of the same training_log).

Format strings (NVIDIA/Megatron-LM at tag core_v0.12.1, a845aa7e):
- megatron/training/training.py l. 1533-1581, training_log: `' iteration {:8d}/{:8d} |'`, `' elapsed time per
  iteration (ms): {:.1f} |'` (the interval timer over log_interval iterations, l. 1518-1523), `' global batch size:
  {:5d} |'`; MindSpeed-MM v2.2.0 mindspeed_mm/training.py l. 929-975 writes the same fields.
- megatron/training/utils.py l. 260-274, report_memory: `'[Rank {}] {}'` of `name + ' memory (MB)' + ' | allocated:
  {}' + ' | max allocated: {}'`, in MiB (bytes / 1024^2), once after the first logged iteration (training.py
  l. 1582-1588; MindSpeed-MM l. 984), by each data-parallel rank 0.
- megatron/training/arguments.py l. 975-987, _print_args: `'  {} {} {}'.format(arg, dots, value)`, dots filling
  to 48 characters, between `------------------------ arguments ------------------------` lines.
- megatron/training/checkpointing.py l. 361: `'saving checkpoint at iteration {:7d} to {} in {} format'`;
  training.py l. 2279: `' validation loss at {prefix} | '`. The interval timer stops for both (l. 1647-1675,
  l. 2068-2093), but the next interval also holds the barrier and restart: not steady state.
"""

from __future__ import annotations

import re

from ...logs import LogFacts, Sample, number, whole

SOURCE = ("Megatron core_v0.12.1 megatron/training/training.py l. 1533-1581 (training_log), utils.py l. 260-274 "
          "(report_memory), arguments.py l. 975-987 (_print_args)")
_ITERATION = re.compile(r" iteration +([0-9]{1,12})/ *([0-9]{1,12}) \|")
_ELAPSED = re.compile(r" elapsed time per iteration \(ms\): ([0-9.]{1,30}) \|")
_BATCH = re.compile(r" global batch size: +([0-9]{1,12}) \|")
_MEMORY = re.compile(r"memory \(MB\) \| allocated: [0-9.eE+-]{1,40} \| max allocated: ([0-9.eE+-]{1,40})")
_ARGUMENT = re.compile(r"  ([a-z_0-9]{1,60}) \.+ (\S{1,40})$")
# _print_args names -> the plan's vocabulary; num_layers and hidden_size name the model.
ARGUMENTS = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
             "context_parallel_size": "cp", "expert_model_parallel_size": "ep", "world_size": "cards",
             "micro_batch_size": "micro_batch_size", "global_batch_size": "global_batch_size",
             "seq_length": "seq_len", "num_layers": "layers", "hidden_size": "hidden"}
MIB_PER_GIB = 1024.0


class MegatronLog:
    """The Megatron family's log lines (module docstring)."""

    source = SOURCE

    def __init__(self) -> None:
        self.last = 0  # the iteration of the previous line: a line covers the iterations since

    def read(self, line: str, facts: LogFacts) -> None:
        if "saving checkpoint at iteration" in line:
            facts.pending = "checkpoint save"
        elif " validation loss at " in line:
            facts.pending = "validation"
        found = _ITERATION.search(line)
        elapsed = _ELAPSED.search(line)
        if found and elapsed:
            step, ms = int(found.group(1)), number(elapsed.group(1))
            if ms is not None and step > 0:
                facts.add(Sample(step, step - self.last if step > self.last else 1, ms / 1000.0))
                self.last = step
            batch = _BATCH.search(line)
            facts.state("global_batch_size", whole(batch.group(1)) if batch else None)
            return
        memory = _MEMORY.search(line)
        if memory:
            mib = number(memory.group(1))
            facts.peak(None if mib is None else mib / MIB_PER_GIB)
            return
        argument = _ARGUMENT.match(line)
        if argument and argument.group(1) in ARGUMENTS:
            facts.state(ARGUMENTS[argument.group(1)], whole(argument.group(2)))


def log_format() -> MegatronLog:
    return MegatronLog()
