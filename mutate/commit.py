"""Committing a step: its events, in one transaction, through the writer capability.

What was written comes back as data — the events with the versions they got and the bodies their
appends hold — so the session folds it exactly as it folds an appended turn, without reading back.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import NamedTuple

from transcript.model.events import Event
from transcript.store.port import EventStore, NewBody, SessionWrite, StoredBody
from transcript.store.writer import FlagWriter


class Written(NamedTuple):
    """Events one step committed: the first got `first_version`, the next one more, and so on.

    `token` is the store's change token as of the commit (see `Committed`).
    """

    session_id: str
    first_version: int
    events: tuple[Event, ...]
    bodies: Mapping[str, StoredBody]
    token: Hashable

    @property
    def version(self) -> int:
        """The session's version after this step."""
        return self.first_version + len(self.events) - 1

    def versioned(self) -> Iterator[tuple[int, Event]]:
        """Each event with its version."""
        return enumerate(self.events, start=self.first_version)


def commit(
    store: EventStore,
    session_id: str,
    expected_version: int,
    events: Sequence[Event],
    bodies: Mapping[str, NewBody] | None = None,
) -> Written:
    """Append one step's events in one transaction, checked against `expected_version`."""
    new = dict(bodies or {})
    (done,) = FlagWriter(store).commit([SessionWrite(session_id, expected_version, events, new)])
    stored = {
        message_id: StoredBody(body.message, done.reused.get(message_id, body.tokens))
        for message_id, body in new.items()
    }
    return Written(session_id, expected_version + 1, tuple(events), stored, done.token)
