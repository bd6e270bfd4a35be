"""The gen-launch command line: parse, call spec -> plan -> files, print, exit.

Exit status: 0 ok; 1 `check` found drift or `validate` a problem; 2 bad spec or arguments, a pinned layout that breaks a rule, no layout
that fits, a refusal; 3 `--strict` and the plan warns; 4 `validate` could not run a check because the
environment is broken (a package that is installed but does not import); 5 a data table under generator/data/ lacks
a fact a framework needs (after an edit to it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import click

from . import __version__
from .errors import SpecError, UserError, show, show_path
from .plan import Plan
from .render import check as check_files
from .render import compare, environment, render_files, write
from .render.core import plan_json
from .resolve import candidate_layouts, minimum_table, resolve
from .shell import quote
from .spec import load_spec
from .starter import starter_spec
from .tables import METHODS, load_tables
from .validate import validate as validate_job

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
EXIT_DRIFT, EXIT_USER, EXIT_STRICT, EXIT_ENVIRONMENT = 1, 2, 3, 4
MAX_CANDIDATES = 15  # layouts listed per framework by plan --candidates (the JSON has them all)


def _fail(error: UserError, source: str) -> NoReturn:
    for line in error.lines(source):
        click.echo(line, err=True)
    sys.exit(error.exit_code)


def _plan(spec_path: str, force: bool, overrides: tuple[str, ...] = ()) -> Plan:
    try:
        return resolve(load_spec(spec_path, overrides), load_tables(), force=force)
    except UserError as error:
        _fail(error, spec_path)


def _files(plan: Plan, spec_path: str) -> dict[str, str]:
    try:
        return render_files(plan)
    except UserError as error:  # a planned framework the registry cannot render (exit 5)
        _fail(error, spec_path)


def _plan_text(plan: Plan) -> str:
    """The plan as `plan` prints it (and `render` on stderr)."""
    return environment().get_template("plan.txt.j2").render(plan=plan)


def _strict_exit(plan: Plan, strict: bool) -> None:
    if plan.warnings:
        for warning in plan.warnings:
            click.echo(f"Warning: {warning}", err=True)
        if strict:
            click.echo("Error: --strict: the plan warns (see above)", err=True)
            sys.exit(EXIT_STRICT)


spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=str))
set_option = click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
                          help="Override a spec value (repeatable), validated as if written in the file, e.g. "
                               "--set train.learning_rate=2.0e-5 --set cards=16.")
force_option = click.option("--force", is_flag=True,
                            help="Accept a card count below the table minimum or a '-' cell, or a pinned layout the "
                                 "memory model says does not fit (flagged in the plan); on render, also overwrite "
                                 "generated files that were edited by hand.")
strict_option = click.option("--strict", is_flag=True, help="Exit 3 when the plan warns: a forced layout may "
                                                            "not fit, the time budget is missed, or checkpoints "
                                                            "outgrow keep_checkpoints.")
out_option = click.option("-o", "--out", "out_dir", default="out", show_default=True,
                          type=click.Path(file_okay=False, path_type=Path),
                          help="Folder that holds one sub-folder per job.")


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="gen-launch")
def main() -> None:
    """Plan and generate launch files for LLM training on Ascend NPU clusters (and LLaMA-Factory on NVIDIA GPUs).

    \b
    Example:
        gen-launch plan examples/qwen3-32b-full-snt9b-16c.yaml
        gen-launch render examples/qwen3-32b-full-snt9b-16c.yaml -o out
        gen-launch check examples/qwen3-32b-full-snt9b-16c.yaml -o out
    """


@main.command()
@spec_argument
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (the keys plan.json has).")
@click.option("--candidates", "show_candidates", is_flag=True,
              help="Also list every layout that fits at the plan's card count, with its memory and estimated speed.")
@force_option
@strict_option
def plan(spec: str, overrides: tuple[str, ...], as_json: bool, show_candidates: bool, force: bool,
         strict: bool) -> None:
    """Show the cards, layout, memory and time chosen for SPEC, and why.

    \b
    Example:
        gen-launch plan examples/qwen3-32b-full-snt9b-16c.yaml --json
    """
    result = _plan(spec, force, overrides)
    found = {}
    if show_candidates:
        try:
            found = candidate_layouts(load_spec(spec, overrides), load_tables(), result)
        except UserError as error:
            _fail(error, spec)
    if as_json:
        extra = {"candidates": {name: [row.to_json() for row in rows] for name, rows in found.items()}} \
            if show_candidates else None
        click.echo(plan_json(result, extra), nl=False)
    else:
        click.echo(_plan_text(result), nl=False)
        if show_candidates:
            click.echo(environment().get_template("candidates.txt.j2").render(
                plan=result, candidates=found, limit=MAX_CANDIDATES), nl=False)
    _strict_exit(result, strict)


@main.command()
@spec_argument
@set_option
@out_option
@force_option
@strict_option
@click.option("--dry-run", is_flag=True, help="Render and report what would change; write nothing.")
def render(spec: str, overrides: tuple[str, ...], out_dir: Path, force: bool, strict: bool, dry_run: bool) -> None:
    """Write OUT/<job>/: PLAN.md, plan.json, MANIFEST and each framework's launch files.

    The whole folder is written beside the old one and swapped in at once: a failed or killed render leaves the
    old folder or the new one. Anything in it render did not write as it is (hand edits, stray files, links) is
    refused unless --force, which first keeps a copy as OUT/<job>+backup-<time>. One line per path on stdout:
    create, overwrite, identical, mode (executable bit restored), remove, edited, stray; the plan's summary (as
    `gen-launch plan` prints it) goes to stderr.

    \b
    Example:
        gen-launch render examples/qwen3-32b-full-snt9b-16c.yaml -o out
    """
    result = _plan(spec, force, overrides)
    _strict_exit(result, strict)
    files = _files(result, spec)
    try:
        written = None if dry_run else write(files, out_dir, result.job, force)
    except UserError as error:
        _fail(error, spec)
    click.echo(_plan_text(result), nl=False, err=True)
    for change in written.changes if written else compare(files, out_dir / result.job):
        click.echo(f"{change.action:>9}  {show_path(out_dir / result.job / change.path)}")
    if written and written.backup:
        click.echo(f"kept the folder as it was (with the edits --force replaced) in {written.backup}", err=True)


@main.command()
@spec_argument
@set_option
@out_option
def check(spec: str, overrides: tuple[str, ...], out_dir: Path) -> None:
    """Exit 0 when OUT/<job>/ holds exactly what render would write, 1 (with a summary) otherwise.

    Every difference counts: a missing, changed or stray file or folder, a link, a FIFO, a changed executable bit.

    \b
    Example (CI or pre-commit in an experiment repo):
        gen-launch check jobs/qwen3-32b.yaml -o launch
    """
    result = _plan(spec, False, overrides)
    problems = check_files(_files(result, spec), out_dir, result.job)
    if problems:
        for line in problems:
            click.echo(line)
        again = " ".join(quote(w) for w in ["gen-launch", "render", spec, *(f"--set={o}" for o in overrides), "-o",
                                             str(out_dir)])
        click.echo(f"{out_dir / result.job} is out of date: run {again}", err=True)
        sys.exit(EXIT_DRIFT)
    click.echo(f"{out_dir / result.job} is up to date")


@main.command()
@click.option("--seq-len", default=4096, show_default=True, type=click.IntRange(256, 1048576),
              help="Sequence length to look the minimum cards up for.")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def models(seq_len: int, as_json: bool) -> None:
    """List the supported models with their minimum cards per framework and hardware.

    \b
    Cells: a card count (dies on snt9b23); '-' the table says unsupported there; 'mem' no table row, the
    memory model decides at plan time. GPUs (rtx3090, rtx4090, a800, h800) have no table column: the memory
    model always decides there.

    \b
    Example:
        gen-launch models --seq-len 8192
    """
    try:
        rows = minimum_table(load_tables(), seq_len)
    except UserError as error:
        _fail(error, "generator/data")
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(environment().get_template("models.txt.j2").render(rows=rows, seq_len=seq_len), nl=False)


@main.command()
@click.argument("model")
@click.option("--method", required=True, type=click.Choice(METHODS), help="Training method.")
@click.option("--hardware", required=True, help="A hardware row (snt9b, snt9b23, rtx4090, h800, ...).")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the spec here (never over an existing file); default: print it.")
def init(model: str, method: str, hardware: str, out_file: Path | None) -> None:
    """Write a commented starter spec for MODEL (a table name or HuggingFace id): the required keys filled in,
    the optional ones commented with their defaults and sources, and the schema line editors read.

    \b
    Example:
        gen-launch init Qwen/Qwen3-8B --method lora --hardware snt9b -o qwen3-8b-lora.yaml
    """
    try:
        tables = load_tables()
        if hardware not in tables.hardware:
            raise SpecError.at("hardware", f"{show(hardware)} is not a hardware row; choose one of "
                                           f"{', '.join(tables.hardware)}")
        text = starter_spec(tables, environment(), model, method, hardware)
    except UserError as error:
        _fail(error, "init")
    if out_file is None:
        click.echo(text, nl=False)
        return
    try:
        with out_file.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        _fail(UserError(f"{out_file} exists; init never writes over a file"), "init")
    except OSError as exc:
        _fail(UserError(f"cannot write {out_file}: {exc.strerror}"), "init")
    click.echo(f"   create  {out_file}")


@main.command()
@click.argument("job_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--mindformers-python", envvar="GEN_LAUNCH_MINDFORMERS_PYTHON", metavar="PYTHON",
              help="An interpreter with mindformers and a MindSpore CPU build: also run MindFormers' own "
                   "MindFormerConfig and check_rules on train.yaml (see README).")
def validate(job_dir: Path, mindformers_python: str | None) -> None:
    """Check the files render wrote in JOB_DIR with each framework's own rules: one line per file.

    \b
    MindSpeed-LLM command lines go through parsers rebuilt from the pinned 2.2.0 declarations and the start-up
    rules of Megatron / MindSpeed / MindSpeed-LLM (each cited by file and line); MindFormers YAMLs through
    MindFormers' rules; scripts through bash -n and shellcheck; LLaMA-Factory through its argument list and, when
    installed, its own parser, transformers' DeepSpeed reconciliation at the planned world size and DeepSpeed's
    config class. Nothing in JOB_DIR is imported or run.

    \b
    Status per file: ok; problem (a defect in the file); skipped (an optional check's package is not installed);
    env (installed but broken: says nothing about the file).
    Exit 0 all ok or skipped; 1 any problem; 4 no problem but a broken environment.

    \b
    To add LLaMA-Factory's own checks (from a clone of gen-launch; the second command only on a host without
    CUDA, where PyPI's torchvision / torchaudio builds for torch 2.13 do not import and break transformers):
        pip install -e '.[validate]' && pip uninstall -y torchvision torchaudio

    \b
    Example:
        gen-launch validate out/qwen3-32b-full-snt9b-16c
    """
    try:
        results = validate_job(job_dir, mindformers_python)
    except UserError as error:
        _fail(error, str(job_dir))
    for result in results:
        detail = f"  {result.detail}" if result.detail else ""
        click.echo(f"{result.status:>8}  {show_path(result.path)}{detail}")
    if any(r.status == "problem" for r in results):
        sys.exit(EXIT_DRIFT)
    if any(r.status == "env" for r in results):
        sys.exit(EXIT_ENVIRONMENT)
