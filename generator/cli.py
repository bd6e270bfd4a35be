"""The gen-launch command line: parse, call spec -> plan -> files, print, exit.

Exit status: 0 ok; 1 `check` found drift or `validate` a problem; 2 bad spec or arguments, a pinned layout that breaks a
rule, no layout that fits, a refusal; 3 `--strict` and the plan warns; 4 `validate` could not run a check because the
environment is broken (a package that is installed but does not import); 5 a data table under generator/data/ lacks a
fact a framework needs (after an edit to it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from . import __version__
from .errors import SpecError, UserError, show, show_path
from .facts import Accelerator
from .schemafile import SCHEMA_NAME, current, schema_bytes, schema_ref, write_schema
from .shell import quote

# The planner, the tables and the renderer load where a command uses them (in its function): `--version` and
# `--help` start without them (they were a whole plan's start-up).
if TYPE_CHECKING:
    from .plan import MadeFrom, Plan
    from .spec import Spec
    from .tables import Tables

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
EXIT_DRIFT, EXIT_USER, EXIT_STRICT, EXIT_ENVIRONMENT = 1, 2, 3, 4
MAX_CANDIDATES = 15  # layouts listed per framework by plan --candidates (the JSON has them all)


def _fail(error: UserError, source: str) -> NoReturn:
    for line in error.lines(source):
        click.echo(line, err=True)
    sys.exit(error.exit_code)


def _load(spec_path: str, overrides: tuple[str, ...]) -> Spec:
    from .spec import bad_override, load_spec

    bad = bad_override(overrides)
    try:
        if bad is not None:
            raise SpecError.at("(--set)", f"{show(bad)} holds a control or other non-printing character; an override "
                                          f"is recorded in plan.json and PLAN.md, and none may")
        return load_spec(spec_path, overrides)
    except UserError as error:
        _fail(error, spec_path)


def _tables() -> Tables:
    """The data tables, with every framework's plugin loaded and checked: a broken plugin is a table error (exit 5)
    whichever frameworks the spec lists (plugins otherwise load when first asked for)."""
    from .frameworks import registry
    from .tables import load_tables

    registry()
    return load_tables()


def _resolve(spec: Spec, spec_path: str, made: MadeFrom) -> Plan:
    from .progress import progress
    from .resolve import resolve

    budget = " and the card count that meets the time budget" if spec.time_budget_hours is not None else ""
    try:
        with progress(f"planning {spec.model} {spec.method}: searching the layouts{budget} (a large MoE model under "
                      f"a time budget takes about 10 s)"):
            return dataclasses.replace(resolve(spec, _tables(), force=made.force), made_from=made)
    except UserError as error:
        _fail(error, spec_path)


def _plan(spec_path: str, force: bool, overrides: tuple[str, ...] = ()) -> Plan:
    from .plan import MadeFrom

    return _resolve(_load(spec_path, overrides), spec_path, MadeFrom(None, overrides, force))


def _as_made(spec_path: str, overrides: tuple[str, ...], force: bool, out_dir: Path, ignore_record: bool,
             must_trust: bool) -> tuple[Spec, MadeFrom]:
    """The spec and options render or check plans with: the --set overrides and --force that OUT/<job>/plan.json
    records of the render that made the folder from this spec file, then this command line's (a key given again
    keeps its last value; said on stderr); with --no-recorded, this command line's alone."""
    from .plan import MadeFrom
    from .record import PLAN_JSON, merged, spec_key

    try:
        made = MadeFrom(spec_key(spec_path, out_dir), overrides, force)
    except UserError as error:
        _fail(error, spec_path)
    _refuse_rename(overrides, spec_path)
    spec = _load(spec_path, overrides)
    record = None if ignore_record else _record(out_dir / spec.job, spec_path, must_trust)
    if record is None or record.spec_file != made.spec_file:
        return spec, made  # nothing recorded, or another spec's options (render refuses that folder)
    applied = _options(record.overrides, record.force and not force)
    if not applied:
        return spec, made
    _refuse_rename(record.overrides, spec_path)
    kept = merged(record.overrides, overrides)
    click.echo(f"Note: applying {' '.join(quote(w) for w in applied)}, as "
               f"{show_path(out_dir / spec.job / PLAN_JSON)} records "
               f"(a --set adds to them, the last value of a key wins; --no-recorded drops them)", err=True)
    return (_load(spec_path, kept) if kept != overrides else spec), \
        MadeFrom(made.spec_file, kept, force or record.force)


