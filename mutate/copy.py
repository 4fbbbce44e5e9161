"""The mutator's copies of a session's log: restore of an exported state, and fork.

Besides the compaction steps, these are the only writers of marks and compaction records: the events
are copied as they are, in order, through the writer capability, into a session that does not exist
yet, in one transaction. Bodies keep the token counts (and tokenizer) they were stored with, so
nothing is counted again and the restored view is the exported one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from transcript.model.codec import normalize_message
from transcript.model.errors import (
    ConflictError,
    DuplicateMessage,
    InvalidArgument,
    InvalidMessage,
    StoreCorrupted,
    WriteRefused,
)
from transcript.model.events import (
    EVENT_ENCODER,
    Event,
    ForkedFrom,
    MessageAppended,
    MessageMarked,
    MessagesExcluded,
    RestoredFrom,
    SnapshotRecorded,
    UsageRecorded,
    ViewServed,
)
from transcript.model.hashing import GENESIS, body_hash, event_hash
from transcript.model.history import check_order, pending_after
from transcript.model.message import Message
from transcript.model.state import ExportedBody, SessionState
from transcript.store.port import EventStore, LogRecord, NewBody, SessionWrite, StoredBody
from transcript.store.writer import writer_for
from transcript.tokens import TokenCounter, get_counter, message_tokens


def restore_session(
    store: EventStore,
    state: SessionState,
    session_id: str,
    counter: TokenCounter,
    *,
    before_write: Callable[[], None] | None = None,
    expect_head: str | None = None,
) -> str:
    """Rebuild an exported session under `session_id`; returns the id.

    The document is untrusted: before anything is written it passes every check an append passes
    (well-formed bodies, the pairing rule, token counts equal to a recount) and the log's own rules
    (versions 1, 2, 3, ...; dense `seq`; marks naming appended messages; served-view records that fit
    the view they describe), that its events chain to the head it states, and then `before_write`
    (the caller's checks of its fold). Raises `InvalidMessage` naming the first problem; nothing is
    written. The copy ends with a `RestoredFrom` event naming the original's re-derived head, marked
    `unverified` when nothing vouched for it: the document stated no head and `expect_head` (a head
    of the original kept elsewhere, or a prefix of it) was not given. Given, the events must chain to
    it.
    """
    bodies = {body.message.id: body for body in (_restored(item, counter) for item in state.bodies)}
    _check_log([record.version for record in state.events], [record.event for record in state.events], bodies)
    events = [e.event for e in state.events]
    if before_write is not None:
        before_write()
    if events:
        head = _chained(state, expect_head)
        unverified = not state.head and expect_head is None
        events.append(
            RestoredFrom(session_id=state.session_id, version=len(events), head=head, unverified=unverified)
        )
    elif expect_head is not None:
        raise InvalidMessage("the document holds no events, so no head can vouch for it; nothing was written")
    _copy(store, session_id, events, bodies, "restore into a new id")
    return session_id


def copy_session(
    store: EventStore,
    state: SessionState,
    counter: TokenCounter,
    *,
    before_write: Callable[[], None] | None = None,
    expect_head: str | None = None,
) -> str:
    """Store an exported session as the very same log: its id, events, event times and so every hash,
    after the checks a restore makes (the document must chain to the head it states, and to
    `expect_head` when given). An exact copy keeps no record of where it came from, so a document
    that states no head is refused unless `expect_head` vouches for it. Returns the id;
    `ConflictError` when the store already has a session of that id."""
    if store.head(state.session_id)[0]:
        raise ConflictError(
            f"session {state.session_id!r} already exists in {store.path}; nothing was written"
        )
    bodies = {body.message.id: body for body in (_restored(item, counter) for item in state.bodies)}
    _check_log([record.version for record in state.events], [record.event for record in state.events], bodies)
    if before_write is not None:
        before_write()
    if state.events and not state.head and expect_head is None:
        raise InvalidMessage(
            "the document states no head, and an exact copy would keep its log with no record that "
            "nothing vouched for it: give the head to expect, or restore it as a new session (marked "
            "unverified); nothing was written"
        )
    if state.events:
        head = _chained(state, expect_head)
        write = SessionWrite(
            state.session_id,
            0,
            [record.event for record in state.events],
            bodies,
            recorded_at=[record.recorded_at for record in state.events],
        )
        writer_for(store).commit([write])
        if store.head(state.session_id)[1] != head:
            raise InvalidMessage(
                f"session {state.session_id!r}: the copy does not chain to the exported head"
            )
    return state.session_id


def _chained(state: SessionState, expect_head: str | None = None) -> str:
    """The head the document's events chain to under its session's id, as the exporting store chained
    them; a document that states another head was edited since, and one that does not chain to
    `expect_head` (a kept head, or a prefix of it) is not the one it was kept of (`InvalidMessage`)."""
    head = GENESIS
    for record in state.events:
        head = event_hash(
            head, state.session_id, record.version, record.recorded_at, EVENT_ENCODER.encode(record.event)
        )
    if state.head and head != state.head:
        raise InvalidMessage(
            f"the document's events do not chain to the head it states ({state.head[:16]}…): it was "
            "edited after it was exported; nothing was written"
        )
    if expect_head is not None and not head.startswith(expect_head.lower()):
        raise InvalidMessage(
            f"the document's events chain to {head[:16]}…, not to the expected head {expect_head[:16]}…: "
            "it is not the log that head was kept of; nothing was written"
        )
    return head


def _restored(exported: ExportedBody, counter: TokenCounter) -> NewBody:
    """An exported body, checked and hashed, with counts that must equal a recount by its tokenizer."""
    body = _body(exported.message, exported.tokens, exported.tokenizer)
    where = f"message {body.message.id!r}"
    if len(body.tokens) != len(body.message.parts):
        raise InvalidMessage(f"{where}: token counts do not match its parts")
    recount = counter if exported.tokenizer == counter.name else _counter_named(exported.tokenizer, where)
    if body.tokens != message_tokens(body.message, recount):
        raise InvalidMessage(f"{where}: its token counts differ from a recount with {recount.name}")
    return body


def _counter_named(name: str, where: str) -> TokenCounter:
    try:
        return get_counter(name)
    except InvalidArgument as exc:
        raise InvalidMessage(f"{where}: counted by {name!r}, a tokenizer this release does not know") from exc


def _check_log(versions: list[int], events: list[Event], bodies: Mapping[str, NewBody]) -> None:
    """The rules of a session's log, checked on an untrusted copy (see `restore_session`)."""
    appended: list[Message] = []
    members: set[str] = set()
    pending: dict[str, str] = {}
    served: set[int] = set()
    for expected, (version, event) in enumerate(zip(versions, events, strict=True), start=1):
        where = f"event {expected}"
        if version != expected:
            raise InvalidMessage(f"event versions must run 1, 2, 3, ...; found {version} at {expected}")
        if isinstance(event, MessageAppended):
            if event.seq != len(appended):
                raise InvalidMessage(f"{where} appends seq {event.seq}, expected {len(appended)}")
            body = bodies.get(event.message_id)
            if body is None or body.hash != event.body_hash:
                raise InvalidMessage(f"{where} appends {event.message_id!r} without its exported body")
            pending = check_order(pending, [body.message])
            appended.append(body.message)
            members.add(event.message_id)
        elif isinstance(event, MessageMarked) and event.message_id not in members:
            raise InvalidMessage(f"{where} marks {event.message_id!r}, which the log has not appended")
        elif isinstance(event, MessagesExcluded) and not event.well_formed(len(appended)):
            raise InvalidMessage(
                f"{where} excludes seqs {event.ranges!r:.120}, not ascending disjoint ranges of the "
                f"{len(appended)} messages the log has appended"
            )
        elif isinstance(event, ViewServed):
            _check_served(event, len(appended) + 1, where)
            served.add(version)
        elif isinstance(event, UsageRecorded):
            _check_usage(event, served, where)


def _check_usage(record: UsageRecorded, served: set[int], where: str) -> None:
    """A usage record answers a served view of the log before it, once (an import's names its reply)."""
    if record.estimate < 0:
        raise InvalidMessage(f"{where}: a usage record with an estimate of {record.estimate} tokens")
    if record.served is not None:
        if record.served not in served:
            raise InvalidMessage(f"{where}: usage for a served view at {record.served}, which the log lacks")
        served.discard(record.served)


def _check_served(record: ViewServed, most: int, where: str) -> None:
    """A served-view record describes a view no longer than the history, by positions inside it."""
    if not 0 <= record.length <= most or record.tokens < 0:
        raise InvalidMessage(f"{where}: a served view of {record.length} messages, {record.tokens} tokens")
    if any(not 0 <= position < record.length for position, _ in record.changed):
        raise InvalidMessage(f"{where}: a served-view record names positions outside its view")


def fork_session(store: EventStore, parent_id: str, point: int | None, session_id: str) -> str:
    """A new session whose log starts as the parent's up to `point` (its whole log when None).

    The bodies are shared; the parent's marks, directives and compaction records up to the point are
    copied, so the fork's view at its start is the parent's view at that point. Served-view records
    and usage records are not copied (they attest the parent's model calls), nor snapshot records (the
    parent's snapshots). The parent is never written.
    """
    records, stored = store.read_log(parent_id, point)
    head = records[-1].version if records else 0
    if not records or (point is not None and head < point):
        raise InvalidMessage(f"session {parent_id!r} has no point {point}")
    _check_whole_steps(store, parent_id, head, records, stored)
    tokenizers = store.tokenizers(list(stored))
    bodies = {
        message_id: _body(body.message, body.tokens, tokenizers.get(message_id, ""))
        for message_id, body in stored.items()
    }
    for record in records:
        event = record.event
        if isinstance(event, MessageAppended):
            body = bodies.get(event.message_id)
            if body is None or body.hash != event.body_hash:
                raise StoreCorrupted(
                    f"bodies row (message {event.message_id!r}): it is not the body session {parent_id!r} "
                    f"appended at version {record.version} (run `transcript verify`); nothing was written"
                )
    events: list[Event] = [ForkedFrom(parent_session_id=parent_id, point=head)]
    left_out = (ViewServed, UsageRecorded, SnapshotRecorded)
    events.extend(r.event for r in records if not isinstance(r.event, left_out))
    try:
        _copy(store, session_id, events, bodies, "fork into a new id")
    except (DuplicateMessage, InvalidArgument, InvalidMessage, WriteRefused) as exc:
        # The parent's own log and bodies, copied as stored: a check of the write refusing them means
        # they were damaged since they were written.
        raise StoreCorrupted(
            f"session {parent_id!r}: its stored log cannot be copied ({exc}) (run `transcript verify`)"
        ) from exc
    return session_id


def _check_whole_steps(
    store: EventStore,
    parent_id: str,
    point: int,
    records: Sequence[LogRecord],
    stored: Mapping[str, StoredBody],
) -> None:
    """Refuse a fork point between a step's calls and the results the parent went on to store: the fork
    would begin with calls its own first append must answer, cut off from the answers it had."""
    pending: dict[str, str] = {}
    step = 0
    for record in records:
        event = record.event
        if isinstance(event, MessageAppended) and event.message_id in stored:
            message = stored[event.message_id].message
            pending = pending_after(pending, message)
            step = record.version if message.role == "assistant" else step
    if pending and point < store.head(parent_id)[0]:
        calls = ", ".join(repr(call) for call in pending)
        raise InvalidArgument(
            f"point {point} splits a step of {parent_id!r}: call {calls} has no result until a later "
            f"point; fork at {step - 1} (before the step) or at a point after its results"
        )


def _body(message: Message, tokens: tuple[int, ...], tokenizer: str) -> NewBody:
    """A body to copy, checked and hashed again, with the counts it was stored with."""
    normal, data = normalize_message(message)
    return NewBody(normal, data, body_hash(normal), tuple(tokens), tokenizer)


def _copy(
    store: EventStore, session_id: str, events: list[Event], bodies: Mapping[str, NewBody], hint: str
) -> None:
    """Write the copy as a new session; a session of that id that already holds exactly this copy (the
    same command run again) is left as it is, any other is `ConflictError`."""
    if store.head(session_id)[0]:
        records, _ = store.read_log(session_id, len(events))
        if [_same(r.event) for r in records] == [_same(e) for e in events]:
            return
        raise ConflictError(f"session {session_id!r} already exists in {store.path}; {hint}")
    writer_for(store).commit([SessionWrite(session_id, 0, events, bodies)])


def _same(event: Event) -> object:
    """What a copied event must match in a stored log: an append as the log numbered it, without the
    record digest the log adds; any other event whole."""
    if isinstance(event, MessageAppended):
        return (event.seq, event.message_id, event.body_hash)
    return event
