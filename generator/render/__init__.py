"""Plan -> {relative path: text}, then write (the whole folder, swapped in atomically) or check against disk.

Each framework's files come from its plugin (generator/frameworks/<name>/, found through the registry): its Output
renders `(plan, env) -> {relative path under <name>/: text}` and `(plan, env) -> markdown`, its section of PLAN.md,
which the core renderer writes last. This module adds the provenance header to each file (in the file format's
comment syntax) and a MANIFEST listing every file with its sha256: JSON cannot carry a comment, and the hashes let
`render` tell a file edited by hand from one it wrote itself.
"""

from __future__ import annotations

import errno
import hashlib
import marshal
import os
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import CodeType

import jinja2

from .. import kept
from ..charts import markdown as chart_markdown
from ..errors import SpecError, TableError, UserError, show, show_path
from ..frameworks import registry
from ..jobdir import (
    MANIFEST,
    REFUSED,
    Change,
    clear_leftovers,
    compare,
    drift,
    leftovers,
    locked,
    manifest_text,
    replace,
)
from ..plan import Plan
from ..record import PLAN_JSON, RecordError, read_record
from ..resources import resource_dir
from ..shell import quote
from ..throughput import per_card
from ..training import LABEL_WIDTH as RECIPE_LABEL_WIDTH
from ..training import rows as recipe_rows
from ..yamlvalue import yaml_value
from . import core
from .common import FILES_DIGEST
from .submit import Submit, submit_files

MAX_LISTED = 20  # paths named in one refusal


class _CompiledTemplates(jinja2.BytecodeCache):
    """Templates compiled once and kept as Python keeps compiled modules (kept.py): compiling plan.txt.j2 was a sixth
    of `gen-launch plan`'s start-up. An entry is named by Jinja's key of the template (its name and file) and keyed
    by its text (Jinja's checksum) and what else the compiled code depends on: Python's and Jinja's versions and the
    settings Jinja's compiler reads (compiled unoptimized, no filter's result is folded into the code)."""

    def __init__(self, templates: Path, env: jinja2.Environment):
        settings = (env.block_start_string, env.block_end_string, env.variable_start_string, env.variable_end_string,
                    env.comment_start_string, env.comment_end_string, env.line_statement_prefix,
                    env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks, env.newline_sequence,
                    env.keep_trailing_newline, env.autoescape, env.optimized, sorted(env.extensions))
        self.templates, self.tag = templates, f"jinja2 {jinja2.__version__} {settings!r}"
        self.sources: dict[str, Path] = {}  # Jinja's key -> the template file, whose mode its entry takes

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        key = super().get_cache_key(name, filename)
        self.sources[key] = Path(filename) if filename else self.templates
        return key

    def _entry(self, bucket: jinja2.bccache.Bucket) -> tuple[Path, bytes]:
        return kept.entry(self.templates, bucket.key, "jinja"), f"{self.tag}\n{bucket.checksum}".encode()

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        payload = kept.read(*self._entry(bucket))
        if payload is not None:
            with suppress(ValueError, EOFError, TypeError):
                code = marshal.loads(payload)
                if isinstance(code, CodeType):
                    bucket.code = code

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        kept.write(*self._entry(bucket), marshal.dumps(bucket.code), self.sources.get(bucket.key, self.templates))


