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
from typing import Final

import msgspec

from planner.intent import GOAL_CHARS, clip, contains_task, first_request, normalize
from transcript.model.errors import ConflictError, StoreCorrupted, WriteRefused
from transcript.model.events import (
    CapsSet,
    CompactionRecorded,
    Event,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    ProcessesSet,
    SnapshotRecorded,
    TitleSet,
    UsageRecorded,
    ViewServed,
)
from transcript.model.message import Message
from transcript.model.result import CompactResult
from transcript.store.log import refuse_unexplained_marks
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
    only new messages came since, against the new head: see the module docstring).

    A round's record must match the step it records (`check_round_record`): `WriteRefused`, nothing
    written, for one that claims a summary the write does not carry, or whose checkpoint does not
    carry the task the user gave."""
    write = SessionWrite(session_id, expected_version, events, dict(bodies or {}))
    check_round_record(store, write)
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


def check_round_record(store: EventStore, write: SessionWrite) -> None:
    """`WriteRefused` unless each round record of a step's write matches what the write carries: the
    log's own checks of a mutator's write first (`refuse_unexplained_marks`: every mark explained,
    range exclusions well formed, and the reverse, `transcript.store.explained.unmatched_records`: a
    record that claims a full step comes after the summary and the exclusions it claims); then a
    summary appended after exclusions comes with a record, and the step's checkpoint (the whole one
    the round carries) has a goal that holds the task the user gave, as every round anchors it
    (`planner.summary.anchored_goal`) — a made-up record cannot hide the request behind a summary of
    another goal. Imported compactions are the import's own record."""
    refuse_unexplained_marks([write])
    events = write.events
    excluded = 0
    summary: Message | None = None
    for position, event in enumerate(events, start=1):
        if isinstance(event, MessagesExcluded):
            excluded += event.count
        elif isinstance(event, MessageMarked) and event.excluded and not event.retracted:
            excluded += 1
        elif isinstance(event, MessageAppended):
            body = write.bodies.get(event.message_id)
            if body is not None and body.message.kind == "summary":
                summary = body.message
        elif isinstance(event, CompactionRecorded):
            result = event.result
            if result.strategy == "imported":
                return
            if summary is not None:
                _check_goal(store, write, position, result, summary)
            excluded, summary = 0, None
    if summary is not None and excluded:
        raise WriteRefused(
            f"session {write.session_id!r}: the write appends a summary after excluding {excluded} "
            "messages, and records no round that made it; nothing was written"
        )


def _check_goal(
    store: EventStore, write: SessionWrite, position: int, result: CompactResult, summary: Message
) -> None:
    """The round's checkpoint (whole: the carried one when the view shows less of it) has a goal
    holding the task the user gave; without one, the summary itself holds it."""
    task = _task(store, write.session_id)
    if not task:
        return
    checkpoint = result.carried_checkpoint or result.checkpoint
    held = checkpoint.goal if checkpoint is not None else summary.text
    # A goal made to fit a small room keeps the task's opening only (`planner.full.clip_goal`, at
    # least `_TASK_OPENING` characters of it, or half that after whitespace is folded), or gives way
    # altogether (an empty goal, the room holding next to nothing): both are rounds' own, and pass.
    if held and not (
        contains_task(held, task, head=_TASK_OPENING)
        or normalize(held).startswith(normalize(task)[: _TASK_OPENING // 2])
    ):
        raise WriteRefused(
            f"session {write.session_id!r}: event {position} of the write records a round whose "
            f"{'checkpoint goal' if checkpoint is not None else 'summary'} does not hold the task the user "
            "gave (every round carries it): a summary would hide the user's request; nothing was written"
        )


def _task(store: EventStore, session_id: str) -> str:
    """The task the user gave the session, as a round's goal holds it (the first request, clipped as
    `planner.intent.task_goal` clips it); "" when its history holds no request, or when the read
    meets damage. Read from the start of the log, a window at a time (the first request is near the
    start)."""
    until = _FIRST_WINDOW
    head = store.head(session_id)[0]
    while True:
        try:
            records, bodies = store.read_log(session_id, until=min(until, head))
        except StoreCorrupted:
            # A log damaged there (a mark that cannot be read) cannot say what the task was: the round
            # goes on without this check rather than stop on a storage fault.
            return ""
        messages = [
            bodies[r.event.message_id].message
            for r in records
            if isinstance(r.event, MessageAppended) and r.event.message_id in bodies
        ]
        first = first_request(messages)
        if first or until >= head:
            return clip(first, GOAL_CHARS) if first else ""
        until *= 8


# How much of the task's opening (normalized) a goal must hold: a goal clipped to fit keeps at least
# this much of it.
_TASK_OPENING: Final = 20
# How many events the first look for the task reads.
_FIRST_WINDOW: Final = 64


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
