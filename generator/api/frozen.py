"""`frozen`: the package's immutable values, `dataclass(frozen=True)` with its comparison, hash and repr as three
shared functions instead of three compiled for each class.

`dataclass` compiles six methods for every frozen class as the module is imported (CPython 3.11), about 0.75 ms a
class: the 45 values `gen-launch plan` loads spent a third of its own start-up there (35 ms). Sharing `__eq__`,
`__hash__` and `__repr__` takes 40% off that (issue 35, docs/development.md). They answer what dataclass's do on
Python 3.10-3.12: the fields with compare (hash, repr) set, as one tuple, and a method a class writes itself is kept.
Where they differ, nothing here reaches: 3.13's `__eq__` compares field by field, so a NaN field there differs from
itself (specs refuse non-finite numbers); the repr has no guard for a value that holds itself (no value here can);
and `__dataclass_params__` says eq and repr False.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        """Read by type checkers alone (typing has it from Python 3.11; the package runs on 3.10)."""
        return lambda decorated: decorated

T = TypeVar("T")
_Values = Callable[[Any], tuple]


def _values_of(names: list[str]) -> _Values:
    """The named attributes of an instance as one tuple (attrgetter returns a lone value bare)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return attrgetter(*names) if names else lambda instance: ()


def _getters(cls: type) -> tuple[_Values, _Values, tuple[str, ...]]:
    """(the compared fields' values, the hashed fields' values, the repr's field names) of `cls`, made at first use
    and kept on the class itself (a subclass has fields of its own)."""
    found = cls.__dict__.get("_frozen_getters")
    if found is None:
        own = fields(cls)
        found = (_values_of([f.name for f in own if f.compare]),
                 _values_of([f.name for f in own if (f.compare if f.hash is None else f.hash)]),
                 tuple(f.name for f in own if f.repr))
        cls._frozen_getters = found  # type: ignore[attr-defined]
    return found


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is self.__class__:
        compared = _getters(self.__class__)[0]
        return bool(compared(self) == compared(other))
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_getters(self.__class__)[1](self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _getters(self.__class__)[2])
    return f"{self.__class__.__qualname__}({shown})"


def _make(cls: type[T], kw_only: bool) -> type[T]:
    own = cls.__dict__
    # dataclass's rule: a __hash__ the class sets is kept, except the None Python gives a class that writes __eq__.
    written_hash = own.get("__hash__", MISSING)
    if written_hash is MISSING or (written_hash is None and "__eq__" in own):
        cls.__hash__ = _hash  # type: ignore[method-assign]
    for name, method in (("__eq__", _eq), ("__repr__", _repr)):
        if name not in own:
            setattr(cls, name, method)
    return dataclass(cls, frozen=True, eq=False, repr=False, kw_only=kw_only)


@overload
def frozen(cls: type[T], /) -> type[T]: ...


@overload
def frozen(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(cls: type[T] | None = None, /, *, kw_only: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """`@frozen` or `@frozen(kw_only=True)` on a class: a frozen dataclass (eq and hash by its fields)."""
    if cls is None:
        return lambda undecorated: _make(undecorated, kw_only)
    return _make(cls, kw_only)
