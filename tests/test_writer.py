"""The single mutator, at run time: only the writer capability writes marks, summaries and records; what
a round writes, the facade folds without reading it back, and ends where a fresh open starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from planner import CompactConfig
from planner.summary import SummaryRequest
from tests.helpers import dump, mutator_write, planted
from transcript import Message, Store, ToolCall, Transcript, WriteRefused
from transcript.model import (
    CompactionRecorded,
    CompactResult,
    Event,
    MessageAppended,
    MessageMarked,
    SnapshotRecorded,
    ViewServed,
)
from transcript.store.bodies import prepare
from transcript.store.port import NewBody, SessionWrite
from transcript.store.writer import FlagWriter, writer_for


def _grow(t: Transcript, steps: int) -> None:
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("make the failing test pass"))
    for n in range(steps):
        call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
        t.append_turn(
            [
                Message.assistant(f"step {n}", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"output line {n}\n" * 120, name="Bash"),
            ]
        )


@pytest.fixture
def session(tmp_path: Path) -> Transcript:
    t = Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4", config=CompactConfig.priced())
    _grow(t, 8)
    return t


def _summary(t: Transcript) -> tuple[MessageAppended, dict[str, NewBody]]:
    first = t.messages().entries[2].message.id
    message = Message(
        id="sum-1",
        role="user",
        kind="summary",
        anchor=first,
        parts=Message.user("a summary").parts,
        created_at=t.messages().entries[0].message.created_at,
    )
    body = prepare(message, t.counter)
    return MessageAppended(seq=len(t), message_id="sum-1", body_hash=body.hash), {"sum-1": body}


MUTATOR_EVENTS: dict[str, Callable[[Transcript], tuple[Event, dict[str, NewBody]]]] = {
    "mark": lambda t: (MessageMarked(message_id=t.messages().entries[3].message.id, excluded=True), {}),
    "record": lambda t: (CompactionRecorded(result=CompactResult(outcome="micro_applied")), {}),
    "summary": _summary,
    "append-without-body": lambda t: (
        MessageAppended(seq=len(t), message_id="ghost", body_hash="0" * 64),
        {},
    ),
}


@pytest.mark.parametrize("kind", MUTATOR_EVENTS)
def test_a_mutator_event_offered_to_the_store_without_the_capability_is_refused(
    session: Transcript, kind: str
) -> None:
    event, bodies = MUTATOR_EVENTS[kind](session)
    before = dump(session)
    write = SessionWrite("s", session.version, [event], bodies)
    with pytest.raises(WriteRefused, match="writer capability"):
        session.events.commit([write])
    with pytest.raises(WriteRefused):
        session.events.commit([write], writer=object())  # a look-alike is no capability
    assert dump(session) == before


@pytest.mark.parametrize("kind", ["mark", "record", "summary"])
def test_the_same_event_through_the_writer_capability_is_written(session: Transcript, kind: str) -> None:
    event, bodies = MUTATOR_EVENTS[kind](session)
    events = planted([event]) if isinstance(event, MessageMarked) else [event]
    version = mutator_write(session, "s", session.version, events, bodies)
    assert version == session.version + len(events)


def test_user_code_cannot_make_the_writer_capability(session: Transcript) -> None:
    before = dump(session)
    with pytest.raises(WriteRefused, match="mutator"):
        FlagWriter(session.events)
    with pytest.raises(WriteRefused, match="mutator"):
        writer_for(session.events)
    forged = object.__new__(FlagWriter)  # past the constructor: still no capability the log takes
    write = SessionWrite("s", session.version, [MessageMarked(message_id="x", excluded=True)], {})
    with pytest.raises(WriteRefused):
        session.events.commit([write], writer=forged)
    assert dump(session) == before


def test_facade_events_need_no_capability(session: Transcript) -> None:
    served = ViewServed(view_hash="h", length=0, tokens=0, source="canonical")
    (done,) = session.events.commit([SessionWrite("s", session.version, [served], {})])
    assert done.version == session.version + 1


def test_appending_a_summary_through_the_facade_is_refused(session: Transcript) -> None:
    before = dump(session)
    message = Message(
        id="sum-2",
        role="user",
        kind="summary",
        anchor=None,
        parts=Message.user("a summary").parts,
        created_at=session.messages().entries[0].message.created_at,
    )
    with pytest.raises(WriteRefused):
        session.append(message)
    assert dump(session) == before and len(session) == 18


def _state(t: Transcript) -> tuple[object, ...]:
    """Everything a caller can read of a session."""
    return (
        t.version,
        msgspec.json.encode(t.messages()),
        t.visible_messages().canonical_json(),
        t.visible_messages().tokens,
        t.visible_messages().source,
        t.compact_results(),
        t.latest_checkpoint(),
        t.pending_calls,
        t.stored_tokens,
        t.caps,
    )


def _model(request: SummaryRequest) -> str:
    return '{"goal": "make the failing test pass", "done": ["ran the tests"], "next_steps": ["fix it"]}'


ROUNDS: dict[str, dict[str, object]] = {
    "micro": {"config": CompactConfig.priced(full_compact_enabled=False)},
    "micro-then-full": {"summarizer": _model},
    "forced-full": {"force": True, "manual": True, "summarizer": _model},
}


@pytest.mark.parametrize("kind", ROUNDS)
def test_after_a_round_the_facade_equals_a_fresh_open_without_reading_back(
    session: Transcript, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    budget = session.visible_messages().tokens // 2
    reads: list[tuple[object, ...]] = []
    real = session.events.read_since

    def counted(*args: Any) -> Any:
        reads.append(args)
        return real(*args)

    monkeypatch.setattr(session.events, "read_since", counted)
    result = session.compact(budget_tokens=budget, **ROUNDS[kind])  # type: ignore[arg-type]
    # After its record, at most the record of the snapshot a full round stores.
    after = [type(event) for _, event in real("s", result.version)[0]]
    assert result.version + len(after) == session.version and set(after) <= {SnapshotRecorded}
    assert result.outcome == ("full_unavailable" if kind == "micro" else "full_applied")
    assert reads == []  # what the round wrote was folded from its own data
    folded = _state(session)
    assert reads == []
    with Transcript.open(tmp_path / "t.db", session_id="s", tokenizer="chars/4", readonly=True) as fresh:
        assert _state(fresh) == folded


def test_a_round_of_two_steps_records_twice_under_one_round_id(session: Transcript) -> None:
    budget = session.visible_messages().tokens // 2
    result = session.compact(budget_tokens=budget, summarizer=_model)
    assert result.outcome == "full_applied" and result.compacted_count > 0
    records = [
        (version, event.result)
        for version, event in session.events.read_since("s", 0)[0]
        if isinstance(event, CompactionRecorded)
    ]
    assert [r.round_id for _, r in records] == [result.round_id] * 2
    assert [r.outcome for _, r in records] == ["micro_applied", "full_applied"]
    assert session.compact_results() == [result]  # one line per round: its latest record
    assert Store.open(session.events.path, readonly=True).session("s").compact_results() == [result]
