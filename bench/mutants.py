"""Mutation run over the modules that decide numbers and safety (issue 42): each mutant is one realistic slip (a
comparison's boundary moved, an operator or constant changed, a check dropped, a table value swapped), run against
the test files that cover its module; a mutant no test notices is a test to write, or an equivalent (no behaviour
changes; named with why in EQUIVALENT).

    python bench/mutants.py [MODULE ...] [--sample] [--size N] [--since REV] [--results FILE] [--report FILE]
                            [--list]

The tree is copied into a temporary folder and each mutant written there only: the worktree is never touched. A
mutant is killed when the covering tests fail (or run past TIMEOUT, or, selected, past LOOPING times the unmutated
run of all of them under coverage); the run first checks that they pass unmutated.
Each module's tests first run once under coverage.py with one context per test (pytest-cov's --cov-context=test);
a Python mutant then runs only the tests that executed its statement, with -x (the first failure kills it), all of
them where its statement runs at import, and none where no test executes it (it survives). --every-test runs the
target's tests whole for every mutant (the slow measure the selection must agree with); the shell templates always
run whole. --results FILE keeps each outcome as it is measured (one JSON line a mutant) and skips the mutants it
holds: a long run resumes. --sample runs SAMPLE, the fixed mutants CI runs (tests/test_mutants.py); --report writes
the per-module table as Markdown (bench/mutants-<date>.md keeps each measured run).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 300  # seconds one mutant's tests may run; a mutant that loops is killed by it
LOOPING = 5  # ... or, selected, this many times what all the module's tests took unmutated under coverage (at least
# a minute): a mutant of a loop whose tests take seconds need not wait minutes


@dataclass(frozen=True)
class Target:
    path: str  # from the repository root
    tests: tuple[str, ...]  # pytest arguments: the narrow files (and -k selections) that cover it
    refusals_only: bool = False  # mutate only the conditions of checks that raise (spec.py: its refusals)


RUNTIME, CHECKS = "tests/test_runtime_inputs.py", "tests/test_run_time_checks.py"
TARGETS = {
    "memory": Target("generator/memory.py", ("tests/test_memory_terms.py", "tests/test_memory.py",
                                             "tests/test_memory_moe.py", "tests/test_memory_hf.py",
                                             "tests/test_memory_seed002.py", "tests/test_layouts.py")),
    "parallel": Target("generator/parallel.py", ("tests/test_parallel.py", "tests/test_memory.py")),
    "layouts": Target("generator/layouts.py", ("tests/test_layouts.py", "tests/test_tables_typed.py",
                                               "tests/test_budget.py", "tests/test_nofit.py", "tests/test_roles.py",
                                               "tests/test_search_shortcuts.py", "tests/test_plan_values.py",
                                               "tests/test_resolve.py")),
    "cards": Target("generator/cards.py", ("tests/test_cards.py", "tests/test_budget.py")),
    "scheduler": Target("generator/scheduler.py", ("tests/test_scheduler_values.py", "tests/test_scheduler.py", "-k",
                                                   "values or gpus_ask or time_limit or bad_scheduler or cannot_use")),
    "jobdir": Target("generator/jobdir.py", ("tests/test_jobdir_values.py", "tests/test_jobdir_attacks.py", "-k",
                                             "values or manifest_line or still_removed or unreadable or midway")),
    "record": Target("generator/record.py", ("tests/test_record.py", "tests/test_workflow.py", "-k",
                                             "record or link or set_checks")),
    "spec": Target("generator/spec.py", ("tests/test_spec_refusals.py", "tests/test_spec.py"), refusals_only=True),
    "run_time_data": Target("templates/_run_time_data.sh.j2", (CHECKS, RUNTIME, "-k",
                                                               "run_time_checks or hostile or planted or node_rank")),
    "checkpoint_resume": Target("templates/_checkpoint_resume.sh.j2", (CHECKS, RUNTIME, "-k",
                                                                       "run_time_checks or mindspeed or finished")),
}
SAMPLE_SIZE = 20  # mutants measured per module: a fixed draw (by each mutant's key), so a rerun measures the same


@dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    operator: str
    start: int  # character offsets of the replaced text in the source
    end: int
    replacement: str
    original: str
    nth: int = 0  # how many mutants before it in the file make the same change to the same text

    @property
    def key(self) -> str:
        """Names the mutant across edits elsewhere in the file: the text and the change, not the line number."""
        again = f"#{self.nth}" if self.nth else ""
        return f"{self.module}:{self.operator}:{self.original}->{self.replacement}{again}"

    @property
    def ident(self) -> str:
        return hashlib.sha256(self.key.encode()).hexdigest()[:10]


# ---- Python: one change per AST node -------------------------------------------------------------------------------

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
          ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.Pow: ast.Mult, ast.LShift: ast.RShift}
_WORD = re.compile(r"[\w./-]{1,40}")  # a table's value that is a name, not a sentence for people
_STOPS = (ast.Raise, ast.Return, ast.Continue, ast.Break)


def _quiet(tree: ast.AST) -> set[int]:
    """Nodes whose value is text for people (docstrings, f-strings, raise messages, log calls): not mutated."""
    quiet: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            quiet.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Raise) and node.exc is not None):
            quiet.update(id(n) for n in ast.walk(node.exc if isinstance(node, ast.Raise) else node))
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            quiet.update(id(n) for n in ast.walk(node))
        for annotation in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if annotation is not None:  # never evaluated (from __future__ import annotations)
                quiet.update(id(n) for n in ast.walk(annotation))
    return quiet


def _refusal_tests(tree: ast.AST) -> set[int]:
    """Nodes inside the condition of an `if` that raises (a refusal)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
            inside.update(id(n) for n in ast.walk(node.test))
    return inside


