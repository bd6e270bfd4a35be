"""Property-based: thousands of generated specs, valid and invalid, through the CLI in-process. Never a traceback;
invalid specs exit 2 naming a field; valid ones plan layouts that obey every rule; render leaves the complete output
or nothing. A corpus of hostile strings in every free-text field comes out of every file as inert literals."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import check_layout_rules, make_spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main
from generator.resolve import resolve
from generator.tables import load_tables

T = load_tables()
ERROR_LINE = re.compile(r"^Error: (?P<file>.+?): (?P<path>[^:\s][^:]*): (?P<sentence>.+)$")

HOSTILE = [
    "it's", 'say "hi"', "$(touch /tmp/pwned)", "`id`", "${HOME}", "a;b&c|d", "back\\slash", "tab\there", "ünïcödé 😀",
    "-rf", "--config", "*?[glob]", "x" * 300, "{{ jinja }}", "#comment", "key: value", "[list, item]", "%s%n", "'",
    "new\nline", "nul\x00byte", "",
]

SAFE_HOSTILE = [h for h in HOSTILE if not any(ord(c) < 32 for c in h)]  # control characters are refused (spec.py)
PATH_KEYS = ["model_dir", "dataset", "output_dir", "mindformers_dir", "mindspeed_llm_dir", "mcore_ckpt_dir"]
# One wrong value per mistake, each at a known key (the error must name it).
MISTAKES = {
    "job": ["Bad Name", "", "a" * 70, "$(x)"], "model": ["qwen3-33b", "", "gpt-5"], "method": ["sft", 1],
    "seq_len": [4000, 0, -256, "4096", 4096.5, True], "hardware": ["tpu", None], "cards": [0, -8, "8", 7.5, 20],
    "frameworks": [["verl"], [], "mindformers"], "global_batch_size": [0, -1, "64"],
    "scaling_efficiency": [0, 1.5, "high"], "quantization_bit": [16, "4"], "time_budget_hours": [0, -3],
    "cluster": [{"master_addr": "a b"}, {"master_port": 70000}, {"host": "x"}],
    "paths": [{"model_dir": "relative"}, {"dataset": "/a\nb"}, {"unknown": "/x"}],
    "layout": [{"mindspeed-llm": {"tp": 3}}, {"llama-factory": {"tp": 2}}, {"verl": {}}],
    "data": [{"total_tokens": 0}, {"samples": 10}, {"epochs": 0, "total_tokens": 5}],
}


@st.composite
def valid_specs(draw) -> dict:
    """Specs a user could mean: a model some framework serves on the hardware, a method it offers."""
    hardware = draw(st.sampled_from(sorted(T.hardware)))
    hw = T.hardware[hardware]
    pairs = [(m, fw) for m in sorted(T.models) for fw in hw.frameworks if T.supports(fw, m)]
    model, framework = draw(st.sampled_from(pairs))
    methods = [m for m in T.frameworks[framework].methods
               if m in (T.frameworks[framework].methods_for(model) or T.frameworks[framework].methods)]
    method = draw(st.sampled_from(methods))
    seqs = [s for s in (1024, 2048, 4096, 8192, 16384) if s <= T.models[model].max_positions]
    spec = {"job": draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)), "model": model,
            "method": method, "seq_len": draw(st.sampled_from(seqs)), "hardware": hardware}
    if method == "qlora":
        spec["quantization_bit"] = draw(st.sampled_from(hw.quantization_bits))
    if draw(st.booleans()):
        spec["frameworks"] = [framework]
    if draw(st.integers(0, 3)) == 0:
        spec["cards"] = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    if draw(st.booleans()):
        spec["data"] = {"total_tokens": draw(st.integers(10**6, 10**10)), "epochs": draw(st.sampled_from([1, 2, 3]))}
        if draw(st.booleans()):
            spec["time_budget_hours"] = draw(st.sampled_from([12, 24, 72, 240]))
    if draw(st.booleans()):
        spec["global_batch_size"] = draw(st.sampled_from([64, 128, 256, 512]))
    if draw(st.booleans()):
        spec["cluster"] = {"master_addr": "10.0.0.1", "master_port": draw(st.sampled_from([29500, 50001]))}
    if draw(st.booleans()):
        spec["paths"] = {key: "/" + draw(st.sampled_from(SAFE_HOSTILE))
                         for key in draw(st.lists(st.sampled_from(PATH_KEYS), unique=True))}
    if framework != "llama-factory" and draw(st.integers(0, 3)) == 0:
        spec.setdefault("frameworks", [framework])
        spec["layout"] = {framework: {"tp": draw(st.sampled_from([1, 2, 4, 8])),
                                      "pp": draw(st.sampled_from([1, 2, 4]))}}
    return spec


@st.composite
def specs(draw) -> dict:
    """Valid specs, and valid specs with one mistake."""
    spec = draw(valid_specs())
    if draw(st.integers(0, 2)) == 0:
        key = draw(st.sampled_from(sorted(MISTAKES)))
        spec[key] = draw(st.sampled_from(MISTAKES[key]))
    return spec


def run_cli(args: list[str]):
    return CliRunner().invoke(main, args)


def check_outcome(spec_path: Path, result) -> dict | None:
    """The contract every run must honour; returns the plan JSON when the spec was valid."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2, 3), result.output
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert lines
        for line in lines:
            match = ERROR_LINE.match(line)
            assert match and match["file"] == str(spec_path) and match["path"], line
        return None
    return json.loads(result.stdout)


