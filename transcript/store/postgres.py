"""The PostgreSQL recorder: the same rows as the SQLite file, in one schema of a server many workers
share — SQL only.

Every insert is one transaction that first moves each session's head from the one the writer names
(optimistic concurrency across hosts: a concurrent writer of the same session waits on the head's row
lock, then finds the head moved and gets `ConflictError`, nothing of its write stored). Guard triggers
make the server refuse edits of stored rows. A connection lost while a commit was sent is resolved by
reading the session's head on a new connection, never by writing again; when the server cannot be
reached to tell, the error says the outcome is unknown. What the rows mean is the event log's.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Final

import psycopg

from transcript.model.errors import (
    CommitOutcomeUnknown,
    ConflictError,
    InvalidArgument,
    StoreCorrupted,
    StoreReadOnly,
    StoreUnavailable,
)
from transcript.store import lease, pgconnect, pgschema
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
_EVENT_COLUMNS: Final = "version, kind, seq, message_id, recorded_at, payload, hash"
_BODY_COLUMNS: Final = "message_id, hash, tokenizer, tokens, body, digest"
_LAST_SEQ: Final = LAST_SEQ.format(p="%s", blob="text")
_KINDS: Final = {
    "all": "",
    "appends": " AND kind = 'message_appended'",
    # Word for word the partial index's condition, so a cold open reads marks by that index.
    "others": " AND kind <> 'message_appended'",
}
_TITLE: Final = """coalesce((
        SELECT t.payload::json ->> 'title' FROM events AS t
        WHERE t.session_id = h.session_id AND t.kind IN ('session_started', 'title_set')
          AND t.payload::json ->> 'title' IS NOT NULL
        ORDER BY t.version DESC LIMIT 1
    ), (
        SELECT substr(btrim(b.body::json #>> '{parts,0,text}', E' \\t\\n\\r'), 1, 80)
        FROM events AS a JOIN bodies AS b ON b.message_id = a.message_id
        WHERE a.session_id = h.session_id AND a.kind = 'message_appended'
          AND b.body::json ->> 'role' = 'user' AND b.body::json -> 'kind' IS NULL
          AND b.body::json #>> '{parts,0,kind}' = 'text'
        ORDER BY a.version LIMIT 1
    ), '')"""
_SESSIONS: Final = f"""
    SELECT h.session_id,
        (SELECT count(*) FROM events AS e WHERE e.session_id = h.session_id AND e.kind = 'message_appended'),
        h.version, h.hash, {_TITLE}
    FROM heads AS h ORDER BY h.session_id COLLATE "C"
"""
_CURSOR_SNAPSHOT: Final = "SELECT pg_current_snapshot()::text"
_OWN_SNAPSHOT: Final = "SELECT pg_current_xact_id()::text, pg_current_snapshot()::text"

Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresRecorder:
    """A store in one schema of a PostgreSQL database. Use `open_backend("postgresql://…")`. Its
    connection may be used from any thread, one at a time (the event log above it takes care of that)."""

    capabilities: Final = Capabilities(enforced_append_only=True, durable=True, search=False, sql_views=False)
    # Every store it writes was made by this release: each append carries its record digest.
    attestation_due: Final = False

    def __init__(self, target: pgconnect.Target, conn: Connection, *, readonly: bool, timeout: float) -> None:
        self._target = target
        self._conn: Connection | None = conn
        # A recorder dropped without `close()` still lets its connection go.
        self._finalizer = weakref.finalize(self, _close_all, [conn])
        self._timeout = timeout
        self.readonly = readonly
        self._reading = 0
        self._resolved = itertools.count(1)
        # Triggers on the log's tables this release did not make, found at open: no write while any is.
        self._foreign: list[str] = []
        self._snapshots_table: bool | None = None  # whether the schema has it (0002), once known

    @property
    def location(self) -> str:
        """The store's URL, its password (if any) shown as `***`."""
        return self._target.redacted

    @property
    def schema(self) -> str:
        return self._target.schema

    @classmethod
    def open(
        cls,
        location: str,
        *,
        readonly: bool = False,
        timeout: float = 5.0,
        synchronous: str = "FULL",
        verifying: bool = False,
    ) -> PostgresRecorder:
        """Connect and (unless read-only) create or migrate the store's schema. `synchronous` `NORMAL`
        or `OFF` commits without waiting for the WAL flush (a server crash may lose the last commits,
        never half of one). `verifying` opens it for `verify`: read-only, never migrated, a schema
        this release does not know still opened."""
        target = pgconnect.parse(location)._replace(durable=synchronous.upper() in ("FULL", "EXTRA"))
        conn = pgconnect.connect(target, readonly=readonly, timeout=timeout)
        foreign: list[str] = []
        try:
            with pgconnect.translated(f"opening {target.redacted}", target.secret):
                (encoding,) = conn.execute("SHOW server_encoding").fetchone() or ("",)
                if encoding != "UTF8":
                    raise StoreUnavailable(
                        f"{target.redacted}: the database's encoding is {encoding}; a transcript store "
                        "keeps text as UTF-8 (create the database with ENCODING 'UTF8')"
                    )
                if not verifying:
                    pending = pgschema.check(conn, target.schema, can_migrate=not readonly)
                    if pending and not readonly:
                        pgschema.migrate(conn, target.schema)
                    foreign = pgschema.foreign_triggers(conn, target.schema)
        except BaseException:
            conn.close()
            raise
        recorder = cls(target, conn, readonly=readonly, timeout=timeout)
        recorder._foreign = foreign
        return recorder

    def close(self) -> None:
        """Close the connection. Committed work is already durable; nothing else is pending."""
        self._finalizer()
        self._conn = None

    def __repr__(self) -> str:
        return f"<PostgresRecorder {self.location!r} {'read-only' if self.readonly else 'read-write'}>"

    def _connection(self) -> Connection:
        """The open connection; a new one when the last was lost (a server restart, a network cut),
        never inside a read block, whose snapshot is then gone."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None and self._reading:
            raise StoreUnavailable(f"{self.location}: the connection was lost during a read")
        if conn is not None:
            conn.close()
        self._conn = pgconnect.connect(self._target, readonly=self.readonly, timeout=self._timeout)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_all, [self._conn])
        return self._conn

    def _all(self, action: str, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with pgconnect.translated(action, self._target.secret):
            return self._connection().execute(query, params).fetchall()

    # Reads.

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A repeatable-read transaction: every statement inside sees the same committed state."""
        if self._reading:
            self._reading += 1
            try:
                yield
            finally:
                self._reading -= 1
            return
        with pgconnect.translated("reading the store", self._target.secret):
            self._connection().execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._reading = 1
        try:
            yield
        finally:
            self._reading = 0
            conn = self._conn
            if conn is not None and not conn.closed and not conn.broken:
                with pgconnect.translated("reading the store", self._target.secret):
                    conn.execute("ROLLBACK")

    def head(self, session_id: str) -> tuple[int, str] | None:
        rows = self._all(
            f"reading session {session_id!r}",
            "SELECT version, hash FROM heads WHERE session_id = %s",
            (session_id,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def next_seq(self, session_id: str) -> int:
        rows = self._all(f"reading session {session_id!r}", _LAST_SEQ, (session_id,))
        return next_seq_of(session_id, rows)

    def heads(self) -> dict[str, tuple[object, object]]:
        rows = self._all("reading heads", "SELECT session_id, version, hash FROM heads")
        return {row[0]: (row[1], row[2]) for row in rows}

    def events(
        self, session_id: str, *, after: int = 0, until: int | None = None, kinds: Kinds = "all"
    ) -> Iterator[EventRow]:
        return iter(self._events(session_id, after, until, kinds, None))

    def events_page(self, session_id: str, after: int, count: int) -> list[EventRow]:
        return self._events(session_id, after, None, "all", count)

    def _events(
        self, session_id: str, after: int, until: int | None, kinds: Kinds, limit: int | None
    ) -> list[EventRow]:
        rows = self._all(
            f"reading session {session_id!r}",
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = %s AND version > %s AND version <= %s"
            + _KINDS[kinds]
            + " ORDER BY version LIMIT %s",  # (NULL: no limit)
            (session_id, after, until if until is not None else 2**62, limit),
        )
        return list(map(EventRow._make, rows))

    def history(self, session_id: str) -> Iterator[HistoryRow]:
        """The session's history with each append's body, in order: one join."""
        rows = self._all(
            f"reading session {session_id!r}",
            "SELECT e.version, e.seq, e.message_id, b.body, b.tokens FROM events AS e "
            "LEFT JOIN bodies AS b ON b.message_id = e.message_id "
            "WHERE e.session_id = %s AND e.kind = 'message_appended' ORDER BY e.version",
            (session_id,),
        )
        return map(HistoryRow._make, rows)

    def bodies(self, message_ids: Sequence[str]) -> Iterator[BodyRow]:
        """The stored bodies with these ids, a chunk at a time (each decoded before the next is read)."""
        for rows in self._body_chunks(_BODY_COLUMNS, message_ids):
            yield from map(BodyRow._make, rows)

    def contents(self, message_ids: Sequence[str]) -> Iterator[ContentRow]:
        """The id, counts and record of the stored bodies with these ids, a chunk at a time."""
        for rows in self._body_chunks("message_id, tokens, body", message_ids):
            yield from rows

    def _body_chunks(self, columns: str, message_ids: Sequence[str]) -> Iterator[list[tuple[Any, ...]]]:
        for start in range(0, len(message_ids), _IN_CHUNK):
            chunk = list(message_ids[start : start + _IN_CHUNK])
            yield self._all(
                "reading bodies", f"SELECT {columns} FROM bodies WHERE message_id = ANY(%s)", (chunk,)
            )

    def sessions(self) -> list[SessionRow]:
        # The id, messages, version, head and title; the columns after them keep their defaults.
        return [SessionRow(*row) for row in self._all("listing sessions", _SESSIONS)]

    def backup(self, target: str) -> None:
        raise StoreUnavailable(
            f"{self.location}: a PostgreSQL store is backed up by the server's own tools (pg_dump of "
            "its schema), or copied into a file with `transcript copy`"
        )

    def snapshots(self, session_id: str) -> Iterator[SnapshotRow]:
        """The session's snapshots, newest first (none in a schema that predates them)."""
        if not self._has_snapshots():
            return iter(())
        rows = self._all(
            f"reading the snapshots of session {session_id!r}",
            "SELECT version, hash, payload, digest FROM snapshots WHERE session_id = %s "
            "ORDER BY version DESC",
            (session_id,),
        )
        return map(SnapshotRow._make, rows)

    def scan_snapshots(self) -> Iterator[tuple[object, ...]]:
        """Every snapshot row as stored, by session and version."""
        if not self._has_snapshots():
            return iter(())
        return iter(
            self._all(
                "reading snapshots",
                "SELECT session_id, version, hash, payload, digest FROM snapshots "
                'ORDER BY session_id COLLATE "C", version',
            )
        )

    def _has_snapshots(self) -> bool:
        if self._snapshots_table is None:
            self._snapshots_table = bool(
                self._all(
                    "reading the schema",
                    "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'snapshots'",
                    (self.schema,),
                )
            )
        return self._snapshots_table

    def scan_bodies(self) -> Iterator[tuple[object, ...]]:
        return iter(self._all("reading bodies", f"SELECT {_BODY_COLUMNS} FROM bodies ORDER BY id"))

    def scan_events(self) -> Iterator[tuple[object, ...]]:
        return iter(
            self._all(
                "reading events",
                f'SELECT session_id, {_EVENT_COLUMNS} FROM events ORDER BY session_id COLLATE "C", version',
            )
        )

    def change_token(self) -> str | tuple[str, int]:
        """The server's current snapshot: it changes when any transaction of the cluster ends, so a
        commit by any worker is never missed (another database's commit only costs a re-read)."""
        ((token,),) = self._all("checking for changes", _CURSOR_SNAPSHOT)
        return str(token)

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        """The server's advisory lock on the session, held by a connection of its own for the block
        (other workers' recorders see it at once; a worker that dies lets it go with its connection)."""
        with lease.in_process(self.location, session_id):
            conn = pgconnect.connect(self._target, readonly=False, timeout=self._timeout)
            try:
                with pgconnect.translated(f"leasing session {session_id!r}", self._target.secret):
                    ((held,),) = conn.execute(
                        "SELECT pg_try_advisory_lock(%s)", (lease.key(self.schema, session_id),)
                    ).fetchall()
                if not held:
                    raise lease.refused(session_id, "another worker of this server")
                yield
            finally:
                conn.close()  # which lets the advisory lock go

    def search(self, phrase: str, *, session_id: str | None, limit: int) -> list[SearchHit]:
        raise InvalidArgument(f"{self.location}: the PostgreSQL recorder keeps no full-text index yet")

    # Redaction and erasure: what is rewritten is the event log's (`transcript.store.redaction`); this
    # backend still lacks the guard functions that would let those rewrites through, so it refuses them.

    def holders(self, message_ids: Sequence[str]) -> dict[str, set[str]]:
        """The sessions whose history appends each of these messages."""
        found: dict[str, set[str]] = {}
        rows = self._all(
            "reading the history",
            "SELECT DISTINCT message_id, session_id FROM events "
            "WHERE kind = 'message_appended' AND message_id = ANY(%s)",
            (list(message_ids),),
        )
        for message_id, session_id in rows:
            found.setdefault(message_id, set()).add(session_id)
        return found

    def redact(
        self, writes: Sequence[RecorderWrite], bodies: Sequence[BodyRow], payloads: Sequence[PayloadRewrite]
    ) -> str:
        raise StoreUnavailable(
            f"{self.location}: redaction is not implemented on PostgreSQL yet (its guards refuse every "
            "rewrite); nothing was redacted"
        )

    def erase(self, write: RecorderWrite, bodies: Sequence[str]) -> str:
        raise StoreUnavailable(
            f"{self.location}: erasure is not implemented on PostgreSQL yet (its guards refuse every "
            "delete); nothing was erased"
        )

    def purge(self) -> Purged:
        return Purged(False, f"{self.location}: PostgreSQL keeps removed tuples until VACUUM FULL; not run")

    # The one write.

    def insert(self, writes: Sequence[RecorderWrite]) -> str | tuple[str, int]:
        """Store every write in one transaction, or nothing (see `Recorder.insert`)."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was written")
        if self._foreign:
            raise StoreCorrupted(
                f"{self.location}: {self._foreign[0]} (added by someone else, or damaged); writes are "
                "refused while it is there (reads work; `transcript verify` lists the schema)"
            )
        conn = self._connection()
        secret = self._target.secret
        committing = False
        try:
            with pgconnect.translated("writing to the store", secret):
                # Read committed whatever the server's default: a body another writer committed
                # meanwhile is then a taken id to look up (below), not a serialization failure.
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                for write in writes:
                    self._insert(conn, write)
                # Taken before the commit: a worker's commit that lands after it changes the token.
                ((xid, before),) = conn.execute(_OWN_SNAPSHOT).fetchall()
                committing = True
                with conn.pipeline():
                    conn.execute("COMMIT")
                    after = conn.execute(_CURSOR_SNAPSHOT)
                ((now,),) = after.fetchall()
        except BaseException as exc:
            if committing and isinstance(exc.__cause__, psycopg.Error) and conn.broken:
                return self._resolve(writes)
            self._rollback(conn)
            raise
        # The snapshot after the commit, when nothing but this write ended meanwhile: the session that
        # folds it is then current, and its next check reads nothing again.
        return str(now) if _ended_between(str(before), str(now)) == {int(xid)} else str(before)

    def _rollback(self, conn: Connection) -> None:
        if (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    def _resolve(self, writes: Sequence[RecorderWrite]) -> tuple[str, int]:
        """The connection was lost while the commit was sent: read on a new connection whether each
        session's last event is stored (its hash names this very write); never write again."""
        try:
            written = [
                write
                for write in writes
                if write.events
                and self._all(
                    "reading the outcome of a commit",
                    "SELECT 1 FROM events WHERE session_id = %s AND version = %s AND hash = %s",
                    (write.session_id, write.events[-1].version, write.events[-1].hash),
                )
            ]
        except StoreUnavailable as exc:
            raise CommitOutcomeUnknown(
                f"{self.location}: the connection was lost while the write was committed, and the server "
                f"cannot be reached to tell whether it was stored ({exc}); reopen the session and read "
                "its head before writing again"
            ) from None
        if len(written) == len([w for w in writes if w.events]):
            return ("resolved", next(self._resolved))  # a token no snapshot equals: read again
        if not written:
            raise StoreUnavailable(
                f"{self.location}: the connection was lost while the write was committed; it was not "
                "stored (nothing was written)"
            )
        raise StoreCorrupted(f"{self.location}: a write was stored in part (a server fault)")

    def _insert(self, conn: Connection, write: RecorderWrite) -> None:
        session_id, (version, head_hash), bodies, events, snapshot = write
        if snapshot is not None:
            self._insert_snapshot(conn, write, snapshot)
        if not events:
            return
        last = events[-1]
        if version:
            moved = conn.execute(
                "UPDATE heads SET version = %s, hash = %s "
                "WHERE session_id = %s AND version = %s AND hash = %s",
                (last.version, last.hash, session_id, version, head_hash),
            ).rowcount
        else:
            moved = conn.execute(
                "INSERT INTO heads (session_id, version, hash) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id) DO NOTHING",
                (session_id, last.version, last.hash),
            ).rowcount
        if moved != 1:
            now = (self._head_in(conn, session_id) or (0, ""))[0]
            raise ConflictError(
                f"session {session_id!r} is at version {now}, this write expected {version}; "
                "nothing was written (catch up and retry)"
            )
        with conn.cursor() as cursor:
            if bodies:
                # A taken id stores nothing (no row back) rather than failing the statement, so the
                # server logs no error for what the log's commit expects and handles (a re-append,
                # a re-import): it is told by the rows that come back, and the write rolls back.
                cursor.executemany(
                    "INSERT INTO bodies (message_id, hash, tokenizer, tokens, body, digest) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (message_id) DO NOTHING RETURNING 1",
                    [
                        (b.message_id, b.hash, b.tokenizer, _text(b.tokens), _text(b.body), b.digest)
                        for b in bodies
                    ],
                    returning=True,
                )
                if _returned(cursor) != len(bodies):
                    raise BodyTaken(f"session {session_id!r}: a body was stored by another writer meanwhile")
            try:
                cursor.executemany(
                    "INSERT INTO events "
                    "(session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
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
            except psycopg.errors.UniqueViolation:
                raise ConflictError(f"session {session_id!r} moved on while this write was made") from None
            except psycopg.errors.IntegrityConstraintViolation as exc:
                # The order guard (`transcript_in_order`) refused a write numbered from the head this
                # transaction just moved: the stored rows disagree with that head (damage).
                raise StoreCorrupted(
                    f"session {session_id!r}: {exc.diag.message_primary}; the stored events disagree "
                    "with the session's head (run `transcript verify`); nothing was written"
                ) from None

    def _insert_snapshot(self, conn: Connection, write: RecorderWrite, snapshot: SnapshotRow) -> None:
        """Store a snapshot, keeping only the newest one before it; a write of a snapshot alone must
        find the session at its head (else `ConflictError`), held so no writer moves it meanwhile."""
        session_id = write.session_id
        if not write.events:
            held = conn.execute(
                "SELECT version, hash FROM heads WHERE session_id = %s FOR SHARE", (session_id,)
            ).fetchone()
            if held is None or (held[0], held[1]) != write.expected:
                raise ConflictError(f"session {session_id!r} moved on while this snapshot was made")
        conn.execute(
            "DELETE FROM snapshots WHERE session_id = %s AND (version = %s OR version < (SELECT "
            "coalesce(max(version), 0) FROM snapshots WHERE session_id = %s AND version < %s))",
            (session_id, snapshot.version, session_id, snapshot.version),
        )
        conn.execute(
            "INSERT INTO snapshots (session_id, version, hash, payload, digest) VALUES (%s, %s, %s, %s, %s)",
            (session_id, snapshot.version, snapshot.hash, _text(snapshot.payload), snapshot.digest),
        )

    @staticmethod
    def _head_in(conn: Connection, session_id: str) -> tuple[int, str] | None:
        row = conn.execute("SELECT version, hash FROM heads WHERE session_id = %s", (session_id,)).fetchone()
        return (row[0], row[1]) if row else None

    # The server's own checks, for `verify`.

    def storage_check(self) -> StorageCheck:
        """The migrations recorded, and the guard triggers and their functions."""
        conn = self._connection()
        with pgconnect.translated(f"verifying {self.location}", self._target.secret):
            applied = tuple(pgschema.applied(conn, self.schema))
            if not pgschema.readable_as_is(applied):
                detail = f"migrations {list(applied)} recorded, this release expects {list(pgschema.KNOWN)}"
                return StorageCheck(applied, [Problem(code="schema", detail=detail)], [], [])
            after = [
                Problem(code=code, detail=detail)
                for code, detail in pgschema.guard_problems(conn, self.schema, pgschema.guards_of(applied))
            ]
        return StorageCheck(applied, [], [], after)


def _close_all(connections: list[Connection]) -> None:
    for conn in connections:
        conn.close()


def _ended_between(before: str, after: str) -> set[int] | None:
    """The transactions a snapshot `after` sees ended that `before` did not (None: too many to list).

    A snapshot `xmin:xmax:xip,...` sees every transaction below `xmax` but those in progress (`xip`)."""
    _, top, running = before.split(":")
    _, now_top, now_running = after.split(":")
    first, last = int(top), int(now_top)
    if last - first > 64:
        return None
    was = {int(x) for x in running.split(",") if x}
    still = {int(x) for x in now_running.split(",") if x}
    return {x for x in was | set(range(first, last)) if x < last and x not in still}


def _text(value: bytes | str) -> str:
    """JSON as the text column stores it (the UTF-8 bytes the hashes cover, decoded)."""
    return value.decode() if isinstance(value, bytes) else value


def _returned(cursor: psycopg.Cursor[tuple[Any, ...]]) -> int:
    """How many rows the statements of an `executemany(..., returning=True)` gave back, in all."""
    count = 0
    while True:
        count += len(cursor.fetchall())
        if not cursor.nextset():
            return count
