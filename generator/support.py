"""What gen-launch plans: for each model, framework, method and hardware, whether a job would be planned, by the
rules the resolver refuses a job with (resolve._job_refusal) and the hardware's quantization rows (QLoRA).
`gen-launch models` prints it as a matrix and a per-model listing, with filters; `init` names the alternatives from
it when it refuses."""

from __future__ import annotations

from .api.frozen import frozen
from .resolve import _job_refusal
from .spec import Spec
from .tables import METHODS, Tables


@frozen
class Supported:
    """One model, framework, method and hardware the tables support together."""

    model: str
    framework: str
    method: str
    hardware: str


def supported(tables: Tables, framework: str | None = None, method: str | None = None,
              hardware: str | None = None, model: str | None = None) -> list[Supported]:
    """Every (model, framework, method, hardware) a spec can plan, in the tables' order, narrowed by the filters
    (a hardware alias names its row)."""
    hw_names = [tables.hardware_row(hardware).name] if hardware is not None else list(tables.hardware)
    out = []
    for row in tables.models.values():
        if model is not None and row.name != tables.model(model).name:
            continue
        for name in tables.frameworks:
            if framework is not None and name != framework or not tables.supports(name, row.name):
                continue
            for way in METHODS:
                if method is not None and way != method:
                    continue
                out += [Supported(row.name, name, way, hw) for hw in hw_names if _runs(tables, name, row.name, way, hw)]
    return out


def _runs(tables: Tables, framework: str, model: str, method: str, hardware: str) -> bool:
    if method == "qlora" and not tables.hardware[hardware].quantization_bits:
        return False
    spec = Spec(job="support", model=model, method=method, seq_len=256, hardware=hardware, frameworks=(framework,),
                cards=None, sha256="")
    return _job_refusal(tables, framework, tables.models[model], spec) is None


def matrix(rows: list[Supported]) -> list[tuple[str, str, dict[str, int]]]:
    """(framework, method, {hardware: models}) per framework and method that runs somewhere, in the rows' order."""
    cells: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        counts = cells.setdefault((r.framework, r.method), {})
        counts[r.hardware] = counts.get(r.hardware, 0) + 1
    order = {m: i for i, m in enumerate(METHODS)}
    return [(fw, method, counts) for (fw, method), counts in sorted(
        cells.items(), key=lambda item: (list(dict.fromkeys(r.framework for r in rows)).index(item[0][0]),
                                         order[item[0][1]]))]


def by_model(rows: list[Supported]) -> list[tuple[str, str, list[str], list[str]]]:
    """(model, framework, methods, hardware) per model and framework, one line per set of hardware its methods share."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    hardware: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        hardware.setdefault((r.model, r.framework, r.method), []).append(r.hardware)
    for (model, fw, method), hws in hardware.items():
        groups.setdefault((model, fw, tuple(hws)), []).append(method)
    return [(model, fw, methods, list(hws)) for (model, fw, hws), methods in groups.items()]
