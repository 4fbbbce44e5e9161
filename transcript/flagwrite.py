"""The one way to write marks (`truncated`, `excluded`, directives), summaries and compaction records.

Import-linter protects this module: only `mutate` may import it, so these events are written by the
compaction steps (and mutate's protected copy for restore and fork) and by nothing else. All events of
one call commit in one transaction, checked against the session version the caller planned from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transcript.model import CompactionRecorded, MessageAppended, MessageMarked
from transcript.store import PreparedMessage, SessionWrite, Store

WritableEvent = MessageMarked | CompactionRecorded | MessageAppended


def write_events(
    store: Store,
    session_id: str,
    expected_version: int,
    events: Sequence[WritableEvent],
    summaries: Mapping[str, PreparedMessage] | None = None,
) -> int:
    """Append marks, compaction records and summary messages in one transaction; returns the version.

    An appended message must be a summary (`kind="summary"`) whose prepared body is in `summaries`.
    Raises `ConflictError` (nothing written) when the session is no longer at `expected_version`.
    """
    bodies = summaries or {}
    for event in events:
        if isinstance(event, MessageAppended):
            body = bodies.get(event.message_id)
            if body is None or body.message.kind != "summary":
                raise TypeError("only summary messages are appended here, with their prepared bodies")
        elif not isinstance(event, (MessageMarked, CompactionRecorded)):
            raise TypeError(
                f"only marks, summaries and compaction records are written here, not {type(event).__name__}"
            )
    version, _ = store.write(session_id, expected_version, list(events), bodies)
    return version


def write_marks(store: Store, session_id: str, expected_version: int, marks: Sequence[MessageMarked]) -> int:
    """Append mark events to a session in one transaction; returns the session's new version."""
    for mark in marks:
        if not isinstance(mark, MessageMarked):
            raise TypeError(f"expected MessageMarked events, got {type(mark).__name__}")
    return write_events(store, session_id, expected_version, marks)


def copy_log(store: Store, writes: Sequence[SessionWrite]) -> list[int]:
    """Write whole event logs (bodies, history, marks, records) in one transaction: restore and fork.

    The caller is `mutate`'s protected copy function, which checks what it copies.
    """
    return [version for version, _ in store.write_many(writes)]