def _options(overrides: tuple[str, ...], force: bool) -> list[str]:
    """The command-line words of --set overrides and --force."""
    return [*(f"--set={o}" for o in overrides), *(["--force"] if force else [])]


def _refuse_rename(overrides: tuple[str, ...], spec_path: str) -> None:
    """A --set of `job` would write the folder under another name than the one `check` (which reads the job name
    from the spec) looks in, so that the folder could never be checked: the job name is the spec's alone."""
    if any(o.startswith("job=") for o in overrides):
        _fail(SpecError.at("(--set)", "give the job name in the spec; a --set cannot rename the folder check looks "
                                      "in (copy the spec under another job name for a variant)"), spec_path)


def _record(job_dir: Path, spec_path: str, must_trust: bool) -> MadeFrom | None:
    """The job folder's record of the options that made it. One that cannot be trusted is refused when
    `must_trust` (render without --overwrite: the user must say which options), else noted and left out."""
    from .record import PLAN_JSON, RecordError, read_record

    try:
        record = read_record(job_dir)
    except RecordError as error:
        if must_trust:
            _fail(RecordError(f"{error.args[0]}; so the --set overrides and --force it records are not known: give "
                              f"them with --set (or --no-recorded for none), or render with --overwrite to replace "
                              f"the folder without them (the old folder is moved aside whole first)"), spec_path)
        click.echo(f"Note: {error.args[0]}; not applying the --set overrides and --force it records", err=True)
        return None
    from .jobdir import MANIFEST

    if record is None and os.path.lexists(job_dir / MANIFEST):
        click.echo(f"Note: {show_path(job_dir / PLAN_JSON)} is missing: no recorded options to apply", err=True)
    return record


def _files(plan: Plan, spec_path: str) -> dict[str, str]:
    from .render import render_files

    try:
        return render_files(plan)
    except UserError as error:  # a planned framework the registry cannot render (exit 5)
        _fail(error, spec_path)


def _plan_text(plan: Plan) -> str:
    """The plan as `plan` prints it (and `render` on stderr)."""
    from .templating import environment

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
                                 "memory model says does not fit (flagged in the plan). render records it in "
                                 "plan.json; check and a re-render apply it again.")
overwrite_option = click.option("--overwrite", is_flag=True,
                                help="Replace what OUT/<job> holds that render did not write as it is (hand edits, "
                                     "stray files, links), or a folder rendered from another spec file; the old "
                                     "folder is moved aside whole (not copied) as OUT/<job>+backup-<time>.")
recorded_option = click.option("--no-recorded", "ignore_record", is_flag=True,
                               help="Plan with this command line's options only. Without it, "
                                    "the --set overrides and --force that OUT/<job>/plan.json records of the render "
                                    "that made the folder are applied again (said on stderr); a --set adds to "
                                    "them (the last value of a key wins).")
strict_option = click.option("--strict", is_flag=True, help="Exit 3 when the plan warns: a forced layout may "
                                                            "not fit, the time budget is missed, or checkpoints "
                                                            "outgrow keep_checkpoints.")
out_option = click.option("-o", "--out", "out_dir", default="out", show_default=True,
                          type=click.Path(file_okay=False, path_type=Path),
                          help="Folder that holds one sub-folder per job.")


class LazyChoice(click.Choice):
    """A choice whose values are read when the option is parsed or its command's help shown (the tables' methods),
    not when the command line is built."""

    def __init__(self, load):
        super().__init__(())
        self._load = load

    @property
    def choices(self):
        return tuple(self._load())

    @choices.setter
    def choices(self, value) -> None:
        pass  # click.Choice's constructor sets it; the values come from _load


def _methods() -> tuple[str, ...]:
    from .tables import METHODS

    return METHODS


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
@click.option("--mermaid", "as_mermaid", is_flag=True,
              help="Print the plan's charts (with --candidates also memory against speed of the layouts that fit) "
                   "as Markdown Mermaid blocks, for a pull request or a wiki page.")
