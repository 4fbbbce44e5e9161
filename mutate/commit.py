"""Committing a step: its events, in one transaction, through the writer capability.

What was written comes back as data (`Written`) — the events with the versions they got and the
bodies their appends hold — so the session folds it exactly as it folds an appended turn, without
reading back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transcript.model.events import Event
from transcript.store.port import EventStore, NewBody, SessionWrite, Written
from transcript.store.writer import writer_for

__all__ = ["Written", "commit"]


def commit(
    store: EventStore,
    session_id: str,
    expected_version: int,
    events: Sequence[Event],
    bodies: Mapping[str, NewBody] | None = None,
) -> Written:
    """Append one step's events in one transaction, checked against `expected_version`."""
    write = SessionWrite(session_id, expected_version, events, dict(bodies or {}))
    (done,) = writer_for(store).commit([write])
    return Written.of(write, done)
