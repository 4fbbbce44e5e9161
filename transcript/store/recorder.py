"""The recorder: the narrow, dumb storage protocol a backend implements under the event log.

A recorder stores rows and nothing else: it knows no hashing, no capability, no de-duplication rule
and no event type. It inserts bodies and events for sessions atomically at the versions they are
expected to be at (the loser of a race gets `ConflictError` and nothing is stored), and reads rows
back: a session's events in a version range, bodies by id, heads, and the whole store for `verify`.
Every rule about what the rows mean lives once, in `transcript.store.log`, over any recorder.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Final, Literal, NamedTuple, Protocol

import msgspec

from transcript.model.errors import ConflictError, StoreCorrupted
from transcript.store.port import Capabilities as Capabilities, Purged as Purged, SearchHit

# JSON as stored: the bytes a hash covers, or the same as text where a backend keeps text columns.
Json = bytes | str


class EventRow(NamedTuple):
    """One stored event: its version, kind, history columns (appends only), time, payload and hash.

    `payload` is the event's canonical JSON, exactly what its chained `hash` covers.
    """

    version: int
    kind: str
    seq: int | None
    message_id: str | None
    recorded_at: str
    payload: Json
    hash: str


class BodyRow(NamedTuple):
    """One stored body: its id, content hash, tokenizer, counts (JSON), record (JSON) and digest."""

    message_id: str
    hash: str
    tokenizer: str
    tokens: Json
    body: Json
    digest: str


# What a read of a session needs of one stored body: (message id, counts (JSON), record (JSON)). A
# plain tuple: a cold open reads one for every message it shows.
ContentRow = tuple[str, Json, Json]


class SnapshotRow(NamedTuple):
    """A snapshot of a session's fold: the version and event hash it folds to, its payload (JSON, opaque
    to the recorder) and the payload's digest."""

    version: int
    hash: str
    payload: Json
    digest: str


class RecorderWrite(NamedTuple):
    """What one session's write stores: the head it must be at (version and hash; version 0 for a new
    session), the bodies it adds and its events. The session's new head is its last event.

    `snapshot`, when given, is stored in the same transaction: it folds to the write's last event (or,
    in a write of no events, to the head it must be at) and moves no head."""

    session_id: str
    expected: tuple[int, str]
    bodies: Sequence[BodyRow]
    events: Sequence[EventRow]
    snapshot: SnapshotRow | None = None


class HistoryRow(NamedTuple):
    """One append of a session's history and its body as stored (None: no body of that id)."""

    version: int
    seq: int | None
    message_id: str | None
    body: Json | None
    tokens: Json | None


class PayloadRewrite(NamedTuple):
    """An event whose payload a redaction rewrites (its version, kind, time and hash stay)."""

    session_id: str
    version: int
    payload: Json


class SessionRow(NamedTuple):
    """A session as listed: id, messages in its history, head version and hash, title ("" if none);
    then the source its import recorded, its parent, its first and last message times (ISO 8601 UTC),
    and its stored tokens."""

    session_id: str
    messages: int
    version: int
    head_hash: str
    title: str
    source: str | None = None
    parent_session_id: str | None = None
    first_at: str | None = None
    last_at: str | None = None
    stored_tokens: int = 0


class BodyTaken(ConflictError):
    """A body this write would insert was stored by another writer meanwhile (the log re-checks and
    retries; nothing of the write was stored)."""


