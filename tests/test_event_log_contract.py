"""The event log contract: the store's rules hold the same over every recorder.

Chaining, record digests, the writer capability, the read-back check, de-duplication, optimistic
concurrency, tolerant reads and the neutral `verify` are written once, in `transcript.store.log`;
this class of tests is subclassed once per backend to show that they hold on each.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import msgspec
import pytest

from tests.backends import (
    MEMORY,
    POSTGRES,
    SQLITE_FILE,
    SQLITE_MEMORY,
    OnBackend,
    stored_event,
    tamper_body,
    tamper_event,
)
from tests.helpers import mutator_write, planted
from transcript import ConflictError, DuplicateMessage, Message, StoreCorrupted, WriteRefused
from transcript.model.errors import InvalidArgument
from transcript.model.events import (
    EVENT_ENCODER,
    Event,
    MessageAppended,
    MessageMarked,
    SnapshotRecorded,
    TitleSet,
)
from transcript.model.hashing import GENESIS, event_hash, record_digest, snapshot_digest
from transcript.store.backends import open_backend
from transcript.store.bodies import prepare
from transcript.store.log import EventLog
from transcript.store.port import NewBody, SessionWrite, UnreadableEvent
from transcript.store.recorder import RecorderWrite, SnapshotRow
from transcript.store.verify import check
from transcript.store.writer import FlagWriter, writer_for
from transcript.tokens import get_counter

COUNTER = get_counter("chars/4")


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def appended(messages: Sequence[Message], start: int = 0) -> tuple[list[Event], dict[str, NewBody]]:
    """Append events for `messages` from seq `start` on, and their prepared bodies."""
    bodies = {m.id: prepare(m, COUNTER) for m in messages}
    events: list[Event] = [
        MessageAppended(seq=start + i, message_id=m.id, body_hash=bodies[m.id].hash)
        for i, m in enumerate(messages)
    ]
    return events, bodies


def append(log: EventLog, session_id: str, *messages: Message) -> int:
    """Append messages at the session's head; returns the new version."""
    version = log.head(session_id)[0]
    start = sum(1 for row in log.recorder.events(session_id, kinds="appends"))
    events, bodies = appended(messages, start)
    (done,) = log.commit([SessionWrite(session_id, version, events, bodies)])
    return done.version


