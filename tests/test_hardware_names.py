"""Issue 22 item 17: hardware names people write (910B, Atlas 800T A2, A3, ...) are aliases in hardware.yaml, with
their sources, matched ignoring case, spaces, '-' and '_'; the plan says which row an alias named. An unknown name
gets "did you mean" (the models' code); a name no row plans (the 32 GB inference 910B) is refused with the reason.
`init --hardware` takes the same names."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from helpers import note_lines

from generator.cli import main
from generator.errors import TableError
from generator.tables import _hardware_names, load_tables

T = load_tables()
SPEC = "job: t\nmodel: qwen3-8b\nmethod: lora\nseq_len: 4096\nhardware: {}\nframeworks: [llama-factory]\n"


def plan(tmp_path, hardware: str):
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(json.dumps(hardware)), encoding="utf-8")
    return spec, CliRunner().invoke(main, ["plan", str(spec), "--json"])


@pytest.mark.parametrize("name,row", [("910b", "snt9b"), ("910B", "snt9b"), ("910B2", "snt9b"), ("a2", "snt9b"),
                                      ("Atlas 800T A2", "snt9b"), ("atlas-800t-a2", "snt9b"), ("SNT9B", "snt9b"),
                                      ("a3", "snt9b23"), ("910C", "snt9b23"), ("Atlas 900 A3 SuperPoD", "snt9b23"),
                                      ("RTX 4090", "rtx4090"), ("GeForce RTX 3090", "rtx3090")])
def test_an_alias_plans_as_its_row_and_the_plan_says_so(tmp_path, name, row):
    _, result = plan(tmp_path, name)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["hardware"] == row
    said = [n for n in note_lines(data["notes"]) if n.startswith(f"hardware '{name}' is {row} (")]
    assert len(said) == 1, note_lines(data["notes"])
    source = next((a["source"] for a in T.hardware[row].aliases if a["name"].lower() == name.lower()), None)
    assert source is None or said[0].endswith(f": {source}")


def test_the_row_name_itself_adds_no_note(tmp_path):
    _, result = plan(tmp_path, "snt9b")
    notes = note_lines(json.loads(result.stdout)["notes"])
    assert result.exit_code == 0 and not any(n.startswith("hardware ") for n in notes)


@pytest.mark.parametrize("name,hint", [("snt9c", "did you mean snt9b?"), ("snt9b32", "did you mean snt9b23?"),
                                       ("rtx4080", "did you mean rtx4090?"), ("tpu", ""),
                                       # issue 37: an alias inside a vendor's name (910B), no look-alike row
                                       ("Ascend910B", "did you mean snt9b?"), ("NVIDIA-H100", "did you mean h100?")])
def test_an_unknown_name_gets_did_you_mean(tmp_path, name, hint):
    spec, result = plan(tmp_path, name)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith(f"Error: {spec}: hardware: '{name}' is not a known hardware row or alias"
                                    f"{hint and '; '}{hint} (rows: snt9b, snt9b23, "), result.stderr


def test_a_name_no_row_plans_is_refused_with_the_reason(tmp_path):
    # The Atlas 800I A2's NPUs have 32 GB: "did you mean snt9b?" would plan 64 GB cards for it.
    spec, result = plan(tmp_path, "Atlas 800I A2")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {spec}: hardware: 'Atlas 800I A2' is not planned: the inference server")


@pytest.mark.parametrize("name,row", [("910B", "snt9b"), ("Atlas 900 A3 SuperPoD", "snt9b23")])
def test_init_takes_the_same_names(tmp_path, name, row):
    out = tmp_path / "job.yaml"
    made = CliRunner().invoke(main, ["init", "qwen3-8b", "--method", "lora", "--hardware", name, "-o", str(out)])
    assert made.exit_code == 0, made.stderr
    assert f'hardware: "{row}"' in out.read_text()
    unknown = CliRunner().invoke(main, ["init", "qwen3-8b", "--method", "lora", "--hardware", "snt9c"])
    assert unknown.exit_code == 2 and "did you mean snt9b?" in unknown.stderr


def test_two_rows_claiming_one_name_is_a_table_error():
    a3 = {"name": "A3", "source": "a mistake"}
    rows = {**T.hardware, "snt9b": replace(T.hardware["snt9b"], aliases=(*T.hardware["snt9b"].aliases, a3))}
    with pytest.raises(TableError, match="the name 'A3' is snt9b23's too|the name 'A3' is snt9b's too"):
        _hardware_names(rows)


# Issue 37 item 6: the GPUs people have were no rows ("A100" suggested a800, "H100" h800).
@pytest.mark.parametrize("name,row,memory,peak", [("A100 40GB", "a100-40gb", 40.0, 312.0),
                                                  ("a100-80gb", "a100-80gb", 80.0, 312.0),
                                                  ("H100", "h100", 80.0, 989.0), ("H200", "h200", 131.3, 989.0),
                                                  ("L40S", "l40s", 48.0, 362.05)])
def test_the_gpus_people_rent_are_rows_with_their_sources(tmp_path, name, row, memory, peak):
    _, result = plan(tmp_path, name)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    hw = T.hardware[row]
    assert data["hardware"] == row and (hw.memory_gb, hw.peak_tflops_bf16) == (memory, peak)
    assert "datasheet" in hw.source and f"{peak:g} TFLOPS" in data["frameworks"]["llama-factory"]["estimate"][
        "tps_source"]
    assert hw.frameworks == ("llama-factory", "verl")


def test_a100_without_its_memory_is_refused_with_both_rows(tmp_path):
    spec, result = plan(tmp_path, "A100")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {spec}: hardware: 'A100' is not planned: it comes with 40 GB or 80 GB: "
                                    f"give a100-40gb or a100-80gb"), result.stderr


def test_verl_plans_on_h200(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("job: t\nmodel: qwen3-8b\nmethod: grpo\nseq_len: 4096\nhardware: h200\nframeworks: [verl]\n"
                    "data: {samples: 10000, tokens_per_sample: 1000}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["plan", str(spec), "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["frameworks"]["verl"]["usable_gib"] == 131.3
