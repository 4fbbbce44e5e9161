"""Progress of long work, in units of work (bytes imported, events, model calls): a bar on a terminal, on
stderr; nothing at all when stderr is not a terminal, so scripts and logs get only the result."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Protocol

import click


class Progress(Protocol):
    """What long work reports to: `update(n)` after n more units are done."""

    def update(self, n_steps: int) -> None: ...


class _Silent:
    def update(self, n_steps: int) -> None:
        pass


@contextlib.contextmanager
def progress(total: int, label: str, unit: str) -> Iterator[Progress]:
    """A bar over `total` units named `unit` on a terminal; a silent stand-in otherwise."""
    if not sys.stderr.isatty() or total <= 0:
        yield _Silent()
        return
    with click.progressbar(length=total, label=f"{label} ({unit})", file=sys.stderr, show_pos=True) as bar:
        yield bar
