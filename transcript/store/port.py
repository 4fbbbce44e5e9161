"""The event store's port: what every backend offers, in the library's own types.

A backend (SQLite today, PostgreSQL later) stores bodies once and appends hash-chained events to
per-session logs. It has one way to write, `commit`: for each session, the version it expects, the
events to append and the bodies they need, all in one transaction, checked with optimistic
concurrency — the loser of a race gets `ConflictError` and nothing of its write is stored. Marks,
summaries and compaction records are accepted only with the mutator's writer capability
(`transcript.store.writer`). No `sqlite3` type crosses this port.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Final, NamedTuple, Protocol

import msgspec

from transcript.model.errors import WriteRefused
from transcript.model.events import (
    CompactionRecorded,
    Event,
    ImportRecorded,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    RetractionRecorded,
    RoundClaimed,
)
from transcript.model.message import Message


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A session of the store: its id, how many messages its history holds, its version, its head hash
    (the hash of its last event: keep it to check the session later, `verify --expect-head`), its
    title (given, or its first user message's opening), the source its import recorded
    (`<format>:<file name>`), the session it was forked or spawned from, the first and last times of
    its own messages (ISO 8601, UTC: when they were written, not when they were imported) and the
    tokens its history holds."""

    session_id: str
    messages: int
    version: int
    head_hash: str = ""
    title: str = ""
    source: str = ""
    parent_session_id: str | None = None
    first_at: str = ""
    last_at: str = ""
    stored_tokens: int = 0

    @property
    def source_format(self) -> str:
        """The format its import read (`claude-code`, `swe-agent`, ...); "" when it was not imported."""
        return self.source.partition(":")[0]


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """A message whose text matched a search: where it is, and the matching words in context."""

    session_id: str
    seq: int
    message_id: str
    role: str
    snippet: str


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend offers beyond the protocol.

    `enforced_append_only`: the database itself refuses edits of stored rows (triggers), not only
    this code; `durable`: a commit survives the process (a file, a server); `search`: a full-text
    index; `sql_views`: the readable SQL views (`sessions`, `messages`, `compactions`).
    """

    enforced_append_only: bool
    durable: bool
    search: bool
    sql_views: bool


class NewBody(NamedTuple):
    """A checked body, ready to store: the value, its canonical bytes, content hash and counts."""

    message: Message
    data: bytes
    hash: str
    tokens: tuple[int, ...]
    tokenizer: str


class SessionWrite(NamedTuple):
    """Events to append to one session, the version it must be at, and the bodies its appends need.

    `snapshot` is a snapshot of the session's fold (JSON) as of the write's last event — or, with no
    events, as of the version it must be at — stored in the same transaction, with a `SnapshotRecorded`
    event the log appends after the write's events (so the version moves one more): the chained record
    of its digest, without which no open takes it."""

    session_id: str
    expected_version: int
    events: Sequence[Event]
    bodies: Mapping[str, NewBody]
    # Each event's time as an exact copy of a log keeps it (the mutator's copies only); by default
    # every event of a commit gets the time it commits.
    recorded_at: Sequence[str] = ()
    snapshot: bytes | None = None


class Snapshot(NamedTuple):
    """A stored snapshot of a session's fold that matches its chain: the version and event hash it
    folds to, and its payload."""

    version: int
    hash: str
    payload: bytes


class Committed(NamedTuple):
    """What one session's write became: its events got versions `expected + 1` to `version`.

    `reused` holds the stored counts of appended bodies the store already had (a fork, a re-import),
    which the caller folds instead of its own. `token` is the store's change token as of this
    commit: a reader that folded this write itself has seen everything up to it.
    """

    version: int
    reused: Mapping[str, tuple[int, ...]]
    token: Hashable
    # The events as committed: each append at the seq the log gave it (empty from an older store).
    events: tuple[Event, ...] = ()


class Written(NamedTuple):
    """A committed write as data, for its writer to fold without reading back: the events (the first
    got `first_version`, the next one more, and so on), the bodies their appends hold (with the
    stored counts), and the store's change token as of the commit (see `Committed`)."""

    session_id: str
    first_version: int
    events: tuple[Event, ...]
    bodies: Mapping[str, StoredBody]
    token: Hashable
    # The messages (count, tokens) the write was committed after: they came while it was planned.
    shifted: tuple[int, int] = (0, 0)

    @classmethod
    def of(cls, write: SessionWrite, done: Committed) -> Written:
        """What `write` became once committed as `done`."""
        stored = {
            message_id: StoredBody(body.message, done.reused.get(message_id, body.tokens))
            for message_id, body in write.bodies.items()
        }
        events = done.events or tuple(write.events)
        return cls(write.session_id, write.expected_version + 1, events, stored, done.token)

    @property
    def version(self) -> int:
        """The session's version after this write."""
        return self.first_version + len(self.events) - 1

    def versioned(self) -> Iterator[tuple[int, Event]]:
        """Each event with its version."""
        return enumerate(self.events, start=self.first_version)


