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
import functools
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NoReturn

from transcript.model.errors import ConflictError, StoreCorrupted, StoreReadOnly, StoreUnavailable
from transcript.store import connection, lease, schema
from transcript.store.location import MEMORY
from transcript.store.port import SearchHit
from transcript.store.recorder import (
    LAST_SEQ,
    BodyRow,
    BodyTaken,
    Capabilities,
    ContentRow,
    EventRow,
    HistoryRow,
    Kinds,
    PayloadRewrite,
    Problem,
    Purged,
    RecorderWrite,
    SessionRow,
    SnapshotRow,
    StorageCheck,
    next_seq_of,
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
# The JSON columns are read as their bytes: SQLite then never decodes them, so a damaged byte reaches
# the log's decoder (a mark it cannot read is then a diagnostic, not a failed read).
_EVENT_READ: Final = "version, kind, seq, message_id, recorded_at, CAST(payload AS BLOB), hash"
_BODY_READ: Final = "message_id, hash, tokenizer, CAST(tokens AS BLOB), CAST(body AS BLOB), digest"
_LAST_SEQ: Final = LAST_SEQ.format(p="?", blob="BLOB")
# The order guard refused a write whose head the transaction had just checked: the write was numbered
# from that head, so the stored rows disagree with it (damage), not with another writer.
_DISORDERED: Final = (
    "session {session_id!r}: the order guard refused a write numbered from the session's head, so its "
    "stored events disagree with that head (run `transcript verify`); nothing was written"
)
_KINDS: Final = {
    "all": "",
    "appends": " AND kind = 'message_appended'",
    # Word for word the partial index's condition, so a cold open reads marks by that index.
    "others": " AND kind <> 'message_appended'",
}


class SqliteRecorder:
    """An open store file. Use `SqliteRecorder.open()` (or `open_backend`). Its connection may be used
    from any thread, one at a time (the event log above it takes care of that).

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
        self._schema: tuple[int, list[str]] = (-1, [])
        self._snapshots_table: bool | None = None  # whether the file has the table (0007), once known
        # True after this open migrated a file whose appends predate record digests in the chain.
        self.attestation_due = False
        # A read-only open: the side files there before it (the ones it made are tidied at close).
        self._side_files: frozenset[str] | None = None

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
        before = connection.side_files(location) if readonly else None
        conn = connection.connect(
            location,
            readonly=readonly,
            timeout=timeout,
            synchronous=_SYNC[synchronous.upper()],
            text_errors="surrogateescape" if verifying else "",
        )
        try:
            pending: list[str] = []
            with connection.translated(f"opening {location}"):
                if not verifying:
                    pending = schema.check(conn, can_migrate=not readonly)
                if pending and not readonly:
                    schema.migrate(conn)
                if not readonly and location != MEMORY:
                    conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except BaseException:
            conn.close()
            raise
        recorder = cls(conn, location, readonly=readonly)
        recorder._side_files = before
        # A file that held a log before this open (not all migrations were pending) needs attesting.
        recorder.attestation_due = (
            not readonly and schema.ATTESTATION in pending and len(pending) < len(schema.KNOWN)
        )
        return recorder

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """A lock on one byte of `<file>.leases` (`transcript.store.lease`); a private `:memory:`
        database is leased among this process's threads."""
        if self.location == MEMORY:
            return lease.in_process(f"sqlite-memory:{id(self)}", session_id)
        return lease.on_file(self.location, session_id)

    def close(self) -> None:
        """Close the connection. Committed work is already durable; nothing else is pending."""
        self.connection.close()
        if self._side_files is not None:
            connection.tidy_after_read(self.location, self._side_files)

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
            rows = self._fetch(
                "SELECT version, hash FROM heads WHERE session_id = ?",
                (session_id,),
                lambda row: f"heads row (session {session_id!r})",
            )
        return (rows[0][0], rows[0][1]) if rows else None

    def next_seq(self, session_id: str) -> int:
        """One past the session's last append's seq (its newest events read back to it by key)."""
        with connection.translated(f"reading session {session_id!r}"):
            rows = self._fetch(_LAST_SEQ, (session_id,), lambda row: f"events of session {session_id!r}")
        return next_seq_of(session_id, rows)

    def heads(self) -> dict[str, tuple[object, object]]:
        """Every head row as stored."""
        with connection.translated("reading heads"):
            rows = self._fetch("SELECT session_id, version, hash FROM heads", (), lambda row: "heads row")
        return {row[0]: (row[1], row[2]) for row in rows}

    def events(
        self, session_id: str, *, after: int = 0, until: int | None = None, kinds: Kinds = "all"
    ) -> Iterator[EventRow]:
        """The session's event rows with `after < version <= until`, in order."""
        return iter(self._events(session_id, after, until, kinds, -1))

    def events_page(self, session_id: str, after: int, count: int) -> list[EventRow]:
        """The first `count` of the session's events after version `after`, in order."""
        return self._events(session_id, after, None, "all", count)

    def _events(
        self, session_id: str, after: int, until: int | None, kinds: Kinds, limit: int
    ) -> list[EventRow]:
        with connection.translated(f"reading session {session_id!r}"):
            rows = self._fetch(
                f"SELECT {_EVENT_READ} FROM events WHERE session_id = ? AND version > ? AND version <= ?"
                + _KINDS[kinds]
                + " ORDER BY version LIMIT ?",  # (-1: no limit)
                (session_id, after, until if until is not None else 2**62, limit),
                lambda row: f"events row (session {session_id!r}, version {row[0]})",
            )
        return list(map(EventRow._make, rows))

    def history(self, session_id: str) -> Iterator[HistoryRow]:
        """The session's history with each append's body, in order: one join, read in chunks (a cold
        open decodes each chunk before the next is read, so the raw text of a whole history is never
        held at once)."""
        sql = (
            "SELECT e.version, e.seq, e.message_id, CAST(b.body AS BLOB), CAST(b.tokens AS BLOB) "
            "FROM events AS e "
            "LEFT JOIN bodies AS b ON b.message_id = e.message_id "
            "WHERE e.session_id = ? AND e.kind = 'message_appended' ORDER BY e.version"
        )
        where = functools.partial(_history_row, session_id)
        with connection.translated(f"reading session {session_id!r}"):
            try:
                cursor = self.connection.execute(sql, (session_id,))
                while rows := cursor.fetchmany(_IN_CHUNK):
                    yield from map(HistoryRow._make, rows)
            except sqlite3.OperationalError as exc:
                if "decode to UTF-8" not in str(exc):
                    raise
                self._name_undecodable(sql, (session_id,), where)

    def bodies(self, message_ids: Sequence[str]) -> Iterator[BodyRow]:
        """The stored bodies with these ids, read a chunk at a time."""
        for rows in self._body_chunks(_BODY_READ, message_ids):
            yield from map(BodyRow._make, rows)

    def contents(self, message_ids: Sequence[str]) -> Iterator[ContentRow]:
        """The id, counts and record of the stored bodies with these ids, a chunk at a time."""
        for rows in self._body_chunks("message_id, CAST(tokens AS BLOB), CAST(body AS BLOB)", message_ids):
            yield from rows

    def _body_chunks(self, columns: str, message_ids: Sequence[str]) -> Iterator[list[tuple[Any, ...]]]:
        """The bodies with these ids, a chunk of rows at a time (a cold open decodes each chunk
        before the next is read, so the raw text of a whole history is never held at once)."""
        select = f"SELECT {columns} FROM bodies"
        for start in range(0, len(message_ids), _IN_CHUNK):
            chunk = message_ids[start : start + _IN_CHUNK]
            with connection.translated("reading bodies"):
                yield self._fetch(
                    f"{select} WHERE message_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                    lambda row: f"bodies row (message {row[0]!r})",
                )

    def sessions(self) -> list[SessionRow]:
        """Every session, by id, as the `sessions` view lists it."""
        with connection.translated("listing sessions"), self._json_named():
            # The view's own query, not the view: a file read as it is may keep an older view.
            rows = self._fetch(
                "SELECT session_id, messages, head_version, head_hash, coalesce(title, ''), source, "
                f"parent_session_id, first_at, last_at, stored_tokens FROM ({schema.SESSIONS_SELECT}) "
                "ORDER BY session_id",
                (),
                lambda row: f"sessions view (session {row[0]!r})",
            )
        return list(map(SessionRow._make, rows))

    def backup(self, target: str) -> None:
        """A consistent copy of the file at `target` through SQLite's online backup, in one step: it
        reads one snapshot while writers go on (WAL readers never block them)."""
        if self.location == MEMORY:
            raise StoreUnavailable("an in-memory store has no file to copy")
        if connection.create_private(target) is None:
            raise StoreUnavailable(f"cannot copy the store to {target}: a file is there already")
        with connection.translated(f"copying {self.location} to {target}"):
            copy = sqlite3.connect(target, isolation_level=None)
            try:
                self.connection.backup(copy)
            finally:
                copy.close()

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

    @contextlib.contextmanager
    def _json_named(self) -> Iterator[None]:
        """Name the row when SQL's JSON functions meet a stored document that is not JSON."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "malformed JSON" not in str(exc):
                raise
            conn = self.connection
            body = conn.execute("SELECT message_id FROM bodies WHERE NOT json_valid(body) LIMIT 1").fetchone()
            if body is not None:
                raise StoreCorrupted(f"bodies row (message {body[0]!r}): it is not JSON") from exc
            event = conn.execute(
                "SELECT session_id, version FROM events WHERE NOT json_valid(payload) LIMIT 1"
            ).fetchone()
            where = f"events row (session {event[0]!r}, version {event[1]})" if event else "a stored row"
            raise StoreCorrupted(f"{where}: it is not JSON") from exc

    def _fetch(
        self, sql: str, params: Sequence[object], where: Callable[[tuple[Any, ...]], str]
    ) -> list[tuple[Any, ...]]:
        """All rows of a query; `StoreCorrupted` naming the row (by `where`) when a text column holds
        bytes that are not UTF-8, which only damage can put there."""
        try:
            return self.connection.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "decode to UTF-8" not in str(exc):
                raise
        self._name_undecodable(sql, params, where)

    def _name_undecodable(
        self, sql: str, params: Sequence[object], where: Callable[[tuple[Any, ...]], str]
    ) -> NoReturn:
        """`StoreCorrupted` naming the first row of a query that holds text that is not UTF-8. Only a
        damaged file gets here: the rows are read again as bytes to find it."""
        self.connection.text_factory = bytes
        try:
            raw = self.connection.execute(sql, params).fetchall()
        finally:
            self.connection.text_factory = str
        for row in raw:
            named = tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in row)
            for value in row:
                if isinstance(value, bytes) and not _is_utf8(value):
                    raise StoreCorrupted(f"{where(named)}: text stored there is not valid UTF-8")
        raise StoreCorrupted("text stored in the file is not valid UTF-8")

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
            self._refuse_foreign_triggers()
            for write in writes:
                self._insert(write)
        self._local_writes += 1
        return data_version, self._local_writes

    def _refuse_foreign_triggers(self) -> None:
        """No write while a trigger this release did not create sits on the log's tables (it could
        change or silently drop rows); the schema is listed again only when it changed."""
        (version,) = self.connection.execute("PRAGMA schema_version").fetchone()
        if version != self._schema[0]:
            self._schema = (version, schema.foreign_triggers(self.connection))
        if self._schema[1]:
            raise StoreCorrupted(
                f"{self.location}: trigger {self._schema[1][0]!r} on the log's tables is not one "
                "transcript-store made (added by someone else, or damaged); writes are refused while it "
                "is there (reads work; `transcript verify` lists the schema)"
            )

    def _insert(self, write: RecorderWrite) -> None:
        session_id, (version, head_hash), bodies, events, snapshot = write
        if snapshot is not None:
            self._insert_snapshot(write, snapshot)
        if not events:
            return
        self._move_head(session_id, version, head_hash, events[-1])
        if bodies:
            try:
                # JSON text: the very bytes the hashes cover, readable by any SQLite tool.
                stored = self.connection.executemany(
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
            _all_stored(stored.rowcount, len(bodies), "bodies", session_id)
        try:
            stored = self.connection.executemany(
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
            if "out of order refused" in str(exc):
                raise StoreCorrupted(_DISORDERED.format(session_id=session_id)) from exc
            raise ConflictError(f"session {session_id!r} moved on while this write was made") from exc
        _all_stored(stored.rowcount, len(events), "events", session_id)

    def _insert_snapshot(self, write: RecorderWrite, snapshot: SnapshotRow) -> None:
        """Store a snapshot, keeping only the newest one before it; a write of a snapshot alone must
        find the session at its head (else `ConflictError`)."""
        conn, session_id = self.connection, write.session_id
        if not write.events and self.head(session_id) != write.expected:
            raise ConflictError(f"session {session_id!r} moved on while this snapshot was made")
        conn.execute(
            "DELETE FROM snapshots WHERE session_id = ? AND version < (SELECT coalesce(max(version), 0) "
            "FROM snapshots WHERE session_id = ? AND version < ?)",
            (session_id, session_id, snapshot.version),
        )
        conn.execute(
            "INSERT OR REPLACE INTO snapshots (session_id, version, hash, payload, digest) "
            "VALUES (?, ?, ?, ?, ?)",
            (session_id, snapshot.version, snapshot.hash, _text(snapshot.payload), snapshot.digest),
        )

    def snapshots(self, session_id: str) -> Iterator[SnapshotRow]:
        """The session's snapshots, newest first (none in a file that predates them), each read when
        it is reached: an open that takes the newest never reads the older one's payload."""
        if not self._has_snapshots():
            return iter(())
        with connection.translated("reading snapshots"):
            versions = self.connection.execute(
                "SELECT version FROM snapshots WHERE session_id = ? ORDER BY version DESC", (session_id,)
            ).fetchall()
        return self._snapshot_rows(session_id, [version for (version,) in versions])

    def _snapshot_rows(self, session_id: str, versions: list[object]) -> Iterator[SnapshotRow]:
        for version in versions:
            with connection.translated("reading snapshots"):
                rows = self._fetch(
                    "SELECT version, hash, payload, digest FROM snapshots "
                    "WHERE session_id = ? AND version = ?",
                    (session_id, version),
                    lambda row: f"snapshots row (session {session_id!r}, version {row[0]})",
                )
            yield from map(SnapshotRow._make, rows)

    def scan_snapshots(self) -> Iterator[tuple[object, ...]]:
        """Every snapshot row as stored, by session and version."""
        if not self._has_snapshots():
            return
        with connection.translated("reading snapshots"):
            yield from self.connection.execute(
                "SELECT session_id, version, hash, payload, digest FROM snapshots "
                "ORDER BY session_id, version"
            )

    def _has_snapshots(self) -> bool:
        if self._snapshots_table is None:
            with connection.translated("reading the schema"):
                row = self.connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'"
                ).fetchone()
            self._snapshots_table = row is not None
        return bool(self._snapshots_table)

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

    # Redaction and erasure (what is rewritten is the event log's: `transcript.store.redaction`).

    def holders(self, message_ids: Sequence[str]) -> dict[str, set[str]]:
        """The sessions whose history appends each of these messages."""
        found: dict[str, set[str]] = {}
        ids = list(dict.fromkeys(message_ids))
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            with connection.translated("reading the history"):
                rows = self.connection.execute(
                    "SELECT DISTINCT message_id, session_id FROM events WHERE kind = 'message_appended' "
                    f"AND message_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            for message_id, session_id in rows:
                found.setdefault(message_id, set()).add(session_id)
        return found

    def redact(
        self, writes: Sequence[RecorderWrite], bodies: Sequence[BodyRow], payloads: Sequence[PayloadRewrite]
    ) -> tuple[int, int]:
        """The redaction events, then the rewrites their guards let through, with the search index's
        copies, in one transaction (see `Recorder.redact`); freed bytes are zeroed as they are freed."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was redacted")
        conn = self.connection
        with connection.translated("redacting"), _secure_delete(conn), _WriteTransaction(conn):
            (data_version,) = conn.execute("PRAGMA data_version").fetchone()
            self._refuse_foreign_triggers()
            for write in writes:
                self._insert(write)
            search = self.search_enabled()
            for body in bodies:
                changed = conn.execute(
                    "UPDATE bodies SET hash = ?, tokens = ?, body = ?, digest = ? WHERE message_id = ?",
                    (body.hash, _text(body.tokens), _text(body.body), body.digest, body.message_id),
                ).rowcount
                _all_stored(changed, 1, "bodies", body.message_id)
                if search:
                    conn.execute(
                        f"UPDATE {schema.SEARCH_TABLE} SET {schema.SEARCH_COLUMN} = "
                        f"(SELECT {schema.body_text('b.body')} FROM bodies AS b WHERE b.message_id = ?) "
                        f"WHERE rowid = (SELECT id FROM bodies WHERE message_id = ?)",
                        (body.message_id, body.message_id),
                    )
            for rewrite in payloads:
                changed = conn.execute(
                    "UPDATE events SET payload = ? WHERE session_id = ? AND version = ?",
                    (_text(rewrite.payload), rewrite.session_id, rewrite.version),
                ).rowcount
                _all_stored(changed, 1, "events", rewrite.session_id)
            if search:
                _merge_search_index(conn)
            self._drop_snapshots([write.session_id for write in writes])
        self._local_writes += 1
        return data_version, self._local_writes

    def _drop_snapshots(self, session_ids: Sequence[str]) -> None:
        """Drop these sessions' snapshots: folds of what a redaction or erasure rewrote (a checkpoint
        quoting it, its counts). They are derived: the next open folds the log and stores a new one."""
        if session_ids and self._has_snapshots():
            self.connection.executemany(
                "DELETE FROM snapshots WHERE session_id = ?", [(session_id,) for session_id in session_ids]
            )

    def erase(self, write: RecorderWrite, bodies: Sequence[str]) -> tuple[int, int]:
        """The erasure event, then the deletes its guards let through (see `Recorder.erase`)."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was erased")
        conn = self.connection
        with connection.translated("erasing"), _secure_delete(conn), _WriteTransaction(conn):
            (data_version,) = conn.execute("PRAGMA data_version").fetchone()
            self._refuse_foreign_triggers()
            self._insert(write)
            conn.execute(
                "DELETE FROM events WHERE session_id = ? AND version < ?",
                (write.session_id, write.events[0].version),
            )
            search = self.search_enabled()
            for start in range(0, len(bodies), _IN_CHUNK):
                chunk = list(bodies[start : start + _IN_CHUNK])
                marks = ",".join("?" * len(chunk))
                if search:
                    conn.execute(
                        f"DELETE FROM {schema.SEARCH_TABLE} WHERE rowid IN "
                        f"(SELECT id FROM bodies WHERE message_id IN ({marks}))",
                        chunk,
                    )
                deleted = conn.execute(f"DELETE FROM bodies WHERE message_id IN ({marks})", chunk).rowcount
                _all_stored(deleted, len(chunk), "bodies", write.session_id)
            if search:
                _merge_search_index(conn)
            self._drop_snapshots([write.session_id])
        self._local_writes += 1
        return data_version, self._local_writes

    def purge(self) -> Purged:
        """VACUUM (every page written afresh: no free page, no stale cell keeps a removed byte), then a
        checkpoint that truncates the WAL; a reader holding the WAL open keeps its frames, and then the
        result says so."""
        if self.location == MEMORY:
            return Purged(True, "an in-memory database: nothing was on disk")
        conn = self.connection
        with connection.translated("purging removed content"), _secure_delete(conn):
            conn.execute("VACUUM")
            busy, frames, moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or (frames not in (0, -1) and frames != moved):
            return Purged(
                False,
                f"another connection holds {self.location}-wal open: the removed bytes stay in the WAL "
                "until it lets go; then run `transcript purge` (or Store.purge())",
            )
        return Purged(True, f"{self.location} vacuumed and its WAL truncated")

    # The file's own checks, for `verify`.

    def storage_check(self) -> StorageCheck:
        """The migrations recorded, SQLite's page check, and the guard triggers and views by their SQL."""
        with connection.translated(f"verifying {self.location}"):
            applied = tuple(schema.applied(self.connection))
            if not schema.readable_as_is(applied):
                detail = f"migrations {list(applied)} recorded, this release expects {list(schema.KNOWN)}"
                return StorageCheck(applied, [Problem(code="schema", detail=detail)], [], [])
            return StorageCheck(
                applied, [], list(_page_problems(self.connection)), _schema_problems(self.connection, applied)
            )


