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
from typing import Final, Literal

from transcript.model.errors import (
    StoreCorrupted,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    TranscriptError,
)
from transcript.store.location import MEMORY, check_regular, default_path

Synchronous = Literal["FULL", "NORMAL", "OFF", "EXTRA"]


# What SQLite says when the schema it reads is not the one the store's migrations made.
_SCHEMA_DAMAGE: Final = ("no such column", "no such table", "no such function", "duplicate column name")


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
    if "decode to UTF-8" in str(exc):
        return StoreCorrupted(f"{detail} (text stored in the file is not valid UTF-8)")
    if str(exc).startswith(_SCHEMA_DAMAGE) or "already exists" in str(exc):
        # The store's own statements name only what its migrations created: the schema was damaged.
        return StoreCorrupted(f"{detail} (the file's schema is not the one its migrations made)")
    if name == "SQLITE_IOERR_WRITE" and (limit := _file_size_limit()) is not None:
        # SQLite reports a write refused for the file-size limit (EFBIG, SIGXFSZ ignored) as an I/O
        # error, where a full disk is SQLITE_FULL: both mean the same to the caller.
        return StoreFull(
            f"{detail} (a file of the store reached this process's file-size limit, RLIMIT_FSIZE = "
            f"{limit:,} bytes; nothing of this write was stored)"
        )
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM", "SQLITE_AUTH")):
        return StoreUnavailable(detail)
    if isinstance(exc, sqlite3.OperationalError):
        return StoreUnavailable(detail)
    return TranscriptError(detail)


def _file_size_limit() -> int | None:
    """This process's file-size limit in bytes (`RLIMIT_FSIZE`), or None when it has none."""
    try:
        import resource
    except ImportError:  # no such limit where there is no `resource` (Windows)
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


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
    """Open the file (creating it with mode 0600 unless read-only) and set the connection's pragmas.

    The connection may be used from any thread: the event log above it serializes its use.
    """
    target = str(path)
    if target != MEMORY:
        check_regular(target, "a store")  # SQLite would wait on a FIFO, or read a device as empty
    with translated(f"opening {target}"):
        if target == MEMORY:
            if readonly:
                raise StoreUnavailable("an in-memory store cannot be opened read-only")
            conn = sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
        elif readonly:
            if not os.path.exists(target):
                raise StoreUnavailable(f"opening {target}: no such file (a read-only open never creates one)")
            from urllib.parse import quote

            uri = f"file:{quote(os.path.abspath(target))}?mode=ro"
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
            )
        else:
            create_private(target)
            conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=timeout)
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


def create_private(path: str) -> os.stat_result | None:
    """Create an empty file readable by its owner only, never through a link, and return what it is;
    None when a file is there already (it keeps its mode). A link that points nowhere is refused:
    creating the store through it would make a file where the link says, with the default mode."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        if os.path.islink(path) and not os.path.exists(path):
            raise StoreUnavailable(
                f"cannot create {path}: it is a symbolic link to a file that does not exist, and a store "
                "is created only as a regular file, never through a link"
            ) from None
        return None
    except OSError as exc:
        raise StoreUnavailable(f"cannot create {path}: {exc.strerror}") from exc
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


# What SQLite may create beside a store file.
SIDE_FILES: Final = ("-wal", "-shm", "-journal")


@contextlib.contextmanager
def removed_if_failed(path: str | Path | None, *, readonly: bool) -> Iterator[None]:
    """Run an open of `path`, creating the file first (mode 0600, never through a link); when the open
    fails, the file it created is removed again, with what SQLite made beside it, so a failed open (a
    full disk, a bad argument) leaves no file behind.

    Only a file this call created and that is still empty is removed: one that another process opened
    and wrote meanwhile is theirs.
    """
    target = default_path() if path is None else path
    if readonly or not isinstance(target, (str, Path)) or not _nameable(str(target)):
        yield
        return
    name = str(target)
    before = {suffix for suffix in SIDE_FILES if os.path.lexists(name + suffix)}
    created = create_private(name)
    try:
        yield
    except BaseException:
        if created is not None:
            _remove_created(name, created, before)
        raise


def _nameable(name: str) -> bool:
    return bool(name) and name != MEMORY and "\x00" not in name


def _remove_created(name: str, created: os.stat_result, before: set[str]) -> None:
    try:
        now = os.lstat(name)
        if (now.st_dev, now.st_ino) != (created.st_dev, created.st_ino) or now.st_size != 0:
            return
        os.unlink(name)
        for suffix in SIDE_FILES:
            if suffix not in before and os.path.lexists(name + suffix):
                os.unlink(name + suffix)
    except OSError:
        pass  # what cannot be removed stays; the open's own error is what the caller needs


def side_files(path: str) -> frozenset[str]:
    """Which of the files SQLite may make beside a store are there now."""
    if not _nameable(path):
        return frozenset()
    return frozenset(suffix for suffix in SIDE_FILES if os.path.lexists(path + suffix))


def tidy_after_read(path: str, before: frozenset[str]) -> None:
    """Let SQLite remove the empty `-wal` and `-shm` it made for a read-only connection, now closed.

    A read-only connection to a WAL file makes both and may not remove them. When this one made them
    and the `-wal` holds nothing, a read-write connection that reads the file's header and closes is the
    file's last connection, and SQLite removes both as it does for any last connection; while another
    connection has the file open (a writer at work), SQLite leaves them, as it must. Nothing is written.
    """
    made = [suffix for suffix in ("-wal", "-shm") if suffix not in before and os.path.lexists(path + suffix)]
    if not made:
        return
    try:
        if os.path.getsize(path + "-wal") != 0:
            return
        from urllib.parse import quote

        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True, timeout=0)
        try:
            conn.execute("PRAGMA schema_version").fetchone()  # the header only, not the whole schema
        finally:
            conn.close()
    except (OSError, sqlite3.Error):
        pass  # a file this user may not write, or one another connection holds: they stay
