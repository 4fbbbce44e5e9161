"""The mutator's part of a retraction: messages the session's owner takes back, marked, never deleted.

A framework that owns the conversation can take items back (the OpenAI Agents SDK's `pop_item` and
`clear_session`). The store keeps them: each is marked `retracted` (and `excluded`, so no later view
shows it), and one `RetractionRecorded` naming them closes the write, so every mark belongs to a
record. Calls a retracted step left unanswered are answered by synthetic results, retracted at once,
so the history keeps the pairing rule and a new turn may follow; messages the owner puts in their
place (`then`) are appended in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transcript.model.events import Event, MessageAppended, MessageMarked, RetractionRecorded
from transcript.store.port import EventStore, NewBody, SessionWrite, Written
from transcript.store.writer import writer_for


def retraction_events(
    message_ids: Sequence[str],
    first_seq: int,
    closing: Sequence[NewBody],
    then: Sequence[NewBody],
    *,
    reason: str,
    source: str = "",
) -> list[Event]:
    """The events of one retraction: the marks of `message_ids`, the `closing` synthetic results
    (appended, then retracted), the `then` messages appended, and the record naming every retraction."""
    events: list[Event] = [
        MessageMarked(message_id=key, excluded=True, retracted=True) for key in message_ids
    ]
    seq = first_seq
    for body in closing:
        events.append(MessageAppended(seq=seq, message_id=body.message.id, body_hash=body.hash))
        events.append(MessageMarked(message_id=body.message.id, excluded=True, retracted=True))
        seq += 1
    for body in then:
        events.append(MessageAppended(seq=seq, message_id=body.message.id, body_hash=body.hash))
        seq += 1
    named = (*message_ids, *(body.message.id for body in closing))
    events.append(RetractionRecorded(message_ids=named, reason=reason, source=source))
    return events


def commit_retraction(
    store: EventStore,
    session_id: str,
    expected_version: int,
    events: Sequence[Event],
    bodies: Mapping[str, NewBody],
) -> Written:
    """Write one retraction in one transaction, through the writer capability. Unlike a round's step it
    is never moved to a newer head: "the latest item" means the one its owner saw (`ConflictError`)."""
    write = SessionWrite(session_id, expected_version, events, dict(bodies))
    (done,) = writer_for(store).commit([write])
    return Written.of(write, done)
