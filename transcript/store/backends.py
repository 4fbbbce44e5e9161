"""Choosing a backend: the one place where a location becomes a recorder under the event log.

Nothing above `transcript.store` names a backend; it asks `open_backend(location)` for an event log.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from transcript.model.errors import InvalidArgument, StoreUnavailable
from transcript.store.anchor import ANCHOR_SUFFIX as ANCHOR_SUFFIX, HeadAnchor
from transcript.store.location import MEMORY, MEMORY_RECORDER, check_location, is_server
from transcript.store.log import EventLog
from transcript.store.recorder import Recorder

if TYPE_CHECKING:
    from transcript.store.postgres import PostgresRecorder

SYNC_MODES: Final = ("FULL", "EXTRA", "NORMAL", "OFF")


def anchor_location(location: str, anchor: object) -> str | None:
    """Where a store's head anchor file is (None: no anchor), or `InvalidArgument`. `anchor` is None
    (the default: `<file>.anchor` for a store file, none for a store that is no file), True (the same,
    and a store that is no file is refused), False (none) or a path."""
    if anchor is False:
        return None
    if anchor is None or anchor is True:
        if location == MEMORY or location.startswith(MEMORY_RECORDER) or is_server(location):
            if anchor is None:
                return None
            raise InvalidArgument(f"{location} is not a file: name the head anchor's path (anchor=PATH)")
        return location + ANCHOR_SUFFIX
    if isinstance(anchor, (str, Path)) and str(anchor):
        return str(anchor)
    raise InvalidArgument(f"anchor is None, True, False or a path, not {anchor!r}")


def open_recorder(
    location: str | Path | None = None,
    *,
    readonly: bool = False,
    timeout: float = 5.0,
    synchronous: str = "FULL",
    verifying: bool = False,
) -> Recorder:
    """The recorder for a location (see `transcript.store.location`), opened; bad arguments raise
    `InvalidArgument` before anything is opened. `verifying` opens it for `verify`: read-only, never
    migrated, and damaged rows are returned as they are."""
    target = check_location(location)
    mode = synchronous.upper() if isinstance(synchronous, str) else None
    if mode not in SYNC_MODES:
        raise InvalidArgument(f"synchronous must be one of {', '.join(SYNC_MODES)}, not {synchronous!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < 1e9:
        raise InvalidArgument(f"timeout must be a number of seconds (0 or more), not {timeout!r}")
    if target.startswith(MEMORY_RECORDER):
        from transcript.store.memory import MemoryRecorder

        return MemoryRecorder.open(target, readonly=readonly or verifying)
    if is_server(target):
        return _postgres().open(
            target, readonly=readonly or verifying, timeout=timeout, synchronous=mode, verifying=verifying
        )
    from transcript.store.connection import removed_if_failed
    from transcript.store.sqlite import SqliteRecorder

    with removed_if_failed(target, readonly=readonly or verifying):
        return SqliteRecorder.open(
            target, readonly=readonly or verifying, timeout=timeout, synchronous=mode, verifying=verifying
        )


def _postgres() -> type[PostgresRecorder]:
    """The PostgreSQL recorder, whose driver is the optional `[postgres]` extra."""
    try:
        from transcript.store.postgres import PostgresRecorder
    except ImportError as exc:
        raise StoreUnavailable(
            f"a postgresql:// store needs psycopg 3: pip install 'transcript-store[postgres]' ({exc})"
        ) from None
    return PostgresRecorder


def open_backend(
    location: str | Path | None = None,
    *,
    readonly: bool = False,
    timeout: float = 5.0,
    synchronous: str = "FULL",
    anchor: bool | str | Path | None = None,
) -> EventLog:
    """The event log of the store at `location`: created or migrated unless read-only.

    `timeout` is how long a writer waits for another's lock; `synchronous` how durable a commit is
    (SQLite's setting: `FULL` survives power loss). `anchor` is the head anchor file `verify` reads to
    name a lost tail (`transcript.store.anchor`): None (the default) keeps `<file>.anchor` beside a store
    file, appended after each commit without fsync; True the same, fsync'd (and refused for a store
    that is no file); a path, fsync'd; False none.
    """
    target = check_location(location)
    anchor_path = anchor_location(target, anchor)
    recorder = open_recorder(target, readonly=readonly, timeout=timeout, synchronous=synchronous)
    kept = HeadAnchor(anchor_path, durable=anchor is not None) if anchor_path and not readonly else None
    log = EventLog(recorder, anchor=kept)
    if log.recorder.attestation_due:
        try:
            log.attest()
        except BaseException:
            log.close()
            raise
    return log
