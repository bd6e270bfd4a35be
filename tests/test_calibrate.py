"""Issue 41: `gen-launch calibrate` reads a run's own log back into the spec, and the next plan uses it.

Each framework's log lines are built from upstream's format strings (tests/calibrate_logs.py cites them); the
LLaMA-Factory round trip reads the real log of an execution-tier CPU run (tests/llamafactory_exec.py)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import calibrate_logs as L
import pytest
import yaml
from click.testing import CliRunner
from helpers import note_lines, require

from generator.calibration_block import Calibration
from generator.cli import main
from generator.logs import MAX_LINE, LogError, lines, number, steady

ROOT = Path(__file__).resolve().parent.parent
QWEN32 = {"job": "q32", "model": "qwen3-32b", "method": "full", "seq_len": 4096, "hardware": "snt9b", "cards": 16,
          "data": {"samples": 80000, "tokens_per_sample": 2048, "epochs": 2}}


def _cli(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args])


def _write_spec(folder: Path, spec: dict, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def _plan(spec_path: Path, *extra) -> dict:
    result = _cli("plan", spec_path, "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _framework(plan: dict, name: str) -> dict:
    return plan["frameworks"][name]


def _megatron_log(fp: dict, steps: int, ms: float, peak_mib: float, model=(64, 5120), seq_len=4096,
                  **changed) -> list[str]:
    """A MindSpeed-LLM run of the plan's layout: a slow first iteration, a save at 10 with a slow next interval."""
    args = {"tensor_model_parallel_size": fp["tp"], "pipeline_model_parallel_size": fp["pp"],
            "context_parallel_size": fp["cp"], "expert_model_parallel_size": fp["ep"], "world_size": fp["cards"],
            "micro_batch_size": fp["micro_batch_size"], "global_batch_size": fp["global_batch_size"],
            "seq_length": seq_len, "num_layers": model[0], "hidden_size": model[1], "lr": 1e-5, **changed}
    out = L.megatron_arguments(args)
    gbs = fp["global_batch_size"]
    for i in range(1, steps + 1):
        out.append(L.megatron_iteration(i, 1250, 4 * ms if i == 1 else 2 * ms if i == 11 else ms, gbs))
        if i == 1:
            out += [L.megatron_memory(1, rank, peak_mib * (1 if rank == 3 else 0.9)) for rank in range(4)]
        if i == 10:
            out.append(L.megatron_save(10))
    return out


def _log(folder: Path, name: str, rows: list[str]) -> Path:
    path = folder / name
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _round_trip(tmp_path: Path, spec: dict, framework: str, log_rows) -> tuple[dict, dict, dict]:
    """Plan the spec, write its run's log (log_rows(plan's framework dict)), calibrate into a new spec, plan it:
    (first plan's framework, the calibration block, the calibrated plan)."""
    spec_path = _write_spec(tmp_path, {**spec, "frameworks": [framework]})
    fp = _framework(_plan(spec_path), framework)
    log = _log(tmp_path, "train.log", log_rows(fp))
    out = tmp_path / "calibrated.yaml"
    result = _cli("calibrate", log, "--spec", spec_path, "-o", out)
    assert result.exit_code == 0, result.output
    block = yaml.safe_load(out.read_text())["calibration"]
    return fp, block, _plan(out)


def _steps(plan: dict) -> int:
    return plan["train"]["steps"]


