"""Committing a step: its events, in one transaction, through the writer capability.

What was written comes back as data (`Written`) — the events with the versions they got and the
bodies their appends hold — so the session folds it exactly as it folds an appended turn, without
reading back.

A step is planned from one version of the session. When the session moved on before the step could
commit — the loop appended a turn while the summarizer ran, say — the step still commits if all that
happened since was new messages and records that change no flag (served views, billed usage, titles,
processes, provider capabilities, stored snapshots):
nothing it marked or summarized was touched, so its marks, summary and record mean what they did.
It is then committed at the new head, its summary appended after the new messages, its record's
view counting them. Anything else (a mark, another round's record) is the conflict it always was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from transcript.model.errors import ConflictError
from transcript.model.events import (
    CapsSet,
    CompactionRecorded,
    Event,
    MessageAppended,
    ProcessesSet,
    SnapshotRecorded,
    TitleSet,
    UsageRecorded,
    ViewServed,
)
from transcript.store.port import EventStore, NewBody, SessionWrite, UnreadableEvent, Written
from transcript.store.writer import writer_for

__all__ = ["Written", "commit"]

# What may have been appended to a session meanwhile without touching what a planned step marks.
_HARMLESS: tuple[type, ...] = (
    MessageAppended,
    ViewServed,
    UsageRecorded,
    TitleSet,
    CapsSet,
    ProcessesSet,
    SnapshotRecorded,
)


def commit(
    store: EventStore,
    session_id: str,
    expected_version: int,
    events: Sequence[Event],
    bodies: Mapping[str, NewBody] | None = None,
) -> Written:
    """Append one step's events in one transaction, checked against `expected_version` (or, when
    only new messages came since, against the new head: see the module docstring)."""
    write = SessionWrite(session_id, expected_version, events, dict(bodies or {}))
    writer = writer_for(store)
    try:
        (done,) = writer.commit([write])
    except ConflictError:
        moved = _rebased(store, write)
        if moved is None:
            raise
        write, shifted = moved
        (done,) = writer.commit([write])
        return Written.of(write, done)._replace(shifted=shifted)
    return Written.of(write, done)


def _rebased(store: EventStore, write: SessionWrite) -> tuple[SessionWrite, tuple[int, int]] | None:
    """The write moved on to the session's new head, with the messages (count, tokens) that came
    since; or None when what came since forbids it."""
    since, bodies = store.read_since(write.session_id, write.expected_version)
    if not since or any(isinstance(e, UnreadableEvent) or not isinstance(e, _HARMLESS) for _, e in since):
        return None
    appended = [e for _, e in since if isinstance(e, MessageAppended)]
    shift = len(appended)
    tokens = sum(sum(bodies[e.message_id].tokens) for e in appended if e.message_id in bodies)
    events = [_moved(event, shift, tokens) for event in write.events]
    return write._replace(expected_version=since[-1][0], events=events), (shift, tokens)


def _moved(event: Event, shift: int, tokens: int) -> Event:
    if isinstance(event, MessageAppended):  # the round's summary goes after the new messages
        return msgspec.structs.replace(event, seq=event.seq + shift)
    if isinstance(event, CompactionRecorded):  # the view after the round shows them too
        result = event.result
        return CompactionRecorded(
            result=msgspec.structs.replace(
                result, tokens_after=result.tokens_after + tokens, items_after=result.items_after + shift
            )
        )
    return event