def _swapped(node: ast.AST, **fields) -> str:
    copy = ast.fix_missing_locations(type(node)(**{**{f: getattr(node, f) for f in node._fields}, **fields}))
    return ast.unparse(copy)


def _constant(node: ast.Constant, parent: ast.AST | None) -> Iterator[tuple[str, str]]:
    value = node.value
    if isinstance(value, bool):
        yield "bool", repr(not value)
    elif isinstance(value, int):
        yield "number", repr(value + 1)
    elif isinstance(value, float):
        yield "number", repr(value * 2 if value else 1.0)
    elif isinstance(value, str) and _WORD.fullmatch(value) and isinstance(parent, ast.Dict) and node in parent.values:
        others = [v.value for v in parent.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
                  and v.value != value]
        yield "table", repr(others[0] if others else value + "x")


def _changes(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[str, str]]:
    """(operator, replacement source) for each mutant of `node`."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE:
                ops = [*node.ops[:i], _COMPARE[type(op)](), *node.ops[i + 1:]]
                yield "compare", f"({_swapped(node, ops=ops)})"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and not isinstance(node.left, ast.BinOp):
        yield "flag", f"({ast.unparse(node.left)})"  # `a | b` -> `a`: a flag dropped (os.O_NOFOLLOW)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        yield "arith", f"({_swapped(node, op=_BINOP[type(node.op)]())})"
    elif isinstance(node, ast.BoolOp):
        yield "logic", f"({_swapped(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And())})"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", f"({ast.unparse(node.operand)})"
    elif isinstance(node, ast.Constant):
        yield from _constant(node, parent)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        yield "minmax", ast.unparse(ast.Name("max" if node.func.id == "min" else "min"))


def python_mutants(module: str, target: Target, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    quiet, refusals = _quiet(tree), _refusal_tests(tree) if target.refusals_only else set()
    lines, starts = source.splitlines(keepends=True), [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

    def span(node) -> tuple[int, int]:
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)

    found = []
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.body and isinstance(node.body[0], _STOPS) and id(node) not in quiet:
            start, end = span(node.test)  # the check dropped: its condition never holds
            found.append(Mutant(module, node.lineno, "drop", start, end, "False", source[start:end]))
        if not hasattr(node, "lineno") or id(node) in quiet or (target.refusals_only and id(node) not in refusals):
            continue
        for operator, replacement in _changes(node, parents.get(id(node))):
            start, end = span(node)
            found.append(Mutant(module, node.lineno, operator, start, end, replacement, source[start:end]))
    return sorted(found, key=lambda m: (m.start, m.end, m.operator))


# ---- shell templates: one change per match of a pattern -------------------------------------------------------------

_SHELL = [(r"-le\b", "-lt", "compare"), (r"-lt\b", "-le", "compare"), (r"-ge\b", "-gt", "compare"),
          (r"-gt\b", "-ge", "compare"), (r"\|\| refuse\b", "|| true ||", "drop"), (r"\[ ! ", "[ ", "not"),
          (r"\breturn 1\b", "return 0", "return"), (r"\bexit 2\b", "true", "drop"), (r"\s*\|\| \[ -L \"\$2\" \]", "",
                                                                                         "drop"),
          (r"\|\| return 1", "|| true", "drop"), (r"\bexists_as folder\b", "exists_as file", "kind"),
          (r"(?<=-le )\d+|(?<=-ge )\d+", None, "number"), (r"\| 0\?\*", "", "pattern"),
          (r"\*\[!0-9\]\* \|", "", "pattern"), (r"\*\[!A-Za-z0-9._-\]\*", "*[!A-Za-z0-9._/-]*", "pattern")]


def shell_mutants(module: str, source: str) -> list[Mutant]:
    found, offset = [], 0
    for number, line in enumerate(source.splitlines(keepends=True), 1):
        code = line.split("  #", 1)[0] if not line.lstrip().startswith(("#", "{#")) else ""
        for pattern, replacement, operator in _SHELL:
            for match in re.finditer(pattern, code):
                new = str(int(match.group()) + 1) if replacement is None else replacement
                found.append(Mutant(module, number, operator, offset + match.start(), offset + match.end(), new,
                                    match.group()))
        offset += len(line)
    return sorted(found, key=lambda m: (m.start, m.operator))


def mutants(module: str) -> list[Mutant]:
    target = TARGETS[module]
    source = (REPO / target.path).read_text()
    found = shell_mutants(module, source) if target.path.endswith(".j2") else python_mutants(module, target, source)
    seen: dict[str, int] = {}
    numbered = []
    for mutant in found:
        numbered.append(replace(mutant, nth=seen.get(mutant.key, 0)))
        seen[mutant.key] = seen.get(mutant.key, 0) + 1
    return numbered


def drawn(found: list[Mutant], size: int) -> list[Mutant]:
    """`size` of the mutants (all when size is 0 or they are fewer), drawn by key: the same draw on every run."""
    if size and len(found) > size:
        keep = {m.key for m in sorted(found, key=lambda m: m.ident)[:size]}
        return [m for m in found if m.key in keep]
    return found


# ---- the run -------------------------------------------------------------------------------------------------------

def copy_tree(tree: Path, revision: str | None) -> Path:
    """The working tree (or the commit `revision`: a measure of the tests as they were) copied into `tree`."""
    if revision is None:
        shutil.copytree(REPO, tree, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "out"))
        return tree
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def test_args(tree: Path, target: Target) -> list[str]:
    """The target's pytest arguments, less test files not in `tree` (a measure taken before they were written)."""
    return [a for a in target.tests if not a.endswith(".py") or (tree / a).exists()]


