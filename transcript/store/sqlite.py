"""The SQLite backend of the event store: one file, many sessions, nothing ever rewritten.

Bodies are stored once (canonical JSON + content hash + per-part token counts) and shared by every
session that holds them; a session is its hash-chained event log, whose append events carry the
`seq -> message_id` history. Every commit is one `BEGIN IMMEDIATE` transaction that first checks each
session's head against the version the writer expects (optimistic concurrency): the loser of a race
gets `ConflictError` and nothing of its write is stored.
"""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec

from transcript.model.codec import MESSAGE_DECODER
from transcript.model.errors import (
    ConflictError,
    DuplicateMessage,
    InvalidArgument,
    StoreCorrupted,
    StoreReadOnly,
    TranscriptError,
)
from transcript.model.events import EVENT_DECODER, EVENT_ENCODER, Event, MessageAppended
from transcript.model.hashing import GENESIS, event_hash, record_digest
from transcript.store import connection, schema
from transcript.store.port import (
    Committed,
    LoadedSession,
    LogRecord,
    NewBody,
    SearchHit,
    SessionInfo,
    SessionWrite,
    StoredBody,
    UnreadableEvent,
    refuse_mutator_events,
)
from transcript.store.writer import is_writer

_TOKENS_ENCODER: Final = msgspec.json.Encoder()
_TOKENS_DECODER: Final = msgspec.json.Decoder(tuple[Annotated[int, msgspec.Meta(ge=0)], ...])
_IN_CHUNK: Final = 500
SYNC_MODES: Final[dict[str, connection.Synchronous]] = {
    "FULL": "FULL",
    "EXTRA": "EXTRA",
    "NORMAL": "NORMAL",
    "OFF": "OFF",
}


