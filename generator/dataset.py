"""What the training data looks like: its format and the optional columns every row has (pure; part of the resolver).

A framework reads a registered column from every row (LLaMA-Factory: data/parser.py, data/converter.py), so only
the columns the spec names, or the model's default, are ever registered.
"""

from __future__ import annotations

from .api.frozen import frozen
from .errors import Problem, SpecError
from .spec import Spec
from .tables import Model

# Optional columns each format can carry beyond its required ones (LLaMA-Factory data/README.md at v0.9.5:
# alpaca has system and history, ShareGPT system and tools; any format can carry images). The OpenAI format has no
# tools column there: its tool turns (role "tool", assistant "tool_calls") fail the role check and the row is
# dropped (data/converter.py l.161-162, l.180).
OPTIONAL_COLUMNS = {"alpaca": ("system", "history", "images"), "sharegpt": ("system", "tools", "images"),
                    "openai": ("system", "images")}


@frozen
class DataShape:
    """The data file's format and the optional columns every row has."""

    format: str  # "alpaca" | "sharegpt" | "openai"; "text" for pretraining
    columns: tuple[str, ...]  # optional columns every row has, in OPTIONAL_COLUMNS order

    def to_json(self) -> dict:
        return {"format": self.format, "columns": list(self.columns)}


def data_format(spec: Spec, model: Model) -> str:
    """The spec's format, or the model's default."""
    return spec.dataset_format if spec.dataset_format is not None else default_format(model)


def default_format(model: Model) -> str:
    """A vision-language model's data is upstream's mllm_demo shape (openai); a text model's alpaca."""
    return "openai" if model.vision else "alpaca"


def data_shape(spec: Spec, model: Model) -> DataShape:
    """The data's format and optional columns; a column the format or the model cannot use is a spec error."""
    if spec.method == "pretrain":
        for key, value in (("dataset_format", spec.dataset_format), ("dataset_columns", spec.dataset_columns)):
            if value is not None:
                raise SpecError.at(f"paths.{key}", f"pretraining reads plain text (one \"text\" field per row); "
                                                   f"leave {key} out")
        return DataShape("text", ())
    fmt = data_format(spec, model)
    columns = spec.dataset_columns
    if columns is None:
        columns = ("images",) if model.vision else ()
    problems = []
    for i, column in enumerate(columns):
        if column not in OPTIONAL_COLUMNS[fmt]:
            problems.append(Problem(f"paths.dataset_columns.{i}", f"{column!r} is not a column of {fmt} data; "
                                                                   f"{fmt} allows: {', '.join(OPTIONAL_COLUMNS[fmt])}"))
        elif column == "images" and not model.vision:
            problems.append(Problem(f"paths.dataset_columns.{i}", f"{model.name} is a text model: it cannot "
                                                                   f"train on images"))
    if problems:
        raise SpecError(problems)
    return DataShape(fmt, tuple(c for c in OPTIONAL_COLUMNS[fmt] if c in columns))
