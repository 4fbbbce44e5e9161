"""The protected functions that copy a session's log: restore of an exported state, and fork.

It is the only other writer of marks and compaction records besides the compaction steps: the events
are copied as they are, in order, through `transcript.flagwrite`, into a session that does not exist
yet, in one transaction. Bodies keep the token counts (and tokenizer) they were stored with, so
nothing is counted again and the restored view is the exported one.
"""

from __future__ import annotations

from transcript.errors import ConflictError, InvalidMessage
from transcript.flagwrite import copy_log
from transcript.model import Event, ForkedFrom, MessageAppended, ViewServed
from transcript.state import SessionState
from transcript.store import PreparedMessage, SessionWrite, Store


def restore_session(store: Store, state: SessionState, session_id: str | None = None) -> str:
    """Rebuild an exported session under `session_id` (default: its own id); returns the id."""
    target = session_id or state.session_id
    if store.has_session(target):
        raise ConflictError(f"session {target!r} already exists in {store.path}; restore into a new id")
    bodies: dict[str, PreparedMessage] = {}
    for exported in state.bodies:
        prepared = store.prepare(exported.message, count=False)
        if len(exported.tokens) != len(prepared.message.parts):
            raise InvalidMessage(f"message {prepared.message.id!r}: token counts do not match its parts")
        bodies[prepared.message.id] = prepared._replace(tokens=exported.tokens, tokenizer=exported.tokenizer)
    next_seq = 0
    for expected, record in enumerate(state.events, start=1):
        if record.version != expected:
            raise InvalidMessage(
                f"event versions must run 1, 2, 3, ...; found {record.version} at {expected}"
            )
        event = record.event
        if isinstance(event, MessageAppended):
            if event.seq != next_seq:
                raise InvalidMessage(f"event {expected} appends seq {event.seq}, expected {next_seq}")
            next_seq += 1
            body = bodies.get(event.message_id)
            if body is None or body.hash != event.body_hash:
                raise InvalidMessage(
                    f"event {expected} appends {event.message_id!r} without its exported body"
                )
    copy_log(store, [SessionWrite(target, 0, [e.event for e in state.events], bodies)])
    return target


def fork_session(store: Store, parent_id: str, point: int | None, session_id: str) -> str:
    """A new session whose log starts as the parent's up to `point` (its whole log when None).

    The bodies are shared; the parent's marks, directives and compaction records up to the point are
    copied, so the fork's view at its start is the parent's view at that point. Served-view records
    are not copied (they attest the parent's model calls). The parent is never written.
    """
    if store.has_session(session_id):
        raise ConflictError(f"session {session_id!r} already exists in {store.path}; fork into a new id")
    records, stored = store.read_log(parent_id, point)
    head = records[-1].version if records else 0
    if not records or (point is not None and head < point):
        raise InvalidMessage(f"session {parent_id!r} has no point {point}")
    bodies: dict[str, PreparedMessage] = {}
    for message_id, body in stored.items():
        prepared = store.prepare(body.message, count=False)
        bodies[message_id] = prepared._replace(tokens=body.tokens)
    events: list[Event] = [ForkedFrom(parent_session_id=parent_id, point=head)]
    events.extend(r.event for r in records if not isinstance(r.event, ViewServed))
    copy_log(store, [SessionWrite(session_id, 0, events, bodies)])
    return session_id
