"""What every step of one framework's resolution needs: the spec, the model and hardware rows, the framework."""

from __future__ import annotations

from dataclasses import dataclass

from .spec import Pins, Spec
from .tables import Framework, Hardware, Model


@dataclass(frozen=True)
class Context:
    """What every step of one framework's resolution needs."""

    spec: Spec
    model: Model
    hw: Hardware
    fw: Framework
    force: bool

    @property
    def pins(self) -> Pins:
        return self.spec.layout.get(self.fw.name, Pins())

    @property
    def pinned(self) -> bool:
        return self.pins != Pins()

    def pin_path(self, key: str) -> str:
        return f"layout.{self.fw.name}.{key}"