@force_option
@strict_option
def plan(spec: str, overrides: tuple[str, ...], as_json: bool, show_candidates: bool, as_mermaid: bool, force: bool,
         strict: bool) -> None:
    """Show the cards, layout, memory and time chosen for SPEC, and why.

    \b
    Example:
        gen-launch plan examples/qwen3-32b-full-snt9b-16c.yaml --json
    """
    from .charts import candidates_chart
    from .charts import markdown as chart_markdown
    from .resolve import candidate_layouts
    from .spec import load_spec
    from .templating import environment

    result = _plan(spec, force, overrides)
    found = {}
    if show_candidates:
        try:
            found = candidate_layouts(load_spec(spec, overrides), _tables(), result)
        except UserError as error:
            _fail(error, spec)
    if as_mermaid:
        charts = [*result.charts, *(chart for name, rows in found.items() if (chart := candidates_chart(
            name, rows, result.frameworks[name].layout.usable_gb)) is not None)]
        click.echo("\n".join(chart_markdown(chart) for chart in charts), nl=False)
    elif as_json:
        from .render.core import plan_json  # the renderer's plan.json: loaded only where it is printed

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
@overwrite_option
@recorded_option
@strict_option
@click.option("--dry-run", is_flag=True, help="Refuse what render would refuse (same messages and exit status), "
                                              "else report what would change; write nothing.")
def render(spec: str, overrides: tuple[str, ...], out_dir: Path, force: bool, overwrite: bool, ignore_record: bool,
           strict: bool, dry_run: bool) -> None:
    """Write OUT/<job>/: PLAN.md, plan.json, MANIFEST and each framework's launch files.

    The whole folder is written beside the old one and swapped in at once: a failed or killed render leaves the
    old folder or the new one. Anything in it render did not write as it is (hand edits, stray files, links), and
    a folder rendered from another spec file with the same job name, is refused unless --overwrite, which moves
    the old folder aside whole (not a copy) as OUT/<job>+backup-<time>. plan.json and PLAN.md record the spec
    file, the --set overrides in order and --force; a re-render applies the recorded ones, and a --set adds to
    them. One line per path on stdout: create, overwrite, identical, mode (executable bit restored), remove, edited,
    stray; the plan's summary (as `gen-launch plan` prints it) goes to stderr.

    \b
    Example:
        gen-launch render examples/qwen3-32b-full-snt9b-16c.yaml -o out
    """
    from .render import write

    loaded, made = _as_made(spec, overrides, force, out_dir, ignore_record, must_trust=not overwrite)
    result = _resolve(loaded, spec, made)
    _strict_exit(result, strict)
    files = _files(result, spec)
    try:
        written = write(files, out_dir, result.job, overwrite, made.spec_file, dry_run)
    except UserError as error:
        _fail(error, spec)
    click.echo(_plan_text(result), nl=False, err=True)
    for change in written.changes:
        click.echo(f"{change.action:>9}  {show_path(out_dir / result.job / change.path)}")
    if written.backup:
        click.echo(f"kept the folder as it was (with what --overwrite replaced) in {show_path(written.backup)}",
                   err=True)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=str))
@set_option
@out_option
@recorded_option
def check(specs: tuple[str, ...], overrides: tuple[str, ...], out_dir: Path, ignore_record: bool) -> None:
    """Exit 0 when OUT/<job>/ holds exactly what render would write for each SPEC (a spec file, or a folder: its
    *.yaml and *.yml files), 1 (with a summary) otherwise; 2 when a spec cannot be planned (the others are still
    checked).

    Every difference counts: a missing, changed or stray file or folder, a link, a FIFO, a changed executable bit,
    a folder rendered from another spec file; then the plan values that change (`train.steps: 391 -> 782`). The
    --set overrides and --force the folder's plan.json records are applied (said on stderr), any --set added to
    them, so a committed folder stays up to date until the spec or gen-launch changes.

    \b
    Example (CI or pre-commit in an experiment repo):
        gen-launch check jobs -o launch
    """
    codes = []
    for spec in _spec_files(specs):
        try:
            codes.append(_check_one(spec, overrides, out_dir, ignore_record))
        except SystemExit as stop:  # _fail's exit for this spec: said on stderr, the next spec is still checked
            codes.append(stop.code if isinstance(stop.code, int) else EXIT_USER)
    sys.exit(max(codes))


