"""The SQLite recorder: one file, many sessions, rows never rewritten — SQL and its pragmas only.

Bodies are rows of `bodies` (shared by every session that holds them), a session is its rows of
`events` (whose append rows carry the `seq -> message_id` history) and its `heads` row. Every insert
is one `BEGIN IMMEDIATE` transaction that first moves each session's head from the one the writer
names (optimistic concurrency): the loser of a race gets `ConflictError` and nothing of its write is
stored. Guard triggers make the database itself refuse edits. What the rows mean — hashes, digests,
the writer capability, de-duplication — is the event log's (`transcript.store.log`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from transcript.model.errors import ConflictError, StoreReadOnly
from transcript.store import connection, schema
from transcript.store.location import MEMORY
from transcript.store.port import SearchHit
from transcript.store.recorder import (
    BodyRow,
    BodyTaken,
    Capabilities,
    EventRow,
    Kinds,
    Problem,
    RecorderWrite,
    SessionRow,
    StorageCheck,
)

_IN_CHUNK: Final = 500
_SYNC: Final[dict[str, connection.Synchronous]] = {
    "FULL": "FULL",
    "EXTRA": "EXTRA",
    "NORMAL": "NORMAL",
    "OFF": "OFF",
}
_EVENT_COLUMNS: Final = "version, kind, seq, message_id, recorded_at, payload, hash"
_BODY_COLUMNS: Final = "message_id, hash, tokenizer, tokens, body, digest"
_KINDS: Final = {
    "all": "",
    "appends": " AND kind = 'message_appended'",
    # Word for word the partial index's condition, so a cold open reads marks by that index.
    "others": " AND kind <> 'message_appended'",
}


class SqliteRecorder:
    """An open store file. Use `SqliteRecorder.open()` (or `open_backend`); one per thread.

    `connection` is the raw `sqlite3` connection, for tools that read the file as SQL (tests, crash
    probes); nothing above the store uses it.
    """

    def __init__(self, conn: sqlite3.Connection, location: str, *, readonly: bool) -> None:
        self.connection = conn
        self.location = location
        self.readonly = readonly
        self.capabilities = Capabilities(
            enforced_append_only=True, durable=location != MEMORY, search=True, sql_views=True
        )
        self._local_writes = 0

    @classmethod
    def open(
        cls,
        location: str,
        *,
        readonly: bool = False,
        timeout: float = 5.0,
        synchronous: str = "FULL",
        verifying: bool = False,
    ) -> SqliteRecorder:
        """Open (and, unless read-only, create or migrate) a store file; `":memory:"` is private.

        `verifying` opens it for `verify`: read-only, never migrated, a schema this release does not
        know still opened, and text that is not UTF-8 read with its bad bytes escaped.
        """
        conn = connection.connect(
            location,
            readonly=readonly,
            timeout=timeout,
            synchronous=_SYNC[synchronous.upper()],
            text_errors="surrogateescape" if verifying else "",
        )
        try:
            with connection.translated(f"opening {location}"):
                if not verifying and schema.check(conn, can_migrate=not readonly):
                    schema.migrate(conn)
                if not readonly and location != MEMORY:
                    conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except BaseException:
            conn.close()
            raise
        return cls(conn, location, readonly=readonly)

    def close(self) -> None:
        """Close the connection. Committed work is already durable; nothing else is pending."""
        self.connection.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<SqliteRecorder {self.location!r} {mode}>"

    # Reads.

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A deferred read transaction: every statement inside sees the same committed state."""
        conn = self.connection
        began = not conn.in_transaction
        if began:
            with connection.translated("reading the store"):
                conn.execute("BEGIN")
        try:
            yield
        finally:
            if began and conn.in_transaction:
                with connection.translated("reading the store"):
                    conn.execute("ROLLBACK")

    def head(self, session_id: str) -> tuple[int, str] | None:
        """The session's head row: its version and last event hash, or None."""
        with connection.translated(f"reading session {session_id!r}"):
            row = self.connection.execute(
                "SELECT version, hash FROM heads WHERE session_id = ?", (session_id,)
            ).fetchone()
        return (row[0], row[1]) if row else None

    def heads(self) -> dict[str, tuple[object, object]]:
        """Every head row as stored."""
        with connection.translated("reading heads"):
            return {
                row[0]: (row[1], row[2])
                for row in self.connection.execute("SELECT session_id, version, hash FROM heads")
            }

    def events(
        self, session_id: str, *, after: int = 0, until: int | None = None, kinds: Kinds = "all"
    ) -> Iterator[EventRow]:
        """The session's event rows with `after < version <= until`, in order."""
        with connection.translated(f"reading session {session_id!r}"):
            rows = self.connection.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND version > ? AND version <= ?"
                + _KINDS[kinds]
                + " ORDER BY version",
                (session_id, after, until if until is not None else 2**62),
            ).fetchall()
        return map(EventRow._make, rows)

    def bodies(self, message_ids: Sequence[str]) -> Iterator[BodyRow]:
        """The stored bodies with these ids."""
        with connection.translated("reading bodies"):
            rows = list(self._select_in(f"SELECT {_BODY_COLUMNS} FROM bodies", message_ids))
        return map(BodyRow._make, rows)

    def sessions(self) -> list[SessionRow]:
        """Every session, by id, as the `sessions` view lists it."""
        with connection.translated("listing sessions"):
            rows = self.connection.execute(
                "SELECT session_id, messages, head_version, head_hash, coalesce(title, '') FROM sessions "
                "ORDER BY session_id"
            ).fetchall()
        return list(map(SessionRow._make, rows))

    def scan_bodies(self) -> Iterator[tuple[object, ...]]:
        """Every body row as stored, in insertion order."""
        with connection.translated("reading bodies"):
            yield from self.connection.execute(f"SELECT {_BODY_COLUMNS} FROM bodies ORDER BY id")

    def scan_events(self) -> Iterator[tuple[object, ...]]:
        """Every event row as stored, by session and version."""
        with connection.translated("reading events"):
            yield from self.connection.execute(
                f"SELECT session_id, {_EVENT_COLUMNS} FROM events ORDER BY session_id, version"
            )

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anything may have been committed to the file since it was last read."""
        with connection.translated("checking for changes"):
            (data_version,) = self.connection.execute("PRAGMA data_version").fetchone()
        return data_version, self._local_writes

    def _select_in(self, select: str, message_ids: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """Rows of `select ... WHERE message_id IN (...)`, in chunks that respect SQLite's variable limit."""
        for start in range(0, len(message_ids), _IN_CHUNK):
            chunk = message_ids[start : start + _IN_CHUNK]
            yield from self.connection.execute(
                f"{select} WHERE message_id IN ({','.join('?' * len(chunk))})", chunk
            )

    # Search.

    def search(self, phrase: str, *, session_id: str | None, limit: int) -> list[SearchHit]:
        """Messages whose text holds `phrase` (words in this order), best matches first.

        Full-text search is opt-in: the first search builds the index (a read-only store cannot, and
        says so) and from then on every stored body is indexed as it is written.
        """
        if not self.search_enabled():
            self._enable_search()
        query = '"' + phrase.replace('"', '""') + '"'
        sql = (
            "SELECT e.session_id, e.seq, e.message_id, json_extract(b.body, '$.role'), "
            "snippet(message_text, 0, '[', ']', '…', 12) "
            "FROM message_text JOIN bodies AS b ON b.id = message_text.rowid "
            "JOIN events AS e ON e.message_id = b.message_id AND e.kind = 'message_appended' "
            "WHERE message_text MATCH ?"
            + (" AND e.session_id = ?" if session_id is not None else "")
            + " ORDER BY rank, e.session_id, e.seq LIMIT ?"
        )
        params = (query, session_id, limit) if session_id is not None else (query, limit)
        with connection.translated("searching"):
            rows = self.connection.execute(sql, params).fetchall()
        return [SearchHit(session_id=r[0], seq=r[1], message_id=r[2], role=r[3], snippet=r[4]) for r in rows]

    def search_enabled(self) -> bool:
        """Whether this file keeps a full-text index of message text."""
        with connection.translated("reading the schema"):
            row = self.connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'message_text'"
            ).fetchone()
        return row is not None

    def _enable_search(self) -> None:
        if self.readonly:
            raise StoreReadOnly(
                f"{self.location} has no search index yet and is open read-only; search it once read-write"
            )
        with connection.translated("building the search index"), _WriteTransaction(self.connection):
            if not self.search_enabled():
                for statement in schema.SEARCH:
                    self.connection.execute(statement)
        self._local_writes += 1

    # The one write.

    def insert(self, writes: Sequence[RecorderWrite]) -> tuple[int, int]:
        """Store every write in one transaction, or nothing (see `Recorder.insert`)."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was written")
        with connection.translated("writing to the store"), _WriteTransaction(self.connection):
            # Read under the write lock: no one else can commit until we do, and our own commit does
            # not change it, so a session that folds this write itself is current at this token.
            (data_version,) = self.connection.execute("PRAGMA data_version").fetchone()
            for write in writes:
                self._insert(write)
        self._local_writes += 1
        return data_version, self._local_writes

    def _insert(self, write: RecorderWrite) -> None:
        session_id, (version, head_hash), bodies, events = write
        if not events:
            return
        self._move_head(session_id, version, head_hash, events[-1])
        if bodies:
            try:
                # JSON text: the very bytes the hashes cover, readable by any SQLite tool.
                self.connection.executemany(
                    "INSERT INTO bodies (message_id, hash, tokenizer, tokens, body, digest) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (b.message_id, b.hash, b.tokenizer, _text(b.tokens), _text(b.body), b.digest)
                        for b in bodies
                    ],
                )
            except sqlite3.IntegrityError as exc:
                raise BodyTaken(
                    f"session {session_id!r}: a body was stored by another writer meanwhile"
                ) from exc
        try:
            self.connection.executemany(
                "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        session_id,
                        e.version,
                        e.kind,
                        e.seq,
                        e.message_id,
                        e.recorded_at,
                        _text(e.payload),
                        e.hash,
                    )
                    for e in events
                ],
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(f"session {session_id!r} moved on while this write was made") from exc

    def _move_head(self, session_id: str, version: int, head_hash: str, last: EventRow) -> None:
        """Move the session's head from the one the write names to its last event, or `ConflictError`."""
        conn = self.connection
        if version:
            moved = (
                conn.execute(
                    "UPDATE heads SET version = ?, hash = ? "
                    "WHERE session_id = ? AND version = ? AND hash = ?",
                    (last.version, last.hash, session_id, version, head_hash),
                ).rowcount
                == 1
            )
        elif self.head(session_id) is None:
            conn.execute(
                "INSERT INTO heads (session_id, version, hash) VALUES (?, ?, ?)",
                (session_id, last.version, last.hash),
            )
            moved = True
        else:
            moved = False
        if not moved:
            now = (self.head(session_id) or (0, ""))[0]
            raise ConflictError(
                f"session {session_id!r} is at version {now}, this write expected {version}; "
                "nothing was written (catch up and retry)"
            )

    # The file's own checks, for `verify`.

    def storage_check(self) -> StorageCheck:
        """The migrations recorded, SQLite's page check, and the guard triggers and views by their SQL."""
        with connection.translated(f"verifying {self.location}"):
            applied = tuple(schema.applied(self.connection))
            if applied != schema.KNOWN:
                detail = f"migrations {list(applied)} recorded, this release expects {list(schema.KNOWN)}"
                return StorageCheck(applied, [Problem(code="schema", detail=detail)], [], [])
            return StorageCheck(
                applied, [], list(_page_problems(self.connection)), _guard_problems(self.connection)
            )