@contextlib.contextmanager
def _secure_delete(conn: sqlite3.Connection) -> Iterator[None]:
    """`secure_delete` on for a block: content freed meanwhile is overwritten with zeros."""
    (before,) = conn.execute("PRAGMA secure_delete").fetchone()
    conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(before)}")


def _merge_search_index(conn: sqlite3.Connection) -> None:
    """Merge the full-text index's segments into one: a rewritten or deleted row's old terms leave the
    index's pages, not only its lookups."""
    conn.execute(f"INSERT INTO {schema.SEARCH_TABLE} ({schema.SEARCH_TABLE}) VALUES ('optimize')")


def _page_problems(conn: sqlite3.Connection) -> Iterable[Problem]:
    """SQLite's own check of the file's pages and indexes (a damaged index can hide rows)."""
    found = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
    if found != ["ok"]:
        yield from (Problem(code="file_damaged", detail=str(detail)) for detail in found)


def _schema_problems(conn: sqlite3.Connection, applied: tuple[str, ...]) -> list[Problem]:
    """Every table, index, trigger and view against the release's (their SQL as SQLite keeps it):
    what is missing, what was changed, and what this release did not create; and the search index
    against the bodies, when search is on."""
    present = schema.objects(conn)
    search = ("table", schema.SEARCH_TABLE) in present
    release = schema.release_objects(search=search, applied=None if applied == schema.KNOWN else applied)
    problems = []
    for (kind, name), sql in release.items():
        found = present.get((kind, name))
        if kind == "trigger" and (name in schema.GUARD_SQL):
            if found is None:
                problems.append(Problem(code="guard_missing", detail=f"trigger {name} was dropped"))
            elif found != sql:
                problems.append(
                    Problem(code="guard_changed", detail=f"trigger {name} does not do what it must")
                )
        elif kind == "view":
            if found != sql:
                problems.append(
                    Problem(code="view_changed", detail=f"view {name} is missing or not what it must be")
                )
        elif found is None:
            problems.append(Problem(code="schema_missing", detail=f"{kind} {name} is missing"))
        elif found != sql:
            problems.append(
                Problem(code="schema_changed", detail=f"{kind} {name} is not the one this release makes")
            )
    for kind, name in sorted(present.keys() - release.keys()):
        problems.append(
            Problem(code="schema_foreign", detail=f"{kind} {name} was not created by transcript-store")
        )
    if search:
        problems.extend(_search_problems(conn))
    problems.extend(_derived_problems(conn, present))
    return problems