def _spec_files(given: tuple[str, ...]) -> list[str]:
    """The spec files `check` was given: each file, and each folder's *.yaml and *.yml files in name order (a
    folder without one is an error: a mistyped folder must not pass CI)."""
    found: list[str] = []
    for path in given:
        if not os.path.isdir(path):
            found.append(path)
            continue
        inside = sorted(str(p) for p in Path(path).iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not inside:
            _fail(UserError(f"{show_path(path)} holds no spec (*.yaml, *.yml); give spec files or their folder"),
                  path)
        found.extend(inside)
    return found


def _check_one(spec: str, overrides: tuple[str, ...], out_dir: Path, ignore_record: bool) -> int:
    from .plandiff import value_changes
    from .record import PLAN_JSON
    from .render import check as check_files
    from .render import needs_overwrite

    loaded, made = _as_made(spec, overrides, False, out_dir, ignore_record, must_trust=False)
    result = _resolve(loaded, spec, made)
    files = _files(result, spec)
    job_dir = out_dir / result.job
    problems = check_files(files, out_dir, result.job, made.spec_file)
    if not problems:
        click.echo(f"{show_path(job_dir)} is up to date")
        return 0
    for line in problems:
        click.echo(line)
    for line in value_changes(job_dir, files[PLAN_JSON]):
        click.echo(f"changes: {show_path(line)}")
    options = [*_options(made.overrides, made.force), *(["--no-recorded"] if ignore_record else []),
               *(["--overwrite"] if needs_overwrite(files, out_dir, result.job, made.spec_file) else [])]
    again = " ".join(quote(w) for w in ["gen-launch", "render", spec, *options, "-o", str(out_dir)])
    click.echo(f"{show_path(job_dir)} is out of date: run {show_path(again)}", err=True)
    return EXIT_DRIFT


@main.command()
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--spec", "spec", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="The spec of the job that wrote the logs (with the --set options it was rendered with).")
@set_option
@force_option
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the spec with the calibration block added here (a new file, or the spec itself); "
                   "without it the block is printed.")
def calibrate(logs: tuple[Path, ...], spec: str, overrides: tuple[str, ...], force: bool,
              out_file: Path | None) -> None:
    """Read a run's logs (LOGS: its launch log, LLaMA-Factory's trainer_log.jsonl) into a calibration block that
    the next plan uses: measured tokens/s per card, step time and peak memory of the layout the run used.

    \b
    Example:
        gen-launch calibrate out/job/train.log --spec jobs/job.yaml -o jobs/job.yaml
    """
    from .calibrate import block_text, calibration_of, write_spec  # loads the plugins' log formats
    from .plan import MadeFrom

    loaded = _load(spec, overrides)
    result = _resolve(loaded, spec, MadeFrom(None, overrides, force))
    try:
        found = calibration_of(loaded, result, list(logs))
        if out_file is None:
            click.echo(block_text(found), nl=False)
            return
        write_spec(Path(spec), loaded, found, out_file)
    except UserError as error:
        _fail(error, spec)
    click.echo(f"calibration: {found.tokens_per_card_s:,g} tokens/s per card, {found.step_time_s:g} s a step "
               f"({found.steps} steady steps) written to {show_path(out_file)}", err=True)


@main.command()
@click.option("--framework", help="Only this framework (the matrix's first column).")
@click.option("--method", type=LazyChoice(_methods), help="Only this method.")
@click.option("--hardware", help="Only this hardware row or alias (snt9b, 910B, A3, h800, ...).")
@click.option("--matrix", "matrix_only", is_flag=True, help="Print the framework x method x hardware matrix only.")
@click.option("--seq-len", default=4096, show_default=True, type=click.IntRange(256, 1048576),
              help="Sequence length to look the minimum cards up for.")
@click.option("--json", "as_json", is_flag=True,
              help="Print {support: [{model, framework, method, hardware}], minimum_cards: [...]} as JSON.")
