"""Redaction and erasure over any recorder: what is rewritten, decided once, for every backend.

A redaction replaces a stored body's content (or some of its parts) by the tombstone, in every
session that holds it, and scrubs the copies that quote what it removed: the summaries those sessions
hold, and the payloads of their other events (a checkpoint in a compaction record, a stored error, a
title, a process's output tail). Each of those sessions gets one chained `message_redacted` event
naming every body and payload it rewrote, so `verify` accepts exactly those rewrites. An erasure
replaces a session's whole log by one `session_erased` event chained from its old head, and deletes
the bodies no other session holds. The recorder stores what this module plans (`Recorder.redact`,
`Recorder.erase`) through its guards, then purges the freed bytes (`Recorder.purge`).
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from typing import Final, NamedTuple

import msgspec

from transcript.model.codec import MESSAGE_DECODER, encode_message
from transcript.model.errors import InvalidArgument, StoreCorrupted
from transcript.model.events import EVENT_DECODER, EVENT_ENCODER, Event, MessageRedacted, RedactedBody
from transcript.model.hashing import body_hash, payload_digest, record_digest, salted_digest
from transcript.model.message import Message
from transcript.model.redaction import Quotes, redacted_message, scrubbed_message
from transcript.store.recorder import BodyRow, EventRow, PayloadRewrite, Recorder
from transcript.tokens import get_counter, message_tokens

_TOKENS: Final = msgspec.json.Encoder()
# Events never scrubbed: appends and snapshot records carry only ids, versions and hashes, and
# redaction and erasure records are the audit itself (their reasons were checked not to quote what they
# remove).
_NOT_SCRUBBED: Final = frozenset(
    ("message_appended", "message_redacted", "session_erased", "snapshot_recorded")
)


class RedactionPlan(NamedTuple):
    """What one redaction rewrites: the bodies (new rows), the payloads, and each holding session's
    redaction event."""

    bodies: list[BodyRow]
    payloads: list[PayloadRewrite]
    events: dict[str, MessageRedacted]


def who(by: str | None) -> str:
    """Who redacts: the name given, else the user running this process."""
    if by is not None:
        if not isinstance(by, str) or len(by) > 200 or not by.isprintable():
            raise InvalidArgument("`by` names who redacts: one printable line of at most 200 characters")
        return by
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in this environment
        return ""


def plan_redaction(
    recorder: Recorder,
    message_id: str,
    *,
    parts: Sequence[int] | None,
    reason: str,
    by: str,
    salt: bytes,
) -> RedactionPlan:
    """Plan the redaction of `message_id` (its `parts`, or all of it), read in one consistent state."""
    rows = list(recorder.bodies([message_id]))
    if not rows:
        raise InvalidArgument(f"no message {message_id!r} is stored; nothing was redacted")
    row = rows[0]
    message = _message(row)
    if parts is not None:
        bad = [index for index in parts if not 0 <= index < len(message.parts)]
        if bad or not parts:
            raise InvalidArgument(
                f"message {message_id!r} has parts 0 to {len(message.parts) - 1}; parts {list(parts)!r} "
                "cannot be redacted (nothing was)"
            )
    wanted = range(len(message.parts)) if parts is None else parts
    if set(wanted) <= set(message.redacted):
        raise InvalidArgument(f"message {message_id!r} is already redacted there; nothing was redacted")
    redacted, removed = redacted_message(message, parts, reason)
    quotes = Quotes(removed)
    if quotes.windows & set(_windows(reason)) or any(secret in reason for secret in quotes.short):
        raise InvalidArgument("the reason quotes what the redaction removes; give a reason that does not")
    holders = recorder.holders([message_id])
    sessions = set(holders.get(message_id, set()))
    rewritten: dict[str, tuple[Message, BodyRow, RedactedBody]] = {}
    rewritten[message_id] = _rewrite(
        row, message, redacted, parts=tuple(i for i in wanted if i not in message.redacted)
    )
    # Summaries that quote what is removed, in the sessions that hold it (and in those that hold them).
    summaries = _summaries(recorder, sorted(sessions), exclude={message_id})
    for summary_row, summary in summaries:
        scrubbed, changed = scrubbed_message(summary, quotes) if quotes else (summary, ())
        if changed:
            rewritten[summary.id] = _rewrite(summary_row, summary, scrubbed, scrubbed=changed)
    if len(rewritten) > 1:
        for holding in recorder.holders([m for m in rewritten if m != message_id]).values():
            sessions |= holding
    payloads: list[PayloadRewrite] = []
    events: dict[str, MessageRedacted] = {}
    held = recorder.holders(list(rewritten))
    removed_digest = salted_digest(salt, _TOKENS.encode(removed))
    for session_id in sorted(sessions):
        versions = []
        replaced = []
        if quotes:
            for event_row in recorder.events(session_id, kinds="others"):
                payload = _scrubbed_payload(session_id, event_row, quotes)
                if payload is not None:
                    payloads.append(PayloadRewrite(session_id, event_row.version, payload))
                    versions.append((event_row.version, payload_digest(payload)))
                    replaced.append((event_row.version, payload_digest(_bytes(event_row.payload))))
        bodies = tuple(
            entry for mid, (_, _, entry) in rewritten.items() if session_id in held.get(mid, set())
        )
        events[session_id] = MessageRedacted(
            message_id=message_id,
            reason=reason,
            by=by,
            parts=() if parts is None else tuple(sorted(set(parts))),
            bodies=bodies,
            events=tuple(versions),
            removed=removed_digest,
            replaced=tuple(replaced),
        )
    return RedactionPlan([new_row for _, new_row, _ in rewritten.values()], payloads, events)


def _windows(text: str) -> list[str]:
    from transcript.model.redaction import QUOTE_WINDOW

    return [text[i : i + QUOTE_WINDOW] for i in range(len(text) - QUOTE_WINDOW + 1)]


def _message(row: BodyRow) -> Message:
    try:
        message: Message = MESSAGE_DECODER.decode(row.body)
    except (msgspec.DecodeError, TypeError) as exc:
        raise StoreCorrupted(f"bodies row (message {row.message_id!r}): it cannot be read ({exc})") from exc
    return message


def _rewrite(
    row: BodyRow,
    old: Message,
    message: Message,
    *,
    parts: tuple[int, ...] = (),
    scrubbed: tuple[int, ...] = (),
) -> tuple[Message, BodyRow, RedactedBody]:
    """The new row of a rewritten body (`old` as read from `row`, `message` as rewritten): its bytes,
    content hash, counts recounted by the tokenizer that counted it, and record digest; and the entry
    the redaction event keeps of it, with the content hash and record digest of the body it replaces
    as the row holds it (re-derived from its bytes: an edit made before is named by `verify`, never
    vouched for)."""
    data = encode_message(message)
    counts = _TOKENS.encode(message_tokens(message, get_counter(row.tokenizer)))
    digest = record_digest(data, counts, row.tokenizer)
    content = body_hash(message)
    new_row = BodyRow(row.message_id, content, row.tokenizer, counts, data, digest)
    return (
        message,
        new_row,
        RedactedBody(
            message_id=row.message_id,
            hash=content,
            record=digest,
            parts=parts,
            scrubbed=scrubbed,
            was_hash=body_hash(old),
            was_record=record_digest(_bytes(row.body), _bytes(row.tokens), row.tokenizer),
        ),
    )


def _summaries(
    recorder: Recorder, sessions: Sequence[str], exclude: set[str]
) -> list[tuple[BodyRow, Message]]:
    """The summary bodies these sessions hold, each once."""
    ids: dict[str, None] = {}
    for session_id in sessions:
        for append in recorder.history(session_id):
            if append.message_id and append.message_id not in exclude:
                ids[append.message_id] = None
    found = []
    for row in recorder.bodies(list(ids)):
        if b'"kind":"summary"' not in _bytes(row.body):
            continue
        message = _message(row)
        if message.kind == "summary":
            found.append((row, message))
    return found


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def _scrubbed_payload(session_id: str, row: EventRow, quotes: Quotes) -> bytes | None:
    """The event's payload with quotes scrubbed from every string in it, as canonical bytes; None when
    nothing in it quotes what is removed."""
    if row.kind in _NOT_SCRUBBED:
        return None
    payload = _bytes(row.payload)
    try:
        value = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None  # a damaged mark: nothing a view shows, `verify` names it
    scrubbed = quotes.scrub_value(value)
    if scrubbed == value:
        return None
    try:
        event: Event = EVENT_DECODER.decode(msgspec.json.encode(scrubbed))
    except msgspec.DecodeError as exc:
        raise StoreCorrupted(
            f"events row (session {session_id!r}, version {row.version}): scrubbed of the redacted text, "
            f"it would not read back ({exc}); nothing was redacted"
        ) from exc
    return EVENT_ENCODER.encode(event)
