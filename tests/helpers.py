"""Helpers that read a store's file as SQL, for tests only (the library has no such API)."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import PROJECT_ROOT, PYTHON
from transcript import Message, Store, Transcript
from transcript.model import (
    CompactionRecorded,
    CompactResult,
    Event,
    MessageFlags,
    MessageMarked,
    MessagesExcluded,
    ToolResult,
    apply_mark,
)
from transcript.store.log import EventLog
from transcript.store.port import EventStore, NewBody
from transcript.store.sqlite import SqliteRecorder


def connection(target: Store | Transcript | EventLog) -> sqlite3.Connection:
    """The raw connection behind a SQLite store (a file or `:memory:`)."""
    events = target if isinstance(target, EventLog) else target.events
    assert isinstance(events, EventLog) and isinstance(events.recorder, SqliteRecorder)
    return events.recorder.connection


def dump(target: Store | Transcript | EventLog) -> list[str]:
    """The file's content as SQL text: what tests compare to prove a file was left as it was."""
    return list(connection(target).iterdump())


def sql(
    target: Store | Transcript | EventLog, query: str, params: Sequence[Any] = ()
) -> list[tuple[Any, ...]]:
    """All rows of one SQL statement run on the store's own connection."""
    return connection(target).execute(query, params).fetchall()


def fold_marks(marks: Iterable[MessageMarked]) -> dict[str, MessageFlags]:
    """The flags per message id that a sequence of mark events leaves (the reference fold)."""
    flags: dict[str, MessageFlags] = {}
    for mark in marks:
        flags[mark.message_id] = apply_mark(flags.get(mark.message_id, MessageFlags()), mark)
    return flags


def as_marks(events: Iterable[object], history: Sequence[str]) -> Iterator[MessageMarked]:
    """The mark events among `events`, a range exclusion as the one exclusion mark per message it
    stands for (`history`: the session's message ids in seq order)."""
    for event in events:
        if isinstance(event, MessageMarked):
            yield event
        elif isinstance(event, MessagesExcluded):
            for seq in event.seqs():
                yield MessageMarked(message_id=history[seq], excluded=True)


def mutator_write(
    target: Store | Transcript | EventStore,
    session_id: str,
    expected_version: int,
    events: Sequence[Event],
    bodies: Mapping[str, NewBody] | None = None,
) -> int:
    """Commit events through the mutator's own commit (the writer capability is the mutator's: a test
    holds it no more than user code does); the new version."""
    from mutate.commit import commit

    store = target.events if isinstance(target, (Store, Transcript)) else target
    return commit(store, session_id, expected_version, events, bodies).version


def planted(marks: Sequence[MessageMarked]) -> list[Event]:
    """Marks as a manual round records them: the marks, then the record that names them (every mark
    belongs to a recorded round)."""
    result = CompactResult(
        outcome="micro_applied",
        manual=True,
        reason="planted by a test",
        compacted_ids=tuple(m.message_id for m in marks),
    )
    return [*marks, CompactionRecorded(result=result)]


def write_marks(
    target: Store | Transcript, session_id: str, expected_version: int, marks: Sequence[MessageMarked]
) -> int:
    """Write mark events as the mutator would (tests that plant marks, good or bad), with the round
    record that explains them; the new version."""
    return mutator_write(target, session_id, expected_version, planted(marks))


def append_summary(transcript: Transcript, summary: Message) -> int:
    """Append a summary message as the mutator would (its body prepared and counted, a round record
    after it); the new version."""
    from transcript.model import MessageAppended
    from transcript.store.bodies import prepare

    body = prepare(summary, transcript.counter)
    event = MessageAppended(seq=len(transcript), message_id=body.message.id, body_hash=body.hash)
    record = CompactionRecorded(result=CompactResult(outcome="full_applied", manual=True, reason="planted"))
    return mutator_write(
        transcript, transcript.session_id, transcript.version, [event, record], {body.message.id: body}
    )


def grow_reads(t: Transcript, steps: int, *, start: int = 0, size: int = 1500, tool: str = "Read") -> None:
    """Append `steps` steps, each a call of `tool` reading `src/m<n>.py` and its result of about `size`
    characters (a session that grows as a coding agent's does)."""
    from transcript import ToolCall

    for n in range(start, start + steps):
        call = ToolCall(id=f"c{n}", name=tool, input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"step {n}: reading src/m{n}.py", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"def f{n}():\n    return {n}\n" * (size // 30), name=tool),
            ]
        )


def reading_session(goal: str, **settings: Any) -> Transcript:
    """An in-memory session (chars/4 tokens): a system prompt, the user's `goal`, 20 reading steps."""
    t = Store.open(":memory:", tokenizer="chars/4").session("s", **settings)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user(goal))
    grow_reads(t, 20)
    return t


def run_loop(module: str, db: Path, log: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """Run one of the framework loop scripts (`tests.agents_loop`, `tests.langchain_loop`) in a new
    process: `python -m MODULE DB LOG MODE`."""
    return subprocess.run(
        [PYTHON, "-m", module, str(db), str(log), mode],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def shown_result(t: Transcript, call_id: str) -> str:
    """The text the view shows for the result of tool call `call_id`."""
    for message in t.visible_messages().messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id == call_id:
                return part.text
    raise AssertionError(f"no result of {call_id!r} in the view")