def models(framework: str | None, method: str | None, hardware: str | None, matrix_only: bool, seq_len: int,
           as_json: bool) -> None:
    """What can I run: the framework x method x hardware matrix (how many models each cell plans), each model's
    frameworks, methods and hardware, and the minimum cards the Huawei card table gives, narrowed by the filters.

    \b
    Minimum cards: a card count (dies on snt9b23); '-' the table says unsupported there; 'mem' no table row, the
    memory model decides at plan time. GPUs (rtx3090, rtx4090, a800, h800, a100-40gb, a100-80gb, h100, h200,
    l40s) have no table column: the memory model always decides there.

    \b
    Example:
        gen-launch models --method grpo --hardware snt9b
    """
    from .support import by_model, matrix
    from .templating import environment

    try:
        tables = _tables()
        rows, minimum = _support(tables, framework, method, hardware, seq_len, matrix_only)
    except UserError as error:
        _fail(error, "models")
    if as_json:
        click.echo(json.dumps({"support": [dataclasses.asdict(r) for r in rows], "minimum_cards": minimum},
                              indent=2))
        return
    chosen = [tables.hardware_row(hardware).name] if hardware is not None else list(tables.hardware)
    filters = [f"{key} {value}" for key, value in (("framework", framework), ("method", method),
                                                     ("hardware", hardware)) if value is not None]
    click.echo(environment().get_template("support.txt.j2").render(
        narrowed=", ".join(filters), methods={r.method for r in rows}, cells=matrix(rows), hardware=chosen,
        frameworks=list(dict.fromkeys(r.framework for r in rows)),
        labels={name: fw.label for name, fw in tables.frameworks.items()},
        hardware_labels={name: hw.label for name, hw in tables.hardware.items()},
        models=[] if matrix_only else by_model(rows), params={m.name: m.params / 1e9 for m in tables.models.values()}),
        nl=False)
    if minimum:
        gpu = {name for hw in tables.hardware.values() if hw.accelerator == Accelerator.GPU for name in hw.frameworks}
        listed = {row["framework"] for row in minimum}
        click.echo("\n" + environment().get_template("models.txt.j2").render(
            rows=minimum, seq_len=seq_len,
            gpu_frameworks=[name for name in tables.frameworks if name in gpu & listed]), nl=False)


def _support(tables: Tables, framework: str | None, method: str | None, hardware: str | None, seq_len: int,
             matrix_only: bool) -> tuple[list, list[dict]]:
    """The supported rows the filters keep, and the minimum-card rows of those models (none on a GPU, where the
    card table has no column, or with --matrix)."""
    from .resolve import minimum_table
    from .support import supported

    if framework is not None and framework not in tables.frameworks:
        raise UserError(f"--framework: {show(framework)} is not a framework; one of: {', '.join(tables.frameworks)}")
    rows = supported(tables, framework, method, hardware)
    on_gpu = hardware is not None and tables.hardware_row(hardware).accelerator == Accelerator.GPU
    if matrix_only or on_gpu:
        return rows, []
    kept = {(s.model, s.framework) for s in rows}
    return rows, [r for r in minimum_table(tables, seq_len) if (r["model"], r["framework"]) in kept]


@main.command()
@click.argument("model")
@click.option("--method", required=True, type=LazyChoice(_methods), help="Training method.")
@click.option("--hardware", required=True, help="A hardware row or alias (snt9b, snt9b23, 910B, A3, rtx4090, ...).")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the spec here (never over an existing file); default: print it.")
@click.option("--schema", "schema_dir", type=click.Path(file_okay=False, path_type=Path),
              help=f"The folder holding {SCHEMA_NAME}, which the spec's editor line names by a path relative to "
                   f"the spec; with -o it is written there if missing. Default: the spec's folder.")
def init(model: str, method: str, hardware: str, out_file: Path | None, schema_dir: Path | None) -> None:
    """Write a commented starter spec for MODEL (a table name, or a HuggingFace id: an instruct model's, or its
    base model's to train from the base weights): the required keys filled in, the optional ones commented with
    their defaults and sources, and the schema line editors read (relative to the spec, so it works in every
    checkout; with -o the schema file is written beside the spec, or in --schema).

    \b
    Example:
        gen-launch init Qwen/Qwen3-8B --method lora --hardware snt9b -o jobs/qwen3-8b-lora.yaml
    """
    from .starter import starter_spec
    from .templating import environment

    spec_dir = out_file.parent if out_file is not None else Path()
    schema_dir = spec_dir if schema_dir is None else schema_dir
    try:
        tables = _tables()
        text = starter_spec(tables, environment(), model, method, hardware, schema_ref(schema_dir, spec_dir))
    except UserError as error:
        _fail(error, "init")
    if out_file is None:
        click.echo(text, nl=False)
        if not current(schema_dir / SCHEMA_NAME):
            click.echo(f"note: the schema line names {show_path(schema_dir / SCHEMA_NAME)}; write it with: "
                       f"{quote('gen-launch')} schema -o {show_path(quote(str(schema_dir)))}", err=True)
        return
    try:
        out_file.parent.mkdir(parents=True, exist_ok=True)  # init -o jobs/x.yaml starts the jobs folder
        with out_file.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        _fail(UserError(f"{show_path(out_file)} exists; init never writes over a file"), "init")
    except OSError as exc:
        _fail(UserError(f"cannot write {show_path(out_file)}: {exc.strerror}"), "init")
    click.echo(f"   create  {show_path(out_file)}")
    _init_schema(schema_dir)


