"""Files the command line writes: `-o/--output` (0600, atomic), and no store left by a failed command.

Every file a command writes through `-o` is new, readable by its owner only, and replaces its target
whole once complete, so no reader ever sees half of it and a link planted at the path is replaced,
never followed. A command writes it only when it succeeds (or when a check it ran found a problem,
whose report is the result): a failing command leaves nothing behind, and neither does one that
created a store file and then failed before storing anything.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from transcript.cli.output import safe, sink, terminal_json
from transcript.session.store import Store
from transcript.store.location import MEMORY, MEMORY_RECORDER, SERVER_SCHEMES

_SIDE = ("-wal", "-shm", "-journal")


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only (mode 0600), atomically: the bytes go to a new file
    beside the target, synced, which then replaces the target. A link planted at the path is replaced,
    never followed, and no reader ever sees half of the file."""
    write_private_with(path, lambda write: write(data))


def write_private_with(path: Path, writer: Callable[[Callable[[bytes], object]], object]) -> None:
    """`write_private` of what `writer` writes, piece by piece, through the function it is given: the
    target is replaced only once all of it was written (an error on the way leaves it as it was)."""
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as exc:
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            writer(out.write)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def stream_result(writer: Callable[[Callable[[bytes], object]], object]) -> None:
    """The command's result as JSON that `writer` writes piece by piece, then a line break: to
    stdout as it comes (escaped on a terminal, as `echo_json` does), or to the `-o` file, written
    as `write_private_with` writes it — never held whole."""
    out = sink()
    if out.path is not None:

        def whole(write: Callable[[bytes], object]) -> None:
            writer(write)
            write(b"\n")

        write_private_with(out.path, whole)
        out.written = True
        return
    terminal = sys.stdout.isatty()

    def echo(data: bytes) -> None:
        text = data.decode("utf-8", "surrogateescape")
        click.echo(terminal_json(text) if terminal else text, nl=False)

    writer(echo)
    click.echo("")


def is_file(path: str) -> bool:
    """Whether a store location names a file (not an in-memory store, not a server's URL)."""
    return path != MEMORY and not path.startswith((MEMORY_RECORDER, *SERVER_SCHEMES))


def check_store_path(path: str) -> None:
    """A clear error for a store path that names no file a store could be (a directory, or a file in
    a directory that does not exist), before SQLite says "disk I/O error" or "unable to open"."""
    if not is_file(path):
        return
    if os.path.isdir(path):
        raise click.ClickException(f"{safe(path)} is a directory; --db names a store file in it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise click.ClickException(f"cannot create the store {safe(path)}: no directory {safe(parent)}")


@contextlib.contextmanager
def created_or_removed(path: str) -> Iterator[None]:
    """Run a command that may create the store at `path`: when it fails, a store it created that holds
    no session yet is removed again, with the files SQLite made beside it. One that another process
    wrote meanwhile holds a session and stays."""
    if not is_file(path) or os.path.lexists(path):
        yield
        return
    before = {suffix for suffix in _SIDE if os.path.lexists(path + suffix)}
    try:
        yield
    except BaseException:
        _remove_if_empty(path, before)
        raise


def _remove_if_empty(path: str, before: set[str]) -> None:
    try:
        with Store.open(path, readonly=True) as store:
            if store.sessions():
                return
    except Exception:  # a file that does not open as a store: only an empty one is ours
        if os.path.lexists(path) and os.path.getsize(path) != 0:
            return
    with contextlib.suppress(OSError):
        os.unlink(path)
        for suffix in _SIDE:
            if suffix not in before and os.path.lexists(path + suffix):
                os.unlink(path + suffix)
