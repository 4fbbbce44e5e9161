"""What an import writes besides appends — an imported compaction, records out of every view, superseded
synthetic results — is made by the mutator and committed only through its writer capability."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

import mutate.imported
from mutate.imported import Boundary, import_events
from tests.conftest import PROJECT_ROOT
from transcript import Message, Store
from transcript.model.errors import WriteRefused
from transcript.model.events import CompactionRecorded, MessageAppended, MessageMarked
from transcript.model.marks import MessageFlags
from transcript.model.snapshot import Entry
from transcript.store.bodies import prepare
from transcript.tokens import get_counter

COMPACTED = PROJECT_ROOT / "fixtures" / "formats" / "claude-code" / "compact_boundary_2.1.14_entire.jsonl"
AT = datetime(2026, 1, 1, tzinfo=UTC)
COUNTER = get_counter("chars/4")


def _entry(seq: int, message: Message, *, excluded: bool = False) -> Entry:
    return Entry(seq=seq, message=message, tokens=(10,), flags=MessageFlags(excluded=excluded))


def _summary(message_id: str) -> Message:
    return Message(
        id=message_id, role="user", parts=Message.user("so far").parts, created_at=AT, kind="summary"
    )


def _kinds(events: Sequence[object]) -> list[tuple[str, str]]:
    out = []
    for event in events:
        if isinstance(event, MessageAppended):
            out.append(("append", event.message_id))
        elif isinstance(event, MessageMarked):
            out.append(("exclude", event.message_id))
        elif isinstance(event, CompactionRecorded):
            out.append(("record", event.result.strategy or ""))
    return out


def test_a_compaction_excludes_what_is_visible_before_its_summary_then_records_the_round() -> None:
    stored = [
        _entry(0, Message.system("sys", id="s", created_at=AT)),
        _entry(1, Message.user("hi", id="u1", created_at=AT)),
        _entry(2, Message.assistant("oops", id="err", created_at=AT), excluded=True),
    ]
    appends = [
        prepare(Message.assistant("hello", id="a1", created_at=AT), COUNTER),
        prepare(_summary("sum"), COUNTER),
        prepare(Message.user("next", id="u2", created_at=AT), COUNTER),
        prepare(Message.assistant("API Error", id="err2", created_at=AT), COUNTER),
    ]
    events = import_events(
        stored,
        appends,
        hidden={"err2"},
        superseded=["old"],
        compactions={"sum": Boundary(manual=True, reason="claude-code compact_boundary")},
    )
    assert _kinds(events) == [
        ("exclude", "old"),
        ("append", "a1"),
        ("exclude", "u1"),
        ("exclude", "a1"),
        ("append", "sum"),
        ("record", "imported"),
        ("append", "u2"),
        ("append", "err2"),
        ("exclude", "err2"),
    ]
    assert [e.seq for e in events if isinstance(e, MessageAppended)] == [3, 4, 5, 6]
    (record,) = [e.result for e in events if isinstance(e, CompactionRecorded)]
    assert (record.outcome, record.manual, record.items_before, record.items_after) == (
        "full_applied",
        True,
        3,
        2,
    )
    assert record.compacted_count == 2 and record.tokens_before == 20 + sum(appends[0].tokens)


def test_the_marks_of_an_import_are_refused_without_the_writer_capability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    monkeypatch.setattr(mutate.imported, "commit_import", lambda events, writes: events.commit(writes))
    with pytest.raises(WriteRefused):
        store.import_file(COMPACTED)
    assert store.sessions() == []
    monkeypatch.undo()
    assert store.import_file(COMPACTED).sessions[0].compactions == 1