def environment() -> jinja2.Environment:
    """The one Jinja environment: strict undefined, no autoescape (Markdown, YAML, shell: each quotes by filter)."""
    templates = resource_dir("templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             optimized=False)
    env.bytecode_cache = _CompiledTemplates(templates, env)
    env.filters["code"] = markdown_code
    env.filters["sh"] = quote
    env.filters["yaml"] = yaml_value
    env.filters["duration"] = duration
    env.filters["rate"] = per_card
    env.filters["chart_markdown"] = chart_markdown
    env.globals["recipe_rows"] = recipe_rows
    env.globals["recipe_label_width"] = RECIPE_LABEL_WIDTH
    return env


def duration(hours: float) -> str:
    """A time estimate a person reads at a glance: minutes below an hour (never "0.0 h"), else hours."""
    return f"{max(1, round(hours * 60))} min" if hours < 1 else f"{hours:.1f} h"


def markdown_code(value: object) -> str:
    """Inline Markdown code that shows any text literally, backticks included."""
    text = str(value)
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def header_text(plan: Plan) -> str:
    """The header of every file: no hash or version, so that a one-value change of the spec, or an upgrade, is a
    diff of the lines that change (MANIFEST and plan.json record both)."""
    return ("Generated by gen-launch from a job spec (MANIFEST and plan.json record its sha256 and the version). "
            "Do not edit: change the spec and run gen-launch render again.")


def with_header(path: str, text: str, header: str) -> str:
    """Put the provenance header at the top of `text`, in the comment syntax of the file's format."""
    suffix = PurePosixPath(path).suffix
    if suffix == ".json":
        return text  # no comment syntax; MANIFEST carries the provenance
    if suffix == ".md":
        return f"<!-- {header} -->\n{text}"
    if text.startswith("#!"):
        shebang, _, rest = text.partition("\n")
        return f"{shebang}\n# {header}\n{rest}"
    return f"# {header}\n{text}"


def render_files(plan: Plan) -> dict[str, str]:
    """Every file of the job folder, headers and MANIFEST included, in a stable order."""
    env = environment()
    files: dict[str, str] = {}
    sections: dict[str, str] = {}
    submits: dict[str, Submit | None] = {}
    plugins = registry()
    for framework in plan.frameworks:
        output = plugins[framework].output
        own = plan.for_framework(framework)  # its recipe: the framework's own defaults where it has them
        written = output.render(own, env)
        stray = sorted(path for path in written if not path.startswith(f"{framework}/"))
        if stray:  # validate hands a file to the plugin whose folder it is in
            raise TableError(f"frameworks.yaml {framework}: its plugin wrote {', '.join(stray)}, outside "
                             f"{framework}/")
        _refuse_untaken_extra(plan, framework, written)
        files.update(written)
        sections[framework] = output.plan_section(own, env)
        if f"{framework}/launch.sh" in written:  # the scheduler's files run it on every node
            scheduled, submits[framework] = submit_files(own, own.frameworks[framework], env, framework)
            files.update(scheduled)
        elif plan.scheduler.kind != "none":
            raise SpecError.at("cluster.scheduler", f"{framework} writes no launch.sh, so {plan.scheduler.kind} "
                                                    f"has nothing to start on its nodes: leave it out (none) or "
                                                    f"plan without {framework}")
    files.update(core.render(plan, env, sections, submits))
    header = header_text(plan)
    out = {path: with_header(path, files[path], header) for path in sorted(files)}
    for framework in plan.frameworks:
        launch = f"{framework}/launch.sh"
        if launch in out:  # a framework may launch otherwise (tests/test_registry.py's toy has no launch.sh)
            out[launch] = out[launch].replace(FILES_DIGEST, files_digest(out, framework))
    out[MANIFEST] = manifest_text(
        [f"# Generated by gen-launch {plan.version} from a job spec with sha256 {plan.spec_sha256}.",
         "# Files gen-launch wrote for this job and their sha256 (JSON files cannot carry a header; this is their",
         "# provenance). render compares these hashes to refuse overwriting files edited by hand."], out)
    return out


def _refuse_untaken_extra(plan: Plan, framework: str, written: dict[str, str]) -> None:
    """The spec's `extra.<framework>` options are refused where the framework's files take none: a framework that
    takes them writes them under a comment naming `extra.<framework>`."""
    if plan.extra.get(framework) and not any(f"extra.{framework}" in text for text in written.values()):
        raise SpecError.at(f"extra.{framework}", f"{framework}'s files take no extra options in this version; "
                                                 f"leave it out")


def files_digest(out: dict[str, str], framework: str) -> str:
    """sha256 over the framework's rendered files (launch.sh as rendered, before its own hash is put in) and
    plan.json: the render mark names it, so two renders of one spec by different gen-launch code never train
    together even when both call themselves the same version."""
    digest = hashlib.sha256()
    for path in sorted(p for p in out if p.startswith(f"{framework}/") or p == PLAN_JSON):
        digest.update(f"{path}\0{out[path]}\0".encode())
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# Disk


@dataclass(frozen=True)
class Written:
    changes: list[Change]
    backup: Path | None  # where --overwrite kept the folder it replaced (hand edits, stray files), if it did


def write(files: dict[str, str], out_dir: Path, job: str, overwrite: bool, spec_file: str | None = None,
          dry_run: bool = False) -> Written:
    """Replace OUT/<job> with `files`, whole (jobdir.replace). Refuses (UserError) when the folder holds anything
    render did not write as it is (hand edits, stray files, links, a changed MANIFEST), or was rendered from
    another spec file than `spec_file` (None: not asked), unless `overwrite`, which first moves the whole old
    folder aside beside it. `dry_run`: the same refusals, then the changes a write would make, writing nothing."""
    job_dir = out_dir / job
    if job_dir.is_symlink():
        raise UserError(f"{show_path(job_dir)} is a symbolic link; render writes only into a real folder (remove the "
                        f"link, or point -o at the folder it links to)")
    if job_dir.exists() and not job_dir.is_dir():
        raise UserError(f"{show_path(job_dir)} exists and is not a folder; remove it or choose another -o")
    try:
        if not dry_run:
            out_dir.mkdir(parents=True, exist_ok=True)
        with locked(out_dir) if out_dir.is_dir() else nullcontext():  # a dry run waits for no render either
            if not dry_run:
                clear_leftovers(out_dir, job)
            changes, keep = _refusals(files, job_dir, overwrite, spec_file)
            if all(c.action == "identical" for c in changes):
                return Written(changes, None)
            if dry_run:
                _writable(out_dir)
                return Written(changes, None)
            return Written(changes, replace(files, out_dir, job, backup=keep))
    except OSError as exc:
        raise UserError(f"cannot write {show_path(job_dir)}: {exc.strerror or exc}") from None


def _writable(out_dir: Path) -> None:
    """Raise the error a real render would meet making or writing into OUT: its nearest existing folder must be a
    folder this process (by its effective ids, as the kernel checks) may add entries to."""
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(existing))
    if not os.access(existing, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(existing))