def run_tests(tree: Path, target: Target, show: bool = False, selected: list[str] | None = None,
              extra: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> str:
    """'passed', 'failed' or 'timeout' for the target's tests in `tree` (or only the test ids `selected`); `show`:
    print the end of a failure."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    tests = test_args(tree, target) if selected is None else selected
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "-p", "no:randomly", *extra, *tests], cwd=tree, env=env, capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    if done.returncode and show:
        print(done.stdout.decode(errors="replace")[-3000:], file=sys.stderr)
    return "passed" if done.returncode == 0 else "failed"


UNRUN = " (no test runs it)"  # the log's mark of a mutant that survives uncovered
AT_IMPORT = ""  # coverage's context for what runs outside any test: module bodies run while pytest collects


def covering(tree: Path, target: Target, cache: Path | None = None) -> tuple[dict[int, set[str]], float] | None:
    """The ids of the tests that execute each line of the target (AT_IMPORT among them for code that runs at
    import), from one run of its tests under coverage.py, and the seconds that run took; None where they fail
    (nothing is measured). `cache`: a folder that keeps both for these tests and this source, so a resumed run does
    not measure them again."""
    digest = hashlib.sha256((tree / target.path).read_bytes())
    for path in sorted((tree / "tests").rglob("*.py")):
        digest.update(path.read_bytes())
    digest.update(repr(target.tests).encode())
    kept = cache / f"covered-{digest.hexdigest()[:16]}.json" if cache else None
    if kept is not None and kept.exists():
        stored = json.loads(kept.read_text())
        return {int(line): set(tests) for line, tests in stored["lines"].items()}, stored["seconds"]
    data_file = tree.parent / f"coverage-{tree.name}"
    started = time.monotonic()
    outcome = run_tests(tree, target, show=True, extra=(f"--cov={tree / 'generator'}", "--cov-context=test",
                                                         "--cov-report="), env={"COVERAGE_FILE": str(data_file)})
    seconds = time.monotonic() - started
    if outcome != "passed":
        return None
    import coverage  # the bench's own dependency (scripts/install.sh test), not the package's

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    contexts = data.contexts_by_lineno(str(tree / target.path))
    data_file.unlink()
    # pytest-cov names a test's context `nodeid|setup`, `nodeid|run` or `nodeid|teardown`
    covered = {line: {c.rpartition("|")[0] if "|" in c else c for c in found} for line, found in contexts.items()}
    if kept is not None:
        kept.write_text(json.dumps({"seconds": seconds,
                                    "lines": {line: sorted(tests) for line, tests in covered.items()}}))
    return covered, seconds


def statement_lines(source: str) -> dict[tuple[int, int], range]:
    """For each node's (start line, end line): the lines of the innermost statement around it up to its end, where
    coverage.py records the statement's execution (a statement spanning lines is recorded at its first)."""
    lines: dict[tuple[int, int], range] = {}
    for statement in ast.walk(ast.parse(source)):
        if isinstance(statement, ast.stmt):
            for node in ast.walk(statement):
                if isinstance(node, (ast.expr, ast.stmt)) and (node is statement or not isinstance(node, ast.stmt)):
                    lines[node.lineno, node.end_lineno or node.lineno] = range(
                        min(statement.lineno, node.lineno), (node.end_lineno or node.lineno) + 1)  # or a decorator
    return lines


def tests_for(mutant: Mutant, source: str, spans: dict[tuple[int, int], range], covered: dict[int, set[str]],
              order: dict[str, int]) -> list[str] | None:
    """The test ids to run against `mutant` ([] where no test executes it); None: all of the target's tests (its
    statement runs at import, where no test's context is recorded). `spans`: statement_lines(source)."""
    end = source.count("\n", 0, mutant.end) + 1
    span = spans.get((mutant.line, end), range(mutant.line, end + 1))
    found = set().union(*(covered.get(line, set()) for line in span))
    if AT_IMPORT in found:
        return None
    return sorted(found, key=lambda test: (order.get(test.partition("::")[0], len(order)), test))


def run_module(module: str, chosen: list[Mutant], trees: queue.Queue, every_test: bool = False,
               done: dict[str, str] | None = None, save: Path | None = None) -> dict[str, str] | None:
    """Each mutant's outcome (killed, survived, or equivalent: not run), run in the trees that `trees` holds, one
    mutant per tree at a time; None for a module whose tests fail unmutated (nothing is measured). `done`: outcomes
    measured before (not run again); `save`: the results file each new outcome is added to."""
    target = TARGETS[module]
    done = done or {}
    tree = trees.get()
    trees.put(tree)
    source = (tree / target.path).read_text()
    if source != (REPO / target.path).read_text():
        print(f"{module}: not run: {target.path} differs in the measured tree", file=sys.stderr)
        return None
    left = [m for m in chosen if m.key not in done]
    selective = not every_test and target.path.endswith(".py")
    measured = covering(tree, target, save.parent if save else None) if selective and left else ({}, 0.0)
    if measured is None or (left and not selective and run_tests(tree, target, show=True) != "passed"):
        print(f"{module}: not run: its tests fail (or time out) unmutated: {' '.join(target.tests)}", file=sys.stderr)
        return None
    covered, seconds = measured
    timeout = min(TIMEOUT, max(60.0, LOOPING * seconds)) if selective else TIMEOUT
    order = {a: i for i, a in enumerate(test_args(tree, target))}
    spans = statement_lines(source) if selective else {}
    print(f"{module}: {len(chosen)} mutants ({len(chosen) - len(left)} measured before), tests: "
          f"{' '.join(test_args(tree, target))}{' (those that run each mutant)' if selective else ''}, "
          f"{timeout:.0f} s each at most", flush=True)
    lock = threading.Lock()

    def run(mutant: Mutant) -> str:
        if mutant.key in EQUIVALENT:
            return "equivalent"
        if mutant.key in done:
            return done[mutant.key]
        selected = tests_for(mutant, source, spans, covered, order) if selective else None
        tree = trees.get()
        try:
            (tree / target.path).write_text(source[:mutant.start] + mutant.replacement + source[mutant.end:])
            passed = selected == [] or run_tests(tree, target, selected=selected, timeout=timeout) == "passed"
            outcome = "survived" if passed else "killed"
        finally:
            (tree / target.path).write_text(source)
            trees.put(tree)
        print(f"{outcome:>9} {shown(mutant)}{UNRUN if selected == [] else ''}", flush=True)
        if save is not None:
            with lock, save.open("a") as results:
                results.write(json.dumps({"key": mutant.key, "outcome": outcome}) + "\n")
        return outcome

    with ThreadPoolExecutor(trees.qsize()) as pool:
        return dict(zip((m.key for m in chosen), pool.map(run, chosen)))


def changed_lines(path: str, revision: str) -> set[int]:
    """The lines of `path` in the worktree that differ from `revision`'s (git diff's new side)."""
    diff = subprocess.run(["git", "-C", str(REPO), "diff", "-U0", revision, "--", path], capture_output=True,
                          text=True, check=True).stdout
    spans = re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M)
    return {line for start, count in spans for line in range(int(start), int(start) + int(count or 1))}


