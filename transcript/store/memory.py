"""The in-process recorder: the recorder protocol over Python dicts, for tests and throwaway stores.

`memory://NAME` opens it: stores of one name share their rows within the process (a reopen sees what
was committed), and nothing outlives the process. Append-only is enforced here in code, as SQLite's
guard triggers enforce it in the database: rows are only ever added, an insert naming a stored key is
refused, and a head moves only forward from the one a write names. It has no full-text search and no
SQL views (`capabilities` says so).
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Final

import msgspec

from transcript.model.codec import MESSAGE_DECODER
from transcript.model.errors import ConflictError, StoreCorrupted, StoreReadOnly, StoreUnavailable
from transcript.model.events import EVENT_DECODER, MessageRedacted, SessionStarted, TitleSet
from transcript.model.message import Message, opening_title
from transcript.store import lease
from transcript.store.port import SearchHit
from transcript.store.recorder import (
    BodyRow,
    BodyTaken,
    Capabilities,
    ContentRow,
    EventRow,
    HistoryRow,
    Kinds,
    PayloadRewrite,
    Purged,
    RecorderWrite,
    SessionRow,
    SnapshotRow,
    StorageCheck,
    next_seq_of,
)

_APPENDED: Final = "message_appended"


def utc_text(when: datetime | str) -> str:
    """A time as the `sessions` view writes it: UTC, ISO 8601, milliseconds, `Z`."""
    moment = datetime.fromisoformat(when) if isinstance(when, str) else when
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class _Rows:
    """One named store's rows, guarded by one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.bodies: dict[str, BodyRow] = {}
        self.events: dict[str, list[EventRow]] = {}
        self.heads: dict[str, tuple[int, str]] = {}
        self.snapshots: dict[str, list[SnapshotRow]] = {}
        self.commits = 0


_STORES: Final[dict[str, _Rows]] = {}
_STORES_LOCK: Final = threading.Lock()


