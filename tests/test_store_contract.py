"""One contract, run against every store configuration: in-memory, file, and read-only."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from tests.conftest import StoreFactory
from tests.helpers import sql
from transcript import (
    ConflictError,
    DuplicateMessage,
    Message,
    SessionNotFound,
    Store,
    StoreReadOnly,
    ToolCall,
)
from transcript.model import TextPart


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


class TestStoreContract:
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
        if make_store.config == "readonly":  # type: ignore[attr-defined]
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
        sessions = ["s1"] if make_store.config == "readonly" else ["s1", "s3"]  # type: ignore[attr-defined]
        for other in (later, tagged):
            for session in sessions:
                with pytest.raises(DuplicateMessage, match="u1"):
                    store.session(session).append(other)

    def test_an_existing_id_with_other_content_is_refused(self, make_store: StoreFactory) -> None:
        store = make_store(_populate)
        with pytest.raises(DuplicateMessage, match="u1"):
            store.session("s1").append(Message.user("something else", id="u1"))
        if make_store.config != "readonly":  # type: ignore[attr-defined]
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