def test_mindspeed_llm_round_trip_uses_the_measured_rate_and_step_time(tmp_path):
    fp, block, plan = _round_trip(tmp_path, QWEN32, "mindspeed-llm", lambda fp: _megatron_log(fp, 40, 45000, 65000))
    # Steady state: iterations 5..40 less 11 (the interval after the save); 45 s each.
    assert block["step_time_s"] == 45.0 and block["steps"] == 35
    assert block["tokens_per_card_s"] == pytest.approx(128 * 2048 / (45.0 * 16), rel=1e-3)
    assert block["peak_memory_gib"] == pytest.approx(65000 / 1024, abs=0.01)  # the largest rank's max allocated
    assert block["layout"] == {key: fp[key] for key in block["layout"]}
    assert block["log_sha256"] == [__import__("hashlib").sha256((tmp_path / "train.log").read_bytes()).hexdigest()]
    again = _framework(plan, "mindspeed-llm")
    assert again["tp"] == fp["tp"] and again["cards"] == 16
    assert again["estimate"]["tokens_per_card_s"] == pytest.approx(block["tokens_per_card_s"], rel=1e-3)
    source = again["estimate"]["tps_source"]
    assert source.startswith(f"measured: {block['tokens_per_card_s']:,.0f} tokens/s per card on tp{fp['tp']} "
                             f"pp{fp['pp']}") and f"log sha256 {block['log_sha256'][0][:12]}" in source
    assert f"modelled there: {fp['estimate']['tokens_per_card_s']:,.0f}" in source  # measured against modelled
    # The time estimate is the plan's steps x the measured step time (within 5%).
    assert again["estimate"]["time_hours"] * 3600 == pytest.approx(_steps(plan) * 45.0, rel=0.05)
    # 63.5 GiB measured against the model's 50.0 GiB: more than 15% apart, a warning.
    assert "mindspeed-llm: calibration.peak_memory_gib: the run peaked at 63.5 GiB per card where the memory model " \
           "estimates 50.0 GiB (-21%, more than 15% apart): the plan's fit check rests on the estimate" \
           in note_lines(plan["warnings"])


def test_a_peak_close_to_the_estimate_is_no_warning_and_md_shows_measured(tmp_path):
    spec_path = _write_spec(tmp_path, {**QWEN32, "frameworks": ["mindspeed-llm"]})
    fp = _framework(_plan(spec_path), "mindspeed-llm")
    log = _log(tmp_path, "train.log", _megatron_log(fp, 40, 45000, fp["memory_per_card_gib"] * 1024 * 1.05))
    result = _cli("calibrate", log, "--spec", spec_path)  # no -o: the block on stdout
    assert result.exit_code == 0, result.output
    spec = {**QWEN32, "frameworks": ["mindspeed-llm"], **yaml.safe_load(result.stdout)}
    plan = _plan(_write_spec(tmp_path, spec, "calibrated.yaml"))
    assert not [w for w in note_lines(plan["warnings"]) if "peak_memory_gib" in w]
    render = _cli("render", tmp_path / "calibrated.yaml", "-o", tmp_path / "out")
    assert render.exit_code == 0, render.output
    md = (tmp_path / "out" / "q32" / "PLAN.md").read_text()
    assert "measured: 364 tokens/s per card on tp4 pp4" in md and "modelled there:" in md


def test_another_layout_scales_the_measured_rate_by_the_step_model(tmp_path):
    _, block, plan = _round_trip(tmp_path, QWEN32, "mindspeed-llm", lambda fp: _megatron_log(fp, 40, 45000, 60000))
    measured_at = _framework(plan, "mindspeed-llm")["estimate"]["tokens_per_card_s"]
    pinned = tmp_path / "pinned.yaml"
    spec = yaml.safe_load((tmp_path / "calibrated.yaml").read_text())
    spec["layout"] = {"mindspeed-llm": {"tp": 8, "pp": 2}}
    pinned.write_text(yaml.safe_dump(spec))
    other = _framework(_plan(pinned), "mindspeed-llm")
    modelled = _framework(_plan(_write_spec(tmp_path, {k: v for k, v in spec.items() if k != "calibration"},
                                            "model.yaml")), "mindspeed-llm")
    base = _framework(_plan(_write_spec(tmp_path, {**QWEN32, "frameworks": ["mindspeed-llm"]}, "base.yaml")),
                      "mindspeed-llm")
    factor = modelled["estimate"]["tokens_per_card_s"] / base["estimate"]["tokens_per_card_s"]
    assert other["estimate"]["tokens_per_card_s"] == pytest.approx(measured_at * factor, rel=0.01)
    assert "the step model here" in other["estimate"]["tps_source"]