class MemoryRecorder:
    """A recorder over one named store's rows in this process (see the module docstring)."""

    capabilities: Final = Capabilities(
        enforced_append_only=False, durable=False, search=False, sql_views=False
    )

    # Its logs were written by this release: every append carries its record digest.
    attestation_due: Final = False

    def __init__(self, rows: _Rows, location: str, *, readonly: bool) -> None:
        self._rows = rows
        self.location = location
        self.readonly = readonly

    @classmethod
    def open(cls, location: str, *, readonly: bool = False) -> MemoryRecorder:
        """The store named by `location` (`memory://NAME`), created unless read-only."""
        with _STORES_LOCK:
            rows = _STORES.get(location)
            if rows is None:
                if readonly:
                    raise StoreUnavailable(
                        f"opening {location}: no such store (a read-only open never creates one)"
                    )
                rows = _STORES[location] = _Rows()
        return cls(rows, location, readonly=readonly)

    @staticmethod
    def discard(location: str) -> None:
        """Forget a named store's rows (tests start afresh with it)."""
        with _STORES_LOCK:
            _STORES.pop(location, None)

    def lease(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Held among this process's threads (the only ones that share its rows)."""
        return lease.in_process(self.location, session_id)

    def close(self) -> None:
        """Nothing to release: the rows stay for the next open of this name."""

    def __repr__(self) -> str:
        return f"<MemoryRecorder {self.location!r} {'read-only' if self.readonly else 'read-write'}>"

    # Reads.

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Holds the store's lock: no commit can come between the reads inside."""
        with self._rows.lock:
            yield

    def head(self, session_id: str) -> tuple[int, str] | None:
        return self._rows.heads.get(session_id)

    def next_seq(self, session_id: str) -> int:
        with self._rows.lock:
            log = self._rows.events.get(session_id, [])
            last = next((row for row in reversed(log) if row.kind == _APPENDED), None)
        return next_seq_of(session_id, [] if last is None else [(last.seq, last.payload)])

    def heads(self) -> dict[str, tuple[object, object]]:
        with self._rows.lock:
            return dict(self._rows.heads)

    def events(
        self, session_id: str, *, after: int = 0, until: int | None = None, kinds: Kinds = "all"
    ) -> Iterator[EventRow]:
        with self._rows.lock:
            log = self._rows.events.get(session_id, [])
            start = bisect.bisect_right(log, after, key=lambda row: row.version)
            stop = len(log) if until is None else bisect.bisect_right(log, until, key=lambda row: row.version)
            rows = log[start:stop]
        if kinds == "appends":
            rows = [row for row in rows if row.kind == _APPENDED]
        elif kinds == "others":
            rows = [row for row in rows if row.kind != _APPENDED]
        return iter(rows)

    def events_page(self, session_id: str, after: int, count: int) -> list[EventRow]:
        with self._rows.lock:
            log = self._rows.events.get(session_id, [])
            start = bisect.bisect_right(log, after, key=lambda row: row.version)
            return log[start : start + count]

    def history(self, session_id: str) -> Iterator[HistoryRow]:
        with self._rows.lock:
            log = [row for row in self._rows.events.get(session_id, []) if row.kind == _APPENDED]
            bodies = [self._rows.bodies.get(row.message_id or "") for row in log]
        return (
            HistoryRow(
                row.version, row.seq, row.message_id, *((body.body, body.tokens) if body else (None, None))
            )
            for row, body in zip(log, bodies, strict=True)
        )

    def bodies(self, message_ids: Sequence[str]) -> Iterator[BodyRow]:
        return iter(self._found(message_ids))

    def contents(self, message_ids: Sequence[str]) -> Iterator[ContentRow]:
        return iter([(row.message_id, row.tokens, row.body) for row in self._found(message_ids)])

    def _found(self, message_ids: Sequence[str]) -> list[BodyRow]:
        stored = self._rows.bodies
        with self._rows.lock:
            return [stored[message_id] for message_id in dict.fromkeys(message_ids) if message_id in stored]

    def sessions(self) -> list[SessionRow]:
        with self._rows.lock:
            heads = sorted(self._rows.heads.items())
            logs = {session_id: list(self._rows.events.get(session_id, [])) for session_id, _ in heads}
        return [
            self._session(session_id, version, head, logs[session_id])
            for session_id, (version, head) in heads
        ]

    def _session(self, session_id: str, version: int, head: str, log: list[EventRow]) -> SessionRow:
        """A session as the `sessions` view lists it (`schema.SESSIONS_SELECT`), computed in code."""
        started = next((row for row in log if row.kind == "session_started"), None)
        source = EVENT_DECODER.decode(started.payload).source if started is not None else None  # type: ignore[union-attr]
        parent: str | None = None
        for row in log:
            if row.kind in ("session_started", "forked_from"):
                parent = EVENT_DECODER.decode(row.payload).parent_session_id  # type: ignore[union-attr]
                break
        appended = [row for row in log if row.kind == _APPENDED]
        bodies = [self._rows.bodies.get(row.message_id or "") for row in appended]
        messages = [MESSAGE_DECODER.decode(body.body) for body in bodies if body is not None]
        times = [utc_text(m.created_at) for m in messages] or [utc_text(row.recorded_at) for row in log]
        tokens = sum(sum(msgspec.json.decode(body.tokens)) for body in bodies if body is not None)
        return SessionRow(
            session_id,
            len(appended),
            version,
            head,
            self._title(log, messages),
            source,
            parent,
            min(times, default=None),
            max(times, default=None),
            tokens,
        )

    def _title(self, log: list[EventRow], messages: list[Message]) -> str:
        """The title last given (at its start or by `title_set`), else its first user message's opening."""
        for row in reversed(log):
            if row.kind in ("session_started", "title_set"):
                event = EVENT_DECODER.decode(row.payload)
                if isinstance(event, (SessionStarted, TitleSet)) and event.title is not None:
                    return event.title
        return opening_title(messages)

    def backup(self, target: str) -> None:
        raise StoreUnavailable(f"{self.location}: the in-process recorder has no file to copy")

    def snapshots(self, session_id: str) -> Iterator[SnapshotRow]:
        with self._rows.lock:
            kept = list(self._rows.snapshots.get(session_id, []))
        return reversed(kept)

    def scan_snapshots(self) -> Iterator[tuple[object, ...]]:
        with self._rows.lock:
            rows = [(sid, *row) for sid, kept in sorted(self._rows.snapshots.items()) for row in kept]
        return iter(rows)

    def scan_bodies(self) -> Iterator[tuple[object, ...]]:
        with self._rows.lock:
            rows = list(self._rows.bodies.values())
        return iter(rows)

    def scan_events(self) -> Iterator[tuple[object, ...]]:
        with self._rows.lock:
            logs = sorted((session_id, list(log)) for session_id, log in self._rows.events.items())
        return ((session_id, *row) for session_id, log in logs for row in log)

    def storage_check(self) -> StorageCheck:
        """Nothing of its own to check: the rows are the log's."""
        return StorageCheck((), [], [], [])

    def search(self, phrase: str, *, session_id: str | None, limit: int) -> list[SearchHit]:
        raise StoreUnavailable(f"{self.location}: the in-process recorder keeps no full-text index")

    def change_token(self) -> int:
        return self._rows.commits

    # The one write.

    def insert(self, writes: Sequence[RecorderWrite]) -> int:
        """Store every write, or nothing: all checks run before the first row is added."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was written")
        rows = self._rows
        with rows.lock:
            adding: set[str] = set()
            for write in writes:
                if not write.events and write.snapshot is None:
                    continue
                head = rows.heads.get(write.session_id, (0, ""))
                if head[0] != write.expected[0] or (head[0] and head[1] != write.expected[1]):
                    raise ConflictError(
                        f"session {write.session_id!r} is at version {head[0]}, this write expected "
                        f"{write.expected[0]}; nothing was written (catch up and retry)"
                    )
                self._check_append_only(write, adding)
            for write in writes:
                if write.snapshot is not None:
                    new = write.snapshot._replace(payload=_text(write.snapshot.payload))
                    kept = rows.snapshots.setdefault(write.session_id, [])
                    kept[:] = [*[r for r in kept if r.version < new.version][-1:], new]
                if not write.events:
                    continue
                # JSON kept as text, as a SQL backend's text columns keep it.
                rows.bodies.update(
                    (body.message_id, body._replace(tokens=_text(body.tokens), body=_text(body.body)))
                    for body in write.bodies
                )
                rows.events.setdefault(write.session_id, []).extend(
                    event._replace(payload=_text(event.payload)) for event in write.events
                )
                last = write.events[-1]
                rows.heads[write.session_id] = (last.version, last.hash)
            rows.commits += 1
            return rows.commits

    # Redaction and erasure: the rewrites the event log planned, checked here as the guards check them.

    def holders(self, message_ids: Sequence[str]) -> dict[str, set[str]]:
        wanted = set(message_ids)
        found: dict[str, set[str]] = {}
        with self._rows.lock:
            for session_id, log in self._rows.events.items():
                for row in log:
                    if row.kind == _APPENDED and row.message_id in wanted:
                        found.setdefault(row.message_id, set()).add(session_id)
        return found

    def redact(
        self, writes: Sequence[RecorderWrite], bodies: Sequence[BodyRow], payloads: Sequence[PayloadRewrite]
    ) -> int:
        """Insert the redaction events and apply the rewrites they name, or nothing."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was redacted")
        rows = self._rows
        with rows.lock:
            named_bodies = {
                (entry.message_id, entry.hash, entry.record)
                for write in writes
                for event in write.events
                for entry in _redaction(event).bodies
            }
            named_events = {
                (write.session_id, version)
                for write in writes
                for event in write.events
                for version, _ in _redaction(event).events
            }
            for body in bodies:
                if (
                    body.message_id not in rows.bodies
                    or (body.message_id, body.hash, body.digest) not in named_bodies
                ):
                    raise StoreCorrupted(f"bodies: a rewrite of {body.message_id!r} no redaction event names")
            for rewrite in payloads:
                if (rewrite.session_id, rewrite.version) not in named_events:
                    raise StoreCorrupted(
                        f"events: a rewrite of session {rewrite.session_id!r} no redaction names"
                    )
            token = self.insert(writes)
            for body in bodies:
                rows.bodies[body.message_id] = body._replace(tokens=_text(body.tokens), body=_text(body.body))
            for write in writes:
                rows.snapshots.pop(write.session_id, None)  # folds of what was rewritten: derived
            for rewrite in payloads:
                log = rows.events[rewrite.session_id]
                index = bisect.bisect_left(log, rewrite.version, key=lambda row: row.version)
                log[index] = log[index]._replace(payload=_text(rewrite.payload))
            return token

    def erase(self, write: RecorderWrite, bodies: Sequence[str]) -> int:
        """Insert the erasure event, drop the session's earlier events and the bodies no one holds."""
        if self.readonly:
            raise StoreReadOnly(f"{self.location} is open read-only; nothing was erased")
        rows = self._rows
        with rows.lock:
            token = self.insert([write])
            rows.events[write.session_id] = rows.events[write.session_id][-1:]
            rows.snapshots.pop(write.session_id, None)
            held = self.holders(bodies)
            for message_id in bodies:
                if message_id in held:
                    raise StoreCorrupted(f"bodies: {message_id!r} is still held; nothing is erased past it")
                rows.bodies.pop(message_id, None)
            return token

    def purge(self) -> Purged:
        return Purged(True, "the in-process recorder keeps nothing on disk")

    def _check_append_only(self, write: RecorderWrite, adding: set[str]) -> None:
        """Refuse any row that names a stored key: a stored row is never replaced."""
        for body in write.bodies:
            if body.message_id in self._rows.bodies or body.message_id in adding:
                raise BodyTaken(f"session {write.session_id!r}: body {body.message_id!r} is already stored")
            adding.add(body.message_id)
        log = self._rows.events.get(write.session_id, [])
        expected = (log[-1].version if log else 0) + 1
        seq = self.next_seq(write.session_id)
        for event in write.events:
            if event.version != expected:
                raise ConflictError(f"session {write.session_id!r} moved on while this write was made")
            expected += 1
            # As the SQL backends' guard: an append takes the session's next seq, nothing else does.
            if event.seq != (seq if event.kind == _APPENDED else None):
                raise StoreCorrupted(
                    f"session {write.session_id!r}: event {event.version} ({event.kind}) has seq "
                    f"{event.seq!r}, the session's next is {seq}; nothing was written"
                )
            seq += event.kind == _APPENDED


def _redaction(row: EventRow) -> MessageRedacted:
    event = EVENT_DECODER.decode(row.payload)
    return event if isinstance(event, MessageRedacted) else MessageRedacted(message_id="", reason="")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
