"""Connections to the store's SQLite file, and the translation of `sqlite3` errors.

This is the store boundary: nothing above it sees a `sqlite3` exception. A connection runs in
autocommit mode and every write takes `BEGIN IMMEDIATE`, so a writer learns at once whether it holds
the lock (WAL readers never block it).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from transcript.model.errors import (
    StoreCorrupted,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    TranscriptError,
)
from transcript.store.location import MEMORY

Synchronous = Literal["FULL", "NORMAL", "OFF", "EXTRA"]


def translate(exc: sqlite3.Error, action: str) -> TranscriptError:
    """The typed error for a `sqlite3` error raised while doing `action`."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    detail = f"{action}: {exc}"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc):
        return StoreLocked(f"{detail} (another connection held the lock past the busy timeout)")
    if name.startswith("SQLITE_READONLY") or "readonly database" in str(exc):
        return StoreReadOnly(f"{detail} (the store is read-only)")
    if name == "SQLITE_FULL" or "database or disk is full" in str(exc):
        return StoreFull(f"{detail} (nothing of this write was stored)")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "not a database" in str(exc):
        return StoreCorrupted(detail)
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM", "SQLITE_AUTH")):
        return StoreUnavailable(detail)
    if isinstance(exc, sqlite3.OperationalError):
        return StoreUnavailable(detail)
    return TranscriptError(detail)


@contextlib.contextmanager
def translated(action: str) -> Iterator[None]:
    """Run a block, turning any `sqlite3` error into the library's typed error (and text the file holds
    that is not UTF-8, which only damage can put there, into `StoreCorrupted`)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(exc, action) from exc
    except UnicodeDecodeError as exc:
        raise StoreCorrupted(f"{action}: text stored in the file is not valid UTF-8 ({exc})") from exc


def connect(
    path: str | Path, *, readonly: bool, timeout: float, synchronous: Synchronous, text_errors: str = ""
) -> sqlite3.Connection:
    """Open the file (creating it with mode 0600 unless read-only) and set the connection's pragmas."""
    target = str(path)
    with translated(f"opening {target}"):
        if target == MEMORY:
            if readonly:
                raise StoreUnavailable("an in-memory store cannot be opened read-only")
            conn = sqlite3.connect(MEMORY, isolation_level=None)
        elif readonly:
            if not os.path.exists(target):
                raise StoreUnavailable(f"opening {target}: no such file (a read-only open never creates one)")
            from urllib.parse import quote

            uri = f"file:{quote(os.path.abspath(target))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout)
        else:
            _create_private(target)
            conn = sqlite3.connect(target, isolation_level=None, timeout=timeout)
        try:
            if readonly and text_errors:
                conn.text_factory = lambda data: data.decode("utf-8", text_errors)
            conn.execute("PRAGMA recursive_triggers = ON")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            conn.close()
            raise
    return conn


def _create_private(path: str) -> None:
    """Create an empty file readable by its owner only; an existing file keeps its mode."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreUnavailable(f"cannot create {path}: {exc.strerror}") from exc
    os.close(fd)