def read_results(path: Path | None) -> dict[str, str]:
    """The outcomes a results file holds, by mutant key (the last one where a key was measured again)."""
    if path is None or not path.exists():
        return {}
    return {r["key"]: r["outcome"] for r in map(json.loads, path.read_text().splitlines()) if r}


def shown(mutant: Mutant) -> str:
    """The mutant as a run's log prints it (and --tabulate reads it back)."""
    return f"{mutant.module}:{mutant.line} {mutant.operator} {mutant.original!r} -> {mutant.replacement!r}"


def read_log(log: Path, chosen: dict[str, list[Mutant]]) -> dict[str, tuple[list[Mutant], dict[str, str]]]:
    """The outcomes a run's log printed (or a results file, *.jsonl, holds), for the mutants of `chosen` it ran (a
    mutant printed alike twice: in order)."""
    kept = read_results(log) if log.suffix == ".jsonl" else {}
    printed: dict[str, list[str]] = {}
    for line in [] if kept else log.read_text().splitlines():
        outcome, _, rest = line.strip().partition(" ")
        if outcome in ("killed", "survived"):
            printed.setdefault(rest.removesuffix(UNRUN), []).append(outcome)
    results = {}
    for module, found in chosen.items():
        ran = [m for m in found if m.key in kept or printed.get(shown(m)) or m.key in EQUIVALENT]
        outcome = {m.key: "equivalent" if m.key in EQUIVALENT else kept.get(m.key) or printed[shown(m)].pop(0)
                   for m in ran}
        if ran:
            results[module] = (ran, outcome)
    return results