def _init_schema(folder: Path) -> None:
    """The schema a new spec names: written when missing; an older copy is left as it is, with the command that
    refreshes it."""
    path = folder / SCHEMA_NAME
    if path.exists() or path.is_symlink():
        if not current(path):
            click.echo(f"note: {show_path(path)} is not this gen-launch's schema; refresh it with: "
                       f"gen-launch schema -o {show_path(quote(str(folder)))}", err=True)
        return
    _write_schema(folder, "init")


def _write_schema(folder: Path, command: str) -> None:
    try:
        action, written = write_schema(folder)
    except UserError as error:
        _fail(error, command)
    click.echo(f"{action:>9}  {show_path(written)}")


@main.command()
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help=f"Write {SCHEMA_NAME} into this folder (made if missing; an older copy is replaced); default: "
                   f"print it.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the spec's reference in Markdown instead (docs/spec.md is this output).")
def schema(out_dir: Path | None, as_markdown: bool) -> None:
    """The job spec's JSON Schema, for editors: write it beside the specs, and their first line
    `# yaml-language-server: $schema=job.schema.json` (init writes it) validates them as they are typed, in every
    checkout of the repository.

    \b
    Example:
        gen-launch schema -o jobs
    """
    if as_markdown:
        from .specdoc import reference

        click.echo(reference(json.loads(schema_bytes())), nl=False)
        return
    if out_dir is None:
        click.echo(schema_bytes().decode("utf-8"), nl=False)
        return
    _write_schema(out_dir, "schema")


class PluginOptions(click.Command):
    """A command that also takes the options the framework plugins declare (Output.options: an opt-in check's
    interpreter, ...), added from the registry when the command line is first parsed or its help shown. Tables that
    do not load add none; the command then reports them (exit 5)."""

    _plugin_options = False  # added once

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        from .frameworks import registry

        if not self._plugin_options:
            try:
                declared = [option for plugin in registry().values() for option in plugin.output.options]
            except UserError:
                declared = []
            else:
                self._plugin_options = True
            self.params += [click.Option([o.flag], envvar=o.envvar, metavar=o.metavar, help=o.help)
                            for o in declared]
        return super().get_params(ctx)


@main.command(cls=PluginOptions)
@click.argument("job_dir", type=click.Path(path_type=Path))  # validate checks it: --json reports that too
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document after the last check: job_dir, exit_status and results, a list of "
                   "{path, status, detail} in the order the lines come; when JOB_DIR cannot be validated (exit 2), "
                   "also error, the message printed on stderr.")
def validate(job_dir: Path, as_json: bool, **options: str | None) -> None:
    """Check the files render wrote in JOB_DIR with each framework's own rules: one line per file, printed as its
    checks finish.

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
    To add LLaMA-Factory's own checks (from a clone of gen-launch; the script also removes PyPI's torchvision /
    torchaudio where, as on a host without CUDA, they do not import and would break transformers):
        bash scripts/install.sh validate

    \b
    Example:
        gen-launch validate out/qwen3-32b-full-snt9b-16c
    """
    from .progress import progress
    from .validate import validate as validate_job  # its checks load only for this command

    try:
        results = validate_job(job_dir, options)
    except UserError as error:
        if as_json:
            _validate_json(job_dir, error.exit_code, [], {"error": error.args[0]})
        _fail(error, str(job_dir))
    seen: list = []
    pending = iter(results)
    while True:  # each line as its file's checks finish (click.echo flushes)
        with progress(f"validate: {len(seen)} file(s) checked, the next file's checks still running (a framework's "
                      f"own parser may import torch: up to about 90 s for its first file)"):
            result = next(pending, None)
        if result is None:
            break
        seen.append(result)
        if not as_json:
            detail = f"  {result.detail}" if result.detail else ""
            click.echo(f"{result.status:>8}  {show_path(result.path)}{detail}")
    statuses = {r.status for r in seen}
    code = EXIT_DRIFT if "problem" in statuses else EXIT_ENVIRONMENT if "env" in statuses else 0
    if as_json:
        _validate_json(job_dir, code, [dataclasses.asdict(r) for r in seen])
    sys.exit(code)


def _validate_json(job_dir: Path, code: int, results: list[dict], error: dict | None = None) -> None:
    click.echo(json.dumps({"job_dir": str(job_dir), "exit_status": code, **(error or {}), "results": results},
                          indent=2))
