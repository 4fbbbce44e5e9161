"""The recorder contract: what every backend's storage does, whatever the log above it decides.

A recorder stores rows and returns them: atomically, at the head a write names, never replacing a
stored row. One class of tests, subclassed once per backend (the SQLite file, SQLite `:memory:`, the
in-process recorder).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.backends import MEMORY, POSTGRES, SQLITE_FILE, SQLITE_MEMORY, OnBackend
from transcript import ConflictError, Message, StoreReadOnly
from transcript.model.codec import normalize_message
from transcript.model.events import EVENT_ENCODER, Event, MessageAppended, TitleSet
from transcript.model.hashing import body_hash
from transcript.store.backends import open_recorder
from transcript.store.recorder import BodyRow, BodyTaken, EventRow, Recorder, RecorderWrite, SnapshotRow

AT = "2026-01-02T03:04:05.000006+00:00"


def body_row(message: Message) -> BodyRow:
    normal, data = normalize_message(message)
    return BodyRow(message.id, body_hash(normal), "chars/4", b"[2]", data, f"digest-{message.id}")


def event_row(version: int, event: Event) -> EventRow:
    seq, message_id = (event.seq, event.message_id) if isinstance(event, MessageAppended) else (None, None)
    return EventRow(version, event.kind, seq, message_id, AT, EVENT_ENCODER.encode(event), f"h{version}")


def appends(*messages: Message, start: int = 0) -> tuple[list[BodyRow], list[EventRow]]:
    """Body rows and append event rows for messages appended from seq `start` on."""
    bodies = [body_row(m) for m in messages]
    events = [
        event_row(start + i + 1, MessageAppended(seq=start + i, message_id=b.message_id, body_hash=b.hash))
        for i, b in enumerate(bodies)
    ]
    return bodies, events


class RecorderContract(OnBackend):
    @pytest.fixture
    def recorder(self, location: str) -> Iterator[Recorder]:
        recorder = open_recorder(location)
        yield recorder
        recorder.close()

    def _two(self, location: str) -> Recorder:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a second open is another store")
        return open_recorder(location)

    def test_a_new_store_holds_nothing(self, recorder: Recorder) -> None:
        assert recorder.sessions() == [] and recorder.heads() == {}
        assert recorder.head("s") is None
        assert list(recorder.events("s")) == [] and list(recorder.bodies(["x"])) == []
        assert list(recorder.scan_bodies()) == [] and list(recorder.scan_events()) == []

    def test_an_insert_stores_its_rows_and_moves_the_head(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("hello", id="u1"), Message.assistant("hi", id="a1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        assert recorder.head("s") == (2, "h2")
        assert [_event(e) for e in recorder.events("s")] == events
        assert sorted(map(_body, recorder.bodies(["u1", "a1"]))) == sorted(bodies)

    def test_rows_come_back_byte_for_byte(self, recorder: Recorder) -> None:
        text = 'unicode ✓ \u2028 and "quotes" and a NUL-free tab\t'
        bodies, events = appends(Message.user(text, id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        (event,) = recorder.events("s")
        (body,) = recorder.bodies(["u1"])
        assert _bytes(event.payload) == events[0].payload and _bytes(body.body) == bodies[0].body
        assert _bytes(body.tokens) == b"[2]" and body.digest == "digest-u1" and body.tokenizer == "chars/4"

    def test_events_are_read_in_a_version_range(self, recorder: Recorder) -> None:
        bodies, events = appends(*(Message.user(f"m{i}", id=f"m{i}") for i in range(5)))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        assert [e.version for e in recorder.events("s", after=2)] == [3, 4, 5]
        assert [e.version for e in recorder.events("s", until=2)] == [1, 2]
        assert [e.version for e in recorder.events("s", after=1, until=3)] == [2, 3]
        assert list(recorder.events("s", after=5)) == []
        # A page: the first so many after a version.
        assert [e.version for e in recorder.events_page("s", 1, 2)] == [2, 3]
        assert [e.version for e in recorder.events_page("s", 3, 10)] == [4, 5]
        assert recorder.events_page("s", 5, 10) == []

    def test_events_are_read_by_kind(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("one", id="u1"))
        titled = [*events, event_row(2, TitleSet(title="named"))]
        recorder.insert([RecorderWrite("s", (0, ""), bodies, titled)])
        assert [e.kind for e in recorder.events("s", kinds="appends")] == ["message_appended"]
        assert [e.kind for e in recorder.events("s", kinds="others")] == ["title_set"]
        assert len(list(recorder.events("s", kinds="all"))) == 2

    def test_bodies_are_read_by_id_only_where_stored(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("one", id="u1"), Message.user("two", id="u2"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        assert [b.message_id for b in recorder.bodies(["u2", "nope"])] == ["u2"]
        many = [f"missing-{i}" for i in range(1_200)] + ["u1"]  # past any one query's variable limit
        assert [b.message_id for b in recorder.bodies(many)] == ["u1"]

    def test_contents_are_the_bodies_id_counts_and_record(self, recorder: Recorder) -> None:
        text = 'unicode ✓ \u2028 and "quotes"'
        bodies, events = appends(*(Message.user(f"{text} {i}", id=f"m{i}") for i in range(3)))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        wanted = ["m2", "nope", "m0", *(f"missing-{i}" for i in range(1_200)), "m1"]
        contents = sorted((m, _bytes(t), _bytes(b)) for m, t, b in recorder.contents(wanted))
        assert contents == sorted((b.message_id, b.tokens, b.body) for b in bodies)
        assert contents == sorted(
            (b.message_id, b.tokens, b.body) for b in map(_body, recorder.bodies(wanted))
        )
        assert list(recorder.contents([])) == [] and list(recorder.contents(["nope"])) == []

    def test_a_write_at_a_stale_version_is_a_conflict_and_stores_nothing(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        more, later = appends(Message.user("two", id="u2"), start=1)
        with pytest.raises(ConflictError):
            recorder.insert([RecorderWrite("s", (0, ""), more, later)])
        with pytest.raises(ConflictError):
            recorder.insert([RecorderWrite("s", (1, "not-the-head"), more, later)])
        assert recorder.head("s") == (1, "h1") and list(recorder.bodies(["u2"])) == []

    def test_a_body_already_stored_is_taken_and_nothing_is_stored(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("a", (0, ""), bodies, events)])
        with pytest.raises(BodyTaken):
            recorder.insert([RecorderWrite("b", (0, ""), bodies, events)])
        assert recorder.head("b") is None and list(recorder.events("b")) == []
        assert [row[0] for row in recorder.scan_bodies()] == ["u1"]

    def test_every_write_of_an_insert_is_stored_or_none(self, recorder: Recorder) -> None:
        first, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("taken", (0, ""), first, events)])
        fresh, fresh_events = appends(Message.user("fresh", id="f1"))
        stale, stale_events = appends(Message.user("stale", id="x1"))
        with pytest.raises(ConflictError):
            recorder.insert(
                [
                    RecorderWrite("new", (0, ""), fresh, fresh_events),
                    RecorderWrite("taken", (0, ""), stale, stale_events),
                ]
            )
        assert recorder.head("new") is None and list(recorder.bodies(["f1", "x1"])) == []
        assert [s.session_id for s in recorder.sessions()] == ["taken"]

    def test_the_change_token_moves_with_every_commit(self, recorder: Recorder) -> None:
        before = recorder.change_token()
        assert recorder.change_token() == before
        bodies, events = appends(Message.user("one", id="u1"))
        token = recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        assert recorder.change_token() != before and recorder.change_token() == token

    def test_another_writers_commit_moves_the_change_token(self, recorder: Recorder, location: str) -> None:
        other = self._two(location)
        before = recorder.change_token()
        bodies, events = appends(Message.user("one", id="u1"))
        other.insert([RecorderWrite("s", (0, ""), bodies, events)])
        assert recorder.change_token() != before and recorder.head("s") == (1, "h1")
        other.close()

    def test_reads_inside_reading_see_one_state(self, recorder: Recorder, location: str) -> None:
        self._two(location).close()
        bodies, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        more, later = appends(Message.user("two", id="u2"), start=1)

        def write() -> None:  # another writer, with its own connection in its own thread
            other = open_recorder(location)
            other.insert([RecorderWrite("s", (1, "h1"), more, later)])
            other.close()

        writer = threading.Thread(target=write)
        with recorder.reading():
            assert recorder.head("s") == (1, "h1")
            writer.start()
            writer.join(0.5)  # a backend may make the writer wait until the reads are done
            assert recorder.head("s") == (1, "h1") and len(list(recorder.events("s"))) == 1
        writer.join()
        assert recorder.head("s") == (2, "h2")

    def test_a_read_only_open_reads_and_refuses_to_write(self, recorder: Recorder, location: str) -> None:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a read-only open is another store")
        bodies, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        reader = open_recorder(location, readonly=True)
        assert reader.readonly and reader.head("s") == (1, "h1")
        more, later = appends(Message.user("two", id="u2"), start=1)
        with pytest.raises(StoreReadOnly):
            reader.insert([RecorderWrite("s", (1, "h1"), more, later)])
        assert recorder.head("s") == (1, "h1")
        reader.close()

    def test_sessions_are_listed_by_id_with_counts_heads_and_titles(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.system("rules", id="s0"), Message.user("  fix the bug  ", id="u1"))
        recorder.insert([RecorderWrite("b", (0, ""), bodies, events)])
        named, named_events = appends(Message.user("other", id="o1"))
        recorder.insert(
            [RecorderWrite("a", (0, ""), named, [*named_events, event_row(2, TitleSet(title="A"))])]
        )
        listed = [(s.session_id, s.messages, s.version, s.head_hash, s.title) for s in recorder.sessions()]
        assert listed == [("a", 1, 2, "h2", "A"), ("b", 2, 2, "h2", "fix the bug")]

    def test_scans_return_every_row_in_order(self, recorder: Recorder) -> None:
        first, first_events = appends(Message.user("one", id="u1"))
        second, second_events = appends(Message.user("two", id="u2"))
        recorder.insert([RecorderWrite("b", (0, ""), first, first_events)])
        recorder.insert([RecorderWrite("a", (0, ""), second, second_events)])
        assert [row[0] for row in recorder.scan_bodies()] == ["u1", "u2"]  # as inserted
        assert [(row[0], row[1]) for row in recorder.scan_events()] == [("a", 1), ("b", 1)]
        assert recorder.heads() == {"a": (1, "h1"), "b": (1, "h1")}

    def test_a_snapshot_is_stored_with_its_write_and_moves_no_head(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("hello", id="u1"), Message.assistant("hi", id="a1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events, SnapshotRow(2, "h2", b'{"a":1}', "d2"))])
        assert recorder.head("s") == (2, "h2")
        (row,) = recorder.snapshots("s")
        assert (row.version, row.hash, row.digest) == (2, "h2", "d2") and _bytes(row.payload) == b'{"a":1}'
        assert list(recorder.snapshots("other")) == []

    def test_a_snapshot_alone_must_find_the_head_it_names(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("hello", id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        with pytest.raises(ConflictError):
            recorder.insert([RecorderWrite("s", (0, ""), [], [], SnapshotRow(1, "h1", b"{}", "d"))])
        assert list(recorder.snapshots("s")) == []
        recorder.insert([RecorderWrite("s", (1, "h1"), [], [], SnapshotRow(1, "h1", b"{}", "d"))])
        assert [r.version for r in recorder.snapshots("s")] == [1] and recorder.head("s") == (1, "h1")

    def test_snapshots_come_newest_first_and_only_the_two_newest_are_kept(self, recorder: Recorder) -> None:
        for n in range(4):
            bodies, events = appends(Message.user(f"m{n}", id=f"m{n}"), start=n)
            start = n + 1
            snapshot = SnapshotRow(start, f"h{start}", b"{}", f"d{start}")
            recorder.insert(
                [
                    RecorderWrite(
                        "s", (start - 1, f"h{start - 1}" if start > 1 else ""), bodies, events, snapshot
                    )
                ]
            )
        assert [r.version for r in recorder.snapshots("s")] == [4, 3]
        assert [(row[0], row[1]) for row in recorder.scan_snapshots()] == [("s", 3), ("s", 4)]

    def test_a_healthy_store_passes_its_own_storage_check(self, recorder: Recorder) -> None:
        bodies, events = appends(Message.user("one", id="u1"))
        recorder.insert([RecorderWrite("s", (0, ""), bodies, events)])
        check = recorder.storage_check()
        assert check.stop == [] and check.before == [] and check.after == []


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _event(row: EventRow) -> EventRow:
    """The row with its JSON as bytes (a backend may return text)."""
    return row._replace(payload=_bytes(row.payload))


def _body(row: BodyRow) -> BodyRow:
    return row._replace(tokens=_bytes(row.tokens), body=_bytes(row.body))


class TestSqliteFileRecorder(RecorderContract):
    backend = SQLITE_FILE


class TestSqliteMemoryRecorder(RecorderContract):
    backend = SQLITE_MEMORY


class TestMemoryRecorder(RecorderContract):
    backend = MEMORY


class TestPostgresRecorder(RecorderContract):
    backend = POSTGRES
