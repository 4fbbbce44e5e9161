"""The event store: one SQLite file, many sessions, nothing ever rewritten.

Bodies are stored once (canonical JSON + content hash + per-part token counts) and shared by every
session that holds them; a session is its hash-chained event log, whose append events carry the
`seq -> message_id` history. Every write is one `BEGIN IMMEDIATE` transaction that first
checks the session's head against the version the writer expects (optimistic concurrency): the loser
of a race gets `ConflictError` and nothing of its write is stored.
"""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from transcript import db, schema
from transcript.codec import MESSAGE_DECODER, decode_message, normalize_message
from transcript.errors import (
    ConflictError,
    DuplicateMessage,
    SchemaError,
    SessionNotFound,
    StoreReadOnly,
    TranscriptError,
)
from transcript.hashing import GENESIS, body_hash, event_hash
from transcript.model import (
    EVENT_DECODER,
    EVENT_ENCODER,
    Event,
    Message,
    MessageAppended,
)
from transcript.tokens import CL100K, TokenCounter, get_counter, message_tokens

if TYPE_CHECKING:
    from transcript.importing import ImportReport
    from transcript.session import Transcript
    from transcript.state import SessionState

_TOKENS_ENCODER: Final = msgspec.json.Encoder()
_TOKENS_DECODER: Final = msgspec.json.Decoder(tuple[int, ...])
_IN_CHUNK: Final = 500
_SYNC_MODES: Final = ("FULL", "EXTRA", "NORMAL", "OFF")


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A session of the store: its id, how many messages its history holds, its version."""

    session_id: str
    messages: int
    version: int


class PreparedMessage(NamedTuple):
    """A checked message, ready to store: the value, its canonical bytes, content hash and counts."""

    message: Message
    data: bytes
    hash: str
    tokens: tuple[int, ...]
    tokenizer: str | None = None


class SessionWrite(NamedTuple):
    """Events to append to one session, the version it must be at, and the bodies its appends need."""

    session_id: str
    expected_version: int
    events: Sequence[Event]
    bodies: Mapping[str, PreparedMessage]


class StoredBody(NamedTuple):
    """A body as read back: the message and the per-part counts stored with it."""

    message: Message
    tokens: tuple[int, ...]


class LogRecord(NamedTuple):
    """One event of a session's log as stored: its version, when it was recorded, what it says."""

    version: int
    recorded_at: str
    event: Event


class LoadedSession(NamedTuple):
    """A whole session read in one snapshot: its version, history bodies in order, other events."""

    version: int
    bodies: list[StoredBody]
    events: list[tuple[int, Event]]