class StoredBody(msgspec.Struct, frozen=True, gc=False):
    """A body as read back: the message and the per-part counts stored with it.

    Not tracked by the garbage collector (`gc=False`; it holds a message and a tuple of ints, so it
    can be part of no reference cycle). A store holds one per message of every open session, and a
    tuple subclass (what this was) is never untracked: each full collection walked them all, the
    longest stall an event loop saw next to an `AsyncTranscript` over a 10k-message session.
    """

    message: Message
    tokens: tuple[int, ...]


class UnreadableEvent(NamedTuple):
    """A stored mark event that cannot be read (damaged bytes): what the fold gets in its place.

    A session with one keeps opening; its view says so (`MARK_UNREADABLE`) and is rebuilt from what
    can be read. Any other stored data that cannot be read raises `StoreCorrupted`.
    """

    kind: str
    reason: str


class LogRecord(NamedTuple):
    """One event of a session's log as stored: its version, when it was recorded, what it says, and
    its chained hash."""

    version: int
    recorded_at: str
    event: Event
    hash: str = ""


class LoadedSession(NamedTuple):
    """A whole session read in one snapshot: its version, history bodies in order, other events; and
    the appends whose body is not stored (`(version, seq, message_id)`), each standing in `bodies` as
    a `missing_body` placeholder (only when the read asked for placeholders)."""

    version: int
    bodies: list[StoredBody]
    events: list[tuple[int, Event | UnreadableEvent]]
    missing: tuple[tuple[int, int, str], ...] = ()


def missing_body(message_id: str) -> StoredBody:
    """What stands for an appended message whose body is not stored (a storage fault): an empty user
    message of its id, no tokens. A fold lets it stand only where the view never shows it (the
    excluded history behind a summary); anywhere else the damage is `StoreCorrupted`."""
    return StoredBody(Message(id=message_id, role="user", parts=(), created_at=_EPOCH), ())


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class Purged(NamedTuple):
    """Whether the bytes of what a redaction or erasure removed are gone from the backend's storage
    (a file, its WAL, its free pages), and if not, why and what would finish it."""

    gone: bool
    detail: str


class Redaction(msgspec.Struct, frozen=True, kw_only=True):
    """What a redaction did: the sessions that got its event (and their versions), the bodies and the
    event payloads it rewrote, the salt of its `removed` digest (16 random bytes, written as a UUID;
    kept by no one but the caller), and
    whether the removed bytes are gone from the storage (`purged`: if not, why)."""

    message_id: str
    sessions: tuple[str, ...]
    versions: dict[str, int]
    bodies: tuple[str, ...]
    events: int
    salt: str
    purged: Purged
    token: Hashable = None

    @property
    def bytes_gone(self) -> bool:
        """Whether the removed content is gone from the file, its WAL and its free pages."""
        return self.purged.gone


class Erasure(msgspec.Struct, frozen=True, kw_only=True):
    """What an erasure did: how many events of the session it replaced, how many bodies it deleted,
    and whether their bytes are gone from the storage."""

    session_id: str
    events: int
    bodies: int
    purged: Purged
    token: Hashable = None

    @property
    def bytes_gone(self) -> bool:
        """Whether the erased content is gone from the file, its WAL and its free pages."""
        return self.purged.gone


# What `EventStore.scan_log` calls: with each event, then with each body and its tokenizer.
OnEvent = Callable[[LogRecord], None]
OnBody = Callable[[StoredBody, str], None]