def _refusals(files: dict[str, str], job_dir: Path, overwrite: bool,
              spec_file: str | None) -> tuple[list[Change], bool]:
    """What replacing `job_dir` would change, and whether the old folder must be kept (moved aside) first (it
    holds something render did not write, or another spec's job); raises the refusal when that needs `overwrite`
    and it is not given."""
    changes = compare(files, job_dir)
    kept = [show_path(c.path) for c in changes if c.action in REFUSED]
    other = _other_spec(job_dir, spec_file)
    if other and not overwrite:
        raise UserError(f"{show_path(job_dir)} was rendered from another spec file, {show(other)}, not "
                        f"{show(spec_file)} (both name job {job_dir.name}): give this spec another job name, or, if "
                        f"the spec moved or you mean to replace that job, render with --overwrite (it moves the old "
                        f"folder aside whole first)")
    if kept and not overwrite:
        shown = ", ".join(kept[:MAX_LISTED]) + (f" and {len(kept) - MAX_LISTED} more"
                                                if len(kept) > MAX_LISTED else "")
        raise UserError(f"{show_path(job_dir)}: edited by hand or not written by gen-launch: {shown}; move them away, "
                        f"or run render with --overwrite (it moves the old folder aside whole first)")
    return changes, bool(kept or other)


def needs_overwrite(files: dict[str, str], out_dir: Path, job: str, spec_file: str | None) -> bool:
    """Whether render refuses OUT/<job> without --overwrite (hand edits, an untrusted record, another spec's
    folder): `check` then hints the render that works."""
    try:
        _refusals(files, out_dir / job, False, spec_file)
    except UserError:
        return True
    return False


def _other_spec(job_dir: Path, spec_file: str | None) -> str | None:
    """The spec file the folder records it was rendered from, when that is another one than `spec_file`. A record
    that cannot be trusted says nothing here: the hand edit to it is refused as such."""
    try:
        record = read_record(job_dir)
    except RecordError:
        return None
    if spec_file is None or record is None or record.spec_file in (None, spec_file):
        return None
    return record.spec_file


def check(files: dict[str, str], out_dir: Path, job: str, spec_file: str | None = None) -> list[str]:
    """Differences between what render would write and the job folder on disk, first whether it was rendered from
    another spec file than `spec_file`; empty when in sync."""
    job_dir = out_dir / job
    left = [f"staging leftover: {show_path(p)} (a render was killed while writing it; the next render removes it, "
            f"or: rm -rf -- {show_path(quote(str(p)))})" for p in leftovers(out_dir, job)]
    if job_dir.is_symlink():
        return [f"not a folder: {show_path(job_dir)} is a symbolic link", *left]
    other = _other_spec(job_dir, spec_file)
    return ([f"rendered from another spec file: {show_path(other)}"] if other else []) + \
        drift(compare(files, job_dir)) + left
