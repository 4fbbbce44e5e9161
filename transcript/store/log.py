"""The event log: the store's rules, written once over any recorder.

Everything a stored byte means is decided here, whatever the backend: an event's payload is its
canonical JSON, checked to read back as the very same event; each session's events are hash-chained
(the `recorded_at` text is part of the hash); a body is stored once under its id, with its record
digest, and the same id with another record is `DuplicateMessage` in any session; marks, summaries
and compaction records need the mutator's writer capability, and a mark comes only with the record that
explains it (`transcript.store.explained`); a write names the version it expects
(optimistic concurrency: the loser gets `ConflictError`, nothing of its write stored). Reads decode
tolerantly: a damaged mark is an `UnreadableEvent` the fold can live with, any other damage
`StoreCorrupted` naming its row. The recorder below only stores and returns rows.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Annotated, Concatenate, Final, ParamSpec, TypeVar

import msgspec

from transcript.model.codec import MESSAGE_DECODER
from transcript.model.errors import (
    ConflictError,
    DuplicateMessage,
    InvalidArgument,
    RedactedContent,
    SessionNotFound,
    StoreCorrupted,
    StoreReadOnly,
    TranscriptError,
    WriteRefused,
)
from transcript.model.events import (
    EVENT_DECODER,
    EVENT_ENCODER,
    Event,
    MessageAppended,
    MessageMarked,
    MessageRedacted,
    MessagesExcluded,
    RecordsAttested,
    SessionErased,
    SnapshotRecorded,
)
from transcript.model.hashing import GENESIS, event_hash, record_digest, snapshot_digest
from transcript.store.anchor import HeadAnchor as HeadAnchor, read_anchor as read_anchor
from transcript.store.explained import unexplained_marks, unmatched_records
from transcript.store.port import (
    Committed,
    Erasure,
    LoadedSession,
    LogRecord,
    NewBody,
    OnBody,
    OnEvent,
    Purged,
    Redaction,
    SearchHit,
    SessionInfo,
    SessionWrite,
    Snapshot,
    StoredBody,
    UnreadableEvent,
    missing_body,
    refuse_mutator_events,
)
from transcript.store.recorder import (
    BodyRow,
    BodyTaken,
    Capabilities,
    EventRow,
    HistoryRow,
    Json,
    Recorder,
    RecorderWrite,
    SnapshotRow,
)
from transcript.store.redaction import plan_redaction, who
from transcript.store.writer import is_writer

_TOKENS_ENCODER: Final = msgspec.json.Encoder()
_TOKENS_DECODER: Final = msgspec.json.Decoder(tuple[Annotated[int, msgspec.Meta(ge=0)], ...])
_MARK: Final = "message_marked"
# The kinds of mark events: damaged, each is a diagnostic the fold lives with, never a bricked session.
_MARKS: Final = frozenset((_MARK, "messages_excluded"))
# How often a commit re-checks its bodies when another writer stored one of them meanwhile.
_BODY_ATTEMPTS: Final = 3
# How many bodies `scan_log` reads at once (a few, each of which may be large), and how many
# events.
_SCAN_BODIES: Final = 16
_SCAN_EVENTS: Final = 500


def refuse_unexplained_marks(writes: Sequence[SessionWrite]) -> None:
    """Raise `WriteRefused` when a write holds a mark that no round record or import record of the same
    write explains (`transcript.store.explained`): even the capability writes marks only with one."""
    for write in writes:
        summaries = {key for key, body in write.bodies.items() if body.message.kind == "summary"}
        events = [(position, 0, event) for position, event in enumerate(write.events, start=1)]
        for position, record in unmatched_records(events, summaries):
            raise WriteRefused(
                f"session {write.session_id!r}: event {position} of the write records a round that "
                f"summarized {record.result.delta_count} messages, and the write does not hold the summary "
                "and the exclusions it claims; nothing was written"
            )
        for position, mark in unexplained_marks(events, summaries):
            target = repr(mark.message_id) if isinstance(mark, MessageMarked) else f"seqs {mark.ranges!r:.80}"
            raise WriteRefused(
                f"session {write.session_id!r}: event {position} of the write marks {target}, "
                "and no compaction or import record of the same write explains it; nothing was written"
            )
        _check_exclusions(write)


def _check_exclusions(write: SessionWrite) -> None:
    """`InvalidArgument` when a range exclusion is not ascending disjoint ranges of the history before the
    summary that follows it (whose seq is the history's length then)."""
    for position, event in enumerate(write.events):
        if not isinstance(event, MessagesExcluded):
            continue
        after = next((e for e in write.events[position + 1 :] if isinstance(e, MessageAppended)), None)
        if after is None or not event.well_formed(after.seq):
            raise InvalidArgument(
                f"session {write.session_id!r}: event {position + 1} of the write excludes seqs "
                f"{event.ranges!r:.80}, not ascending disjoint ranges of the history before its summary; "
                "nothing was written"
            )


P = ParamSpec("P")
R = TypeVar("R")


# The most hits one search returns: a database integer holds it (a larger limit would overflow).
SEARCH_LIMIT_MAX: Final = 2**31 - 1


def _serialized(method: Callable[Concatenate[EventLog, P], R]) -> Callable[Concatenate[EventLog, P], R]:
    """Run a method holding the log's lock: one connection, used by one thread at a time."""

    @functools.wraps(method)
    def run(self: EventLog, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class EventLog:
    """The event store over one recorder (`open_backend` picks the recorder for a location).

    It implements `transcript.store.port.EventStore`; `recorder` is the backend underneath, for tools
    that read a backend's own storage (a SQLite file's SQL, say). Any thread may use it: its lock
    serializes the use of the one connection underneath.
    """

    def __init__(self, recorder: Recorder, *, anchor: HeadAnchor | None = None) -> None:
        self.recorder = recorder
        self.anchor = anchor
        self._lock = threading.RLock()
        # The last head this log saw of each session, so a commit need not read it again: a stale one
        # only costs a conflict, because the recorder moves a head only from the one named.
        self._heads: dict[str, tuple[int, str]] = {}
        # The seq the next append of each session takes, as of a version: (version, next seq). It is a
        # function of the log up to that version, so it holds whenever the commit's head check does.
        self._seqs: dict[str, tuple[int, int]] = {}

    @property
    def path(self) -> str:
        """Where the store lives: a file path, `:memory:`, or a backend's location."""
        return self.recorder.location

    @property
    def readonly(self) -> bool:
        """Whether the store was opened read-only."""
        return self.recorder.readonly

    @property
    def capabilities(self) -> Capabilities:
        """What the backend offers beyond the protocol (search, SQL views, guards in the database)."""
        return self.recorder.capabilities

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's lease for a block (`transcript.store.lease`): `SessionLeased` at once
        while another worker holds it. Not under the log's lock: other calls go on meanwhile."""
        return self.recorder.lease(session_id)

    @_serialized
    def close(self) -> None:
        """Release the backend. Committed work is already durable; nothing else is pending."""
        if self.anchor is not None:
            self.anchor.close()
        self.recorder.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<EventLog {self.path!r} {mode}>"

    # Reads.

    @_serialized
    def sessions(self) -> list[SessionInfo]:
        """Every session in the store, by id, with its message count, version, head and title."""
        listed = []
        for row in self.recorder.sessions():
            if not (
                isinstance(row.session_id, str)
                and isinstance(row.messages, int)
                and isinstance(row.version, int)
                and isinstance(row.head_hash, str)
                and isinstance(row.title, (str, type(None)))
                and all(isinstance(v, (str, type(None))) for v in (row.source, row.parent_session_id))
                and all(isinstance(v, (str, type(None))) for v in (row.first_at, row.last_at))
                and isinstance(row.stored_tokens, int)
            ):
                raise StoreCorrupted(
                    f"heads row (session {row.session_id!r}): it holds values of the wrong type"
                )
            listed.append(
                SessionInfo(
                    session_id=row.session_id,
                    messages=row.messages,
                    version=row.version,
                    head_hash=row.head_hash,
                    title=row.title or "",
                    source=row.source or "",
                    parent_session_id=row.parent_session_id,
                    first_at=row.first_at or "",
                    last_at=row.last_at or "",
                    stored_tokens=row.stored_tokens,
                )
            )
        return listed

    @_serialized
    def backup(self, target: str) -> None:
        """A consistent copy of the whole store in a new file at `target` (the recorder's own copy: one
        snapshot, taken while others go on writing)."""
        self.recorder.backup(target)

    @_serialized
    def head(self, session_id: str) -> tuple[int, str]:
        """The session's latest version and event hash (0 and the genesis hash when empty)."""
        head = self.recorder.head(session_id) or (0, GENESIS)
        self._heads[session_id] = head
        return head

    @_serialized
    def change_token(self) -> Hashable:
        """Changes whenever anything may have been committed to the store since it was last read."""
        return self.recorder.change_token()

    @_serialized
    def load(self, session_id: str, *, placeholders: bool = False) -> LoadedSession:
        """The whole session, read in one consistent snapshot (`placeholders`: see `EventStore.load`)."""
        recorder = self.recorder
        missing: list[tuple[int, int, str]] | None = [] if placeholders else None
        with recorder.reading():
            version = self.head(session_id)[0]
            bodies = _history_bodies(session_id, recorder.history(session_id), missing)
            if missing:
                _check_missing(session_id, recorder, missing, len(bodies))
            others = _decode_events(session_id, recorder.events(session_id, kinds="others"))
        return LoadedSession(version, bodies, others, tuple(missing or ()))

    @_serialized
    def read_since(
        self, session_id: str, version: int
    ) -> tuple[list[tuple[int, Event | UnreadableEvent]], dict[str, StoredBody]]:
        """Events after `version` (a damaged mark as an `UnreadableEvent`), and the bodies their
        appends refer to."""
        with self.recorder.reading():
            events = _decode_events(session_id, self.recorder.events(session_id, after=version))
            ids = [event.message_id for _, event in events if isinstance(event, MessageAppended)]
            bodies = self._read_bodies(ids)
        return events, bodies

    @_serialized
    def read_log(
        self, session_id: str, until: int | None = None
    ) -> tuple[list[LogRecord], dict[str, StoredBody]]:
        """The session's log up to version `until` (all of it by default), with the bodies it appends."""
        with self.recorder.reading():
            records = [
                LogRecord(row.version, row.recorded_at, _strict(session_id, row), row.hash)
                for row in self.recorder.events(session_id, until=until)
            ]
            ids = [r.event.message_id for r in records if isinstance(r.event, MessageAppended)]
            found = self._read_bodies(ids)
        # In the order the log first appends them, whatever order the backend returned them in.
        return records, {
            message_id: found[message_id] for message_id in dict.fromkeys(ids) if message_id in found
        }

    @_serialized
    def scan_log(self, session_id: str, on_event: OnEvent, on_body: OnBody) -> None:
        """`read_log` a piece at a time (see `EventStore.scan_log`): what is held at once is one
        event, or a few bodies, and the ids of the bodies still to read."""
        with self.recorder.reading():
            ids: dict[str, None] = {}
            # The events a page at a time, each after the last version the one before read.
            after = 0
            while rows := self.recorder.events_page(session_id, after, _SCAN_EVENTS):
                for row in rows:
                    event = _strict(session_id, row)
                    if isinstance(event, MessageAppended):
                        ids[event.message_id] = None
                    on_event(LogRecord(row.version, row.recorded_at, event, row.hash))
                after = rows[-1].version
            order = list(ids)
            del ids
            for start in range(0, len(order), _SCAN_BODIES):
                chunk = order[start : start + _SCAN_BODIES]
                found = {body.message_id: body for body in self.recorder.bodies(chunk)}
                for message_id in chunk:
                    stored = found.pop(message_id, None)
                    if stored is not None:
                        on_body(_body(stored), stored.tokenizer)

    @_serialized
    def snapshot(self, session_id: str) -> Snapshot | None:
        """The session's newest snapshot that the chain proves: its digest holds, its event hash is the
        chain's at its version, and the event after that version is the chained record of it
        (`SnapshotRecorded` naming its version and digest, whose stored hash chains from that event
        hash and on to the next event's, or is the head). One that is not proven (damaged, edited and
        resealed, stored without its record by hand or by an older build, left by a log that was
        rewritten) is passed over: an older one that is proven is taken, else none (a whole fold)."""
        recorder = self.recorder
        with recorder.reading():
            for row in recorder.snapshots(session_id):
                if not (
                    isinstance(row.version, int)
                    and isinstance(row.hash, str)
                    and isinstance(row.digest, str)
                    and row.version > 0
                ):
                    continue
                payload = stored_bytes(row.payload)
                if snapshot_digest(session_id, row.version, row.hash, payload) != row.digest:
                    continue
                # The event the snapshot folds to, its record, and the event after that (if any).
                near = list(recorder.events(session_id, after=row.version - 1, until=row.version + 2))
                if proves(session_id, row, near, recorder.head(session_id) if len(near) == 2 else None):
                    return Snapshot(row.version, row.hash, payload)
        return None

    @_serialized
    def bodies(self, message_ids: Sequence[str]) -> dict[str, StoredBody]:
        """The stored bodies (and counts) with these ids, those that are stored."""
        return self._read_bodies(message_ids)

    @_serialized
    def tokenizers(self, message_ids: Sequence[str]) -> dict[str, str]:
        """Which tokenizer counted each of these bodies."""
        return {row.message_id: row.tokenizer for row in self.recorder.bodies(message_ids)}

    @_serialized
    def records(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored record (canonical JSON bytes) of each of these bodies that is stored."""
        return {row.message_id: stored_bytes(row.body) for row in self.recorder.bodies(message_ids)}

    @_serialized
    def search(self, phrase: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Messages whose text holds `phrase` (words in this order), best matches first.

        Full-text search is opt-in where the backend has it: the first search builds the index and
        from then on every stored body is indexed as it is written.
        """
        if not isinstance(phrase, str) or not phrase.strip():
            raise InvalidArgument(f"search for a non-blank phrase, not {phrase!r}")
        try:
            phrase.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(
                f"the search phrase must be valid Unicode; position {exc.start} holds a lone surrogate"
            ) from None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= SEARCH_LIMIT_MAX:
            raise InvalidArgument(
                f"limit must be a whole number from 1 to {SEARCH_LIMIT_MAX:,}, not {limit!r:.40}"
            )
        if not self.capabilities.search:
            raise InvalidArgument(f"{self.path}: this backend keeps no full-text index (SQLite stores do)")
        return self.recorder.search(phrase, session_id=session_id, limit=limit)

    @_serialized
    def attest(self) -> dict[str, int]:
        """Chain the record digests of bodies appended before appends carried them: one
        `RecordsAttested` event at the head of each session that has such appends (none twice).
        Returns how many records each attested session got; a head kept before stays an ancestor
        that `verify --expect-head` accepts."""
        attested: dict[str, int] = {}
        for info in self.sessions():
            for _ in range(_BODY_ATTEMPTS):
                version = self.head(info.session_id)[0]
                need = self._unattested(info.session_id, version)
                if not need:
                    break
                digests = {row.message_id: row.digest for row in self.recorder.bodies(need)}
                records = tuple(
                    (message_id, digests[message_id]) for message_id in need if message_id in digests
                )
                try:
                    self.commit(
                        [SessionWrite(info.session_id, version, [RecordsAttested(records=records)], {})]
                    )
                except ConflictError:
                    continue
                attested[info.session_id] = len(records)
                break
        return attested

    def _unattested(self, session_id: str, version: int) -> list[str]:
        """Bodies the session appended without a record in the chain, in order."""
        missing: dict[str, None] = {}
        covered: set[str] = set()
        for row in self.recorder.events(session_id, until=version):
            if row.kind not in (MessageAppended.__struct_config__.tag, RecordsAttested.__struct_config__.tag):
                continue
            event = _strict(session_id, row)
            if isinstance(event, MessageAppended) and not event.record:
                missing[event.message_id] = None
            elif isinstance(event, RecordsAttested):
                covered.update(message_id for message_id, _ in event.records)
        return [message_id for message_id in missing if message_id not in covered]

    def _read_bodies(self, message_ids: Sequence[str]) -> dict[str, StoredBody]:
        """The stored bodies with these ids, decoded (`StoreCorrupted` naming a row that cannot be)."""
        return {row[0]: _decoded(*row) for row in self.recorder.contents(message_ids)}

    # The one write.

    @_serialized
    def commit(
        self, writes: Sequence[SessionWrite], *, writer: object = None, expect_new: bool = False
    ) -> list[Committed]:
        """Append each write's events in one transaction: all of them are stored, or none.

        Each `MessageAppended` event (which is the history row: its `seq` and `message_id`) also
        stores its body, from the write's bodies, unless the store already holds it. Raises
        `ConflictError` when a session is not at its expected version, `DuplicateMessage` when an id
        is stored with other content, `WriteRefused` for mutator events without the capability.

        When every appended body is in the write, the first attempt inserts them without looking
        for stored ones first (the usual append: new messages); a body already stored makes the
        database refuse the insert, nothing is written, and the commit looks and tries again.
        `expect_new=True` raises `BodyTaken` there instead (whether the stored record is the same
        or another; it has no effect on a write that appends a body it does not carry): the caller
        has not read everything it would need to tell a re-append from a new message (a lazy
        open), and reads it first.
        """
        if not is_writer(writer):
            refuse_mutator_events(writes)
            _refuse_snapshot_records(writes)
            if any(write.recorded_at for write in writes):
                raise WriteRefused(
                    "events keep the times of another log only in the mutator's copies of it; "
                    "nothing was written"
                )
        else:
            refuse_unexplained_marks(writes)
        for write in writes:
            _check_times(write)
        _refuse_audit_events(writes)
        if self.readonly:
            raise StoreReadOnly(f"{self.path} is open read-only; nothing was written")
        recorded_at = _now()
        # Attempt 0 looks up no stored body when the writes carry every body they append.
        first = 0 if all(_carries_bodies(write) for write in writes) else 1
        for attempt in range(first, _BODY_ATTEMPTS + 1):
            rows: list[RecorderWrite] = []
            reused: list[dict[str, tuple[int, ...]]] = []
            sequenced: list[tuple[Event, ...]] = []
            adding: dict[str, BodyRow] = {}
            for write in writes:
                row, kept, events = self._rows(write, recorded_at, adding, look=attempt > 0)
                rows.append(row)
                reused.append(kept)
                sequenced.append(events)
            try:
                token = self.recorder.insert(rows)
            except BodyTaken:
                if attempt == _BODY_ATTEMPTS or (attempt == 0 and expect_new):
                    raise
                continue
            except ConflictError:
                for write in writes:
                    self._forget(write.session_id)
                raise
            break
        done = []
        for row, kept, events in zip(rows, reused, sequenced, strict=True):
            head = (row.events[-1].version, row.events[-1].hash) if row.events else row.expected
            self._heads[row.session_id] = head
            if row.events:
                appended = [e for e in events if isinstance(e, MessageAppended)]
                if appended:
                    self._seqs[row.session_id] = (head[0], appended[-1].seq + 1)
                elif self._seqs.get(row.session_id, (-1, 0))[0] == row.expected[0]:
                    self._seqs[row.session_id] = (head[0], self._seqs[row.session_id][1])
            done.append(Committed(head[0], kept, token, events))
        if self.anchor is not None:
            self.anchor.record({row.session_id: self._heads[row.session_id] for row in rows if row.events})
        return done

    @_serialized
    def redact(
        self,
        message_id: str,
        *,
        reason: str,
        parts: Sequence[int] | None = None,
        by: str | None = None,
    ) -> Redaction:
        """Replace a stored body's content (or `parts` of it) by the tombstone, in one transaction, in
        every session that holds it, with the copies that quote it (`transcript.store.redaction`); then
        purge the freed bytes. Other writers of those sessions get `ConflictError` and catch up."""
        if self.readonly:
            raise StoreReadOnly(f"{self.path} is open read-only; nothing was redacted")
        author = who(by)
        salt = os.urandom(16)
        for attempt in range(1, _BODY_ATTEMPTS + 1):
            recorded_at = _now()
            with self.recorder.reading():
                plan = plan_redaction(
                    self.recorder, message_id, parts=parts, reason=reason, by=author, salt=salt
                )
                rows = [
                    self._rows(SessionWrite(sid, self.head(sid)[0], [event], {}), recorded_at, {})[0]
                    for sid, event in plan.events.items()
                ]
            try:
                token = self.recorder.redact(rows, plan.bodies, plan.payloads)
            except ConflictError:
                for row in rows:
                    self._forget(row.session_id)
                if attempt == _BODY_ATTEMPTS:
                    raise
                continue
            break
        heads = self._moved(rows)
        purged = self.recorder.purge()
        return Redaction(
            message_id=message_id,
            sessions=tuple(sorted(heads)),
            versions={sid: head[0] for sid, head in heads.items()},
            bodies=tuple(row.message_id for row in plan.bodies),
            events=len(plan.payloads),
            salt=str(uuid.UUID(bytes=salt)),
            purged=purged,
            token=token,
        )

    @_serialized
    def erase(self, session_id: str, *, reason: str, by: str | None = None) -> Erasure:
        """Replace a session's whole log by one `session_erased` event chained from its head, delete the
        bodies no other session holds, in one transaction; then purge the freed bytes."""
        if self.readonly:
            raise StoreReadOnly(f"{self.path} is open read-only; nothing was erased")
        author = who(by)
        recorded_at = _now()
        with self.recorder.reading():
            version, head = self.head(session_id)
            if not version:
                raise SessionNotFound(f"no session {session_id!r} in {self.path}; nothing was erased")
            appended = [row.message_id for row in self.recorder.history(session_id) if row.message_id]
            if not appended and version == 1:
                only = list(self.recorder.events(session_id))
                if only and only[0].kind == "session_erased":
                    raise InvalidArgument(f"session {session_id!r} is already erased; nothing was erased")
            holders = self.recorder.holders(appended)
            alone = sorted(m for m in set(appended) if holders.get(m, set()) <= {session_id})
            event = SessionErased(reason=reason, version=version, head=head, by=author, bodies=len(alone))
            row = self._rows(SessionWrite(session_id, version, [event], {}), recorded_at, {})[0]
        try:
            token = self.recorder.erase(row, alone)
        except ConflictError:
            self._forget(session_id)
            raise
        self._moved([row])
        return Erasure(
            session_id=session_id,
            events=version,
            bodies=len(alone),
            purged=self.recorder.purge(),
            token=token,
        )

    @_serialized
    def purge(self) -> Purged:
        """Try again to make removed bytes unreadable (after a reader that held the WAL let go)."""
        return self.recorder.purge()

    def _moved(self, rows: Sequence[RecorderWrite]) -> dict[str, tuple[int, str]]:
        """Record the heads these committed rows moved to (and in the anchor file)."""
        heads = {row.session_id: (row.events[-1].version, row.events[-1].hash) for row in rows if row.events}
        self._heads.update(heads)
        for session_id in heads:
            self._seqs.pop(session_id, None)
        if self.anchor is not None:
            self.anchor.record(heads)
        return heads

    def _rows(
        self, write: SessionWrite, recorded_at: str, adding: dict[str, BodyRow], *, look: bool = True
    ) -> tuple[RecorderWrite, dict[str, tuple[int, ...]], tuple[Event, ...]]:
        """One session's write as rows, after the checks: its head, its bodies, its events (`look`:
        whether stored bodies are looked up; else each appended body is taken to be new); and the
        events as numbered (each append at the seq the log gave it)."""
        session_id, expected_version, events, bodies, times, snapshot = write
        now = recorded_at
        head = self._heads.get(session_id)
        if head is None or head[0] != expected_version:
            head = self.head(session_id)
        version, prev = head
        if version != expected_version:
            raise _conflict(session_id, version, expected_version)
        # The log, not the caller, numbers the history: each append takes the session's next seq as of
        # the head this write must find (the recorder checks that head in the transaction, and the
        # schema refuses any other seq), so a caller's stale count can never leave a gap.
        events = self._numbered(session_id, version, events)
        appended = [event for event in events if isinstance(event, MessageAppended)]
        try:
            new_bodies, reused, records = (
                self._new_bodies(appended, bodies, adding, look) if appended else ([], {}, {})
            )
        except DuplicateMessage:
            # The head above may be this process's cached one: another writer may have moved the
            # session and stored these very ids (two loops starting one session at once). That is
            # a conflict to catch up on, not a clash of ids.
            moved = self.head(session_id)[0]
            if moved != expected_version:
                raise _conflict(session_id, moved, expected_version) from None
            raise
        rows = []
        for position, event in enumerate(events):
            if isinstance(event, MessageAppended):
                event = _with_record(event, records[event.message_id])
            if times:
                recorded_at = times[position]
            version += 1
            payload = _payload(event)
            prev = event_hash(prev, session_id, version, recorded_at, payload)
            seq, message_id = (
                (event.seq, event.message_id) if isinstance(event, MessageAppended) else (None, None)
            )
            rows.append(EventRow(version, event.kind, seq, message_id, recorded_at, payload, prev))
        kept = None
        if snapshot is not None:
            # The snapshot folds to the write's last event; its record, chained right after it in the
            # same transaction, puts its digest in the chain: what an open checks before taking it.
            digest = snapshot_digest(session_id, version, prev, snapshot)
            kept = SnapshotRow(version, prev, snapshot, digest)
            record = SnapshotRecorded(version=version, digest=digest)
            version += 1
            payload = _payload(record)
            prev = event_hash(prev, session_id, version, now, payload)
            rows.append(EventRow(version, record.kind, None, None, now, payload, prev))
            events = (*events, record)
        return RecorderWrite(session_id, head, new_bodies, rows, kept), reused, events

    def _numbered(self, session_id: str, version: int, events: Sequence[Event]) -> tuple[Event, ...]:
        """The events with each append at the session's next seq as of `version` (the head the write
        must find)."""
        cached = self._seqs.get(session_id)
        if cached is not None and cached[0] == version:
            next_seq = cached[1]
        else:
            with self.recorder.reading():
                now = self.recorder.head(session_id)
                next_seq = self.recorder.next_seq(session_id)
            if (now[0] if now else 0) != version:
                raise _conflict(session_id, now[0] if now else 0, version)
        numbered = []
        for event in events:
            if isinstance(event, MessageAppended):
                if event.seq != next_seq:
                    event = msgspec.structs.replace(event, seq=next_seq)
                next_seq += 1
            numbered.append(event)
        return tuple(numbered)

    def _forget(self, session_id: str) -> None:
        """Drop what this log remembers of a session's head: another writer moved it."""
        self._heads.pop(session_id, None)
        self._seqs.pop(session_id, None)

    def _new_bodies(
        self,
        appended: list[MessageAppended],
        bodies: Mapping[str, NewBody],
        adding: dict[str, BodyRow],
        look: bool = True,
    ) -> tuple[list[BodyRow], dict[str, tuple[int, ...]], dict[str, str]]:
        """The bodies to store; the stored counts of those the store already has; and the record
        digest of every appended body (its append event carries it into the chain).

        A body already stored (a fork, a re-import, a re-append; or added by an earlier write of this
        commit) must be the very same record: the same message, `created_at` and `metadata`
        included. It is never rewritten, and its stored counts are the ones every session uses.
        """
        stored: dict[str, BodyRow] = {}
        wanted = [event.message_id for event in appended if event.message_id not in adding]
        if look and wanted:
            stored.update((row.message_id, row) for row in self.recorder.bodies(wanted))
        stored.update(adding)
        new: list[BodyRow] = []
        reused: dict[str, tuple[int, ...]] = {}
        records: dict[str, str] = {}
        for event in appended:
            body = bodies.get(event.message_id)
            row = stored.get(event.message_id)
            if row is not None:
                same = row.hash == event.body_hash and (body is None or stored_bytes(row.body) == body.data)
                if not same:
                    _check_intact(row)
                    _refuse_redacted(row)
                    raise DuplicateMessage(
                        f"message {event.message_id!r} is already stored with other content, time or "
                        "metadata; message ids are unique in a store (nothing was written)"
                    )
                reused[event.message_id] = _counts(row)
                records[event.message_id] = row.digest
                continue
            if body is None:
                raise StoreCorrupted(
                    f"bodies: message {event.message_id!r} is appended as a stored body, and no body of "
                    "that id is stored (run `transcript verify`); nothing was written"
                )
            if body.hash != event.body_hash:
                raise TranscriptError(f"internal: no matching body for appended message {event.message_id!r}")
            counts = _TOKENS_ENCODER.encode(body.tokens)
            digest = record_digest(body.data, counts, body.tokenizer)
            row = BodyRow(event.message_id, body.hash, body.tokenizer, counts, body.data, digest)
            stored[event.message_id] = adding[event.message_id] = row
            records[event.message_id] = digest
            new.append(row)
        return new, reused, records


def _carries_bodies(write: SessionWrite) -> bool:
    """Whether a write holds the body of every message it appends (a fork's appends name stored ones)."""
    bodies = write.bodies
    return all(event.message_id in bodies for event in write.events if isinstance(event, MessageAppended))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _refuse_audit_events(writes: Sequence[SessionWrite]) -> None:
    """Redaction and erasure events are written only by `redact` and `erase`, with what they rewrite."""
    for write in writes:
        for event in write.events:
            if isinstance(event, (MessageRedacted, SessionErased)):
                raise WriteRefused(
                    f"session {write.session_id!r}: a {event.kind} event is written only by "
                    "Store.redact / Store.erase, in the transaction that rewrites what it names; "
                    "nothing was written"
                )


def _refuse_snapshot_records(writes: Sequence[SessionWrite]) -> None:
    """A snapshot record is written by the log alone, with the snapshot it records (`SessionWrite.snapshot`);
    only the mutator's copies of a log carry one over as it is."""
    for write in writes:
        for event in write.events:
            if isinstance(event, SnapshotRecorded):
                raise WriteRefused(
                    f"session {write.session_id!r}: a {event.kind} event is written only by the event "
                    "log, with the snapshot it records (SessionWrite.snapshot); nothing was written"
                )


def proves(
    session_id: str, snapshot: SnapshotRow, near: Sequence[EventRow], head: tuple[int, str] | None
) -> bool:
    """Whether the chain proves a snapshot row (whose digest holds): `near` holds the session's events
    from the snapshot's version on, up to two more. The first must have the snapshot's event hash; the
    second must be the record of this snapshot (`SnapshotRecorded` naming its version and digest) whose
    stored hash chains from that one; and the third's stored hash must chain from the record's — or,
    when the record is the session's last event, the session's `head` must be the record. A forged
    snapshot is then taken only if the chain's stored hashes were rewritten from its record on."""
    version = snapshot.version
    if len(near) < 2 or near[0].version != version or near[0].hash != snapshot.hash:
        return False
    record = near[1]
    if record.version != version + 1 or record.kind != SnapshotRecorded.__struct_config__.tag:
        return False
    event = _decode_event(record.kind, record.payload)
    if not (
        isinstance(event, SnapshotRecorded) and event.version == version and event.digest == snapshot.digest
    ):
        return False
    if not (isinstance(record.recorded_at, str) and isinstance(record.hash, str)):
        return False
    payload = stored_bytes(record.payload)
    if event_hash(snapshot.hash, session_id, record.version, record.recorded_at, payload) != record.hash:
        return False
    if len(near) < 3:
        return head == (record.version, record.hash)
    after = near[2]
    return (
        after.version == record.version + 1
        and isinstance(after.recorded_at, str)
        and event_hash(record.hash, session_id, after.version, after.recorded_at, stored_bytes(after.payload))
        == after.hash
    )


def _refuse_redacted(row: BodyRow) -> None:
    """`RedactedContent` when the stored body another record would match was redacted: the write
    would bring back what the redaction removed."""
    if b'"redacted":[' not in stored_bytes(row.body):
        return
    raise RedactedContent(
        f"message {row.message_id!r} was redacted in this store; a write that brings back its content "
        "is refused (nothing was written)"
    )


def _check_times(write: SessionWrite) -> None:
    """Times kept from another log: one per event, each as a log writes them (ISO 8601 with an
    offset; not necessarily in order, as the clocks of several writers need not agree); else
    `InvalidArgument` and nothing is written."""
    times = write.recorded_at
    if not times:
        return
    if len(times) != len(write.events):
        raise InvalidArgument(
            f"session {write.session_id!r}: {len(times)} event times for {len(write.events)} events; "
            "nothing was written"
        )
    for at in times:
        try:
            when = datetime.fromisoformat(at) if isinstance(at, str) else None
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InvalidArgument(
                f"session {write.session_id!r}: event time {at!r} is not an ISO time with an offset; "
                "nothing was written"
            )


def _with_record(event: MessageAppended, digest: str) -> MessageAppended:
    """The append with its body's record digest: the chain then covers every byte a view renders or
    counts. An append that names another record (a copied log whose body was edited) is refused."""
    if not event.record:
        return msgspec.structs.replace(event, record=digest)
    if event.record != digest:
        raise InvalidArgument(
            f"the append of message {event.message_id!r} records a digest its stored body does not have "
            "(its time, metadata or counts differ); nothing was written"
        )
    return event


def _check_intact(row: BodyRow) -> None:
    """`StoreCorrupted` when a stored body no longer matches its own digest (damage, not a duplicate)."""
    if record_digest(stored_bytes(row.body), stored_bytes(row.tokens), row.tokenizer) != row.digest:
        raise StoreCorrupted(
            f"bodies row (message {row.message_id!r}): its record does not match its digest "
            "(run `transcript verify`); nothing was written"
        )


def stored_bytes(value: object) -> bytes:
    """A stored value's bytes, whatever its type (JSON text is the UTF-8 the hashes cover)."""
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


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


def _decode_events(session_id: str, rows: Iterable[EventRow]) -> list[tuple[int, Event | UnreadableEvent]]:
    """Events of a session's rows; a damaged mark becomes an `UnreadableEvent`, any other damage
    raises `StoreCorrupted` naming the row."""
    decoded: list[tuple[int, Event | UnreadableEvent]] = []
    for row in rows:
        event = _decode_event(row.kind, row.payload)
        if isinstance(event, UnreadableEvent) and event.kind not in _MARKS:
            raise StoreCorrupted(
                f"events row (session {session_id!r}, version {row.version}): {event.reason}"
            )
        decoded.append((row.version, event))
    return decoded


def _decode_event(kind: object, payload: object) -> Event | UnreadableEvent:
    """The event a row holds, or why it cannot be read (also when its `kind` column disagrees)."""
    try:
        event = EVENT_DECODER.decode(payload)  # type: ignore[arg-type]
    except (msgspec.DecodeError, TypeError) as exc:
        return UnreadableEvent(str(kind), f"its payload cannot be read ({exc})")
    if event.kind != kind:
        unreadable = UnreadableEvent(str(kind), f"its kind column says {kind!r}, its payload {event.kind!r}")
        return unreadable._replace(kind=event.kind) if event.kind in _MARKS else unreadable
    return event


def _strict(session_id: str, row: EventRow) -> Event:
    """An event that must be read whole (an export, a fork, a replay), or `StoreCorrupted`."""
    event = _decode_event(row.kind, row.payload)
    if isinstance(event, UnreadableEvent):
        raise StoreCorrupted(f"events row (session {session_id!r}, version {row.version}): {event.reason}")
    return event


def _body(row: BodyRow) -> StoredBody:
    """One stored body and its counts, or `StoreCorrupted` naming the row."""
    return _decoded(row.message_id, row.tokens, row.body)


def _decoded(message_id: str, tokens: Json, body: Json) -> StoredBody:
    """A stored body and its counts, decoded, or `StoreCorrupted` naming the row."""
    try:
        return StoredBody(MESSAGE_DECODER.decode(body), _TOKENS_DECODER.decode(tokens))
    except (msgspec.DecodeError, TypeError) as exc:
        raise StoreCorrupted(f"bodies row (message {message_id!r}): it cannot be read ({exc})") from exc


def _counts(row: BodyRow) -> tuple[int, ...]:
    try:
        counts: tuple[int, ...] = _TOKENS_DECODER.decode(row.tokens)
    except (msgspec.DecodeError, TypeError) as exc:
        raise StoreCorrupted(
            f"bodies row (message {row.message_id!r}): its token counts cannot be read"
        ) from exc
    return counts


def _conflict(session_id: str, version: int, expected: int) -> ConflictError:
    return ConflictError(
        f"session {session_id!r} is at version {version}, this write expected {expected}; "
        "nothing was written (catch up and retry)"
    )


def _check_missing(
    session_id: str, recorder: Recorder, missing: list[tuple[int, int, str]], history: int
) -> None:
    """A body the history's read did not find must be absent when looked up by its id too, and the
    history must hold as many appends as the log numbers: otherwise the storage itself is damaged (an
    index that disagrees with its table), which no placeholder may paper over — `StoreCorrupted`."""
    found = {row.message_id for row in recorder.bodies([message_id for _, _, message_id in missing])}
    for version, _, message_id in missing:
        if message_id in found:
            raise StoreCorrupted(
                f"events row (session {session_id!r}, version {version}): the history's read finds no "
                f"body of message {message_id!r}, a read by its id does (the storage is damaged)"
            )
    expected = recorder.next_seq(session_id)
    if expected != history:
        raise StoreCorrupted(
            f"events (session {session_id!r}): the history holds {history} appends, its next seq reads "
            f"{expected} (the storage is damaged)"
        )


def _history_bodies(
    session_id: str, rows: Iterable[HistoryRow], missing: list[tuple[int, int, str]] | None = None
) -> list[StoredBody]:
    """A whole history's bodies and counts, in order, decoded as the rows arrive in one tight loop:
    each append must come at the next seq and name a body that is stored and is that message
    (`StoreCorrupted` naming the event or the row otherwise, as the live fold names them). With
    `missing`, an append whose body is not stored gets the `missing_body` placeholder instead, and is
    added to it.

    The collector is left running: what is decoded is untracked (`StoredBody`, messages), so its
    collections walk only the rows of the chunk being read; paused, its first collection afterwards
    walked the whole history at once.
    """
    message, tokens = MESSAGE_DECODER.decode, _TOKENS_DECODER.decode
    bodies: list[StoredBody] = []
    for seq, (version, stored_seq, message_id, body, counts) in enumerate(rows):
        where = f"events row (session {session_id!r}, version {version})"
        if stored_seq != seq:
            raise StoreCorrupted(f"{where}: it appends seq {stored_seq!r}, the history's next is {seq}")
        if (body is None or counts is None) and missing is not None and isinstance(message_id, str):
            missing.append((version, seq, message_id))
            bodies.append(missing_body(message_id))
            continue
        if body is None or counts is None:
            raise StoreCorrupted(
                f"{where}: it appends message {message_id!r}, and no body of that id is stored"
            )
        try:
            stored = StoredBody(message(body), tokens(counts))
        except (msgspec.DecodeError, TypeError) as exc:
            raise StoreCorrupted(f"bodies row (message {message_id!r}): it cannot be read ({exc})") from exc
        if stored.message.id != message_id:
            raise StoreCorrupted(
                f"bodies row (message {message_id!r}): it holds message {stored.message.id!r}"
            )
        bodies.append(stored)
    return bodies
