"""The mutator's copies of a session's log: restore of an exported state, and fork.

Besides the compaction steps, these are the only writers of marks and compaction records: the events
are copied as they are, in order, through the writer capability, into a session that does not exist
yet, in one transaction. Bodies keep the token counts (and tokenizer) they were stored with, so
nothing is counted again and the restored view is the exported one.
"""

from __future__ import annotations

from collections.abc import Mapping

from transcript.model.codec import normalize_message
from transcript.model.errors import ConflictError, InvalidMessage
from transcript.model.events import Event, ForkedFrom, MessageAppended, ViewServed
from transcript.model.hashing import body_hash
from transcript.model.message import Message
from transcript.model.state import SessionState
from transcript.store.port import EventStore, NewBody, SessionWrite
from transcript.store.writer import FlagWriter


def restore_session(store: EventStore, state: SessionState, session_id: str | None = None) -> str:
    """Rebuild an exported session under `session_id` (default: its own id); returns the id."""
    target = session_id or state.session_id
    if store.head(target)[0]:
        raise ConflictError(f"session {target!r} already exists in {store.path}; restore into a new id")
    bodies: dict[str, NewBody] = {}
    for exported in state.bodies:
        body = _body(exported.message, exported.tokens, exported.tokenizer)
        if len(exported.tokens) != len(body.message.parts):
            raise InvalidMessage(f"message {body.message.id!r}: token counts do not match its parts")
        bodies[body.message.id] = body
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
            appended = bodies.get(event.message_id)
            if appended is None or appended.hash != event.body_hash:
                raise InvalidMessage(
                    f"event {expected} appends {event.message_id!r} without its exported body"
                )
    _copy(store, target, [e.event for e in state.events], bodies)
    return target


def fork_session(store: EventStore, parent_id: str, point: int | None, session_id: str) -> str:
    """A new session whose log starts as the parent's up to `point` (its whole log when None).

    The bodies are shared; the parent's marks, directives and compaction records up to the point are
    copied, so the fork's view at its start is the parent's view at that point. Served-view records
    are not copied (they attest the parent's model calls). The parent is never written.
    """
    if store.head(session_id)[0]:
        raise ConflictError(f"session {session_id!r} already exists in {store.path}; fork into a new id")
    records, stored = store.read_log(parent_id, point)
    head = records[-1].version if records else 0
    if not records or (point is not None and head < point):
        raise InvalidMessage(f"session {parent_id!r} has no point {point}")
    tokenizers = store.tokenizers(list(stored))
    bodies = {
        message_id: _body(body.message, body.tokens, tokenizers.get(message_id, ""))
        for message_id, body in stored.items()
    }
    events: list[Event] = [ForkedFrom(parent_session_id=parent_id, point=head)]
    events.extend(r.event for r in records if not isinstance(r.event, ViewServed))
    _copy(store, session_id, events, bodies)
    return session_id


def _body(message: Message, tokens: tuple[int, ...], tokenizer: str) -> NewBody:
    """A body to copy, checked and hashed again, with the counts it was stored with."""
    normal, data = normalize_message(message)
    return NewBody(normal, data, body_hash(normal), tuple(tokens), tokenizer)


def _copy(store: EventStore, session_id: str, events: list[Event], bodies: Mapping[str, NewBody]) -> None:
    FlagWriter(store).commit([SessionWrite(session_id, 0, events, bodies)])
