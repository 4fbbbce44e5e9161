"""The `Transcript` facade: tool-call ordering, repair, marks in the view, catching up, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import MEMORY, POSTGRES, SQLITE_FILE, SQLITE_MEMORY, OnBackend
from tests.helpers import append_summary, connection, write_marks
from transcript import InvalidMessage, Message, SessionLeased, Store, ToolCall, Transcript, verify
from transcript.model import INTERRUPTED_RESULT, MessageMarked


def _call(call_id: str, name: str = "Bash") -> ToolCall:
    return ToolCall(id=call_id, name=name, input={"command": "ls"})


class SessionBehaviour(OnBackend):
    """The facade's rules, the same on every backend."""

    @pytest.fixture
    def transcript(self, location: str) -> Transcript:
        return Store.open(location, tokenizer="chars/4").session("s")

    def _shared(self) -> None:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a reopen is another store")

    def test_a_lease_is_held_by_one_worker_at_a_time(self, transcript: Transcript, location: str) -> None:
        other = Store.open(location, tokenizer="chars/4") if self.backend.shared else None
        events = other.events if other is not None else transcript.events
        rival = Transcript.attach(events, "s", tokenizer="chars/4")
        with transcript.lease():
            with pytest.raises(SessionLeased, match="'s' is leased"), rival.lease():
                pass
            with Transcript.attach(events, "elsewhere", tokenizer="chars/4").lease():  # another is free
                pass
            transcript.append(Message.user("appends need no lease", id="u1"))
        with rival.lease():  # let go after the block
            pass
        if other is not None:
            other.close()

    def test_results_may_come_in_any_order_within_the_step(self, transcript: Transcript) -> None:
        transcript.append(Message.user("go"))
        transcript.append_turn(
            [
                Message.assistant("", tool_calls=[_call("c1"), _call("c2")]),
                Message.tool_result("c2", "two"),
                Message.tool_result("c1", "one"),
            ]
        )
        assert transcript.pending_calls == ()

    def test_a_result_for_no_pending_call_is_refused(self, transcript: Transcript) -> None:
        transcript.append(Message.assistant("", tool_calls=[_call("c1")]))
        with pytest.raises(InvalidMessage, match="'c9', which is not pending"):
            transcript.append(Message.tool_result("c9", "?"))
        assert transcript.version == 1

    def test_nothing_may_follow_unanswered_calls(self, transcript: Transcript) -> None:
        transcript.append(Message.assistant("", tool_calls=[_call("c1")]))
        with pytest.raises(InvalidMessage, match="'c1' are still unanswered"):
            transcript.append(Message.user("hello?"))
        with pytest.raises(InvalidMessage, match="still unanswered"):
            transcript.append(Message.assistant("again", tool_calls=[_call("c2")]))
        assert transcript.pending_calls == ("c1",)

    def test_a_refused_turn_stores_none_of_its_messages(self, transcript: Transcript) -> None:
        with pytest.raises(InvalidMessage):
            transcript.append_turn([Message.user("ok"), Message.tool_result("c1", "orphan")])
        assert transcript.version == 0 and transcript.stored_messages() == []

    def test_repair_answers_pending_calls_without_editing_history(self, location: str) -> None:
        self._shared()
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
            t.append(Message.user("go"))
            t.append_turn(
                [
                    Message.assistant("", tool_calls=[_call("c1", "Read"), _call("c2", "Bash")]),
                    Message.tool_result("c1", "file"),
                ]
            )
            before = [m.id for m in t.stored_messages()]
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
            repairs = t.repair_interrupted()
            assert [
                (r.tool_results[0].call_id, r.tool_results[0].name, r.tool_results[0].is_error)
                for r in repairs
            ] == [("c2", "Bash", True)]
            assert repairs[0].tool_results[0].content == INTERRUPTED_RESULT
            assert [m.id for m in t.stored_messages()] == [*before, repairs[0].id]
            assert t.pending_calls == ()
            assert t.repair_interrupted() == []
            t.append(Message.user("continue"))
        assert verify(location).ok

    def test_marks_written_by_mutate_reach_the_view(self, transcript: Transcript) -> None:
        old = transcript.append(Message.user("old"))
        kept = transcript.append(Message.user("kept"))
        write_marks(transcript, "s", transcript.version, [MessageMarked(message_id=old.id, excluded=True)])
        view = transcript.visible_messages()
        assert [m.id for m in view.messages] == [kept.id]
        assert transcript.messages().entries[0].flags.excluded
        assert view.tokens == transcript.messages().entries[1].token_count

    def test_a_summary_renders_before_its_anchor(self, transcript: Transcript) -> None:
        system = transcript.append(Message.system("sys"))
        old = transcript.append(Message.user("old"))
        tail = transcript.append(Message.user("tail"))
        write_marks(transcript, "s", transcript.version, [MessageMarked(message_id=old.id, excluded=True)])
        assert [m.id for m in transcript.visible_messages().messages] == [system.id, tail.id]
        summary = Message(
            id="sum",
            role="user",
            kind="summary",
            anchor=tail.id,
            parts=Message.user("summary of old").parts,
            created_at=tail.created_at,
        )
        append_summary(transcript, summary)
        assert [m.id for m in transcript.visible_messages().messages] == [system.id, "sum", tail.id]

    def test_the_view_after_reopen_is_byte_for_byte_the_same(self, location: str) -> None:
        self._shared()
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
            t.append(Message.system("sys"))
            t.append(Message.user("héllo \x00 漢字 🎉"))
            t.append_turn(
                [
                    Message.assistant(
                        "", tool_calls=[ToolCall.from_arguments(id="c", name="x", arguments="{bad")]
                    ),
                    Message.tool_result("c", "out"),
                ]
            )
            first = t.visible_messages()
        with Transcript.open(location, session_id="s", readonly=True) as t:
            again = t.visible_messages()
        assert again.canonical_json() == first.canonical_json()
        assert again.tokens == first.tokens

    def test_open_requires_an_existing_session_when_asked(self, location: str) -> None:
        self._shared()
        Store.open(location).close()
        from transcript import SessionNotFound

        with pytest.raises(SessionNotFound):
            Transcript.open(location, session_id="missing", create=False)
        with pytest.raises(SessionNotFound):
            Transcript.open(location, session_id="missing", readonly=True)

    def test_a_long_live_view_matches_the_reference_across_chunks(self, location: str) -> None:
        from planner import CompactConfig
        from projection import plan_from_persisted_directives, render_llm_view
        from transcript.model.chunked import CHUNK

        t = Store.open(location, tokenizer="chars/4").session("long")
        t.append(Message.user("go"))
        for n in range(CHUNK + 40):
            t.append_turn(
                [Message.assistant("", tool_calls=[_call(f"c{n}")]), Message.tool_result(f"c{n}", "o" * 700)]
            )
        first = t.visible_messages()
        t.compact(budget_tokens=first.tokens, config=CompactConfig())
        view = t.visible_messages()
        entries = t.messages().entries
        reference = render_llm_view(entries, plan_from_persisted_directives(entries))
        assert len(view.chunks) == 3 and all(len(c) == CHUNK for c in view.chunks[:-1])
        assert view.canonical_json() == reference.canonical_json() and view.tokens == reference.tokens
        assert view.messages[-1] == view.messages[len(view) - 1] == reference.messages[-1]
        assert (
            view.messages[CHUNK] == reference.messages[CHUNK] and view.messages[:3] == reference.messages[:3]
        )
        assert (
            first.canonical_json() != view.canonical_json()
        )  # the old view is a snapshot: it did not change
        assert list(first.messages)[CHUNK + 6].text == "o" * 700


