"""Where a store lives: the default location, and the check that a location can name one.

A location is a SQLite file path (the default: `$TRANSCRIPT_DB` or `./transcript.db`), `:memory:` (a
private SQLite database), or `memory://NAME` (the in-process recorder, for tests: no file, no search,
no SQL views; stores of one name share their data within the process), or a PostgreSQL URL
(`postgresql://…`, `transcript.store.pgconnect`: a schema of a server that many workers share).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from transcript.model.errors import InvalidArgument

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
