"""generator/api/frozen.py: `@frozen` values behave as `dataclass(frozen=True)`'s, and every frozen value of the
package shares its three methods (the start-up of issue 35: dataclass compiled them per class)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

import generator
from generator.api import frozen as frozen_module
from generator.api.frozen import frozen


def _twins():
    """The same class through `frozen` and through `dataclass(frozen=True)`: every field option the package uses."""
    def body():
        return {"__annotations__": {"name": "str", "size": "int", "tags": "tuple", "cached": "dict",
                                    "note": "str", "weight": "float"},
                "size": 1, "tags": (), "cached": field(default_factory=dict, compare=False, repr=False),
                "note": field(default="", hash=False), "weight": field(default=0.0, repr=False, hash=True,
                                                                         compare=False)}
    ours = frozen(type("Value", (), body()))
    theirs = dataclass(frozen=True)(type("Value", (), body()))
    return ours, theirs


def test_a_frozen_value_compares_hashes_and_shows_as_dataclass_frozen_does():
    ours, theirs = _twins()
    for args in [("a",), ("a", 2, (1, "x")), ("b", 2, (), {"k": 1}, "n", 3.5)]:
        mine, real = ours(*args), theirs(*args)
        assert repr(mine) == repr(real)
        assert hash(mine) == hash(real)
        assert dataclasses.astuple(mine) == dataclasses.astuple(real)
    a, same_but_cache, other_note, other_weight = (ours("a", 2), ours("a", 2, (), {"x": 1}), ours("a", 2, (), {}, "n"),
                                                   ours("a", 2, (), {}, "", 9.0))
    assert a == same_but_cache and hash(a) == hash(same_but_cache)  # compare=False: not compared or hashed
    assert a != other_note and hash(a) == hash(other_note)  # hash=False: compared, not hashed
    assert a == other_weight and hash(a) != hash(other_weight)  # hash=True, compare=False: hashed alone
    assert a != ours("a", 3) and a != theirs("a", 2)  # another class is never equal
    assert (a == object()) is False and a.__eq__(object()) is NotImplemented


def test_a_frozen_value_refuses_changes_and_replaces_as_a_dataclass():
    ours, _ = _twins()
    value = ours("a")
    with pytest.raises(FrozenInstanceError):
        value.size = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del value.name  # type: ignore[misc]
    assert dataclasses.replace(value, size=5) == ours("a", 5)
    assert [f.name for f in dataclasses.fields(ours)] == ["name", "size", "tags", "cached", "note", "weight"]


def test_keyword_only_values_and_methods_a_class_writes_itself():
    @frozen(kw_only=True)
    class Pair:
        left: int
        right: int = 0

        def __repr__(self) -> str:
            return f"<{self.left}|{self.right}>"

    with pytest.raises(TypeError):
        Pair(1, 2)  # type: ignore[misc]
    assert repr(Pair(left=1)) == "<1|0>"

    @frozen
    class ByLeft:
        left: int
        right: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, ByLeft) and other.left == self.left

    # As dataclass: an __eq__ of its own is kept, and the hash is still the fields'.
    assert ByLeft(1, 2) == ByLeft(1, 3) and hash(ByLeft(1, 2)) == hash((1, 2))

    @frozen
    class Fixed:
        left: int

        def __hash__(self) -> int:
            return 7

    assert hash(Fixed(1)) == 7


def _package_classes():
    for module in pkgutil.walk_packages(generator.__path__, "generator."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if isinstance(value, type) and value.__module__ == loaded.__name__ and dataclasses.is_dataclass(value):
                yield value


def test_every_frozen_value_of_the_package_shares_the_three_methods():
    classes = list(_package_classes())
    frozen_values = [cls for cls in classes if cls.__dataclass_params__.frozen]  # type: ignore[attr-defined]
    assert len(frozen_values) > 50
    compiled = [cls.__qualname__ for cls in frozen_values if cls.__eq__ is not frozen_module._eq]
    assert not compiled, f"frozen values with dataclass's own compiled methods (use @frozen): {compiled}"
