"""Redaction and erasure as a user asks for them: the arguments checked, then the event store's one
audited rewrite (`transcript.store.redaction` decides what it rewrites)."""

from __future__ import annotations

from collections.abc import Sequence

from transcript.model.arguments import check_type
from transcript.model.errors import InvalidArgument
from transcript.model.ids import check_session_id
from transcript.model.redaction import check_reason
from transcript.store.port import Erasure, EventStore, Redaction


def redact_in(
    events: EventStore,
    message_id: str,
    *,
    reason: str,
    parts: Sequence[int] | None = None,
    by: str | None = None,
) -> Redaction:
    """`EventStore.redact` after checking every argument (nothing is written on a bad one)."""
    check_type(message_id, str, "message_id")
    checked = check_reason(reason)
    check_type(by, str, "by", optional=True)
    if parts is not None:
        if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence):
            raise InvalidArgument(f"parts is a sequence of part indices, not {type(parts).__name__}")
        if not parts or not all(isinstance(i, int) and not isinstance(i, bool) for i in parts):
            raise InvalidArgument(f"parts names part indices (whole numbers), not {list(parts)!r:.80}")
        parts = tuple(parts)
    return events.redact(message_id, reason=checked, parts=parts, by=by)


def erase_in(events: EventStore, session_id: str, *, reason: str, by: str | None = None) -> Erasure:
    """`EventStore.erase` after checking every argument."""
    check_session_id(session_id)
    checked = check_reason(reason)
    check_type(by, str, "by", optional=True)
    return events.erase(session_id, reason=checked, by=by)