class EventLogContract(OnBackend):
    @pytest.fixture
    def log(self, location: str) -> Iterator[EventLog]:
        log = open_backend(location)
        yield log
        log.close()

    def _second(self, location: str) -> EventLog:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a second open is another store")
        return open_backend(location)

    def test_each_event_is_chained_to_the_one_before(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"), Message.assistant("two", id="a1"))
        log.commit([SessionWrite("s", 2, [TitleSet(title="named")], {})])
        prev = GENESIS
        for row in log.recorder.events("s"):
            assert row.hash == event_hash(prev, "s", row.version, row.recorded_at, _bytes(row.payload))
            prev = row.hash
        assert log.head("s") == (3, prev)

    def test_a_body_is_stored_with_its_record_digest(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1", metadata={"source": "test"}))
        (row,) = log.recorder.bodies(["u1"])
        assert row.digest == record_digest(_bytes(row.body), _bytes(row.tokens), row.tokenizer)
        assert row.tokenizer == "chars/4"

    def test_marks_need_the_writer_capability(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        mark = MessageMarked(message_id="u1", excluded=True)
        for writer in (None, object()):  # none, or a look-alike
            with pytest.raises(WriteRefused):
                log.commit([SessionWrite("s", 1, [mark], {})], writer=writer)
        assert log.head("s")[0] == 1
        with pytest.raises(WriteRefused, match="mutator"):
            FlagWriter(log)  # user code cannot make the capability
        with pytest.raises(WriteRefused, match="mutator"):
            writer_for(log)  # nor ask for it
        with pytest.raises(WriteRefused, match="no compaction or import record"):
            mutator_write(log, "s", 1, [mark])  # the mutator writes a mark only with its record
        mutator_write(log, "s", 1, planted([mark]))
        assert log.head("s")[0] == 3

    def test_a_summary_append_needs_the_writer_capability(self, log: EventLog) -> None:
        summary = msgspec.structs.replace(
            Message.user("the story so far", id="sum"), kind="summary", anchor="x"
        )
        events, bodies = appended([summary])
        with pytest.raises(WriteRefused):
            log.commit([SessionWrite("s", 0, events, bodies)])
        assert log.head("s") == (0, GENESIS) and list(log.recorder.bodies(["sum"])) == []

    def test_an_event_that_would_not_read_back_is_refused(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        with pytest.raises(InvalidArgument, match="cannot be stored"):
            log.commit([SessionWrite("s", 1, [TitleSet(title="bad \ud800 surrogate")], {})])
        assert log.head("s")[0] == 1

    def test_an_id_stored_with_another_record_is_a_duplicate_in_any_session(self, log: EventLog) -> None:
        append(log, "a", Message.user("one", id="u1"))
        for session in ("a", "b"):
            with pytest.raises(DuplicateMessage, match="u1"):
                append(log, session, Message.user("other words", id="u1"))
        assert log.head("b") == (0, GENESIS)

    def test_a_stored_body_appended_again_keeps_its_stored_counts(self, log: EventLog) -> None:
        message = Message.user("shared words", id="u1")
        append(log, "a", message)
        events, bodies = appended([message])
        recounted = {"u1": bodies["u1"]._replace(tokens=(999,))}  # counts are not part of the content hash
        (done,) = log.commit([SessionWrite("b", 0, events, recounted)])
        assert done.reused == {"u1": prepare(message, COUNTER).tokens}
        assert len(list(log.recorder.scan_bodies())) == 1

    def test_a_write_at_a_stale_version_is_a_conflict(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        events, bodies = appended([Message.user("two", id="u2")], start=1)
        with pytest.raises(ConflictError, match="expected 0"):
            log.commit([SessionWrite("s", 0, events, bodies)])
        assert log.head("s")[0] == 1 and list(log.recorder.bodies(["u2"])) == []

    def test_several_sessions_are_written_in_one_transaction_or_not_at_all(self, log: EventLog) -> None:
        append(log, "taken", Message.user("one", id="u1"))
        fresh, fresh_bodies = appended([Message.user("fresh", id="f1")])
        stale, stale_bodies = appended([Message.user("stale", id="x1")])
        with pytest.raises(ConflictError):
            log.commit(
                [SessionWrite("new", 0, fresh, fresh_bodies), SessionWrite("taken", 0, stale, stale_bodies)]
            )
        assert log.head("new") == (0, GENESIS) and list(log.recorder.bodies(["f1", "x1"])) == []

    def test_one_body_added_by_two_sessions_of_one_commit_is_stored_once(self, log: EventLog) -> None:
        events, bodies = appended([Message.user("shared", id="u1")])
        log.commit([SessionWrite("a", 0, events, bodies), SessionWrite("b", 0, events, bodies)])
        assert [s.session_id for s in log.sessions()] == ["a", "b"]
        assert len(list(log.recorder.scan_bodies())) == 1

    def test_a_second_log_that_is_behind_gets_a_conflict_then_catches_up(
        self, log: EventLog, location: str
    ) -> None:
        other = self._second(location)
        append(log, "s", Message.user("one", id="u1"))
        append(other, "s", Message.user("two", id="u2"))  # reads the head: it is not behind yet
        with pytest.raises(ConflictError):  # this log's last head is stale now
            log.commit([SessionWrite("s", 1, [TitleSet(title="late")], {})])
        assert log.head("s")[0] == 2
        log.commit([SessionWrite("s", 2, [TitleSet(title="on time")], {})])
        assert other.head("s")[0] == 3
        other.close()

    def test_a_body_another_writer_stored_meanwhile_is_taken_as_stored(
        self, log: EventLog, location: str
    ) -> None:
        other = self._second(location)
        message = Message.user("raced", id="r1")
        racing = _RaceOnFirstInsert(log, lambda: append(other, "elsewhere", message))
        events, bodies = appended([message])
        (done,) = EventLog(racing).commit([SessionWrite("s", 0, events, bodies)])
        assert done.version == 1 and done.reused == {"r1": bodies["r1"].tokens}
        assert len(list(log.recorder.scan_bodies())) == 1
        other.close()

    def test_a_body_stored_meanwhile_after_the_look_up_is_looked_up_again(
        self, log: EventLog, location: str
    ) -> None:
        # The first insert finds "known" taken (stored before), the look-up finds it; before the
        # second insert another writer stores "raced": the third attempt looks again.
        other = self._second(location)
        known, raced = Message.user("stored before", id="k1"), Message.user("raced", id="r1")
        append(log, "before", known)
        racing = _RaceOnFirstInsert(log, lambda: append(other, "elsewhere", raced), at=2)
        events, bodies = appended([known, raced])
        (done,) = EventLog(racing).commit([SessionWrite("s", 0, events, bodies)])
        assert done.reused == {"k1": bodies["k1"].tokens, "r1": bodies["r1"].tokens}
        assert racing.inserts == 3 and len(list(log.recorder.scan_bodies())) == 2
        other.close()

    def test_the_reads_agree(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"), Message.assistant("two", id="a1"))
        mutator_write(log, "s", 2, planted([MessageMarked(message_id="u1", truncated=True)]))
        append(log, "s", Message.user("three", id="u2"))
        loaded = log.load("s")
        records, bodies = log.read_log("s")
        since, since_bodies = log.read_since("s", 0)
        assert loaded.version == 5 == records[-1].version == since[-1][0]
        assert [b.message.id for b in loaded.bodies] == ["u1", "a1", "u2"]
        assert since_bodies == bodies == {b.message.id: b for b in loaded.bodies}
        assert loaded.events[0] == (3, MessageMarked(message_id="u1", truncated=True))
        assert [version for version, _ in loaded.events] == [3, 4]  # the mark, then its round's record
        assert [(r.version, r.event) for r in records] == since
        assert log.read_log("s", until=2)[0] == records[:2]

    def test_a_damaged_mark_is_unreadable_and_other_damage_is_corrupted(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        mutator_write(log, "s", 1, planted([MessageMarked(message_id="u1", truncated=True)]))
        log.commit([SessionWrite("s", 3, [TitleSet(title="named")], {})])
        tamper_event(log, "s", 2, b'{"kind":"message_marked","message_id":')
        (mark,) = [event for _, event in log.load("s").events if isinstance(event, UnreadableEvent)]
        assert mark.kind == "message_marked"
        with pytest.raises(StoreCorrupted, match="version 2"):
            log.read_log("s")  # an export must read every event whole
        tamper_event(log, "s", 3, b"not json")
        with pytest.raises(StoreCorrupted, match=r"events row \(session 's', version 3\)"):
            log.load("s")

    def test_a_missing_body_is_corrupted_naming_its_event(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"), Message.user("two", id="u2"))
        tamper_body(log, "u2", None)
        with pytest.raises(StoreCorrupted, match=r"version 2\).*'u2'"):
            log.load("s")

    def test_a_snapshot_folds_to_its_writes_last_event_and_its_chained_record_follows(
        self, log: EventLog
    ) -> None:
        append(log, "s", Message.user("one", id="u1"))
        (done,) = log.commit([SessionWrite("s", 1, [TitleSet(title="named")], {}, snapshot=b'{"state":1}')])
        at = stored_event(log, "s", 2).hash
        record = SnapshotRecorded(version=2, digest=snapshot_digest("s", 2, at, b'{"state":1}'))
        assert done.version == 3 and done.events == (TitleSet(title="named"), record)
        assert stored_event(log, "s", 3).kind == "snapshot_recorded" and log.head("s")[0] == 3
        assert log.snapshot("s") == (2, at, b'{"state":1}')
        (alone,) = log.commit([SessionWrite("s", 3, [], {}, snapshot=b'{"state":2}')])
        assert alone.version == 4 and log.head("s")[0] == 4 and len(alone.events) == 1
        assert log.snapshot("s") == (3, stored_event(log, "s", 3).hash, b'{"state":2}')

    def test_a_snapshot_at_a_stale_version_is_a_conflict_and_is_not_stored(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        append(log, "s", Message.user("two", id="u2"))
        with pytest.raises(ConflictError):
            log.commit([SessionWrite("s", 1, [], {}, snapshot=b"{}")])
        assert log.snapshot("s") is None

    def test_a_snapshot_that_does_not_match_is_passed_over(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        log.commit([SessionWrite("s", 1, [], {}, snapshot=b'{"good":1}')])  # at 1, its record at 2
        append(log, "s", Message.user("two", id="u2"))
        head = log.head("s")[1]
        damaged = SnapshotRow(3, head, b'{"good":2}', "not its digest")
        log.recorder.insert([RecorderWrite("s", (3, head), [], [], damaged)])
        found = log.snapshot("s")
        assert found is not None and (found.version, found.payload) == (1, b'{"good":1}')
        elsewhere = SnapshotRow(3, "f" * 64, b"{}", snapshot_digest("s", 3, "f" * 64, b"{}"))
        log.recorder.insert([RecorderWrite("s", (3, head), [], [], elsewhere)])
        found = log.snapshot("s")
        assert found is not None and (found.version, found.payload) == (1, b'{"good":1}')
        # Intact and on the chain, but stored without its record (by hand, or an older build): unproven.
        unrecorded = SnapshotRow(3, head, b'{"good":3}', snapshot_digest("s", 3, head, b'{"good":3}'))
        log.recorder.insert([RecorderWrite("s", (3, head), [], [], unrecorded)])
        found = log.snapshot("s")
        assert found is not None and (found.version, found.payload) == (1, b'{"good":1}')

    def test_a_caller_cannot_write_a_snapshot_record(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        with pytest.raises(WriteRefused, match="snapshot_recorded"):
            log.commit([SessionWrite("s", 1, [SnapshotRecorded(version=1, digest="0" * 64)], {})])
        assert log.head("s")[0] == 1

    def test_verify_passes_on_a_healthy_log(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        mutator_write(log, "s", 1, planted([MessageMarked(message_id="u1", truncated=True)]))
        report = check(log.recorder)
        assert report.ok and (report.bodies, report.sessions, report.events) == (1, 1, 3)
        assert report.heads == {"s": log.head("s")[1]}

    def test_verify_names_an_edited_event_and_an_edited_body(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        log.commit([SessionWrite("s", 1, [TitleSet(title="named")], {})])
        tamper_event(log, "s", 2, EVENT_ENCODER.encode(TitleSet(title="renamed")))
        assert [p.code for p in check(log.recorder).problems] == ["event_hash"]
        (row,) = log.recorder.bodies(["u1"])
        tamper_body(log, "u1", _bytes(row.body).replace(b"one", b"eno"))
        assert {p.code for p in check(log.recorder).problems} == {"event_hash", "body_record", "body_hash"}

    def test_verify_compares_heads_with_those_kept_elsewhere(self, log: EventLog) -> None:
        append(log, "s", Message.user("one", id="u1"))
        kept = log.head("s")[1]
        assert check(log.recorder, expect_heads={"s": kept}).ok
        report = check(log.recorder, expect_heads={"s": "0" * 64, "gone": kept})
        assert [(p.code, p.session_id) for p in report.problems] == [
            ("head_unexpected", "gone"),
            ("head_unexpected", "s"),
        ]

    def test_sessions_are_listed_with_their_heads(self, log: EventLog) -> None:
        append(log, "s", Message.user("fix it", id="u1"))
        (info,) = log.sessions()
        assert (info.session_id, info.messages, info.version, info.title) == ("s", 1, 1, "fix it")
        assert info.head_hash == stored_event(log, "s", 1).hash

    def test_a_read_only_log_refuses_every_write(self, log: EventLog, location: str) -> None:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a read-only open is another store")
        append(log, "s", Message.user("one", id="u1"))
        reader = open_backend(location, readonly=True)
        with pytest.raises(Exception, match="read-only") as caught:
            reader.commit([SessionWrite("s", 1, [TitleSet(title="no")], {})])
        assert type(caught.value).__name__ == "StoreReadOnly" and log.head("s")[0] == 1
        reader.close()


class _RaceOnFirstInsert:
    """A recorder that lets another writer commit right before the log's `at`-th insert (after it has
    prepared its rows, and looked up stored bodies if it does); it counts the inserts."""

    def __init__(self, log: EventLog, race: Any, *, at: int = 1) -> None:
        self._inner = log.recorder
        self._race = race
        self._at = at
        self.inserts = 0

    def insert(self, writes: Sequence[RecorderWrite]) -> Hashable:
        self.inserts += 1
        if self._race is not None and self.inserts == self._at:
            race, self._race = self._race, None
            race()
        return self._inner.insert(writes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class TestSqliteFileEventLog(EventLogContract):
    backend = SQLITE_FILE


class TestSqliteMemoryEventLog(EventLogContract):
    backend = SQLITE_MEMORY


class TestMemoryEventLog(EventLogContract):
    backend = MEMORY


class TestPostgresEventLog(EventLogContract):
    backend = POSTGRES
