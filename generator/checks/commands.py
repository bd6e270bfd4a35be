"""commands.txt of any framework: one line per node, in node-rank order (the file's own header says so)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

from ..api.output import Launcher

# gen-launch's own launch scripts take the node rank first (launch.sh NODE_RANK [MASTER_ADDR]).
LAUNCH_SH = Launcher("launch.sh", 1, "templates/_launch_prologue.sh.j2")


def _describe(launchers: Sequence[Launcher]) -> str:
    """How a line may pass its rank: NODE_RANK=N, launch.sh N or <script>'s NODE_RANK."""
    ways = ["NODE_RANK=N"] + [f"{x.script} N" if x.rank_at == 1 else f"{x.script}'s NODE_RANK" for x in launchers]
    return ", ".join(ways[:-1]) + f" or {ways[-1]}"


def _rank_word(words: list[str], launchers: Sequence[Launcher]) -> str | None:
    """The node-rank word of one command line, whichever way it is passed: `NODE_RANK=N` in front of a program,
    or the rank argument of one of `launchers`."""
    for word in words:
        if word.startswith("NODE_RANK="):
            return word.split("=", 1)[1]
    at = {x.script: x.rank_at for x in launchers}
    for i, word in enumerate(words):
        name = PurePosixPath(word).name
        if name in at and i + at[name] < len(words):
            return words[i + at[name]]
    return None


def rank_problems(text: str, nodes: int, own: Sequence[Launcher] = ()) -> list[str]:
    """Each node rank 0 .. nodes-1 must be run by exactly one line, in order: a repeated rank starts two nodes as the
    same member (the rendezvous waits for the missing one, or two processes claim the same global ranks). `own`: the
    framework's own launchers (its plugin's Output.launchers), read besides launch.sh."""
    launchers = (LAUNCH_SH, *own)
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    ranks: list[int] = []
    for number, line in enumerate(lines, 1):
        try:
            word = _rank_word(shlex.split(line), launchers)
        except ValueError as exc:
            return [f"command line {number} does not split as shell words ({exc})"]
        if word is None and nodes == 1 and len(lines) == 1:
            return []  # one node: a launcher without a rank argument (a one-card python line) runs it
        if word is None or not word.isdigit():
            return [f"command line {number} passes no node rank ({_describe(launchers)})"]
        ranks.append(int(word))
    if ranks == list(range(nodes)):
        return []
    repeated = sorted({r for r in ranks if ranks.count(r) > 1})
    missing = sorted(set(range(nodes)) - set(ranks))
    return [f"node ranks {ranks} for {nodes} node(s): each of 0..{nodes - 1} must run exactly once, in order"
            + (f"; repeated {repeated}" if repeated else "") + (f"; missing {missing}" if missing else "")]