class EventStore(Protocol):
    """What a store offers: one write (`commit`), and the reads a session and its tools need."""

    @property
    def path(self) -> str:
        """Where the store lives."""
        ...

    @property
    def readonly(self) -> bool:
        """Whether it was opened read-only."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the backend offers beyond the protocol (search, SQL views, guards in the database)."""
        ...

    def commit(
        self, writes: Sequence[SessionWrite], *, writer: object = None, expect_new: bool = False
    ) -> list[Committed]:
        """Append each write's events in one transaction: all of them are stored, or none
        (`expect_new`, for writes that carry every body they append: `BodyTaken`, and nothing
        written, when one of those bodies is already stored, with the same record or another)."""
        ...

    def head(self, session_id: str) -> tuple[int, str]:
        """The session's latest version and event hash (0 and the genesis hash when empty)."""
        ...

    def sessions(self) -> list[SessionInfo]:
        """Every session in the store, by id."""
        ...

    def backup(self, target: str) -> None:
        """A consistent copy of the whole store in a new file at `target`, taken while others write."""
        ...

    def load(self, session_id: str, *, placeholders: bool = False) -> LoadedSession:
        """The whole session, read in one consistent snapshot. An append whose body is not stored is
        `StoreCorrupted` naming it; with `placeholders`, it stands as `missing_body` and is listed in
        `missing` (the fold decides whether it may stand)."""
        ...

    def read_since(
        self, session_id: str, version: int
    ) -> tuple[list[tuple[int, Event | UnreadableEvent]], dict[str, StoredBody]]:
        """Events after `version` (a damaged mark as an `UnreadableEvent`), and the bodies their
        appends refer to."""
        ...

    def read_log(
        self, session_id: str, until: int | None = None
    ) -> tuple[list[LogRecord], dict[str, StoredBody]]:
        """The session's log up to version `until` (all of it by default), with the bodies it appends."""
        ...

    def scan_log(self, session_id: str, on_event: OnEvent, on_body: OnBody) -> None:
        """`read_log` a piece at a time, for a document too big to hold: each event in order, then
        each body the log appends (with its tokenizer) in the order it first appends them, read a
        few at a time, all in one read of the store."""
        ...

    def snapshot(self, session_id: str) -> Snapshot | None:
        """The session's newest snapshot the chain proves: its digest holds, its event hash is the
        chain's at its version, and the next event is its chained `SnapshotRecorded` record (None when
        there is none: fold from the start)."""
        ...

    def bodies(self, message_ids: Sequence[str]) -> dict[str, StoredBody]:
        """The stored bodies (and counts) with these ids, those that are stored."""
        ...

    def tokenizers(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which tokenizer counted each of these bodies."""
        ...

    def records(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored record (canonical JSON bytes) of each of these bodies that is stored."""
        ...

    def search(self, phrase: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages whose text holds `phrase`, best matches first (the index is built on first use)."""
        ...

    def change_token(self) -> Hashable:
        """A value that changes whenever anything may have been committed since it was last read."""
        ...

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's lease for a block; `SessionLeased` at once while another worker does."""
        ...

    def redact(
        self, message_id: str, *, reason: str, parts: Sequence[int] | None = None, by: str | None = None
    ) -> Redaction:
        """Replace a stored body (or some parts) by the tombstone everywhere it is held, with every
        copy quoting it, in one transaction recorded in each holding session; then purge its bytes."""
        ...

    def erase(self, session_id: str, *, reason: str, by: str | None = None) -> Erasure:
        """Replace a session's log by one audited erasure event, with the bodies only it held."""
        ...

    def purge(self) -> Purged:
        """Make removed bytes unreadable in the storage (again, after a reader let go)."""
        ...

    def close(self) -> None:
        """Release the backend's resources; committed work is already durable."""
        ...


# Events only the mutator writes (besides summary appends).
_MUTATOR_EVENTS: tuple[type, ...] = (
    MessageMarked,
    MessagesExcluded,
    CompactionRecorded,
    ImportRecorded,
    RetractionRecorded,
    RoundClaimed,
)


def is_mutator_event(event: Event, bodies: Mapping[str, NewBody]) -> bool:
    """Whether only the mutator may write this event: a mark, a compaction, import or retraction record,
    a summary append.

    An append whose body is not given counts as one too: without the body nobody can tell it is not a
    summary (only the mutator's copies of a log append bodies the store already holds).
    """
    if isinstance(event, _MUTATOR_EVENTS):
        return True
    if isinstance(event, MessageAppended):
        body = bodies.get(event.message_id)
        return body is None or body.message.kind == "summary"
    return False


def refuse_mutator_events(writes: Sequence[SessionWrite]) -> None:
    """Raise `WriteRefused` when a write without the writer capability holds a mutator event."""
    for write in writes:
        for event in write.events:
            if is_mutator_event(event, write.bodies):
                raise WriteRefused(
                    f"session {write.session_id!r}: a {event.kind} event is written only through the "
                    "mutator's writer capability (transcript.store.writer, which mutate alone holds); "
                    "nothing was written"
                )