def test_a_budget_plan_picks_its_cards_from_the_measured_rate(tmp_path):
    budget = {**QWEN32, "cards": "auto", "time_budget_hours": 10}
    spec_path = _write_spec(tmp_path, {**budget, "frameworks": ["mindspeed-llm"]})
    first = _framework(_plan(spec_path), "mindspeed-llm")
    # A run three times slower than the model: the budget needs more cards.
    modelled_step = 128 * 2048 / (first["estimate"]["tokens_per_card_s"] * first["cards"])
    log = _log(tmp_path, "train.log", _megatron_log(first, 30, modelled_step * 3000, 50000))
    out = tmp_path / "calibrated.yaml"
    assert _cli("calibrate", log, "--spec", spec_path, "-o", out).exit_code == 0
    slow = _framework(_plan(out), "mindspeed-llm")
    assert first["estimate"]["time_hours"] <= 10 and slow["cards"] > first["cards"]
    assert slow["estimate"]["time_hours"] <= 10
    assert slow["estimate"]["tps_source"].startswith("measured:")


def test_mindspeed_mm_round_trip_shares_the_megatron_format(tmp_path):
    spec = {"job": "vl", "model": "qwen2.5_vl-7b", "method": "full", "seq_len": 1024, "hardware": "snt9b",
            "cards": 8, "data": {"samples": 50000, "tokens_per_sample": 1024}}
    # MindSpeed-MM's scripts pass no --num-layers or --hidden-size (the model's JSON holds them): None in the dump.
    fp, block, plan = _round_trip(tmp_path, spec, "mindspeed-mm",
                                  lambda fp: _megatron_log(fp, 20, 3000, 40000, model=(None, None), seq_len=1024))
    assert block["framework"] == "mindspeed-mm" and block["step_time_s"] == 3.0
    again = _framework(plan, "mindspeed-mm")
    assert again["estimate"]["tps_source"].startswith("measured:")
    assert again["estimate"]["time_hours"] * 3600 == pytest.approx(_steps(plan) * 3.0, rel=0.05)


