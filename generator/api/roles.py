"""The roles a framework's plan runs: what each does, and how it shares the framework's cards."""

from __future__ import annotations

from enum import Enum

from .frozen import frozen


class RoleKind(str, Enum):
    """What a role of a framework's plan does. Training frameworks have one `train` role; RL frameworks an actor,
    a rollout engine, a frozen reference and (PPO) a critic; inference a `serve` role."""

    TRAIN = "train"
    ACTOR = "actor"
    ROLLOUT = "rollout"
    REFERENCE = "reference"
    CRITIC = "critic"
    SERVE = "serve"

    @property
    def trains(self) -> bool:
        """Whether the role runs backward and an optimizer. A rollout engine, a frozen reference and a server only
        run forward: no gradients, optimizer states or kept activations (memory.py), and no step-model time."""
        return self in (RoleKind.TRAIN, RoleKind.ACTOR, RoleKind.CRITIC)


@frozen
class RoleDef:
    """One role a method runs: its kind, whether it shares the framework's cards with the other roles in turns
    (colocated: the job's cards are the peak over the phases, not the sum), and the earlier role whose layout it
    takes as it is (`takes`: MindSpeed-RL's integrated worker runs the reference and the rollout on the actor's cards
    and weights; None: its own search)."""

    kind: RoleKind
    colocated: bool = True
    takes: RoleKind | None = None
