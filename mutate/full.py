"""The full step's events, as a pure function: exclusions, the summary append, the round's record.

The excluded messages are named by one event (their seqs as ranges: its size does not grow with each
message), the summary message is appended (its body as the round prepared and
counted it), and the record comes last, so one transaction holds the whole step and the round's final
result.
"""

from __future__ import annotations

from planner.full import PreparedFull
from transcript.model.events import CompactionRecorded, Event, MessageAppended, MessagesExcluded, ranges_of
from transcript.model.result import CompactResult
from transcript.store.port import NewBody


def full_events(prepared: PreparedFull, body: NewBody, result: CompactResult) -> list[Event]:
    """The events of a full step: every summarized message excluded, the summary, then the record."""
    cut = prepared.cut
    excluded = MessagesExcluded(ranges=ranges_of(cut.summarize))
    appended = MessageAppended(seq=cut.next_seq, message_id=body.message.id, body_hash=body.hash)
    return [excluded, appended, CompactionRecorded(result=result)]