def fuzz(examples: int):
    """Reproducible in CI (derandomize); planning big jobs is slow for Hypothesis' default deadline."""
    return settings(max_examples=examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def write_spec(folder: str, spec: dict) -> Path:
    path = Path(folder) / "job.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


@fuzz(1500)
@given(specs())
def test_plan_never_crashes_and_valid_plans_obey_every_rule(spec):
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = write_spec(tmp, spec)
        result = run_cli(["plan", str(spec_path), "--json", "--force"])
        plan_json = check_outcome(spec_path, result)
        if plan_json is None:
            return
        plan = resolve(make_spec(**spec), T, force=True)
        for name in plan.frameworks:
            check_layout_rules(plan, name, force=True)
        assert plan_json["cards"] == plan.cards


@fuzz(150)
@given(specs())
def test_render_writes_everything_or_nothing(spec):
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = write_spec(tmp, spec)
        out = Path(tmp) / "out"
        result = run_cli(["render", str(spec_path), "-o", str(out)])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code in (0, 2), result.output
        if result.exit_code != 0:
            assert not out.exists() or not any(out.iterdir())
            return
        job = out / spec["job"]
        listed = [line.split("  ", 1)[1] for line in (job / "MANIFEST").read_text().splitlines()
                  if not line.startswith("#")]
        on_disk = sorted(str(p.relative_to(job)) for p in job.rglob("*") if p.is_file())
        assert on_disk == sorted(listed + ["MANIFEST"])


def _literal_words(script: str) -> list[str]:
    """What bash makes of every refuse_placeholder call and array element: run those lines with echo-like stubs."""
    wanted = [line for line in script.splitlines() if line.startswith("refuse_placeholder ")]
    arrays = re.findall(r"^[A-Z0-9_]+=\(\n.*?^\)", script, re.S | re.M)
    program = "refuse_placeholder() { printf '%s\\0' \"$2\"; }\n" + "\n".join(wanted) + "\n" + "\n".join(arrays) + \
        "\nfor name in $(compgen -A variable | grep '_ARGS$'); do declare -n a=$name; " \
        "printf '%s\\0' \"${a[@]}\"; done\n"
    out = subprocess.run(["bash", "-c", program], capture_output=True, check=True).stdout
    return out.decode("utf-8", "surrogateescape").split("\0")


@pytest.mark.parametrize("hostile", SAFE_HOSTILE,
                         ids=lambda h: repr(h)[:20])
def test_hostile_strings_are_inert_in_every_file(hostile, tmp_path):
    path = "/data/" + hostile
    paths = {key: path for key in ("model_dir", "dataset", "output_dir", "mindformers_dir", "mindspeed_llm_dir")}
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump({"job": "hostile", "model": "qwen3-8b", "method": "lora", "seq_len": 4096,
                                         "hardware": "snt9b", "paths": paths, "cluster": {"master_addr": "10.0.0.1"}},
                                        allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec_path), "-o", str(tmp_path / "out")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job = tmp_path / "out" / "hostile"
    assert not Path("/tmp/pwned").exists()
    for file in job.rglob("*"):
        text = file.read_text(encoding="utf-8") if file.is_file() else ""
        if file.suffix == ".yaml":
            values = _strings(yaml.safe_load(text))
            assert any(v.startswith(path) for v in values), file
        elif file.suffix == ".json":
            _strings(json.loads(text))
        elif file.suffix == ".sh":
            assert subprocess.run(["bash", "-n", str(file)]).returncode == 0
            words = _literal_words(text)
            assert path in words or any(w.startswith(path + "/") for w in words), file
            # The raw text never lets the value out of its quotes: no unquoted $(, `, ; from the spec reach bash.
            for line in text.splitlines():
                if path in line:
                    assert path not in line.replace(f"'{path}", "").replace(_shell_quoted(path), ""), line


def _shell_quoted(value: str) -> str:
    from generator.shell import quote
    return quote(value)


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


@pytest.mark.parametrize("bad", ["/data/new\nline", "/data/nul\x00byte", "relative/path"])
def test_paths_that_cannot_be_one_argument_are_refused(bad, tmp_path):
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump({"job": "x", "model": "qwen3-8b", "method": "lora", "seq_len": 4096,
                                         "hardware": "snt9b", "paths": {"model_dir": bad}}), encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(spec_path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and f"Error: {spec_path}: paths.model_dir: " in result.stderr
    assert not (tmp_path / "out").exists()
