"""Where a store lives: the default location, and the check that a location can name one.

A location is a SQLite file path (the default: `$TRANSCRIPT_DB` or `./transcript.db`), `:memory:` (a
private SQLite database), or `memory://NAME` (the in-process recorder, for tests: no file, no search,
no SQL views; stores of one name share their data within the process), or a PostgreSQL URL
(`postgresql://…`, `transcript.store.pgconnect`: a schema of a server that many workers share).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from transcript.model.errors import InvalidArgument, NotARegularFile

DEFAULT_PATH: Final = "transcript.db"
ENV_VAR: Final = "TRANSCRIPT_DB"
MEMORY: Final = ":memory:"
MEMORY_RECORDER: Final = "memory://"
SERVER_SCHEMES: Final = ("postgresql://", "postgres://")


def is_server(location: str) -> bool:
    """Whether a location names a store on a database server (no file)."""
    return location.startswith(SERVER_SCHEMES)


def default_path() -> str:
    """`$TRANSCRIPT_DB`, or `./transcript.db`."""
    return os.environ.get(ENV_VAR) or DEFAULT_PATH


def check_location(location: object) -> str:
    """The location as text: the default when None; `InvalidArgument` when it cannot name a store."""
    if location is None:
        return default_path()
    if not isinstance(location, (str, Path)):
        raise InvalidArgument(f"a store path is a str or a Path, not {type(location).__name__}")
    target = str(location)
    if not target or "\x00" in target:
        raise InvalidArgument(f"{target!r} cannot name a file (empty, or a NUL character)")
    try:
        target.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{target!r} cannot name a file (not valid Unicode)") from exc
    return target


def absent(location: object) -> bool:
    """Whether `location` (None: the default) names a store file that is not there (False for the
    in-memory stores, and for what names no file: opening it says what is wrong)."""
    target = default_path() if location is None else location
    if not isinstance(target, (str, Path)):
        return False
    name = str(target)
    if not name or "\x00" in name or name == MEMORY or name.startswith((MEMORY_RECORDER, *SERVER_SCHEMES)):
        return False
    return not os.path.lexists(name)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def check_regular(path: str | Path, what: str) -> None:
    """`NotARegularFile` at once when `path` names a directory, a FIFO, a device or a socket (through
    a link too): opening one could wait forever (a FIFO) or read what is no file. A path that names
    nothing, or that cannot be looked at, passes: opening it says what is wrong."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{path} is {file_kind(mode)}; {what} is a regular file")


def read_regular(path: str | Path, what: str) -> bytes:
    """The bytes of a regular file, opened without waiting: a directory, a FIFO, a device or a socket
    is refused on the open descriptor (`NotARegularFile`), never read or waited on; a file that cannot
    be opened is `InvalidArgument`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise InvalidArgument(f"cannot read {path}: {reason}") from exc
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(f"{path} is {file_kind(mode)}; {what} is a regular file")
        os.set_blocking(fd, True)
        return file.read()
