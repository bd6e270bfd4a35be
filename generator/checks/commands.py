"""commands.txt of any framework: one line per node, in node-rank order (the file's own header says so)."""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

# msrun_launcher.sh's positional arguments: "CMD" WORKER_NUM LOCAL_WORKER MASTER_ADDR MASTER_PORT NODE_RANK ...
# (MindFormers scripts/msrun_launcher.sh); the rank is the sixth word after the script.
MSRUN_RANK = 6
NO_RANK = "NODE_RANK=N, launch.sh N or msrun_launcher.sh's NODE_RANK"


def _rank_word(words: list[str]) -> str | None:
    """The node-rank word of one command line, whichever way it is passed: `NODE_RANK=N` in front of a program,
    `launch.sh N` (gen-launch's own launch scripts take the rank first), or msrun_launcher.sh's NODE_RANK."""
    for word in words:
        if word.startswith("NODE_RANK="):
            return word.split("=", 1)[1]
    for i, word in enumerate(words):
        name = PurePosixPath(word).name
        if name == "launch.sh" and i + 1 < len(words):
            return words[i + 1]
        if name == "msrun_launcher.sh" and i + MSRUN_RANK < len(words):
            return words[i + MSRUN_RANK]
    return None


def rank_problems(text: str, nodes: int) -> list[str]:
    """Each node rank 0 .. nodes-1 must be run by exactly one line, in order: a repeated rank starts two nodes as the
    same member (the rendezvous waits for the missing one, or two processes claim the same global ranks)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    ranks: list[int] = []
    for number, line in enumerate(lines, 1):
        try:
            word = _rank_word(shlex.split(line))
        except ValueError as exc:
            return [f"command line {number} does not split as shell words ({exc})"]
        if word is None and nodes == 1 and len(lines) == 1:
            return []  # one node: a launcher without a rank argument (python run_mindformer.py) runs it
        if word is None or not word.isdigit():
            return [f"command line {number} passes no node rank ({NO_RANK})"]
        ranks.append(int(word))
    if ranks == list(range(nodes)):
        return []
    repeated = sorted({r for r in ranks if ranks.count(r) > 1})
    missing = sorted(set(range(nodes)) - set(ranks))
    return [f"node ranks {ranks} for {nodes} node(s): each of 0..{nodes - 1} must run exactly once, in order"
            + (f"; repeated {repeated}" if repeated else "") + (f"; missing {missing}" if missing else "")]