def _derived_problems(conn: sqlite3.Connection, present: dict[tuple[str, str], str]) -> Iterator[Problem]:
    """Each derived table (what the `messages` view reads) against the same rows computed afresh from
    the bodies and events, both ways (a row missing, one too many, or one whose values differ)."""
    for table, expected in schema.DERIVED_EXPECTED.items():
        if ("table", table) not in present:
            continue
        (wrong,) = conn.execute(
            f"SELECT (SELECT count(*) FROM (SELECT * FROM {table} EXCEPT {expected})) "
            f"+ (SELECT count(*) FROM ({expected} EXCEPT SELECT * FROM {table}))"
        ).fetchone()
        if wrong:
            yield Problem(
                code="derived_stale",
                detail=f"{table} does not hold what the stored bodies and events say ({wrong} rows differ); "
                "the log is intact, the `messages` view reports from this table",
            )


def _search_problems(conn: sqlite3.Connection) -> Iterator[Problem]:
    """The full-text index holds each body's text under its row, and nothing else: its content is
    compared row by row, and its terms with those of an index built afresh from that content."""
    expected = conn.execute(f"SELECT id, message_id, {schema.body_text('body')} FROM bodies ORDER BY id")
    indexed = conn.execute(f"SELECT rowid, text FROM {schema.SEARCH_TABLE} ORDER BY rowid")
    texts: list[tuple[int, str]] = []
    for want, got in itertools.zip_longest(expected, indexed):
        if want is None or got is None or (want[0], want[2]) != tuple(got):
            where = f"message {want[1]!r}" if want is not None else f"row {got[0]}"
            yield Problem(
                code="search_index", detail=f"the search index does not hold what is stored ({where})"
            )
            return
        texts.append((want[0], want[2]))
    fresh = sqlite3.connect(":memory:")
    try:
        fresh.execute(f"CREATE VIRTUAL TABLE t USING fts5({schema.SEARCH_COLUMN})")
        fresh.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", texts)
        fresh.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.execute(
            f"CREATE VIRTUAL TABLE temp.stored_terms USING fts5vocab(main, {schema.SEARCH_TABLE}, 'instance')"
        )
        order = " ORDER BY term, doc, col, offset"
        stored = conn.execute("SELECT term, doc, offset FROM temp.stored_terms" + order)
        built = fresh.execute("SELECT term, doc, offset FROM v" + order)
        try:
            differs = next(
                (want or got for want, got in itertools.zip_longest(built, stored) if want != got), None
            )
        finally:
            stored.close()
            conn.execute("DROP TABLE temp.stored_terms")
        if differs is not None:
            yield Problem(
                code="search_index", detail=f"the search index's entries for {differs[0]!r} were edited"
            )
    finally:
        fresh.close()


def _history_row(session_id: str, row: tuple[Any, ...]) -> str:
    return f"events row (session {session_id!r}, version {row[0]})"


def _all_stored(stored: int, rows: int, table: str, session_id: str) -> None:
    """Check that every row of an insert was stored (something in the database could drop some)."""
    if stored != rows:
        raise StoreCorrupted(
            f"{table}: {stored} of the {rows} rows of session {session_id!r} were stored; nothing was written"
        )


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


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
