"""The full step's events, as a pure function: exclusions, the summary append, the round's record.

The excluded messages are marked, the summary message is appended (its body as the round prepared and
counted it), and the record comes last, so one transaction holds the whole step and the round's final
result.
"""

from __future__ import annotations

from planner.full import PreparedFull
from transcript.model.events import CompactionRecorded, Event, MessageAppended, MessageMarked
from transcript.model.result import CompactResult
from transcript.store.port import NewBody


def full_events(prepared: PreparedFull, body: NewBody, result: CompactResult) -> list[Event]:
    """The events of a full step: every summarized message excluded, the summary, then the record."""
    cut = prepared.cut
    marks: list[Event] = [
        MessageMarked(message_id=message_id, excluded=True) for message_id in cut.summarize_ids
    ]
    appended = MessageAppended(seq=cut.next_seq, message_id=body.message.id, body_hash=body.hash)
    return [*marks, appended, CompactionRecorded(result=result)]
