"""Progress on stderr for the steps that can take a while (a framework's own parser importing torch, a budget search
over many card counts): said once the step has run longer than a moment, and only to a person at a terminal, so
that a fast command prints nothing more, and output a program reads (a pipe, a CI log, `validate --json` captured
with its stderr) is the same however loaded the machine is."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click

DELAY_S = 2.0  # a step shorter than this says nothing


def shown() -> bool:
    return sys.stderr.isatty()


@contextmanager
def progress(message: str) -> Iterator[None]:
    """Say `message` on stderr if the block is still running after DELAY_S seconds and stderr is a terminal."""
    if not shown():
        yield
        return
    timer = threading.Timer(DELAY_S, click.echo, args=(message,), kwargs={"err": True})
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
