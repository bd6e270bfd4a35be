"""The one Jinja environment every command renders through (plan's text, PLAN.md, each framework's files), its
filters, and its compiled templates kept between runs. Apart from the renderer so that `plan` loads no more than
printing a plan needs."""

from __future__ import annotations

import marshal
from contextlib import suppress
from pathlib import Path
from types import CodeType

import jinja2

from . import kept
from .charts import markdown as chart_markdown
from .resources import resource_dir
from .shell import quote
from .throughput import per_card
from .training import LABEL_WIDTH as RECIPE_LABEL_WIDTH
from .training import rows as recipe_rows
from .yamlvalue import yaml_value


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
