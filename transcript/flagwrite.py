"""The one way to write mark events (`truncated`, `excluded`, projection directives).

Import-linter protects this module: only `mutate` may import it, so marks are written by the
compaction steps and by nothing else. All marks of one call commit in one transaction, checked
against the session version the caller planned from.
"""

from __future__ import annotations

from collections.abc import Sequence

from transcript.model import MessageMarked
from transcript.store import Store


def write_marks(store: Store, session_id: str, expected_version: int, marks: Sequence[MessageMarked]) -> int:
    """Append mark events to a session in one transaction; returns the session's new version.

    Raises `ConflictError` (nothing written) when the session is no longer at `expected_version`.
    """
    for mark in marks:
        if not isinstance(mark, MessageMarked):
            raise TypeError(f"expected MessageMarked events, got {type(mark).__name__}")
    version, _ = store.write(session_id, expected_version, list(marks))
    return version