class SqliteEventStore:
    """An open store file. Use `SqliteEventStore.open()`; one per thread.

    `connection` is the raw `sqlite3` connection, for tools that read the file as SQL (tests, crash
    probes); nothing above the store uses it.
    """

    def __init__(self, conn: sqlite3.Connection, path: str, *, readonly: bool) -> None:
        self.connection = conn
        self.path = path
        self.readonly = readonly
        self._local_writes = 0

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        readonly: bool = False,
        timeout: float = 5.0,
        synchronous: str = "FULL",
    ) -> SqliteEventStore:
        """Open (and, unless read-only, create or migrate) a store file; `":memory:"` is private.

        `path` defaults to `$TRANSCRIPT_DB` or `./transcript.db`. Bad arguments raise `InvalidArgument`
        before anything is opened.
        """
        target = _path(path)
        sync = SYNC_MODES.get(synchronous.upper()) if isinstance(synchronous, str) else None
        if sync is None:
            raise InvalidArgument(f"synchronous must be one of {', '.join(SYNC_MODES)}, not {synchronous!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < 1e9:
            raise InvalidArgument(f"timeout must be a number of seconds (0 or more), not {timeout!r}")
        conn = connection.connect(target, readonly=readonly, timeout=timeout, synchronous=sync)
        try:
            with connection.translated(f"opening {target}"):
                if schema.check(conn, can_migrate=not readonly):
                    schema.migrate(conn)
                if not readonly and target != connection.MEMORY:
                    conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except BaseException:
            conn.close()
            raise
        return cls(conn, target, readonly=readonly)

    def close(self) -> None:
        """Close the connection. Committed work is already durable; nothing else is pending."""
        self.connection.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<SqliteEventStore {self.path!r} {mode}>"

    # Reads.

    def sessions(self) -> list[SessionInfo]:
        """Every session in the file, by id, with its message count and version."""
        with connection.translated("listing sessions"):
            rows = self.connection.execute(
                "SELECT session_id, messages, head_version, head_hash, title FROM sessions "
                "ORDER BY session_id"
            ).fetchall()
        return [
            SessionInfo(session_id=sid, messages=count, version=version, head_hash=head, title=title or "")
            for sid, count, version, head, title in rows
        ]

    def head(self, session_id: str) -> tuple[int, str]:
        """The session's latest version and event hash (0 and the genesis hash when empty)."""
        with connection.translated(f"reading session {session_id!r}"):
            row = self.connection.execute(
                "SELECT version, hash FROM heads WHERE session_id = ?", (session_id,)
            ).fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anything may have been committed to the file since it was last read."""
        with connection.translated("checking for changes"):
            (data_version,) = self.connection.execute("PRAGMA data_version").fetchone()
        return data_version, self._local_writes

    def load(self, session_id: str) -> LoadedSession:
        """The whole session, read in one consistent snapshot."""
        with connection.translated(f"loading session {session_id!r}"), _ReadSnapshot(self.connection):
            version = self.head(session_id)[0]
            history = (
                "SELECT b.message_id, b.body, b.tokens FROM events AS e "
                "JOIN bodies AS b ON b.message_id = e.message_id "
                "WHERE e.session_id = ? AND e.kind = 'message_appended' ORDER BY e.version"
            )
            bodies = _decode_bodies(self.connection, history, (session_id,))
            events = _decode_events(
                session_id,
                self.connection.execute(
                    "SELECT version, kind, payload FROM events "
                    "WHERE session_id = ? AND kind <> 'message_appended' ORDER BY version",
                    (session_id,),
                ),
            )
        return LoadedSession(version, bodies, events)

    def read_since(
        self, session_id: str, version: int
    ) -> tuple[list[tuple[int, Event | UnreadableEvent]], dict[str, StoredBody]]:
        """Events after `version`, and the bodies their appends refer to."""
        with connection.translated(f"reading session {session_id!r}"), _ReadSnapshot(self.connection):
            events = _decode_events(
                session_id,
                self.connection.execute(
                    "SELECT version, kind, payload FROM events "
                    "WHERE session_id = ? AND version > ? ORDER BY version",
                    (session_id, version),
                ),
            )
            ids = [event.message_id for _, event in events if isinstance(event, MessageAppended)]
            bodies = self._read_bodies(ids)
        return events, bodies

    def read_log(
        self, session_id: str, until: int | None = None
    ) -> tuple[list[LogRecord], dict[str, StoredBody]]:
        """The session's log up to version `until` (all of it by default), with the bodies it appends."""
        limit = until if until is not None else 2**62
        with connection.translated(f"reading session {session_id!r}"), _ReadSnapshot(self.connection):
            records = [
                LogRecord(version, recorded_at, _strict(session_id, version, _decode_event(kind, payload)))
                for version, recorded_at, kind, payload in self.connection.execute(
                    "SELECT version, recorded_at, kind, payload FROM events "
                    "WHERE session_id = ? AND version <= ? ORDER BY version",
                    (session_id, limit),
                )
            ]
            ids = [r.event.message_id for r in records if isinstance(r.event, MessageAppended)]
            bodies = self._read_bodies(ids)
        return records, bodies

    def tokenizers(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which tokenizer counted each of these bodies."""
        with connection.translated("reading bodies"):
            return {
                row[0]: row[1]
                for row in self._select_in("SELECT message_id, tokenizer FROM bodies", message_ids)
            }

    def records(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored record (canonical JSON bytes) of each of these bodies that is stored."""
        with connection.translated("reading bodies"):
            return {
                row[0]: schema.stored_bytes(row[1])
                for row in self._select_in("SELECT message_id, body FROM bodies", message_ids)
            }

    def _read_bodies(self, message_ids: Sequence[str]) -> dict[str, StoredBody]:
        return {
            message_id: _body(message_id, body, tokens)
            for message_id, body, tokens in self._select_in(
                "SELECT message_id, body, tokens FROM bodies", message_ids
            )
        }

    def _select_in(self, select: str, message_ids: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """Rows of `select ... WHERE message_id IN (...)`, in chunks that respect SQLite's variable limit."""
        for start in range(0, len(message_ids), _IN_CHUNK):
            chunk = message_ids[start : start + _IN_CHUNK]
            yield from self.connection.execute(
                f"{select} WHERE message_id IN ({','.join('?' * len(chunk))})", chunk
            )

    def search(self, phrase: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages whose text holds `phrase` (words in this order), best matches first.

        Full-text search is opt-in: the first search builds the index (a read-only store cannot, and
        says so) and from then on every stored body is indexed as it is written.
        """
        if not isinstance(phrase, str) or not phrase.strip():
            raise InvalidArgument(f"search for a non-blank phrase, not {phrase!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be a positive whole number, not {limit!r}")
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
                f"{self.path} has no search index yet and is open read-only; search it once read-write"
            )
        with connection.translated("building the search index"), _WriteTransaction(self.connection):
            if not self.search_enabled():
                for statement in schema.SEARCH:
                    self.connection.execute(statement)
        self._local_writes += 1

    # The one write.

    def commit(self, writes: Sequence[SessionWrite], *, writer: object = None) -> list[Committed]:
        """Append each write's events in one transaction: all of them are stored, or none.

        Each `MessageAppended` event (which is the history row: its `seq` and `message_id`) also
        writes its body, from the write's bodies, unless the store already holds it. Raises
        `ConflictError` when a session is not at its expected version, `DuplicateMessage` when an id
        is stored with other content, `WriteRefused` for mutator events without the capability.
        """
        if not is_writer(writer):
            refuse_mutator_events(writes)
        if self.readonly:
            raise StoreReadOnly(f"{self.path} is open read-only; nothing was written")
        recorded_at = datetime.now(UTC).isoformat(timespec="microseconds")
        with connection.translated("writing to the store"), _WriteTransaction(self.connection):
            # Read under the write lock: no one else can commit until we do, and our own commit does
            # not change it, so a session that folds this write itself is current at this token.
            (data_version,) = self.connection.execute("PRAGMA data_version").fetchone()
            results = [self._append_events(write, recorded_at) for write in writes]
        self._local_writes += 1
        token = (data_version, self._local_writes)
        return [done._replace(token=token) for done in results]

    def _append_events(self, write: SessionWrite, recorded_at: str) -> Committed:
        session_id, expected_version, events, bodies = write
        version, prev = self.head(session_id)
        if version != expected_version:
            raise ConflictError(
                f"session {session_id!r} is at version {version}, this write expected "
                f"{expected_version}; nothing was written (catch up and retry)"
            )
        appended = [event for event in events if isinstance(event, MessageAppended)]
        reused = self._insert_bodies(appended, bodies) if appended else {}
        rows = []
        for event in events:
            version += 1
            payload = _payload(event)
            prev = event_hash(prev, session_id, version, recorded_at, payload)
            seq, message_id = (
                (event.seq, event.message_id) if isinstance(event, MessageAppended) else (None, None)
            )
            rows.append(
                (session_id, version, event.kind, seq, message_id, recorded_at, payload.decode(), prev)
            )
        try:
            self.connection.executemany(
                "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(f"session {session_id!r} moved on while this write was made") from exc
        if rows and expected_version:
            self.connection.execute(
                "UPDATE heads SET version = ?, hash = ? WHERE session_id = ? AND version = ?",
                (version, prev, session_id, expected_version),
            )
        elif rows:
            self.connection.execute(
                "INSERT INTO heads (session_id, version, hash) VALUES (?, ?, ?)", (session_id, version, prev)
            )
        return Committed(version, reused, None)

    def _insert_bodies(
        self, appended: list[MessageAppended], bodies: Mapping[str, NewBody]
    ) -> dict[str, tuple[int, ...]]:
        """Store each body once; returns the stored counts of bodies that were already there.

        A body already stored (a fork, a re-import, a re-append) must be the very same record: the
        same message, `created_at` and `metadata` included. It is never rewritten, and its stored
        counts are the ones every session that holds it uses.
        """
        ids = [event.message_id for event in appended]
        stored = {
            row[0]: row[1:]
            for row in self._select_in("SELECT message_id, hash, tokens, body FROM bodies", ids)
        }
        rows = []
        reused: dict[str, tuple[int, ...]] = {}
        for event in appended:
            body = bodies.get(event.message_id)
            if event.message_id in stored:
                stored_hash, tokens, stored_body = stored[event.message_id]
                same = stored_hash == event.body_hash and (
                    body is None or schema.stored_bytes(stored_body) == body.data
                )
                if not same:
                    raise DuplicateMessage(
                        f"message {event.message_id!r} is already stored with other content, time or "
                        "metadata; message ids are unique in a store (nothing was written)"
                    )
                if tokens:
                    reused[event.message_id] = _decode_tokens(tokens, event.message_id)
                continue
            if body is None or body.hash != event.body_hash:
                raise TranscriptError(f"internal: no matching body for appended message {event.message_id!r}")
            counts = _TOKENS_ENCODER.encode(body.tokens)
            stored[event.message_id] = (body.hash, b"", body.data)
            digest = record_digest(body.data, counts, body.tokenizer)
            # JSON text: the very bytes the hashes cover, readable by any SQLite tool.
            rows.append(
                (event.message_id, body.hash, body.tokenizer, counts.decode(), body.data.decode(), digest)
            )
        self.connection.executemany(
            "INSERT INTO bodies (message_id, hash, tokenizer, tokens, body, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        return reused


def _payload(event: Event) -> bytes:
    """An event's stored bytes, after checking they read back as the very same event: a write that
    could not be read again (a float where a count belongs, NaN, a lone surrogate) is refused."""
    try:
        payload = EVENT_ENCODER.encode(event)
        again = EVENT_DECODER.decode(payload)
    except (msgspec.EncodeError, msgspec.DecodeError, TypeError, OverflowError, UnicodeEncodeError) as exc:
        raise InvalidArgument(f"a {event.kind} event cannot be stored ({exc}); nothing was written") from exc
    if again != event:
        raise InvalidArgument(f"a {event.kind} event would not read back as written; nothing was written")
    return payload


def _path(path: object) -> str:
    """The store's path as text: the default when None; refused when it cannot name a file."""
    if path is None:
        return connection.default_path()
    if not isinstance(path, (str, Path)):
        raise InvalidArgument(f"a store path is a str or a Path, not {type(path).__name__}")
    target = str(path)
    if not target or "\x00" in target:
        raise InvalidArgument(f"{target!r} cannot name a file (empty, or a NUL character)")
    try:
        target.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{target!r} cannot name a file (not valid Unicode)") from exc
    return target


def _decode_events(
    session_id: str, rows: Iterable[tuple[int, str, Any]]
) -> list[tuple[int, Event | UnreadableEvent]]:
    """Events of a session's rows; a damaged mark becomes an `UnreadableEvent`, any other damage
    raises `StoreCorrupted` naming the row."""
    decoded: list[tuple[int, Event | UnreadableEvent]] = []
    for version, kind, payload in rows:
        event = _decode_event(kind, payload)
        if isinstance(event, UnreadableEvent) and event.kind != _MARK:
            raise StoreCorrupted(f"events row (session {session_id!r}, version {version}): {event.reason}")
        decoded.append((version, event))
    return decoded


_MARK: Final = "message_marked"


def _decode_event(kind: object, payload: object) -> Event | UnreadableEvent:
    """The event a row holds, or why it cannot be read (also when its `kind` column disagrees)."""
    try:
        event = EVENT_DECODER.decode(payload)  # type: ignore[arg-type]
    except (msgspec.DecodeError, TypeError) as exc:
        return UnreadableEvent(str(kind), f"its payload cannot be read ({exc})")
    if event.kind != kind:
        unreadable = UnreadableEvent(str(kind), f"its kind column says {kind!r}, its payload {event.kind!r}")
        return unreadable._replace(kind=_MARK) if event.kind == _MARK else unreadable
    return event


def _strict(session_id: str, version: int, event: Event | UnreadableEvent) -> Event:
    """An event that must be read whole (an export, a fork, a replay), or `StoreCorrupted`."""
    if isinstance(event, UnreadableEvent):
        raise StoreCorrupted(f"events row (session {session_id!r}, version {version}): {event.reason}")
    return event


def _body(message_id: str, body: Any, tokens: Any) -> StoredBody:
    """One stored body and its counts, or `StoreCorrupted` naming the row."""
    try:
        return StoredBody(MESSAGE_DECODER.decode(body), _TOKENS_DECODER.decode(tokens))
    except (msgspec.DecodeError, TypeError) as exc:
        raise StoreCorrupted(f"bodies row (message {message_id!r}): it cannot be read ({exc})") from exc


def _decode_tokens(tokens: Any, message_id: str) -> tuple[int, ...]:
    try:
        counts: tuple[int, ...] = _TOKENS_DECODER.decode(tokens)
    except (msgspec.DecodeError, TypeError) as exc:
        raise StoreCorrupted(f"bodies row (message {message_id!r}): its token counts cannot be read") from exc
    return counts


def _decode_bodies(conn: sqlite3.Connection, query: str, params: tuple[Any, ...]) -> list[StoredBody]:
    """Decode a whole history's bodies and counts in one tight loop.

    The garbage collector is paused meanwhile: the decoded values hold no reference cycles, and
    pausing it saves collections that would traverse the growing list again and again. When a row
    cannot be read, the query runs again row by row to name it (`StoreCorrupted`).
    """
    message, tokens = MESSAGE_DECODER.decode, _TOKENS_DECODER.decode
    paused = gc.isenabled()
    gc.disable()
    try:
        return [StoredBody(message(body), tokens(counts)) for _, body, counts in conn.execute(query, params)]
    except (msgspec.DecodeError, TypeError):
        return [_body(*row) for row in conn.execute(query, params)]
    finally:
        if paused:
            gc.enable()


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


class _ReadSnapshot(_WriteTransaction):
    """A deferred read transaction: every statement inside sees the same committed state."""

    def __enter__(self) -> None:
        self._began = not self._conn.in_transaction
        if self._began:
            self._conn.execute("BEGIN")

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if self._began:
            self._rollback()