def test_mindformers_round_trip(tmp_path):
    def rows(fp):
        return [L.mindformers_step(1 + (i - 1) // 20, 3, 1 + (i - 1) % 20, 20, 90000 if i == 1 else 30000)
                for i in range(1, 31)]
    _, block, plan = _round_trip(tmp_path, QWEN32, "mindformers", rows)
    assert block["step_time_s"] == 30.0 and block["peak_memory_gib"] is None and block["steps"] == 27
    again = _framework(plan, "mindformers")
    assert again["estimate"]["time_hours"] * 3600 == pytest.approx(_steps(plan) * 30.0, rel=0.05)


LF = {"job": "lf", "model": "qwen2.5-7b", "method": "lora", "seq_len": 2048, "hardware": "h800", "cards": 8,
      "data": {"samples": 40000, "tokens_per_sample": 1024}}


def test_llamafactory_trainer_log_round_trip_leaves_out_saves_and_evaluations(tmp_path):
    spec_path = _write_spec(tmp_path, {**LF, "frameworks": ["llama-factory"]})
    fp = _framework(_plan(spec_path), "llama-factory")
    per, gbs = fp["micro_batch_size"], fp["global_batch_size"]
    launch = L.trainer_start(per, gbs, gbs // (per * fp["cards"]), 60)
    launch += [L.trainer_save("/out", 20), L.trainer_save("/out", 40)]
    # 6 s a step after a 30 s first one; a save after steps 20 and 40 costs 100 s, an evaluation at 30 costs 50 s.
    elapsed, rows = 0.0, []
    for step in range(1, 61):
        elapsed += 30 if step == 1 else 106 if step in (21, 41) else 6
        rows.append(L.llamafactory_entry(step, 60, elapsed))
        if step == 30:
            elapsed += 50
            rows.append(L.llamafactory_entry(step, 60, elapsed, eval_loss=2.4))
    logs = [_log(tmp_path, "launch.log", launch), _log(tmp_path, "trainer_log.jsonl", rows)]
    out = tmp_path / "calibrated.yaml"
    result = _cli("calibrate", *logs, "--spec", spec_path, "-o", out)
    assert result.exit_code == 0, result.output
    block = yaml.safe_load(out.read_text())["calibration"]
    # The first line starts the clock: 59 intervals, warm-up the first 6, and those ending at 21, 31, 41 left out.
    assert block["step_time_s"] == 6.0 and block["steps"] == 59 - 6 - 3
    assert block["tokens_per_card_s"] == pytest.approx(gbs * 1024 / (6.0 * fp["cards"]), rel=1e-3)
    plan = _plan(out)
    assert _framework(plan, "llama-factory")["estimate"]["time_hours"] * 3600 == \
        pytest.approx(_steps(plan) * 6.0, rel=0.05)
    wrong = _log(tmp_path, "other.log", L.trainer_start(per, gbs * 2, 2 * gbs // (per * fp["cards"]), 60))
    refused = _cli("calibrate", wrong, logs[1], "--spec", spec_path)
    assert refused.exit_code == 2 and f"global_batch_size {gbs * 2} in the log, the plan has {gbs}" in refused.output


VERL = {"job": "rl", "model": "qwen3-8b", "method": "grpo", "seq_len": 4096, "hardware": "snt9b",
        "data": {"samples": 17000, "tokens_per_sample": 512}, "rl": {"reward": "math_dapo"}}


def test_verl_round_trip_reads_perf_throughput_in_verls_unit(tmp_path):
    seconds = 600.0

    def rows(fp):
        tokens = fp["global_batch_size"] * 5 * 4096  # n = 5 sequences a prompt, full length
        out = [L.verl_step(1, 3 * seconds, tokens, fp["cards"], 50.0)]
        out += [L.verl_step(i, seconds, tokens, fp["cards"], 52.5) for i in range(2, 12)]
        out.append(L.verl_step(12, 2 * seconds, tokens, fp["cards"], 52.5, **{"timing_s/save_checkpoint": 300.0}))
        out += [L.verl_step(i, seconds, tokens, fp["cards"], 52.5) for i in range(13, 16)]
        return out
    fp, block, plan = _round_trip(tmp_path, VERL, "verl", rows)
    assert block["step_time_s"] == seconds and block["peak_memory_gib"] == 52.5
    assert block["tokens_per_card_s"] == pytest.approx(fp["global_batch_size"] * 5 * 4096 / (seconds * fp["cards"]),
                                                       rel=1e-3)
    again = _framework(plan, "verl")
    assert again["estimate"]["time_hours"] * 3600 == pytest.approx(_steps(plan) * seconds, rel=0.05)
    assert "as verl's perf/throughput" in again["estimate"]["tps_source"]
    bare = _log(tmp_path, "bare.log", [L.verl_metrics(i, {"perf/time_per_step": seconds}) for i in range(1, 16)])
    refused = _cli("calibrate", bare, "--spec", tmp_path / "job.yaml")
    assert refused.exit_code == 2 and "the steady steps log no verl throughput" in refused.output


MSRL = {"job": "msrl", "model": "qwen3-8b", "method": "grpo", "seq_len": 4096, "hardware": "snt9b23",
        "data": {"samples": 17000, "tokens_per_sample": 512}}


def test_mindspeed_rl_round_trip_reads_e2e_tps_per_die(tmp_path):
    seconds, n = 500.0, 8  # n: grpo_qwen3_8b_A3.yaml's n_samples_per_prompt, which the plan keeps

    def rows(fp):
        gbs, cards = fp["global_batch_size"], fp["cards"]
        # grpo_trainer_hybrid.py l. 153 (not an iteration line), then a slow first iteration
        out = ["sync start grpo training at iteration: 0/200 ...",
               L.mindspeed_rl_step(1, 200, 4 * seconds, 1024.0, 3072.0, gbs, n, cards)]
        out += [L.mindspeed_rl_step(i, 200, seconds, 1024.0, 3072.0, gbs, n, cards) for i in range(2, 13)]
        # hostile: an overflowing step time, an infinite rate, a line with no step time: none is a sample
        return out + ["iteration: 5 / 200 | timing/all : " + "9" * 400 + " | e2e_tps : 1.0",
                      "\x1b[2Jiteration: 6 / 200 | timing/all : 1e999 | e2e_tps : 1.0",
                      "iteration: 7 / 200 | e2e_tps : 1e999"]
    fp, block, plan = _round_trip(tmp_path, {**MSRL, "cards": 16}, "mindspeed-rl", rows)
    assert block["step_time_s"] == seconds and block["steps"] == 11 and block.get("peak_memory_gib") is None
    # e2e_tps per device as logged: a device is a die on A3, the plan's card on snt9b23 (no x2)
    assert block["tokens_per_card_s"] == pytest.approx(fp["global_batch_size"] * n * 4096 / (seconds * fp["cards"]),
                                                       rel=1e-3)
    again = _framework(plan, "mindspeed-rl")
    assert again["cards"] == fp["cards"]
    source = again["estimate"]["tps_source"]
    assert source.startswith(f"measured: {block['tokens_per_card_s']:,.0f} tokens/s per card") \
        and "as MindSpeed-RL's e2e_tps" in source and f"x 512 / (n {n} x seq_len 4096)" in source
    assert again["estimate"]["time_hours"] * 3600 == pytest.approx(_steps(plan) * seconds, rel=0.05)


@pytest.mark.parametrize("changed, words", [
    ({"tensor_model_parallel_size": 8}, "the run used another layout: tp 8 in the log, the plan has 4"),
    ({"world_size": 32}, "the run used another layout: cards 32 in the log, the plan has 16"),
    ({"num_layers": 40}, "the run trained another model: layers 40 in the log, qwen3-32b has 64"),
    ({"seq_length": 8192}, "the run trained at sequence length 8192; the spec plans 4096"),
])
def test_a_log_of_another_run_is_refused_naming_why(tmp_path, changed, words):
    spec_path = _write_spec(tmp_path, {**QWEN32, "frameworks": ["mindspeed-llm"]})
    fp = _framework(_plan(spec_path), "mindspeed-llm")
    log = _log(tmp_path, "train.log", _megatron_log(fp, 20, 45000, 50000, **changed))
    out = tmp_path / "calibrated.yaml"
    result = _cli("calibrate", log, "--spec", spec_path, "-o", out)
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_a_crashed_run_is_refused(tmp_path):
    spec_path = _write_spec(tmp_path, {**QWEN32, "frameworks": ["mindspeed-llm"]})
    fp = _framework(_plan(spec_path), "mindspeed-llm")
    rows = _megatron_log(fp, 3, 45000, 50000) + ["Traceback (most recent call last):", "RuntimeError: out of memory"]
    result = _cli("calibrate", _log(tmp_path, "train.log", rows), "--spec", spec_path)
    assert result.exit_code == 2
    assert "3 step(s) logged, 2 after warm-up (1 step line(s)) and 0 with a save or validation; steady state " \
           "needs 3: the job crashed or stopped before it" in result.output
    none = _cli("calibrate", _log(tmp_path, "empty.log", ["nothing here"]), "--spec", spec_path)
    assert none.exit_code == 2 and "no step line of mindspeed-llm" in none.output


def test_a_calibration_of_another_model_is_refused_by_plan(tmp_path):
    _, block, _ = _round_trip(tmp_path, QWEN32, "mindspeed-llm", lambda fp: _megatron_log(fp, 20, 45000, 50000))
    spec = {**QWEN32, "model": "qwen3-14b", "frameworks": ["mindspeed-llm"], "calibration": block}
    result = _cli("plan", _write_spec(tmp_path, spec, "other.yaml"))
    assert result.exit_code == 2
    assert "calibration.model: the run was measured with model 'qwen3-32b', this spec plans 'qwen3-14b'" \
        in result.output
    other = {**spec, "model": "qwen3-32b", "frameworks": ["mindformers"]}
    unused = _cli("plan", _write_spec(tmp_path, other, "u.yaml"))
    assert unused.exit_code == 2 and "calibration.framework: 'mindspeed-llm' is not in frameworks" in unused.output
    both = _cli("plan", _write_spec(tmp_path, {**spec, "model": "qwen3-32b", "tokens_per_card_s": 100}, "b.yaml"))
    assert both.exit_code == 2 and "give tokens_per_card_s or calibration, not both" in both.output


def test_hostile_log_content_is_data_read_with_bounds(tmp_path):
    spec_path = _write_spec(tmp_path, {**QWEN32, "frameworks": ["mindspeed-llm"]})
    fp = _framework(_plan(spec_path), "mindspeed-llm")
    good = _megatron_log(fp, 20, 45000, 50000)
    hostile = [
        "x" * (MAX_LINE * 3),  # a huge line: skipped
        "\x1b[2J\x1b]0;pwned\x07 iteration 5/10 | elapsed time per iteration (ms): 1.0 |",  # control characters
        " iteration 999999/1000000 | elapsed time per iteration (ms): " + "9" * 400 + " |",  # overflowing number
        " iteration 77777/1000000 | elapsed time per iteration (ms): 1e999 |",
        "__import__('os').system('touch " + str(tmp_path / "pwned") + "')",
        '{"current_steps": ' + "9" * 5000 + ', "elapsed_time": "0:00:01"}',
    ]
    log = _log(tmp_path, "train.log", good[:30] + hostile + good[30:])
    result = _cli("calibrate", log, "--spec", spec_path)
    assert result.exit_code == 0, result.output
    block = yaml.safe_load(result.stdout)["calibration"]
    # The control-character line still parses as iteration 5 (its escape codes blanked), replacing the real one;
    # the overflowing ones are not numbers.
    assert block["step_time_s"] == pytest.approx(45.0, rel=0.1) and not (tmp_path / "pwned").exists()
    assert "\x1b" not in result.output
    assert number("9" * 400) is None and number("1e999") is None and number("nan") is None and number("1,024") == 1024
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    refused = _cli("calibrate", fifo, "--spec", spec_path)
    assert refused.exit_code == 2 and "is not a regular file" in refused.output


def test_lines_are_bounded_and_cleaned(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"ok\x1b[31m\n" + b"y" * (MAX_LINE + 5) + b"\n\xff\xfelast")
    assert list(lines(path)) == ["ok [31m", "\ufffd\ufffdlast"]
    across = tmp_path / "b.log"  # a line past the bound over several read chunks is dropped to its end, not held
    across.write_bytes(b"a\n" + b"z" * (3 << 20) + b"\nafter\n" + b"w" * (MAX_LINE + 1))
    assert list(lines(across)) == ["a", "after"]
    with pytest.raises(LogError):
        steady([], "a.log")


def test_calibration_block_round_trips_through_the_schema(tmp_path):
    _, block, _ = _round_trip(tmp_path, QWEN32, "mindspeed-llm", lambda fp: _megatron_log(fp, 20, 45000, 50000))
    assert Calibration.from_spec(block).to_spec() == block
    assert list(block) == ["framework", "model", "method", "hardware", "seq_len", "tokens_per_card_s", "step_time_s",
                           "peak_memory_gib", "steps", "layout", "log_sha256", "gen_launch_version"]
    bad = {**QWEN32, "calibration": {**block, "log_sha256": ["not a hash"]}}
    result = _cli("plan", _write_spec(tmp_path, bad, "bad.yaml"))
    assert result.exit_code == 2 and "calibration.log_sha256" in result.output


def test_a_spec_that_already_has_a_calibration_is_not_appended_to(tmp_path):
    _, block, _ = _round_trip(tmp_path, QWEN32, "mindspeed-llm", lambda fp: _megatron_log(fp, 20, 45000, 50000))
    calibrated = tmp_path / "calibrated.yaml"
    before = calibrated.read_bytes()
    result = _cli("calibrate", tmp_path / "train.log", "--spec", calibrated, "-o", calibrated)
    assert result.exit_code == 2 and "already has a calibration block" in result.output
    assert calibrated.read_bytes() == before


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration
def test_llamafactory_cpu_run_log_round_trip(tmp_path):
    # The real log of an execution-tier run (tests/llamafactory_exec.py): the generated launch.sh with the real
    # llamafactory-cli on a tiny model, 40 steps on the CPU, through calibrate (its launch log and
    # trainer_log.jsonl), then plan: the measured rate is used, and the time is the steps x the measured step time.
    require("llamafactory", "deepspeed", "bitsandbytes")
    import llamafactory_exec as X

    job = next(job for job in X.covering(X.all_jobs()) if job.method == "lora" and job.cards == 1)
    overrides = tuple(word for word in X.CPU_OVERRIDES if not word.startswith("max_steps=")) + ("max_steps=40",)
    result = X.run(job, tmp_path / "job", _free_port(), tmp_path / "models", overrides=overrides)
    assert result.returncode == 0, result.log[-4000:]
    spec = tmp_path / "job" / "spec.yaml"
    data = ("--set", "data.samples=2000000", "--set", "data.tokens_per_sample=512")
    logs = [tmp_path / "job" / "launch.log", result.output / X.NAME / "trainer_log.jsonl"]
    out = tmp_path / "calibrated.yaml"
    done = _cli("calibrate", *logs, "--spec", spec, *data, "-o", out)
    assert done.exit_code == 0, done.output
    block = yaml.safe_load(out.read_text())["calibration"]
    entries = [json.loads(row) for row in logs[1].read_text().splitlines()]
    elapsed = [sum(int(part) * 60 ** i for i, part in enumerate(reversed(e["elapsed_time"].split(":"))))
               for e in entries]
    # Warm-up: the first 10% of the logged steps (4 of 40); the mean of the rest is their whole-second span.
    assert block["steps"] == 35 and block["step_time_s"] == pytest.approx((elapsed[-1] - elapsed[4]) / 35, rel=1e-3)
    assert block["layout"]["cards"] == 1 and block["peak_memory_gib"] is None
    plan = _plan(out, *data)
    est = _framework(plan, X.NAME)["estimate"]
    assert est["tps_source"].startswith("measured:") and not est["tps_source"].endswith("estimate")
    assert est["time_hours"] * 3600 == pytest.approx(_steps(plan) * block["step_time_s"], rel=0.05)


def test_mindspeed_rl_reads_a_spec_rate_as_its_e2e_tps(tables):
    """A spec's tokens_per_card_s is the framework's own end-to-end figure for MindSpeed-RL as for verl (the schema
    says so): converted per data token as the published rows are, not taken as a rate per data token."""
    from helpers import make_spec

    from generator.resolve import resolve

    spec = make_spec(model="qwen3-8b", method="grpo", seq_len=4096, hardware="snt9b23", cards=16,
                     frameworks=["mindspeed-rl"], tokens_per_card_s=100,
                     data={"samples": 1000, "tokens_per_sample": 512})
    estimate = resolve(spec, tables).frameworks["mindspeed-rl"].estimate
    assert "as MindSpeed-RL's e2e_tps" in estimate.tps_source and estimate.tokens_per_card_s < 100
