"""The event store: bodies stored once, hash-chained per-session logs, one write port.

`port` is what every backend offers (no `sqlite3` type crosses it); `sqlite` is the SQLite backend,
with `connection` (connections and error translation) and `schema` (named migrations); `writer` is the
capability that alone may write marks, summaries and compaction records; `verify` re-derives every
promise from the raw rows.
"""

from transcript.store.port import (
    Committed,
    EventStore,
    LoadedSession,
    LogRecord,
    NewBody,
    SessionInfo,
    SessionWrite,
    StoredBody,
)

__all__ = [
    "Committed",
    "EventStore",
    "LoadedSession",
    "LogRecord",
    "NewBody",
    "SessionInfo",
    "SessionWrite",
    "StoredBody",
]