def _page_problems(conn: sqlite3.Connection) -> Iterable[Problem]:
    """SQLite's own check of the file's pages and indexes (a damaged index can hide rows)."""
    found = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
    if found != ["ok"]:
        yield from (Problem(code="file_damaged", detail=str(detail)) for detail in found)


def _guard_problems(conn: sqlite3.Connection) -> list[Problem]:
    """Every guard trigger and every view present, with exactly the SQL this release creates."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')")
    present = {(kind, name): sql for kind, name, sql in rows}
    problems = []
    for name, sql in schema.GUARD_SQL.items():
        if ("trigger", name) not in present:
            problems.append(Problem(code="guard_missing", detail=f"trigger {name} was dropped"))
        elif present["trigger", name] != sql:
            problems.append(Problem(code="guard_changed", detail=f"trigger {name} does not do what it must"))
    for name, sql in schema.VIEW_SQL.items():
        if present.get(("view", name)) != sql:
            problems.append(
                Problem(code="view_changed", detail=f"view {name} is missing or not what it must be")
            )
    return problems


def _text(value: bytes | str) -> str:
    """JSON as the text column stores it (the UTF-8 bytes the hashes cover, decoded)."""
    return value.decode() if isinstance(value, bytes) else value


class _WriteTransaction:
    """`BEGIN IMMEDIATE` ... `COMMIT`, rolled back on any exception."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            try:
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        else:
            self._rollback()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")