def report(results: dict[str, tuple[list[Mutant], dict[str, str]]]) -> str:
    lines = ["| module | mutants | killed | survived | equivalent | killed of non-equivalent |",
             "|---|---|---|---|---|---|"]
    details = []
    for module, (chosen, outcome) in results.items():
        counts = {k: sum(1 for m in chosen if outcome[m.key] == k) for k in ("killed", "survived", "equivalent")}
        live = counts["killed"] + counts["survived"]
        rate = f"{100 * counts['killed'] / live:.0f}%" if live else "-"
        lines.append(f"| {module} | {len(chosen)} | {counts['killed']} | {counts['survived']} | "
                     f"{counts['equivalent']} | {rate} |")
        for m in chosen:
            if outcome[m.key] != "killed":
                why = f": {EQUIVALENT[m.key]}" if m.key in EQUIVALENT else ""
                details.append(f"- {outcome[m.key]} `{TARGETS[module].path}:{m.line}` {m.operator} "
                               f"`{m.original}` -> `{m.replacement}`{why}")
    return "\n".join(lines + [""] + details) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--sample", action="store_true", help="only the fixed CI sample")
    parser.add_argument("--report", type=Path, help="write the table as Markdown to this file")
    parser.add_argument("--size", type=int, default=SAMPLE_SIZE, help="mutants per module (0: all)")
    parser.add_argument("--at", metavar="REVISION", help="measure the tests of this commit (the modules must match)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy")
    parser.add_argument("--match", default="", metavar="TEXT", help="only the mutants whose line shows TEXT")
    parser.add_argument("--since", metavar="REVISION",
                        help="only the mutants on lines changed since this commit (a merge's new code)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--tabulate", type=Path, metavar="LOG",
                        help="the table of a run's log (or --results file, *.jsonl), run nothing")
    parser.add_argument("--results", type=Path, metavar="FILE",
                        help="add each outcome to FILE (JSON lines) and skip the mutants it already holds")
    parser.add_argument("--every-test", action="store_true",
                        help="run all the target's tests for every mutant, not only those that execute it")
    args = parser.parse_args(argv)
    modules = args.modules or list(TARGETS)
    unknown = sorted(set(modules) - set(TARGETS))
    if unknown:
        parser.error(f"no such module: {', '.join(unknown)}")
    chosen = {m: [x for x in mutants(m) if x.key in SAMPLE] if args.sample else drawn(mutants(m), args.size)
              for m in modules}
    chosen = {m: [x for x in found if args.match in shown(x)] for m, found in chosen.items()}
    if args.since:
        chosen = {m: [x for x in found if x.line in changed_lines(TARGETS[m].path, args.since)]
                  for m, found in chosen.items()}
    if args.list:
        for module, found in chosen.items():
            for m in found:
                print(f"{module}:{m.line} {m.operator} {m.original!r} -> {m.replacement!r}")
        return 0
    if args.tabulate:
        print(report(read_log(args.tabulate, chosen)), end="")
        return 0
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        os.chmod(scratch, 0o755)  # test_jobdir_attacks renders as an unprivileged user: it reads the copied tree
        trees: queue.Queue = queue.Queue()
        for n in range(args.jobs):
            trees.put(copy_tree(Path(scratch) / str(n), args.at))
        done = read_results(args.results)
        outcomes = {m: run_module(m, found, trees, args.every_test, done, args.results)
                    for m, found in chosen.items() if found}
    results = {m: (chosen[m], outcome) for m, outcome in outcomes.items() if outcome is not None}
    table = report(results)
    print(table, end="")
    if args.report:
        args.report.write_text(table)
    if len(results) < len(outcomes):
        return 2
    return 1 if any(v == "survived" for _, outcome in results.values() for v in outcome.values()) else 0