class Store:
    """An open transcript file. Use `Store.open()`; one `Store` per thread."""

    def __init__(self, conn: sqlite3.Connection, path: str, *, readonly: bool, tokenizer: str) -> None:
        self._conn = conn
        self.path = path
        self.readonly = readonly
        self.tokenizer = tokenizer
        self._counter: TokenCounter | None = None
        self._local_writes = 0
        self.written_at: tuple[int, int] | None = None

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        readonly: bool = False,
        timeout: float = 5.0,
        synchronous: str = "FULL",
        tokenizer: str = CL100K,
    ) -> Store:
        """Open (and, unless read-only, create or migrate) a store.

        `path` defaults to `$TRANSCRIPT_DB` or `./transcript.db`; `":memory:"` is a private in-memory
        store. `synchronous="FULL"` makes every committed turn survive power loss; `"NORMAL"` trades
        that for speed. `timeout` is how long a writer waits for another's lock before `StoreLocked`.
        `tokenizer` is `cl100k_base` (exact) or `chars/4` (an estimate, only when asked for).
        """
        sync = synchronous.upper()
        if sync not in _SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNC_MODES)}, not {synchronous!r}")
        get_counter(tokenizer)
        target = str(path) if path is not None else db.default_path()
        conn = db.connect(target, readonly=readonly, timeout=timeout, synchronous=sync)  # type: ignore[arg-type]
        try:
            with db.translated(f"opening {target}"):
                if schema.check(conn, can_migrate=not readonly):
                    schema.migrate(conn)
                if not readonly and target != db.MEMORY:
                    conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except BaseException:
            conn.close()
            raise
        return cls(conn, target, readonly=readonly, tokenizer=tokenizer)

    # --- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Committed work is already durable; nothing else is pending."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<Store {self.path!r} {mode}>"

    # --- sessions ----------------------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Every session in the file, by id, with its message count and version."""
        with db.translated("listing sessions"):
            versions = dict(
                self._conn.execute(
                    "SELECT session_id, max(version) FROM events GROUP BY session_id"
                ).fetchall()
            )
            counts = dict(
                self._conn.execute("SELECT session_id, count(seq) FROM events GROUP BY session_id").fetchall()
            )
        return [
            SessionInfo(session_id=sid, messages=counts.get(sid, 0), version=version)
            for sid, version in sorted(versions.items())
        ]

    def has_session(self, session_id: str) -> bool:
        """Whether the file holds any event of this session."""
        return self.head(session_id)[0] > 0

    def session(self, session_id: str, *, create: bool = True, **settings: Any) -> Transcript:
        """The `Transcript` of one session (created by its first append unless `create=False`).

        `settings` go to `Transcript` (`config`, `summarizer`, `reinject`).
        """
        from transcript.session import Transcript, check_session_id

        check_session_id(session_id)
        if (not create or self.readonly) and not self.has_session(session_id):
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        return Transcript(self, session_id, **settings)

    def import_file(self, path: str | Path, format: str = "auto") -> ImportReport:
        """Import a recorded session file (all its sessions in one transaction); see `transcript.formats`."""
        from transcript.importing import import_file

        return import_file(self, path, format)

    def restore(self, state: SessionState, *, session_id: str | None = None, **settings: Any) -> Transcript:
        """Rebuild an exported session (`Transcript.export_state()`) in this file, in one transaction.

        The session must not exist yet; its view is the exported one, byte for byte.
        """
        from mutate.restore import restore_session

        return self.session(restore_session(self, state, session_id), **settings)

    def fork(
        self, session_id: str, *, at: int | str = "last", new_session_id: str | None = None, **settings: Any
    ) -> Transcript:
        """A new session that starts as `session_id` was at point `at` ("last" or a version).

        Bodies are shared, the parent's marks up to that point are copied, and the fork's own
        compactions never touch the parent. `new_session_id` defaults to `<parent>@<point>`.
        """
        from mutate.restore import fork_session

        point = None if at == "last" else int(at)
        head = self.head(session_id)[0]
        if head == 0:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        target = new_session_id or f"{session_id}@{point if point is not None else head}"
        return self.session(fork_session(self, session_id, point, target), **settings)

    # --- reads -------------------------------------------------------------------------------------

    def head(self, session_id: str) -> tuple[int, str]:
        """The session's latest version and event hash (0 and the genesis hash when empty)."""
        with db.translated(f"reading session {session_id!r}"):
            row = self._conn.execute(
                "SELECT version, hash FROM events WHERE session_id = ? ORDER BY version DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def change_token(self) -> tuple[int, int]:
        """Changes whenever anything may have been committed to the file since it was last read."""
        with db.translated("checking for changes"):
            (data_version,) = self._conn.execute("PRAGMA data_version").fetchone()
        return data_version, self._local_writes

    def load(self, session_id: str) -> LoadedSession:
        """The whole session, read in one consistent snapshot."""
        with db.translated(f"loading session {session_id!r}"), self._read_snapshot():
            version = self.head(session_id)[0]
            rows = self._conn.execute(
                "SELECT b.body, b.tokens FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id "
                "WHERE e.session_id = ? AND e.kind = 'message_appended' ORDER BY e.version",
                (session_id,),
            )
            bodies = _decode_bodies(rows)
            events = self._decode_events(
                self._conn.execute(
                    "SELECT version, payload FROM events WHERE session_id = ? AND kind <> 'message_appended' "
                    "ORDER BY version",
                    (session_id,),
                )
            )
        return LoadedSession(version, bodies, events)

    def read_since(
        self, session_id: str, version: int
    ) -> tuple[list[tuple[int, Event]], dict[str, StoredBody]]:
        """Events after `version`, and the bodies their appends refer to."""
        with db.translated(f"reading session {session_id!r}"), self._read_snapshot():
            events = self._decode_events(
                self._conn.execute(
                    "SELECT version, payload FROM events "
                    "WHERE session_id = ? AND version > ? ORDER BY version",
                    (session_id, version),
                )
            )
            ids = [event.message_id for _, event in events if isinstance(event, MessageAppended)]
            bodies = self.read_bodies(ids)
        return events, bodies

    def read_log(
        self, session_id: str, until: int | None = None
    ) -> tuple[list[LogRecord], dict[str, StoredBody]]:
        """The session's log up to version `until` (all of it by default), with the bodies it appends."""
        limit = until if until is not None else 2**62
        with db.translated(f"reading session {session_id!r}"), self._read_snapshot():
            records = [
                LogRecord(version, recorded_at, _decode_event(version, payload))
                for version, recorded_at, payload in self._conn.execute(
                    "SELECT version, recorded_at, payload FROM events "
                    "WHERE session_id = ? AND version <= ? ORDER BY version",
                    (session_id, limit),
                )
            ]
            ids = [r.event.message_id for r in records if isinstance(r.event, MessageAppended)]
            bodies = self.read_bodies(ids)
        return records, bodies

    def read_bodies(self, message_ids: Sequence[str]) -> dict[str, StoredBody]:
        """Bodies by message id (ids not in the store are left out)."""
        with db.translated("reading bodies"):
            return {
                message_id: StoredBody(decode_message(body), _TOKENS_DECODER.decode(tokens))
                for message_id, body, tokens in self._select_in(
                    "SELECT message_id, body, tokens FROM bodies", message_ids
                )
            }

    def tokenizers(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which tokenizer counted each of these bodies."""
        with db.translated("reading bodies"):
            return {
                row[0]: row[1]
                for row in self._select_in("SELECT message_id, tokenizer FROM bodies", message_ids)
            }

    def _select_in(self, select: str, message_ids: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """Rows of `select ... WHERE message_id IN (...)`, in chunks that respect SQLite's variable limit."""
        for start in range(0, len(message_ids), _IN_CHUNK):
            chunk = message_ids[start : start + _IN_CHUNK]
            yield from self._conn.execute(
                f"{select} WHERE message_id IN ({','.join('?' * len(chunk))})", chunk
            )

    def _decode_events(self, rows: Iterable[tuple[int, bytes]]) -> list[tuple[int, Event]]:
        return [(version, _decode_event(version, payload)) for version, payload in rows]

    def _read_snapshot(self) -> _ReadSnapshot:
        return _ReadSnapshot(self._conn)

    # --- writes ------------------------------------------------------------------------------------

    @property
    def counter(self) -> TokenCounter:
        """The token counter of this store's tokenizer (it loads its data on first use)."""
        if self._counter is None:
            self._counter = get_counter(self.tokenizer)
        return self._counter

    def prepare(self, message: Message, *, count: bool = True) -> PreparedMessage:
        """Check, normalize, hash and (unless `count=False`) count a message, outside any transaction."""
        normal, data = normalize_message(message)
        tokens = message_tokens(normal, self.counter) if count else ()
        return PreparedMessage(normal, data, body_hash(normal), tokens)

    def count(self, prepared: PreparedMessage) -> PreparedMessage:
        """The prepared message with its per-part token counts."""
        return prepared._replace(tokens=message_tokens(prepared.message, self.counter))

    def write(
        self,
        session_id: str,
        expected_version: int,
        events: Sequence[Event],
        bodies: Mapping[str, PreparedMessage] | None = None,
    ) -> tuple[int, dict[str, tuple[int, ...]]]:
        """Append events to a session in one transaction; returns (new version, reused bodies' counts).

        Each `MessageAppended` event (which is the history row: its `seq` and `message_id`) also
        writes its body, from `bodies`, unless the store already holds it. Raises `ConflictError` when
        the session is not at `expected_version`, `DuplicateMessage` when an id is stored with other
        content.
        """
        return self.write_many([SessionWrite(session_id, expected_version, events, bodies or {})])[0]

    def write_many(self, writes: Sequence[SessionWrite]) -> list[tuple[int, dict[str, tuple[int, ...]]]]:
        """Several sessions' writes in one transaction: all of them are stored, or none."""
        if self.readonly:
            raise StoreReadOnly(f"{self.path} is open read-only; nothing was written")
        recorded_at = datetime.now(UTC).isoformat(timespec="microseconds")
        with db.translated("writing to the store"), self._transaction():
            # Read under the write lock: no one else can commit until we do, and our own commit does
            # not change it, so a transcript that applied this write itself is current at this token.
            (data_version,) = self._conn.execute("PRAGMA data_version").fetchone()
            results = [self._append_events(write, recorded_at) for write in writes]
        self._local_writes += 1
        self.written_at = (data_version, self._local_writes)
        return results

    def _append_events(self, write: SessionWrite, recorded_at: str) -> tuple[int, dict[str, tuple[int, ...]]]:
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
            payload = EVENT_ENCODER.encode(event)
            prev = event_hash(prev, session_id, version, recorded_at, payload)
            seq, message_id = (
                (event.seq, event.message_id) if isinstance(event, MessageAppended) else (None, None)
            )
            rows.append((session_id, version, event.kind, seq, message_id, recorded_at, payload, prev))
        try:
            self._conn.executemany(
                "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError as exc:
            raise ConflictError(f"session {session_id!r} moved on while this write was made") from exc
        return version, reused

    def _insert_bodies(
        self, appended: list[MessageAppended], bodies: Mapping[str, PreparedMessage]
    ) -> dict[str, tuple[int, ...]]:
        """Store each body once; returns the stored counts of bodies that were already there.

        A body already stored (a fork, a re-import) must hold the same content; it is never rewritten.
        """
        ids = [event.message_id for event in appended]
        stored = {
            message_id: (stored_hash, tokens)
            for message_id, stored_hash, tokens in self._select_in(
                "SELECT message_id, hash, tokens FROM bodies", ids
            )
        }
        rows = []
        reused: dict[str, tuple[int, ...]] = {}
        for event in appended:
            if event.message_id in stored:
                stored_hash, tokens = stored[event.message_id]
                if stored_hash != event.body_hash:
                    raise DuplicateMessage(
                        f"message {event.message_id!r} is already stored with other content; message ids "
                        "are unique in a store (nothing was written)"
                    )
                reused[event.message_id] = _TOKENS_DECODER.decode(tokens)
                continue
            prepared = bodies.get(event.message_id)
            if prepared is None or prepared.hash != event.body_hash:
                raise TranscriptError(f"internal: no matching body for appended message {event.message_id!r}")
            stored[event.message_id] = (prepared.hash, b"")
            rows.append(
                (
                    event.message_id,
                    prepared.hash,
                    prepared.tokenizer or self.tokenizer,
                    _TOKENS_ENCODER.encode(prepared.tokens),
                    prepared.data,
                )
            )
        self._conn.executemany(
            "INSERT INTO bodies (message_id, hash, tokenizer, tokens, body) VALUES (?, ?, ?, ?, ?)", rows
        )
        return reused

    def _transaction(self) -> _WriteTransaction:
        return _WriteTransaction(self._conn)

    def execute_raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only SQL statement (for tools such as `verify`); returns all rows."""
        with db.translated("running a query"):
            return self._conn.execute(sql, params).fetchall()

    def iterdump(self) -> Iterator[str]:
        """The file's content as SQL text (what tests compare to prove a file was left as it was)."""
        with db.translated("dumping the store"):
            yield from self._conn.iterdump()


def _decode_bodies(rows: Iterable[tuple[bytes, bytes]]) -> list[StoredBody]:
    """Decode a whole history's bodies and counts in one tight loop.

    The garbage collector is paused meanwhile: the decoded values hold no reference cycles, and
    pausing it saves collections that would traverse the growing list again and again.
    """
    message, tokens = MESSAGE_DECODER.decode, _TOKENS_DECODER.decode
    paused = gc.isenabled()
    gc.disable()
    try:
        return [StoredBody(message(body), tokens(counts)) for body, counts in rows]
    finally:
        if paused:
            gc.enable()


def _decode_event(version: int, payload: bytes) -> Event:
    try:
        return EVENT_DECODER.decode(payload)
    except msgspec.ValidationError as exc:
        raise SchemaError(
            f"event {version} cannot be read ({exc}); it was probably written by a newer transcript-store"
        ) from exc


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