class Problem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One mismatch found by `verify`: a stable code, what is wrong, and where."""

    code: str
    detail: str
    session_id: str | None = None
    version: int | None = None
    seq: int | None = None
    message_id: str | None = None

    def __str__(self) -> str:
        where = [
            f"{name} {value!r}" if isinstance(value, str) else f"{name} {value}"
            for name, value in (
                ("session", self.session_id),
                ("event", self.version),
                ("seq", self.seq),
                ("message", self.message_id),
            )
            if value is not None
        ]
        return f"{self.code}: {self.detail}" + (f" ({', '.join(where)})" if where else "")


class StorageCheck(NamedTuple):
    """What a backend checks of its own storage for `verify`, around the log's neutral checks.

    `schema` names the migrations recorded; when `stop` holds problems (a schema this release does
    not know), nothing else is checked. `before` (damaged pages, say) come first in the report,
    `after` (guards, views) last.
    """

    schema: tuple[str, ...]
    stop: list[Problem]
    before: list[Problem]
    after: list[Problem]


Kinds = Literal["all", "appends", "others"]


class Recorder(Protocol):
    """A backend's storage of bodies, per-session event rows and heads (see the module docstring).

    Reads outside `reading()` each see some committed state; inside it, all see the same one.
    `scan_bodies` and `scan_events` may return values of any type when the store was damaged or
    edited outside this library (a recorder opened for `verify` never refuses to read them).
    """

    @property
    def location(self) -> str:
        """Where the store lives (a file path, `:memory:`, a URL)."""
        ...

    @property
    def readonly(self) -> bool:
        """Whether it was opened read-only (every insert is then `StoreReadOnly`)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the backend offers beyond the protocol."""
        ...

    @property
    def attestation_due(self) -> bool:
        """Whether this open migrated a store whose appends predate record digests in the chain
        (the log then attests them: `EventLog.attest`)."""
        ...

    def insert(self, writes: Sequence[RecorderWrite]) -> Hashable:
        """Store every write in one transaction, or nothing: each session must be at its expected
        head (else `ConflictError`, also for a write of a snapshot alone); a body id already stored
        raises `BodyTaken`. A snapshot replaces every one of its session but the newest before it
        (snapshots are derived: only the latest is ever read). Returns the change token as of this
        commit (see `change_token`)."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """A block whose reads all see one consistent committed state."""
        ...

    def head(self, session_id: str) -> tuple[int, str] | None:
        """The session's head (version and hash of its last event), or None when it has none."""
        ...

    def next_seq(self, session_id: str) -> int:
        """The seq the session's next append takes: one past its last append's (0 when it has none)."""
        ...

    def heads(self) -> dict[str, tuple[object, object]]:
        """Every head row as stored, by session (for `verify`)."""
        ...

    def events(
        self, session_id: str, *, after: int = 0, until: int | None = None, kinds: Kinds = "all"
    ) -> Iterator[EventRow]:
        """The session's events with `after < version <= until`, in version order; `kinds` selects
        appends only, all but appends, or all."""
        ...

    def events_page(self, session_id: str, after: int, count: int) -> list[EventRow]:
        """The first `count` of the session's events after version `after`, in version order."""
        ...

    def history(self, session_id: str) -> Iterator[HistoryRow]:
        """The session's history: each append, in version order, with the body it appends (its record
        and counts as stored, or None where no body of that id is stored). A cold open reads this."""
        ...

    def bodies(self, message_ids: Sequence[str]) -> Iterator[BodyRow]:
        """The stored bodies with these ids (those that are stored), in no particular order."""
        ...

    def contents(self, message_ids: Sequence[str]) -> Iterator[ContentRow]:
        """Of each stored body with these ids (those that are stored, in no particular order), what
        reading a session needs: its id, counts and record; `bodies` has its hash, tokenizer and
        digest too."""
        ...

    def sessions(self) -> list[SessionRow]:
        """Every session with a head, by id."""
        ...

    def backup(self, target: str) -> None:
        """A consistent copy of the whole store in a new file at `target` (made 0600, never through a
        link), taken while other connections go on writing; `StoreUnavailable` for a backend
        without a file."""
        ...

    def snapshots(self, session_id: str) -> Iterator[SnapshotRow]:
        """The session's snapshots, newest first."""
        ...

    def scan_snapshots(self) -> Iterable[tuple[object, ...]]:
        """Every snapshot row as stored, by session and version: session_id, version, hash, payload,
        digest (for `verify`)."""
        ...

    def scan_bodies(self) -> Iterable[tuple[object, ...]]:
        """Every body row as stored, in insertion order: message_id, hash, tokenizer, tokens, body,
        digest (for `verify`)."""
        ...

    def scan_events(self) -> Iterable[tuple[object, ...]]:
        """Every event row as stored, by session and version: session_id, version, kind, seq,
        message_id, recorded_at, payload, hash (for `verify`)."""
        ...

    def storage_check(self) -> StorageCheck:
        """The backend's own checks of its storage (see `StorageCheck`)."""
        ...

    def search(self, phrase: str, *, session_id: str | None, limit: int) -> list[SearchHit]:
        """Full-text search (only where `capabilities.search`)."""
        ...

    def change_token(self) -> Hashable:
        """A value that changes whenever anything may have been committed since it was last read."""
        ...

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's lease for a block; `SessionLeased` at once while another holds it
        (`transcript.store.lease`)."""
        ...

    # Redaction and erasure: the one audited exception to append-only. The event log decides what is
    # rewritten (`transcript.store.redaction`); a backend only stores it, through its guards.

    def holders(self, message_ids: Sequence[str]) -> dict[str, set[str]]:
        """The sessions whose history appends each of these messages (ids no session holds left out)."""
        ...

    def redact(
        self, writes: Sequence[RecorderWrite], bodies: Sequence[BodyRow], payloads: Sequence[PayloadRewrite]
    ) -> Hashable:
        """In one transaction, or nothing: insert `writes` (the redaction events, each session at its
        expected head, else `ConflictError`), then replace each body of `bodies` (same id) and each
        payload of `payloads`, and whatever the backend keeps of them (a search index). The backend's
        guards accept these rewrites only with the redaction events that name them. Returns the change
        token as of this commit."""
        ...

    def erase(self, write: RecorderWrite, bodies: Sequence[str]) -> Hashable:
        """In one transaction, or nothing: insert `write` (one erasure event at the session's expected
        head), delete every earlier event of its session and the `bodies` (which no other session
        holds), and whatever the backend keeps of them. Returns the change token."""
        ...

    def purge(self) -> Purged:
        """Make the bytes of rewritten and deleted rows unreadable in the backend's storage (SQLite:
        VACUUM, then a WAL checkpoint that truncates it); say so when something holds them still."""
        ...

    def close(self) -> None:
        """Release the backend's resources."""
        ...


# The seq of a session's last append: its newest events read back (by their key) to the first append.
LAST_SEQ: Final = (
    "SELECT seq, CAST(payload AS {blob}) FROM events WHERE session_id = {p} AND kind = 'message_appended' "
    "ORDER BY version DESC LIMIT 1"
)


class _Numbered(msgspec.Struct):
    seq: int


_NUMBERED: Final = msgspec.json.Decoder(_Numbered)


def next_seq_of(session_id: str, rows: Sequence[Sequence[object]]) -> int:
    """One past the seq that `LAST_SEQ` read (0 for a session with no append); `StoreCorrupted` when
    the stored seq is no whole number or the column disagrees with the event's payload (a write
    numbered from a damaged row would commit a history the fold cannot read)."""
    if not rows:
        return 0
    seq, payload = rows[0][0], rows[0][1]
    try:
        said = _NUMBERED.decode(payload.encode() if isinstance(payload, str) else payload).seq  # type: ignore[arg-type]
    except (msgspec.DecodeError, TypeError):
        said = None
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0 or said != seq:
        raise StoreCorrupted(
            f"events of session {session_id!r}: the last append's seq column reads {seq!r}, its payload "
            f"{said!r} (run `transcript verify`); nothing was written"
        )
    return seq + 1