# Mutants that change no behaviour, by key (module:operator:original->replacement), with why.
_CACHE = ("a bound on _ESTIMATES, a cache of memory.estimate's results (pure): what it keeps or clears changes no "
          "estimate")
_STAGES = ("the lru_cache bound of _distinct_stages or _stage_layers (pure functions of a frozen Model and ints): "
           "what the cache keeps changes no result")
EQUIVALENT: dict[str, str] = {
    "layouts:number:0->1#13": "the LoRA rank of a job without adapters: memory.py reads lora_rank only for methods "
                              "that train adapters (l. 298-300, 377-379), and those always have one (recipe.adapter "
                              "l. 30-34)",
    "spec:drop:best is None->False": "no oneOf/anyOf error without an x-hint reaches it: both oneOf in "
                                     "schemas/job.schema.json carry one (handled at l. 520), their branches exclude "
                                     "each other (never 'valid under each'), and the anyOf inside data's `not` fails "
                                     "as the `not`",
    "parallel:drop:pp == 1->False": "split_layers at PP 1 without the shortcut: divmod(layers + weight, 1) is "
                                    "(layers + weight, 0), one stage of layers + weight, less weight: (layers,), "
                                    "what the shortcut returns",
    'spec:drop:kind in ("oneOf", "anyOf")->False': "the same reason as `best is None`: no oneOf/anyOf error "
                                                    "without an x-hint reaches _describe (both oneOf carry one, "
                                                    "handled the line before)",
    'spec:drop:kind == "const"->False': "no const error reaches _value_message: schemas/job.schema.json's two "
                                        "consts sit in cards' oneOf (reported by its x-hint) and in an `if` "
                                        "(whose failures are never errors)",
    'spec:drop:kind == "multipleOf"->False': "the schema's one multipleOf (seq_len) carries an x-hint, which "
                                             "_value_message returns the line before",
    'spec:drop:kind == "not"->False': "every `not` in the schema is in data's oneOf (reported by its x-hint) or "
                                      "carries x-key (train, allOf's else: _describe reports those itself)",
    "cards:compare:max(r.seq_lens) >= spec.seq_len->(max(r.seq_lens) > spec.seq_len)": "a row whose longest "
        "seq_len is the job's holds the job's seq_len: it is in `exact`, which table_row takes before `larger`",
    "cards:compare:n <= hw.cards_per_node->(n < hw.cards_per_node)": "at n = cards_per_node, a multiple of the "
        "parallel unit on every hardware.yaml row (and equal to it for a framework that counts whole nodes), both "
        "branches yield n and go on to 2 x cards_per_node",
    "cards:number:0->1#7": "first_holding's default rank, `lambda i: 0` made 1: a rank equal for every index "
                           "orders the candidates by (rank, i) exactly as before",
    "cards:arith:n & -n->(n | -n)": "for n > 0, n | -n is -(n & -n) in two's complement, and int.bit_length "
                                    "of a negative number is that of its absolute value",
    "cards:compare:cards > hw.cards_per_node->(cards >= hw.cards_per_node)": "at one node's count, "
        "cards % cards_per_node is 0: the whole-node refusal's second condition is false either way",
    "cards:compare:wanted > 8->(wanted >= 8)": "a budget of exactly 8 cards rounded to a multiple of 8 is 8",
    "jobdir:number:1->2": "read_regular reads limit + 2 bytes instead of limit + 1: `len(data) <= limit` decides "
                          "the same for every file, a file that grew while read included",
    "jobdir:number:0->1#1": "remove_tree's first temporary name is .2 instead of .1 (_free_name skips taken "
                            "names either way); every one is removed with the folder",
    "jobdir:number:1->2#1": "_free_name steps by 2: every name it returns is still one not taken, and each is "
                            "removed with the folder",
    "jobdir:bool:False->True#5": "compare's Manifest for a job folder that is none (or a link): nothing is "
                                 "scanned then, so no entry is compared and its intact flag is never read (its "
                                 "entries are empty either way)",
    "jobdir:number:0->1#4": "_umask sets a umask of 1 instead of 0 for the instant before it restores the one it read: "
                            "the value read and restored is the same, and nothing is created in between",
    "layouts:compare:ep > 1->(ep >= 1)": "at EP 1 the group % 1 is 0: the expert rule adds nothing",
    "layouts:number:1->2#18": "the dense-stage rule from PP 3 instead of 2: at PP 2 it needs first_dense >= "
                              "layers // 2, and models.yaml's one model with dense first layers, deepseek-v3, has 3 "
                              "of 61",
    "layouts:compare:cp > 1->(cp >= 1)#1": "at CP 1, 2 x CP = 2 divides every seq_len the schema takes (multiples "
                                           "of 256)",
    "layouts:number:1->2#19": "the 2 x CP rule from CP 3 instead of 2: at CP 2, 4 divides every seq_len the schema "
                              "takes (multiples of 256)",
    "layouts:number:1->2#36": _CACHE,
    "layouts:arith:1 << 16->(1 >> 16)": _CACHE,
    "layouts:number:16->17#1": _CACHE,
    "layouts:compare:len(_ESTIMATES) >= MAX_ESTIMATES->(len(_ESTIMATES) > MAX_ESTIMATES)": _CACHE,
    "layouts:bool:True->False#8": "_estimate_once's key without sort_keys: the same activations in another order "
                                  "miss the cache and are estimated again, to the same result",
    "layouts:compare:pp > 1->(pp >= 1)#1": "at PP 1 the dense-stage rule would need first_dense >= layers, which "
                                         "tables.py refuses when it loads models.yaml (l. 697-698)",
    "layouts:number:1->2#11": "_validate_pins' EP at 2 where not pinned: every rule EP breaks is reported at key "
                              "`ep` (_structure_problems, _split_problems), which _validate_pins keeps only where EP "
                              "is pinned, and EP is in no other rule's product",
    "layouts:compare:free.pp > 1->(free.pp >= 1)": "a layout's PP is at least 1: at PP 1 both branches give 1",
    "layouts:bool:True->False#5": "_Setting's dataclass not frozen: a _Setting is private to layouts.py, built once "
                                  "and only read (never assigned to, hashed or compared)",
    "memory:bool:True->False#5": "Term's dataclass not frozen: TERMS is only iterated (_with_terms, estimate); "
                                 "nothing assigns to, hashes or compares a Term",
    "memory:drop:not TERMS->False": "_with_terms' shortcut dropped: with no TERMS, replace(breakdown, extra=()) is "
                                    "a breakdown equal to the one given (extra is () already)",
    "memory:compare:stage == last->(stage != last)": "_distinct_stages' flag for the last stage negated: it still "
                                                     "sets the last stage apart from all others, the same partition",
    "memory:number:0->1#4": "a dense model's MoE layers counted 1 instead of 0: _stage_layers' count only multiplies "
                            "expert_params_per_layer (stage_params), which is 0 for every dense model in models.yaml, "
                            "and is equal on every stage (distinct_stages)",
    "memory:number:1->2#3": _STAGES,
    "memory:arith:1 << 12->(1 >> 12)": _STAGES,
    "memory:number:12->13": _STAGES,
    "memory:number:1->2#8": _STAGES,
    "memory:arith:1 << 16->(1 >> 16)": _STAGES,
    "memory:number:16->17": _STAGES,
    "layouts:compare:pp > 1->(pp >= 1)#2": "_global_batch's PP micro-batch rule from PP 1: a step has at least one "
                                           "micro batch (the batch is a multiple of `unit`, and unit x sequences of "
                                           "micro batch x DP), so micro_batches < 1 never holds",
    "layouts:number:4096->4097": "m x seq_len is a multiple of 256 (the schema's seq_len), so it is <= 4096 exactly "
                                 "where it is <= 4097",
}

