"""Log lines as each framework writes them, built from upstream's own format strings (cited at each function; the
parsers under test are generator/frameworks/*/logs.py and families/megatron/log.py). Used by tests/test_calibrate.py."""

from __future__ import annotations

import json
import pprint
from datetime import timedelta


def megatron_arguments(values: dict) -> list[str]:
    """Megatron core_v0.12.1 megatron/training/arguments.py l. 975-987, _print_args."""
    title = "arguments"
    rows = ["  {} {} {}".format(arg, "." * (48 - len(arg)), value) for arg, value in values.items()]
    return [f"------------------------ {title} ------------------------", *sorted(rows, key=lambda x: x.lower()),
            f"-------------------- end of {title} ---------------------"]


def megatron_iteration(iteration: int, train_iters: int, ms: float, batch_size: int) -> str:
    """Megatron core_v0.12.1 megatron/training/training.py l. 1533-1581, training_log (log_throughput off, no
    decoupled LR, one loss)."""
    log_string = " [2026-11-28 08:00:00]"
    log_string += f" iteration {iteration:8d}/{train_iters:8d} |"
    log_string += f" consumed samples: {iteration * batch_size:12d} |"
    log_string += f" elapsed time per iteration (ms): {ms:.1f} |"
    log_string += f" learning rate: {1e-5:.6E} |"
    log_string += f" global batch size: {batch_size:5d} |"
    log_string += " {}: {:.6E} |".format("lm loss", 2.5)
    log_string += f" loss scale: {1.0:.1f} |"
    log_string += f" grad norm: {0.8:.3f} |"
    log_string += f" number of skipped iterations: {0:3d} |"
    log_string += f" number of nan iterations: {0:3d} |"
    return log_string


def megatron_memory(iteration: int, rank: int, max_allocated_mib: float) -> str:
    """Megatron core_v0.12.1 megatron/training/utils.py l. 260-274, report_memory('(after {} iterations)')."""
    string = f"(after {iteration} iterations)" + " memory (MB)"
    string += f" | allocated: {max_allocated_mib * 0.6}"
    string += f" | max allocated: {max_allocated_mib}"
    string += f" | reserved: {max_allocated_mib * 1.1}"
    string += f" | max reserved: {max_allocated_mib * 1.1}"
    return f"[Rank {rank}] {string}"


def megatron_save(iteration: int) -> str:
    """Megatron core_v0.12.1 megatron/training/checkpointing.py l. 361."""
    return "saving checkpoint at iteration {:7d} to {} in {} format".format(iteration, "/ckpt", "torch_dist")


def mindformers_step(epoch: int, epochs: int, step: int, per_epoch: int, ms: int) -> str:
    """MindFormers mindformers/core/callback/callback.py l. 485-487 (fd4deebc), MFLossMonitor, sink mode."""
    return ("{ Epoch:[%3d/%3d], step:[%5d/%5d], loss: %5.3f, "  # noqa: UP031 (upstream's own %-format, verbatim)
            "per_step_time: %dms, lr: %s, overflow cond: %s, loss_scale: %s, global_norm: %s%s") % (
        epoch, epochs, step, per_epoch, 2.5, int(ms), "1e-05", False, 1.0, 0.8, "")


def verl_metrics(step: int, metrics: dict) -> str:
    """verl 0.7.0 verl/utils/logger/aggregate_logger.py l. 26-32, concat_dict_to_str."""
    output = [f"step:{step}"]
    for k, v in metrics.items():
        output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


def verl_step(step: int, seconds: float, tokens: int, cards: int, peak_gib: float, **extra: float) -> str:
    """A step's metrics as verl 0.7.0 computes them: metric_utils.py l. 293-302 (compute_throughout_metrics),
    fsdp_workers.py l. 926 (perf/max_memory_allocated_gb)."""
    return verl_metrics(step, {"actor/pg_loss": 0.01, "perf/max_memory_allocated_gb": peak_gib,
                               "perf/total_num_tokens": tokens, "perf/time_per_step": seconds,
                               "perf/throughput": tokens / (seconds * cards), "timing_s/step": seconds, **extra})


def llamafactory_entry(step: int, total: int, elapsed: float, **extra: float) -> str:
    """LLaMA-Factory 0.9.5 src/llamafactory/train/callbacks.py l. 206-216 (_timing) and l. 272-300 (on_log), one
    trainer_log.jsonl line (_write_log, l. 215-217: json.dumps)."""
    logs = dict(current_steps=step, total_steps=total, loss=2.5, lr=1e-5, epoch=step / total,
                percentage=round(step / total * 100, 2), elapsed_time=str(timedelta(seconds=int(elapsed))),
                remaining_time=str(timedelta(seconds=int((total - step) * elapsed / step))), **extra)
    return json.dumps(logs)


def trainer_start(per_device: int, total_batch: int, accumulation: int, steps: int) -> list[str]:
    """transformers 5.6.0 trainer.py l. 1469-1478, through its logger's INFO format."""
    return ["[INFO|trainer.py:1469] >> ***** Running training *****",
            f"[INFO|trainer.py:1473] >>   Instantaneous batch size per device = {per_device:,}",
            f"[INFO|trainer.py:1476] >>   Total train batch size (w. parallel, distributed & accumulation) = "
            f"{total_batch:,}",
            f"[INFO|trainer.py:1477] >>   Gradient Accumulation steps = {accumulation}",
            f"[INFO|trainer.py:1478] >>   Total optimization steps = {steps:,}"]


def trainer_save(output_dir: str, step: int) -> str:
    """transformers 5.6.0 trainer.py l. 3815."""
    return f"[INFO|trainer.py:3815] >> Saving model checkpoint to {output_dir}/checkpoint-{step}"


def mindspeed_rl_iteration(iteration: int, steps: int, metrics: dict) -> str:
    """MindSpeed-RL v2.3.0 mindspeed_rl/utils/loggers.py l. 24 (the logging prefix) and l. 30-45 (handle_msg)."""
    fmt_msg = "[2026-11-28 08:00:00] "
    fmt_msg += f"iteration: {iteration} / {steps} | "
    for key in metrics:
        if "lr" in key:
            fmt_msg += f"{key} : {metrics[key]:e} | "
        else:
            fmt_msg += f"{key} : {format(metrics[key], '.4f')} | "
    return f"2026-11-28 08:00:00,000 - INFO - {fmt_msg[:-2]}"


def mindspeed_rl_step(iteration: int, steps: int, seconds: float, prompt: float, response: float, gbs: int, n: int,
                      cards: int) -> str:
    """An iteration's metrics as the GRPO trainer computes them: timing/all (trainer/grpo_trainer_hybrid.py l. 165,
    utils/utils.py l. 276) and e2e_tps (grpo_trainer_hybrid.py l. 228-229, utils/utils.py l. 290-303: mean prompt +
    response length x gbs x n / the actor's NPUs / time), in metrics_sort's order (utils/utils.py l. 233-287)."""
    return mindspeed_rl_iteration(iteration, steps, {
        "timing/all": seconds, "timing/update": seconds * 0.3, "timing/rollout": seconds * 0.5, "actor/lr": 1e-6,
        "actor/pg_loss": 0.01, "prompt_length/mean": prompt, "response_length/mean": response,
        "e2e_tps": (prompt + response) * gbs * n / cards / seconds, "update_tps": 1.0, "vllm_tps": 2.0})
