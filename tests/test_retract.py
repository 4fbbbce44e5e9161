"""`Transcript.retract`: messages taken back are marked, never deleted, and the view stays sendable."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from transcript import InvalidArgument, Message, PendingToolCalls, ToolCall, Transcript
from transcript.model.events import RetractionRecorded
from transcript.model.message import RETRACTED_RESULT
from transcript.session.replay import check_served, view_at
from transcript.store.verify import verify

# A step: how many calls the assistant makes (0: a text answer); the last may stay pending.
STEPS = st.lists(st.integers(0, 2), min_size=1, max_size=6)


def _session(path: Path | str, steps: list[int], pending: bool) -> Transcript:
    t = Transcript.open(path, session_id="retract")
    t.append(Message.system("You are a coding agent."))
    for number, calls in enumerate(steps):
        t.append(Message.user(f"task {number}"))
        ids = [f"c{number}_{k}" for k in range(calls)]
        answer = Message.assistant(
            f"step {number}", tool_calls=[ToolCall(id=i, name="Bash", input={}) for i in ids]
        )
        last = number == len(steps) - 1
        results = [] if pending and last else [Message.tool_result(i, f"out {i}", name="Bash") for i in ids]
        t.append_turn([answer, *results])
    return t


@given(
    steps=STEPS, pending=st.booleans(), picks=st.lists(st.sets(st.integers(0, 40), max_size=4), max_size=3)
)
def test_a_retraction_hides_exactly_what_it_takes_or_writes_nothing(
    steps: list[int], pending: bool, picks: list[set[int]]
) -> None:
    with _session(":memory:", steps, pending) as t:
        for pick in picks:
            live = [e.message.id for e in t.messages().entries if not e.flags.retracted]
            taken = [live[k] for k in sorted(pick) if k < len(live)]
            stored, version, before = t.stored_messages(), t.version, t.visible_messages(record=True)
            try:
                t.retract(taken, reason="test")
            except InvalidArgument as exc:
                assert "nothing was written" in str(exc)
                assert t.version == version + 1  # only the served-view record
                continue
            after = t.stored_messages()
            assert after[: len(stored)] == stored  # nothing deleted, no body changed
            closing = after[len(stored) :]
            assert all(m.role == "tool" and m.tool_results[0].text == RETRACTED_RESULT for m in closing)
            shown = {m.id for m in t.visible_messages().messages}
            assert not shown & {*taken, *(m.id for m in closing)}
            assert {m.id for m in before.messages} - set(taken) == shown
            # the earlier point still shows them, and the view is one a provider accepts
            assert [m.id for m in view_at(t.events, "retract", version + 1).messages] == [
                m.id for m in before.messages
            ]
            try:
                if shown:  # (an empty view has nothing to send)
                    t.visible_messages().to_openai()
            except PendingToolCalls:
                assert t.pending_calls  # only calls still waiting at the very end
        assert check_served(t.events, "retract").drifts == ()


def test_retracting_half_of_a_call_is_refused_and_nothing_is_written(db_path: Path) -> None:
    with _session(db_path, [1, 0], pending=False) as t:
        entries = t.messages().entries
        call = next(e.message for e in entries if e.message.tool_calls)
        result = next(e.message for e in entries if e.message.role == "tool")
        version = t.version
        for half in ([call.id], [result.id]):
            with pytest.raises(InvalidArgument, match="half of call 'c0_0'"):
                t.retract(half, reason="test")
        assert t.version == version
        t.retract([call.id, result.id], reason="test")  # together they go
        assert [m.role for m in t.visible_messages().messages] == ["system", "user", "user", "assistant"]
    assert verify(db_path).ok


def test_a_pending_call_taken_back_is_closed_and_a_new_turn_may_follow(db_path: Path) -> None:
    with _session(db_path, [0, 2], pending=True) as t:
        assert t.pending_calls == ("c1_0", "c1_1")
        last = t.messages().entries[-1].message
        (then,) = t.retract([last.id], reason="pop_item", then=[Message.user("try again")])
        assert not t.pending_calls
        assert t.visible_messages().messages[-1].id == then.id
        records = [
            r.event for r in t.events.read_log(t.session_id)[0] if isinstance(r.event, RetractionRecorded)
        ]
        assert len(records) == 1 and records[0].reason == "pop_item" and last.id in records[0].message_ids
        assert len(records[0].message_ids) == 3  # the message and the two synthetic results closing it
    assert verify(db_path).ok


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        ([], "at least one"),
        ("abc", "a list of message ids"),
        (["no-such-message"], "no message 'no-such-message'"),
        ([42], r"message_ids\[0\] must be"),
        ([["a"]], r"message_ids\[0\] must be"),
    ],
)
def test_bad_retractions_are_typed_errors(db_path: Path, ids: object, match: str) -> None:
    with _session(db_path, [0], pending=False) as t:
        version = t.version
        with pytest.raises(InvalidArgument, match=match):
            t.retract(ids, reason="test")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            t.retract([t.stored_messages()[-1].id], reason="")
        t.retract([t.stored_messages()[-1].id], reason="test")
        with pytest.raises(InvalidArgument, match="already retracted"):
            t.retract([t.stored_messages()[-1].id], reason="test")
        assert t.version == version + 2  # the one retraction: its marks and record in one commit
