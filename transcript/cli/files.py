"""Files the command line writes: `-o/--output` and `backup` (`write_to`), and no store left by a
failed command.

Every file a command writes is new, readable by its owner only, and replaces its target whole once
complete, so no reader ever sees half of it and a link planted at the path is replaced, never
followed; a FIFO or a character device (or a link to one) is written through instead, never
replaced. A command writes it only when it succeeds (or when a check it ran found a problem, whose
report is the result): a failing command leaves nothing behind, and neither does one that created a
store file and then failed before storing anything.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import click

from transcript.cli.output import safe, sink, terminal_json
from transcript.session.store import Store
from transcript.store.location import MEMORY, MEMORY_RECORDER, SERVER_SCHEMES

_SIDE = ("-wal", "-shm", "-journal")


def write_private(path: Path, data: bytes) -> None:
    """`write_to` of these bytes."""
    write_to(path, lambda write: write(data))


def write_to(path: Path, writer: Callable[[Callable[[bytes], object]], object]) -> None:
    """Write what `writer` writes, piece by piece through the function it is given, to `path`: the one
    way a command writes a file (`-o`, `backup`).

    What is at the path decides how. Standard output (`/dev/stdout`, whatever stdout is), a FIFO or a
    character device (or a link to one) is written through, as `cat > PATH` does: a FIFO waits for
    its reader, the node stays what it was, and a terminal gets every control character shown
    escaped (`output.terminal_json`). Anything else that is not a regular file (a directory, a block
    device, a socket) is refused. Otherwise the bytes go to a new file beside the target, readable by
    its owner only (mode 0600) and synced, which then replaces the target whole: no reader ever sees
    half of it, an error on the way leaves the target as it was, and a link planted at the path is
    replaced, never followed.
    """
    kind = stream_kind(path)
    if kind is not None:
        _write_through(path, kind, writer)
    else:
        _replace_whole(path, writer)


_STREAMS: Final = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device"}
_REFUSED: Final = {stat.S_IFDIR: "a directory", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


STDOUT: Final = "standard output"


def stream_kind(path: Path) -> str | None:
    """What `path` names when bytes are written through it, not a file put in its place: `STDOUT`
    (the file stdout writes to, `/dev/stdout` say, never replaced), "a FIFO" or "a character
    device" (through a link too); None for a regular file, a link to one, or nothing yet. A
    directory, a block device or a socket is refused with a clear error."""
    if is_stdout(path):
        return STDOUT
    try:
        mode = stat.S_IFMT(os.stat(path).st_mode)
    except FileNotFoundError:  # nothing there, or a link to nothing: a new file takes the name
        return None
    except OSError as exc:
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    if mode == stat.S_IFREG:
        return None
    if mode in _STREAMS:
        return _STREAMS[mode]
    kind = _REFUSED.get(mode, "no regular file")
    raise click.ClickException(
        f"cannot write {safe(str(path))}: it is {kind} (a result goes to a regular file, which it "
        "replaces whole, or through a FIFO or a character device)"
    )


def _write_through(path: Path, kind: str, writer: Callable[[Callable[[bytes], object]], object]) -> None:
    """Write into standard output, or the FIFO or character device at `path` (opened as it is: no
    file is created, nothing truncated; a FIFO's open waits for a reader)."""
    try:
        if kind == STDOUT:
            sys.stdout.flush()
            fd = os.dup(sys.stdout.fileno())
        else:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            if kind != STDOUT and stat.S_IFMT(os.fstat(out.fileno()).st_mode) not in _STREAMS:
                # Replaced by another kind of file between the look and the open: nothing written.
                raise click.ClickException(f"cannot write {safe(str(path))}: it changed while it was opened")
            writer(_escaped(out.write) if os.isatty(out.fileno()) else out.write)
            out.flush()
    except OSError as exc:
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc


def _escaped(write: Callable[[bytes], object]) -> Callable[[bytes], object]:
    """`write` for a terminal: every control and format character shown as its escape (newlines and
    tabs kept), as stdout shows a result on a terminal; text split mid-character is decoded whole."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def escaped(data: bytes) -> None:
        text = decoder.decode(data)
        shown = "\t".join(terminal_json(part) for part in text.split("\t"))
        write(shown.encode("utf-8", "surrogateescape"))

    return escaped


def _replace_whole(path: Path, writer: Callable[[Callable[[bytes], object]], object]) -> None:
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


def is_stdout(path: Path) -> bool:
    """Whether `path` names the very file standard output writes to (`/dev/stdout` on a pipe)."""
    try:
        named, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # (nothing there, or no file behind stdout)
        return False
    return (named.st_dev, named.st_ino) == (out.st_dev, out.st_ino)


def write_file_to(path: Path, source: Path) -> None:
    """`write_to` of a file's bytes, read a piece at a time."""

    def copy(write: Callable[[bytes], object]) -> None:
        with source.open("rb") as handle:
            while piece := handle.read(1 << 20):
                write(piece)

    write_to(path, copy)


def stream_result(writer: Callable[[Callable[[bytes], object]], object]) -> None:
    """The command's result as JSON that `writer` writes piece by piece, then a line break: to
    stdout as it comes (escaped on a terminal, as `echo_json` does), or to the `-o` file, written
    as `write_to` writes it — never held whole."""
    out = sink()
    if out.path is not None:

        def whole(write: Callable[[bytes], object]) -> None:
            writer(write)
            write(b"\n")

        write_to(out.path, whole)
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
