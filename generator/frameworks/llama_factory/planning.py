"""llama-factory: the resolver's side of the plugin."""

from __future__ import annotations

from ..contract import RoleDef, RoleKind


class Planning:
    def roles(self, method: str) -> tuple[RoleDef, ...]:
        return (RoleDef(RoleKind.TRAIN),)


PLANNING = Planning()
