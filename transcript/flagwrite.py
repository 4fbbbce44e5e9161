"""The one way to write marks (`truncated`, `excluded`, projection directives) and compaction records.

Import-linter protects this module: only `mutate` may import it, so marks are written by the
compaction steps and by nothing else. All events of one call commit in one transaction, checked
against the session version the caller planned from.
"""

from __future__ import annotations

from collections.abc import Sequence

from transcript.model import CompactionRecorded, MessageMarked
from transcript.store import Store

WritableEvent = MessageMarked | CompactionRecorded


def write_events(
    store: Store, session_id: str, expected_version: int, events: Sequence[WritableEvent]
) -> int:
    """Append mark and compaction events to a session in one transaction; returns the new version.

    Raises `ConflictError` (nothing written) when the session is no longer at `expected_version`.
    """
    for event in events:
        if not isinstance(event, (MessageMarked, CompactionRecorded)):
            raise TypeError(f"only marks and compaction records are written here, not {type(event).__name__}")
    version, _ = store.write(session_id, expected_version, list(events))
    return version


def write_marks(store: Store, session_id: str, expected_version: int, marks: Sequence[MessageMarked]) -> int:
    """Append mark events to a session in one transaction; returns the session's new version."""
    for mark in marks:
        if not isinstance(mark, MessageMarked):
            raise TypeError(f"expected MessageMarked events, got {type(mark).__name__}")
    return write_events(store, session_id, expected_version, marks)
