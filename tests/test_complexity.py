"""No function in the package above cyclomatic complexity 25, as radon measures it (each branch, loop, boolean
operator, comprehension and except clause counts)."""

from __future__ import annotations

from pathlib import Path

from helpers import require

PACKAGE = Path(__file__).resolve().parent.parent / "generator"
LIMIT = 25


def too_complex(source: str) -> list[tuple[str, int]]:
    """(function, complexity) of every function and method in `source` above LIMIT."""
    from radon.complexity import cc_visit
    from radon.visitors import Function

    # cc_visit lists every function and method (a method with its class's name); a class's own figure sums them.
    return [(f"{block.classname}.{block.name}" if block.is_method else block.name, block.complexity)
            for block in cc_visit(source) if isinstance(block, Function) and block.complexity > LIMIT]


def test_no_function_above_the_limit():
    require("radon")
    found = {f"{path.relative_to(PACKAGE.parent)}:{name}": value for path in sorted(PACKAGE.rglob("*.py"))
             for name, value in too_complex(path.read_text(encoding="utf-8"))}
    assert found == {}


def test_the_measure_finds_a_complex_function():
    require("radon")
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(LIMIT))
    assert too_complex(f"def f(x):\n{branches}    return -1\n") == [("f", LIMIT + 1)]
    assert too_complex(f"class C:\n    def m(self, x):\n{branches.replace('    ', '        ')}        return -1\n") \
        == [("C.m", LIMIT + 1)]
    assert too_complex("def g(x):\n    return x\n") == []
