"""The store contract, as a session sees it: run on every backend (a SQLite file, read-write and
reopened read-only; SQLite `:memory:`; the in-process recorder, read-write and read-only).

`StoreContract` holds what any store configuration must do; `SessionContract` what a writable one
must do for an agent loop — compact, reopen, fork, restore, replay — with the same results on each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from tests.backends import MEMORY, POSTGRES, SQLITE_FILE, SQLITE_MEMORY, OnBackend
from tests.conftest import CORPUS
from tests.helpers import sql
from transcript import (
    ConflictError,
    DuplicateMessage,
    Message,
    SessionNotFound,
    Store,
    StoreReadOnly,
    ToolCall,
    Transcript,
    TranscriptError,
    verify,
)
from transcript.model import TextPart
from transcript.model.events import MessageAppended
from transcript.store.bodies import prepare
from transcript.store.port import SessionWrite
from transcript.store.recorder import BodyTaken
from transcript.tokens import get_counter


def _build_conversation() -> list[list[Message]]:
    return [
        [Message.system("you are a coding agent", id="sys")],
        [Message.user("fix the failing test", id="u1")],
        [
            Message.assistant(
                "running it", tool_calls=[ToolCall(id="c1", name="Bash", input={"cmd": "pytest"})], id="a1"
            ),
            Message.tool_result("c1", "1 failed\n" * 50, name="Bash", id="r1"),
        ],
        [Message.assistant("done", id="a2")],
    ]


CONVERSATION = _build_conversation()


def _conversation() -> list[list[Message]]:
    return CONVERSATION


def _populate(store: Store) -> None:
    transcript = store.session("s1")
    for turn in _conversation():
        transcript.append_turn(turn)
    store.session("s2").append(Message.user("other session", id="o1"))


StoreFactory = Callable[[Callable[[Store], None]], Store]


class StoreContract(OnBackend):
    readonly: ClassVar[bool] = False

    @pytest.fixture
    def make_store(self, location: str) -> Iterator[StoreFactory]:
        """Build a store: `populate` runs on a writable store, then the test gets it as configured
        (the same store, or the same location reopened read-only)."""
        opened: list[Store] = []

        def factory(populate: Callable[[Store], None]) -> Store:
            store = Store.open(location, tokenizer="chars/4")
            populate(store)
            if self.readonly:
                store.close()
                store = Store.open(location, readonly=True, tokenizer="chars/4")
            opened.append(store)
            return store

        yield factory
        for store in opened:
            store.close()

    def test_sessions_are_listed_with_counts(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        listed = {(s.session_id, s.messages, s.version) for s in store.sessions()}
        assert listed == {("s1", 5, 5), ("s2", 1, 1)}

    def test_history_comes_back_in_order_with_bodies(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        stored = store.session("s1").stored_messages()
        expected = [m for turn in _conversation() for m in turn]
        assert [m.id for m in stored] == [m.id for m in expected]
        assert msgspec.json.encode(stored) == msgspec.json.encode(expected)

    def test_snapshot_has_seq_tokens_and_no_flags(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        snapshot = store.session("s1").messages()
        assert snapshot.session_id == "s1" and snapshot.version == 5
        assert [e.seq for e in snapshot.entries] == [0, 1, 2, 3, 4]
        assert all(len(e.tokens) == len(e.message.parts) for e in snapshot.entries)
        assert snapshot.entries[0].tokens == ((len("you are a coding agent") + 3) // 4,)
        assert not any(e.flags.truncated or e.flags.excluded for e in snapshot.entries)

    def test_canonical_view_shows_every_message(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        view = store.session("s1").visible_messages()
        assert view.source == "canonical"
        assert [m.id for m in view.messages] == ["sys", "u1", "a1", "r1", "a2"]
        assert view.tokens == sum(e.token_count for e in store.session("s1").messages().entries)

    def test_unknown_session_without_create_is_refused(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        with pytest.raises(SessionNotFound, match="nope"):
            store.session("nope", create=False)

    def test_writes_follow_the_configuration(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        transcript = store.session("s1")
        if self.readonly:
            with pytest.raises(StoreReadOnly):
                transcript.append(Message.user("more"))
            assert transcript.version == 5
        else:
            transcript.append(Message.user("more", id="u2"))
            assert store.session("s1").version == 6

    def test_reappending_the_same_message_is_a_no_op(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        transcript = store.session("s1")
        (first,) = _conversation()[1]
        again = transcript.append(first)
        assert again == first and again.id == "u1" and transcript.version == 5

    def test_the_same_content_at_another_time_or_with_other_metadata_is_refused(
        self, make_store: StoreFactory
    ) -> None:
        store = make_store(_populate)
        (first,) = _conversation()[1]
        later = msgspec.structs.replace(first, created_at=first.created_at + timedelta(seconds=1))
        tagged = msgspec.structs.replace(first, metadata={"source": "elsewhere"})
        sessions = ["s1"] if self.readonly else ["s1", "s3"]
        for other in (later, tagged):
            for session in sessions:
                with pytest.raises(DuplicateMessage, match="u1"):
                    store.session(session).append(other)

    def test_an_existing_id_with_other_content_is_refused(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        with pytest.raises(DuplicateMessage, match="u1"):
            store.session("s1").append(Message.user("something else", id="u1"))
        if not self.readonly:
            with pytest.raises(DuplicateMessage, match="o1"):
                store.session("s3").append(Message.user("not the same", id="o1"))
            assert "s3" not in {s.session_id for s in store.sessions()}


def test_a_body_is_stored_once_and_shared_by_sessions() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    shared = Message.user("same words", id="shared")
    store.session("a").append(shared)
    store.session("b").append(shared)
    assert sql(store, "SELECT count(*) FROM bodies") == [(1,)]
    assert store.session("b").stored_messages() == [shared]


def test_stale_writer_gets_a_conflict_and_catches_up(db_path: Path) -> None:
    with Store.open(db_path, tokenizer="chars/4") as one, Store.open(db_path, tokenizer="chars/4") as two:
        first, second = one.session("s"), two.session("s")
        first.append(Message.user("one", id="1"))
        with pytest.raises(ConflictError, match="expected 0"):
            second.append(Message.user("two", id="2"))
        assert [m.id for m in second.stored_messages()] == ["1"]
        second.append(Message.user("two", id="2"))
        assert [m.id for m in first.stored_messages()] == ["1", "2"]


def test_two_transcripts_on_one_connection_see_each_other() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    writer, reader = store.session("s"), store.session("s")
    writer.append(Message.user("one", id="1"))
    assert [m.id for m in reader.visible_messages().messages] == ["1"]


def test_message_parts_keep_their_types_through_the_store() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    message = Message.user([TextPart(text="a"), TextPart(text="b")], id="two-parts")
    store.session("s").append(message)
    stored = store.session("s").stored_messages()[0]
    assert stored.parts == (TextPart(text="a"), TextPart(text="b"))


def _grow(t: Transcript, steps: int, *, start: int = 0) -> None:
    """Steps of a coding agent: a call, its long result, and the next call."""
    for n in range(start, start + steps):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"reading src/m{n}.py", tool_calls=[call], id=f"a{n}"),
                Message.tool_result(f"c{n}", f"line {n}\n" * 300, name="Read", id=f"r{n}"),
            ]
        )


def _started(store: Store, session_id: str = "s") -> Transcript:
    t = store.session(session_id)
    t.append(Message.system("you are a coding agent", id=f"{session_id}-sys"))
    t.append(Message.user("make the date parser accept ISO weeks", id=f"{session_id}-u"))
    return t


def _view_bytes(t: Transcript) -> bytes:
    return t.visible_messages().canonical_json()


class SessionContract(OnBackend):
    """What an agent loop relies on, on every backend: the same results from the same calls."""

    @pytest.fixture
    def store(self, location: str) -> Iterator[Store]:
        store = Store.open(location, tokenizer="chars/4")
        yield store
        store.close()

    def _reopened(self, store: Store, location: str) -> Store:
        """The store as a resumed process sees it (the same one where a reopen is another store)."""
        return Store.open(location, tokenizer="chars/4") if self.backend.shared else store

    def test_a_compacted_view_is_the_same_after_a_reopen(self, store: Store, location: str) -> None:
        t = _started(store)
        _grow(t, 12)
        micro = t.compact(budget_tokens=4_000)
        _grow(t, 4, start=12)
        full = t.compact(budget_tokens=4_000, force=True)
        assert micro.outcome != "skipped" and full.outcome == "full_applied"
        again = self._reopened(store, location).session("s")
        assert _view_bytes(again) == _view_bytes(t)
        assert again.compact_results() == t.compact_results() and again.version == t.version

    def test_a_stale_transcript_gets_a_conflict_and_has_caught_up(self, store: Store, location: str) -> None:
        first = _started(store)
        second = self._reopened(store, location).session("s")
        first.append(Message.user("one more thing", id="more"))
        with pytest.raises(ConflictError):
            second.append(Message.user("from the other", id="other"))
        assert [m.id for m in second.stored_messages()][-1] == "more"
        second.append(Message.user("from the other", id="other"))
        assert first.stored_messages()[-1].id == "other"

    def test_two_loops_starting_one_session_get_a_conflict_not_a_clash_of_ids(
        self, store: Store, location: str
    ) -> None:
        # Two processes open the same empty session and both start it with the same ids; the
        # second one's message differs in its time, so it is not the stored record.
        first = store.session("shared", create=True)
        second = self._reopened(store, location).session("shared", create=True)
        first.append(Message.system("You are a coding agent.", id="shared-system"))
        later = datetime(2026, 1, 1, tzinfo=UTC)
        again = Message.system("You are a coding agent.", id="shared-system", created_at=later)
        with pytest.raises(ConflictError):
            second.append(again)
        assert [m.id for m in second.stored_messages()] == ["shared-system"]
        with pytest.raises(DuplicateMessage):
            second.append(again)

    def test_a_commit_expecting_new_bodies_is_refused_whole_when_one_is_stored(self, store: Store) -> None:
        shared = Message.user("said in another session", id="taken")
        store.session("other", create=True).append(shared)
        t = store.session("s", create=True)
        body = prepare(shared, get_counter("chars/4"))
        write = SessionWrite(
            "s", t.version, [MessageAppended(seq=0, message_id="taken", body_hash=body.hash)], {"taken": body}
        )
        with pytest.raises(BodyTaken):
            store.events.commit([write], expect_new=True)
        assert store.events.head("s")[0] == t.version  # nothing written
        (done,) = store.events.commit([write])  # looked up: the stored body is the same record
        assert done.version == t.version + 1 and done.reused == {"taken": body.tokens}

    def test_a_commit_expecting_new_bodies_stores_none_of_them_when_one_is_taken(self, store: Store) -> None:
        taken = Message.user("said in another session", id="taken")
        store.session("other", create=True).append(taken)
        t = store.session("s", create=True)
        counter = get_counter("chars/4")
        bodies = [
            prepare(m, counter)
            for m in (Message.user("one", id="new-1"), taken, Message.user("two", id="new-2"))
        ]
        events = [
            MessageAppended(seq=n, message_id=b.message.id, body_hash=b.hash) for n, b in enumerate(bodies)
        ]
        write = SessionWrite("s", t.version, events, {b.message.id: b for b in bodies})
        with pytest.raises(BodyTaken):
            store.events.commit([write], expect_new=True)
        assert store.events.head("s")[0] == t.version
        assert store.events.bodies(["new-1", "new-2"]) == {}  # the new ones were not stored either
        (done,) = store.events.commit([write])
        assert done.reused == {"taken": bodies[1].tokens} and len(store.session("s")) == 3

    def test_a_served_view_replays_without_drift(self, store: Store) -> None:
        from transcript.session.replay import check_served, timeline

        t = _started(store)
        for n in range(6):
            t.compact(budget_tokens=3_000)
            t.visible_messages(record=True)
            _grow(t, 1, start=n)
        checked = check_served(store.events, "s")
        assert checked.ok and checked.verified == 6
        assert [p.kind for p in timeline(store.events, "s")].count("model-call") >= 1

    def test_a_fork_shares_bodies_and_leaves_the_parent_alone(self, store: Store) -> None:
        parent = _started(store)
        _grow(parent, 6)
        before = _view_bytes(parent)
        fork = store.fork("s", new_session_id="try-2")
        fork.compact(budget_tokens=2_000, force=True)
        assert _view_bytes(parent) == before and parent.version == store.head("s")[0]
        assert [m.id for m in fork.stored_messages()][: len(parent)] == [
            m.id for m in parent.stored_messages()
        ]

    def test_a_restored_state_renders_the_same_view(self, store: Store) -> None:
        t = _started(store)
        _grow(t, 10)
        t.compact(budget_tokens=3_000, force=True)
        copy = store.restore(t.export_state(), session_id="copy")
        assert _view_bytes(copy) == _view_bytes(t) and copy.compact_results() == t.compact_results()

    def test_an_interrupted_call_is_answered_by_an_append(self, store: Store) -> None:
        t = _started(store)
        call = ToolCall(id="c9", name="Bash", input={"command": "sleep 100"})
        t.append(Message.assistant("running", tool_calls=[call], id="a9"))
        assert list(t.pending_calls) == ["c9"]
        (repair,) = t.repair_interrupted()
        assert t.pending_calls == () and t.stored_messages()[-1] == repair

    def test_titles_and_listing(self, store: Store) -> None:
        _started(store, "b")
        named = _started(store, "a")
        named.set_title("ISO weeks")
        listed = [(s.session_id, s.title, s.messages) for s in store.sessions()]
        assert listed == [("a", "ISO weeks", 2), ("b", "make the date parser accept ISO weeks", 2)]
        assert {s.session_id: s.head_hash for s in store.sessions()} == {
            sid: store.head(sid)[1] for sid in ("a", "b")
        }

    def test_status_names_the_head_and_the_goal(self, store: Store) -> None:
        t = _started(store)
        _grow(t, 8)
        t.compact(budget_tokens=2_500, force=True)
        status = t.status()
        assert status.head_hash == store.head("s")[1] and status.goal.startswith("make the date parser")

    def test_an_imported_session_renders_the_same_after_a_reopen(self, store: Store, location: str) -> None:
        report = store.import_file(CORPUS / "sweagent_marshmallow-1867_fc.traj")
        (session,) = report.sessions
        t = store.session(session.session_id)
        t.compact(budget_tokens=3_000, force=True)
        again = self._reopened(store, location).session(session.session_id)
        assert _view_bytes(again) == _view_bytes(t) and len(again) == session.messages + 1

    def test_verify_passes_on_what_the_loop_wrote(self, store: Store, location: str) -> None:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: verify opens the location again, another store")
        t = _started(store)
        _grow(t, 6)
        t.compact(budget_tokens=2_000, force=True)
        t.visible_messages(record=True)
        report = verify(location)
        assert report.ok and report.heads == {"s": store.head("s")[1]}

    def test_search_works_where_the_backend_has_it(self, store: Store) -> None:
        t = _started(store)
        _grow(t, 2)
        if store.events.capabilities.search:
            assert [hit.message_id for hit in store.search("ISO weeks")] == ["s-u"]
        else:
            with pytest.raises(TranscriptError, match="full-text"):
                store.search("ISO weeks")


class TestSqliteFileStore(StoreContract):
    backend = SQLITE_FILE


class TestSqliteFileReadOnlyStore(StoreContract):
    backend = SQLITE_FILE
    readonly = True


class TestSqliteMemoryStore(StoreContract):
    backend = SQLITE_MEMORY


class TestMemoryStore(StoreContract):
    backend = MEMORY


class TestMemoryReadOnlyStore(StoreContract):
    backend = MEMORY
    readonly = True


class TestSqliteFileSession(SessionContract):
    backend = SQLITE_FILE


class TestSqliteMemorySession(SessionContract):
    backend = SQLITE_MEMORY


class TestMemorySession(SessionContract):
    backend = MEMORY


class TestPostgresStore(StoreContract):
    backend = POSTGRES


class TestPostgresReadOnlyStore(StoreContract):
    backend = POSTGRES
    readonly = True


class TestPostgresSession(SessionContract):
    backend = POSTGRES