# The fixed CI sample (tests/test_mutants.py runs each against its module's first test file): mutants the suite let
# through before issue 42, among them the ones the issue names, one or two per module.
SAMPLE = {
    "memory:number:8.0->16.0",  # the activations outside attention, 8sbh
    "memory:arith:seq * micro->(seq / micro)",
    "parallel:drop:self.cards % product->False",  # the cards must divide by TP x PP x CP
    "parallel:drop:self.global_batch_size % self.batch_step->False",  # by micro batch x DP
    "layouts:number:0.25->0.5",  # MAX_BUBBLE
    "cards:minmax:max(range(high + 1, top + 1), key=lambda i: (rank(i), i))->min",
    "scheduler:table:\"gpu\"->'npu'",  # the GPU --gres default
    "scheduler:arith:1 + sched.time_margin->(1 - sched.time_margin)",  # cluster.slurm.time_margin
    "jobdir:flag:os.O_RDONLY | os.O_NOFOLLOW->(os.O_RDONLY)",  # a file opened through a link
    "jobdir:logic:last.startswith(SEAL) and hmac.compare_digest(last[len(SEAL):], _seal(f\"{body}\\n\"))->"
    "(last.startswith(SEAL) or hmac.compare_digest(last[len(SEAL):], _seal(f'{body}\\n')))",  # a broken seal
    "record:drop:not manifest.intact->False",
    "spec:drop:len(parents) >= MAX_DEPTH->False",
    "run_time_data:pattern:| 0?*->",  # a count with a leading zero (bash reads it as octal)
    "checkpoint_resume:compare:-ge->-gt",  # a run at its last iteration trained over
    # survivors of the full run (bench/mutants-2026-11-28-full.md)
    "checkpoint_resume:number:64->65",  # an iteration file read into the shell however large
    "scheduler:drop:not _under(sched.job_dir or \"\", mount)->False",  # a job folder off Volcano's volume
    "parallel:arith:step // math.gcd(step, self.sequences_per_sample)->(step * math.gcd(step, "
    "self.sequences_per_sample))",  # RL's batch tiled in prompts, not responses
    "memory:number:16.0->32.0",  # a LoRA adapter parameter's 16 bytes on Megatron (layouts and memory's full runs)
    "layouts:compare:m * seq <= 4096->(m * seq < 4096)",  # the micro batches a space without a list tries
}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