@pytest.mark.sqlite_only("counts the SQL statements a catch-up runs on a SQLite connection")
def test_another_connection_sees_only_what_is_new(db_path: Path) -> None:
    with Store.open(db_path, tokenizer="chars/4") as a, Store.open(db_path, tokenizer="chars/4") as b:
        writer, reader = a.session("s"), b.session("s")
        writer.append(Message.user("one", id="1"))
        assert [m.id for m in reader.visible_messages().messages] == ["1"]
        seen: list[tuple[str, tuple[object, ...]]] = []
        connection(b).set_trace_callback(lambda sql: seen.append((sql, ())))
        reader.visible_messages()
        assert [sql for sql, _ in seen] == ["PRAGMA data_version"]
        writer.append(Message.user("two", id="2"))
        seen.clear()
        assert [m.id for m in reader.visible_messages().messages] == ["1", "2"]
        reads = [sql for sql, _ in seen if "FROM events" in sql]
        assert len(reads) == 1 and "version > 1" in reads[0]


class TestSqliteFileSessionBehaviour(SessionBehaviour):
    backend = SQLITE_FILE


class TestSqliteMemorySessionBehaviour(SessionBehaviour):
    backend = SQLITE_MEMORY


class TestMemorySessionBehaviour(SessionBehaviour):
    backend = MEMORY


class TestPostgresSessionBehaviour(SessionBehaviour):
    backend = POSTGRES
