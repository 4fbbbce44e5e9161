"""`verify`: re-derive everything a store promises from its raw rows and name what does not match.

The checks here hold for any backend, over its recorder: each body's content hash and record digest
(its `created_at`, metadata, token counts and tokenizer), the counts against a recount (`deep=True`),
every session's hash chain, the history columns against the payloads, every mark against the round or
import recorded with it (`transcript.store.explained`), each session's head row
against its last event (so a deleted tail or a deleted session is named while the head row is
untouched). Where the head row was edited consistently too, only an anchor kept elsewhere can tell:
`expect_heads` compares heads with hashes the caller kept. The backend adds its own checks of its
storage (SQLite: the schema, its page check, the guard triggers and views by their SQL). It opens the
store read-only, never migrates or writes, and raises only when the store cannot be read at all.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from transcript.model.arguments import check_flag, check_type
from transcript.model.codec import decode_message
from transcript.model.errors import InvalidArgument, TranscriptError
from transcript.model.events import (
    EVENT_DECODER,
    Event,
    MessageAppended,
    MessageMarked,
    MessageRedacted,
    MessagesExcluded,
    RecordsAttested,
    RedactedBody,
    RestoredFrom,
    SessionErased,
)
from transcript.model.hashing import GENESIS, body_hash, event_hash, payload_digest, record_digest
from transcript.model.message import Message
from transcript.model.redaction import is_tombstone
from transcript.store.anchor import AcknowledgedLoss, Anchor, held_at, read_anchor
from transcript.store.explained import unexplained_marks, unmatched_records
from transcript.store.recorder import Problem as Problem, Recorder
from transcript.tokens import get_counter, message_tokens

_TOKENS: Final = msgspec.json.Decoder(tuple[int, ...])


class Edit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One audited edit a session's log records: a redaction (`message_id`, its `parts` or all of it;
    the `bodies` it rewrote in this session and how many of its event payloads) or an erasure (how
    many `events` and `bodies` went), when (`at`, the event's time), why (`reason`) and by whom (`by`,
    as the writer stated it), at `version` of `session_id`."""

    kind: str  # "redaction" or "erasure"
    session_id: str
    version: int
    at: str
    reason: str
    by: str = ""
    message_id: str | None = None
    parts: tuple[int, ...] = ()
    bodies: tuple[str, ...] = ()
    events: int = 0
    erased_bodies: int = 0

    def __str__(self) -> str:
        who = f" by {self.by!r}" if self.by else " (no name given)"
        if self.kind == "erasure":
            what = f"erased {self.events} events and {self.erased_bodies} bodies"
        else:
            where = f" parts {list(self.parts)}" if self.parts else ""
            what = f"redacted message {self.message_id!r}{where} ({len(self.bodies)} bodies"
            what += f", {self.events} payloads)" if self.events else ")"
        where = f"session {self.session_id!r} event {self.version} at {self.at}"
        return f"{self.kind}: {where}: {what}{who}: {self.reason!r}"


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` checked and every problem it found, content problems first."""

    path: str
    schema: tuple[str, ...]
    bodies: int
    sessions: int
    events: int
    problems: tuple[Problem, ...]
    heads: dict[str, str] = msgspec.field(default_factory=dict)
    # Sessions whose older appends no attestation covers yet (a file only ever opened read-only by this
    # release): their bodies' records are checked against their own digests, not against the chain.
    unattested: tuple[str, ...] = ()
    anchored: int = 0  # how many sessions an anchor file vouched for
    # Losses the anchor file named and someone acknowledged (`transcript.store.anchor`): information,
    # not problems.
    acknowledged: tuple[AcknowledgedLoss, ...] = ()
    # Every redaction and erasure the logs hold, in session and version order: the audited edits.
    edits: tuple[Edit, ...] = ()
    # Sessions restored from a document nothing vouched for (it stated no head, and the restore was
    # given none to expect), but for those `expect_heads` vouched for: their logs are that document's
    # word. Listed, not a problem: their chains hold.
    unverified: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing was found wrong."""
        return not self.problems

    @property
    def first(self) -> Problem | None:
        """The first mismatch found, or None."""
        return self.problems[0] if self.problems else None


def verify(
    path: str | Path,
    *,
    deep: bool = False,
    expect_heads: Mapping[str, str] | None = None,
    anchor: bool | str | Path = True,
    extra: Callable[[Recorder], list[Problem]] | None = None,
) -> VerifyReport:
    """Check a store end to end (see the module docstring).

    `deep=True` also recounts every body's tokens with the tokenizer that counted them.
    `expect_heads` maps session ids to head hashes kept elsewhere (e.g. printed by `transcript
    sessions` earlier): the whole hash, or any prefix of it of at least `HEAD_PREFIX_MIN` hex digits;
    a session whose head differs, or that is gone, is named. `anchor`: the head anchor file to check
    the chains against — by default `<file>.anchor` when it exists; a path; or False for none. Every
    head it kept must be on its session's chain (`events_lost`, `anchor_mismatch`) unless that loss
    was acknowledged (`transcript.store.acknowledge.acknowledge_loss`; listed in
    `acknowledged`).
    A path that names a directory, a FIFO or a device is refused at once (`NotARegularFile`).
    `extra` checks what the store layer cannot (the session layer's snapshots against a fold).
    """
    from transcript.store.backends import anchor_location, open_recorder
    from transcript.store.location import MEMORY, MEMORY_RECORDER, check_location, check_regular, is_server

    check_type(path, (str, Path), "path")
    check_flag(deep, "deep")
    check_expected_heads(expect_heads)
    check_type(anchor, (bool, str, Path), "anchor")
    target = check_location(path)
    no_file = target == MEMORY or target.startswith(MEMORY_RECORDER) or is_server(target)
    if not no_file:
        check_regular(target, "a store")
    anchor_path = None if anchor is True and no_file else anchor_location(target, anchor)
    if anchor_path and anchor is not True and not Path(anchor_path).exists():
        raise InvalidArgument(f"no head anchor file at {anchor_path}")
    anchors = read_anchor(anchor_path) if anchor_path else None
    recorder = open_recorder(target, verifying=True)
    try:
        return check(recorder, deep=deep, expect_heads=expect_heads, anchors=anchors, extra=extra)
    finally:
        recorder.close()


# The shortest head prefix `expect_heads` takes: 48 bits, as many as no edit can be searched to match.
HEAD_PREFIX_MIN: Final = 12
_HEX: Final = frozenset("0123456789abcdef")


def check_expected_heads(expect_heads: object) -> None:
    """`InvalidArgument` unless `expect_heads` maps session ids to hex head hashes (or prefixes of at
    least `HEAD_PREFIX_MIN` digits)."""
    if expect_heads is None:
        return
    if not isinstance(expect_heads, Mapping):
        raise InvalidArgument(
            f"expect_heads maps session ids to head hashes, not {type(expect_heads).__name__}"
        )
    for session_id, head in expect_heads.items():
        check_type(session_id, str, "a session id in expect_heads")
        check_type(head, str, f"the expected head of {session_id!r}")
        if not HEAD_PREFIX_MIN <= len(head) <= 64 or not set(head.lower()) <= _HEX:
            raise InvalidArgument(
                f"the expected head of {session_id!r} must be {HEAD_PREFIX_MIN} to 64 hex digits "
                f"(a head hash or its prefix), not {head!r:.80}"
            )


def check(
    recorder: Recorder,
    *,
    deep: bool = False,
    expect_heads: Mapping[str, str] | None = None,
    anchors: Anchor | None = None,
    extra: Callable[[Recorder], list[Problem]] | None = None,
) -> VerifyReport:
    """`verify` over an open recorder: the backend's own checks around the log's. `anchors` is what
    an anchor file holds: the heads (by session: version and hash) each chain must hold, and the
    losses acknowledged; `extra` more checks over the recorder (see `verify`)."""
    anchors = anchors or Anchor({})
    problems: list[Problem] = []
    with recorder.reading():
        storage = recorder.storage_check()
        if storage.stop:
            return VerifyReport(
                path=recorder.location,
                schema=storage.schema,
                bodies=0,
                sessions=0,
                events=0,
                problems=tuple(storage.stop),
            )
        problems.extend(storage.before)
        summaries: set[str] = set()
        redacted: dict[str, Message] = {}
        bodies = dict(_check_bodies(recorder.scan_bodies(), problems, deep, summaries, redacted))
        seen = _check_sessions(recorder.scan_events(), bodies, summaries, redacted, anchors.heads, problems)
        _check_body_order(list(bodies), seen, problems)
        heads = _check_heads(recorder.heads(), seen, dict(expect_heads or {}), problems)
        _check_anchors(anchors.heads, seen, problems)
        if extra is not None:
            problems.extend(extra(recorder))
        problems.extend(storage.after)
    return VerifyReport(
        path=recorder.location,
        schema=storage.schema,
        bodies=len(bodies),
        sessions=len(seen),
        events=sum(session.events for session in seen.values()),
        problems=tuple(problems),
        heads=heads,
        edits=tuple(edit for session in seen.values() for edit in session.edits),
        unverified=tuple(
            sid
            for sid, session in seen.items()
            if session.unverified and not _vouched(sid, session, expect_heads or {})
        ),
        unattested=tuple(sid for sid, session in seen.items() if session.unattested),
        anchored=len(anchors.heads),
        acknowledged=anchors.acknowledged,
    )


def _check_bodies(
    rows: Iterable[tuple[Any, ...]],
    problems: list[Problem],
    deep: bool,
    summaries: set[str],
    redacted: dict[str, Message],
) -> Iterator[tuple[str, tuple[str, str | None, bool]]]:
    """Each body's own checks; yields its id, content hash and record digest (of the bytes stored).
    The ids of summary messages are added to `summaries`, the bodies with redacted parts to
    `redacted`."""
    for message_id, stored_hash, tokenizer, tokens, body, digest in rows:
        if not all(isinstance(v, (bytes, str)) for v in (tokens, body, tokenizer, stored_hash, digest)):
            yield message_id, (stored_hash, None, False)
            _body_problem(
                problems, message_id, "body_type", "a column holds a value of a type the store never writes"
            )
            continue
        actual = _digest(body, tokens, tokenizer)
        # The chain's record is compared only where the row agrees with its own digest: an edit that
        # did not reseal the row is named here once.
        yield message_id, (stored_hash, actual, actual == digest)
        report = functools.partial(_body_problem, problems, message_id)
        if actual != digest:
            report("body_record", "the stored record (time, metadata, counts or tokenizer) was edited")
        try:
            message = decode_message(_raw(body))
            counts = _TOKENS.decode(_raw(tokens))
        except (msgspec.DecodeError, TranscriptError) as exc:
            report("body_unreadable", str(exc))
            continue
        if message.kind == "summary":
            summaries.add(message_id)
        if message.redacted:
            redacted[message_id] = message
        if message.id != message_id:
            report("body_id", f"body says id {message.id!r}")
        actual = body_hash(message)
        if actual != stored_hash:
            report("body_hash", f"content hashes to {actual[:12]}…, stored hash is {stored_hash[:12]}…")
        if len(counts) != len(message.parts) or any(count < 0 for count in counts):
            report("body_tokens", "token counts do not match the parts")
        elif deep:
            _recount(report, message, counts, tokenizer)


def _recount(report: Any, message: Any, counts: tuple[int, ...], tokenizer: str) -> None:
    try:
        counter = get_counter(tokenizer)
    except TranscriptError:
        report("body_tokenizer", f"counted by {tokenizer!r}, a tokenizer this release does not know")
        return
    recount = message_tokens(message, counter)
    if recount != counts:
        report("body_recount", f"stored counts {sum(counts):,} tokens, a recount gives {sum(recount):,}")


def _body_problem(problems: list[Problem], message_id: str, code: str, detail: str) -> None:
    problems.append(Problem(code=code, detail=detail, message_id=message_id))


def _digest(body: bytes | str, tokens: bytes | str, tokenizer: str) -> str | None:
    """The record digest of a row as stored; None when damaged text cannot even be hashed."""
    try:
        return record_digest(_raw(body), _raw(tokens), tokenizer)
    except UnicodeEncodeError:
        return None


def _chained(prev: str, session_id: str, version: int, recorded_at: str, payload: bytes) -> str | None:
    """An event's chained hash as stored; None when damaged text cannot even be hashed."""
    try:
        return event_hash(prev, session_id, version, recorded_at, payload)
    except UnicodeEncodeError:
        return None


def _raw(value: bytes | str) -> bytes:
    """A column's bytes as stored (text was read with its undecodable bytes escaped)."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


class _Seen(NamedTuple):
    """What the walk of one session's chain found."""

    events: int
    last: tuple[int, str]
    # Heads a hash kept earlier may name: the last; one followed only by attestations; the original's
    # head a restored copy was re-derived to.
    settled: frozenset[str]
    unattested: bool  # an append before records were chained, and no attestation of it
    # The hash the chain holds at each version an anchor file kept (a version it does not reach left out).
    anchored: Mapping[int, str]
    appended: tuple[str, ...]  # the history's message ids, in order
    edits: tuple[Edit, ...] = ()  # the redactions and erasures its log records
    unverified: frozenset[str] = frozenset()  # the heads of restores nothing vouched for


def _check_sessions(
    rows: Iterable[tuple[Any, ...]],
    bodies: dict[str, tuple[str, str | None, bool]],
    summaries: set[str],
    redacted: dict[str, Message],
    anchors: Mapping[str, tuple[tuple[int, str], ...]],
    problems: list[Problem],
) -> dict[str, _Seen]:
    # One pass over every event, grouped here: a session id damaged into text that is not UTF-8
    # could not even be sent back to the backend as a query parameter.
    seen: dict[str, _Seen] = {}
    for session_id, group in itertools.groupby(rows, key=lambda row: row[0]):
        session_rows = [row[1:] for row in group]
        audit = _audit(session_rows)
        walked = _check_session(session_id, iter(session_rows), bodies, summaries, problems, audit, redacted)
        kept = anchors.get(session_id, ())
        held = held_at(kept, ((row[0], row[5], row[6]) for row in session_rows)) if kept else {}
        seen[session_id] = walked._replace(anchored=held)
    return seen


class _Audit(NamedTuple):
    """What a session's redaction and erasure events vouch for: each rewritten body's entries in the
    order its redactions wrote them (with each one's version and reason; the last is what the store
    must hold), each rewritten event's latest payload digest and its rewrites (the version of the
    redaction, the old digest it names or "" and the new one), and the erasure the log starts with
    (None: it starts at the genesis)."""

    bodies: dict[str, list[tuple[RedactedBody, str, int]]]
    events: dict[int, str]
    rewrites: dict[int, list[tuple[int, str, str]]]
    erased: SessionErased | None


def _audit(rows: list[tuple[Any, ...]]) -> _Audit:
    """Read the redaction and erasure events of a session's rows (damaged ones are named by the walk)."""
    bodies: dict[str, list[tuple[RedactedBody, str, int]]] = {}
    events: dict[int, str] = {}
    rewrites: dict[int, list[tuple[int, str, str]]] = {}
    erased = None
    for index, (version, kind, _, _, _, payload, _) in enumerate(rows):
        if kind not in ("message_redacted", "session_erased") or not isinstance(payload, (bytes, str)):
            continue
        try:
            event = EVENT_DECODER.decode(_raw(payload))
        except msgspec.DecodeError:
            continue
        if isinstance(event, MessageRedacted):
            for entry in event.bodies:
                bodies.setdefault(entry.message_id, []).append((entry, event.reason, version))
            events.update(event.events)
            old = dict(event.replaced)
            for rewritten, digest in event.events:
                rewrites.setdefault(rewritten, []).append((version, old.get(rewritten, ""), digest))
        elif isinstance(event, SessionErased) and index == 0:
            erased = event
    return _Audit(bodies, events, rewrites, erased)


def _check_session(
    session_id: str,
    rows: Iterator[tuple[Any, ...]],
    bodies: dict[str, tuple[str, str | None, bool]],
    summaries: set[str],
    problems: list[Problem],
    audit: _Audit,
    redacted: dict[str, Message],
) -> _Seen:
    members: set[str] = set()
    restored: set[str] = set()  # the original's heads a restored copy's chain vouches it came from
    appended: list[str] = []
    unrecorded: set[str] = set()
    prev = GENESIS
    count = 0
    next_seq = 0
    last = (0, GENESIS)
    settled: list[str] = []
    read: list[tuple[int, str, Event]] = []  # every event read whole, with the commit it is of
    edits: list[Edit] = []
    unverified: set[str] = set()
    if audit.erased is not None:
        # The log before the erasure is gone; the erasure event chains from its last hash.
        prev, count = audit.erased.head, audit.erased.version
        restored.add(audit.erased.head)
    for version, kind, row_seq, row_message_id, recorded_at, payload, stored_hash in rows:
        count += 1
        last = (version, stored_hash)
        report = functools.partial(_report, problems, session_id, version)
        if isinstance(payload, bytes):
            # Rewritten as a BLOB (X'..', a cast): the row was edited outside the store.
            report("event_type", "payload is stored as a BLOB, not the JSON text the store writes")
        elif isinstance(payload, str):
            payload = _raw(payload)
        if (
            not isinstance(payload, bytes)
            or not isinstance(recorded_at, str)
            or not isinstance(stored_hash, str)
        ):
            report("event_type", "a column holds a value of a type the store never writes")
            prev = stored_hash if isinstance(stored_hash, str) else prev
            continue
        if version != count:
            report("event_gap", f"expected event {count}")
            count = version
        if _chained(prev, session_id, version, recorded_at, payload) != stored_hash:
            rewritten = audit.events.get(version)
            if rewritten is None:
                report("event_hash", "the event's hash chain does not match")
            elif payload_digest(payload) != rewritten:
                report(
                    "redaction_mismatch", "its payload is not the one the redaction that rewrote it recorded"
                )
        prev = stored_hash
        try:
            event = EVENT_DECODER.decode(payload)
        except msgspec.DecodeError as exc:
            report("event_unreadable", str(exc))
            settled = [stored_hash]
            continue
        # A head kept before an attestation, or before a redaction that names what it replaced, is still
        # the session's: only those follow it, and they change nothing a head vouched for unnamed.
        follows = isinstance(event, RecordsAttested) or (
            isinstance(event, MessageRedacted) and event.accountable
        )
        settled = [*settled, stored_hash] if follows else [stored_hash]
        if isinstance(event, (MessageRedacted, SessionErased)):
            edits.append(_edit(session_id, version, recorded_at, event))
        if event.kind != kind:
            report("event_kind", f"kind column {kind!r}, payload {event.kind!r}")
        read.append((version, recorded_at, event))
        if isinstance(event, MessageAppended):
            seq, message_id = event.seq, event.message_id
            if seq != next_seq:
                report("seq_gap", f"expected seq {next_seq}", seq, message_id)
            if (row_seq, row_message_id) != (seq, message_id):
                report(
                    "history_mismatch",
                    f"the history row says seq {row_seq} holds {row_message_id!r}",
                    seq,
                    message_id,
                )
            stored = bodies.get(message_id)
            if stored is None:
                report("body_missing", "no body stored for this message", seq, message_id)
            elif (
                message_id in redacted
                and message_id not in audit.bodies
                and body_hash(redacted[message_id]) != event.body_hash
            ):
                report(
                    "redaction_unrecorded",
                    "the body holds a tombstone no redaction event names",
                    seq,
                    message_id,
                )
            elif message_id in audit.bodies and stored[0] != event.body_hash:
                _check_custody(report, seq, message_id, event, audit.bodies[message_id])
                entry, reason, _ = audit.bodies[message_id][-1]
                _check_redacted(report, seq, message_id, stored, (entry, reason), redacted)
            elif stored[0] != event.body_hash:
                code, detail = (
                    ("redaction_unrecorded", "the body holds a tombstone no redaction event names")
                    if message_id in redacted
                    else ("body_changed", "the stored body's hash differs from the one appended")
                )
                report(code, detail, seq, message_id)
            elif event.record and stored[2] and stored[1] != event.record:
                report("body_record", _RECORD_EDITED, seq, message_id)
            if not event.record:
                unrecorded.add(message_id)
            members.add(message_id)
            appended.append(message_id)
            next_seq = seq + 1
        else:
            if row_seq is not None or row_message_id is not None:
                report(
                    "history_extra", "a history row on an event that appends nothing", row_seq, row_message_id
                )
            if isinstance(event, MessageMarked) and event.message_id not in members:
                report("mark_unknown", "marks a message not in the session", message_id=event.message_id)
            if isinstance(event, MessagesExcluded) and not event.well_formed(len(appended)):
                report("mark_unknown", "excludes seqs that are not ascending disjoint ranges of the history")
            if isinstance(event, RestoredFrom):
                restored.add(event.head)
                if event.unverified:
                    unverified.add(event.head)
            if isinstance(event, RecordsAttested):
                for message_id, digest in event.records:
                    stored = bodies.get(message_id)
                    if stored is not None and stored[2] and stored[1] != digest:
                        report("body_record", _RECORD_EDITED, message_id=message_id)
                    unrecorded.discard(message_id)
    _check_marks(session_id, _since_records(read), summaries, problems)
    _check_rewrites(session_id, audit, problems)
    return _Seen(
        count,
        last,
        frozenset(settled or [GENESIS]) | restored,
        bool(unrecorded),
        {},
        tuple(appended),
        tuple(edits),
        frozenset(unverified),
    )


def _vouched(session_id: str, session: _Seen, expected: Mapping[str, str]) -> bool:
    """Whether a head the caller kept vouches for every unverified restore of the session's log."""
    kept = expected.get(session_id)
    return kept is not None and all(head.startswith(kept.lower()) for head in session.unverified)


def _edit(session_id: str, version: int, at: str, event: MessageRedacted | SessionErased) -> Edit:
    if isinstance(event, SessionErased):
        return Edit(
            kind="erasure",
            session_id=session_id,
            version=version,
            at=at,
            reason=event.reason,
            by=event.by,
            events=event.version,
            erased_bodies=event.bodies,
        )
    return Edit(
        kind="redaction",
        session_id=session_id,
        version=version,
        at=at,
        reason=event.reason,
        by=event.by,
        message_id=event.message_id,
        parts=event.parts,
        bodies=tuple(entry.message_id for entry in event.bodies),
        events=len(event.events),
    )


def _check_custody(
    report: Any,
    seq: int,
    message_id: str,
    appended: MessageAppended,
    entries: list[tuple[RedactedBody, str, int]],
) -> None:
    """Each redaction of a body must have replaced the body the chain holds for it: the append's hash
    and record, then each earlier redaction's. One that names another replaced an edit made before it
    (a redaction cannot cover an edit)."""
    held = (appended.body_hash, appended.record)
    for entry, _, version in entries:
        if entry.was_hash and (
            entry.was_hash != held[0] or (held[1] and entry.was_record and entry.was_record != held[1])
        ):
            report(
                "redaction_mismatch",
                f"the redaction at event {version} replaced a body that is not the one the chain holds "
                "(it was edited before the redaction)",
                seq,
                message_id,
            )
        held = (entry.hash, entry.record)


def _check_rewrites(session_id: str, audit: _Audit, problems: list[Problem]) -> None:
    """Each rewrite of an event's payload after the first must name, as the payload it replaced, the
    one the rewrite before it recorded: the payloads a head vouched for are followed rewrite by
    rewrite."""
    for rewritten, chain in sorted(audit.rewrites.items()):
        for (_, _, before), (version, was, _) in itertools.pairwise(chain):
            if was and was != before:
                _report(
                    problems,
                    session_id,
                    version,
                    "redaction_mismatch",
                    f"it rewrote event {rewritten}, naming a payload that is not the one the redaction "
                    "before it left",
                )


def _check_redacted(
    report: Any,
    seq: int,
    message_id: str,
    stored: tuple[str, str | None, bool],
    named: tuple[RedactedBody, str],
    redacted: dict[str, Message],
) -> None:
    """A body a redaction rewrote must be the very body it recorded (hash and record digest), and hold
    exactly the tombstone in every part it replaced."""
    entry, reason = named
    message = redacted.get(message_id)
    if stored[0] != entry.hash or stored[1] != entry.record or message is None:
        report("redaction_mismatch", "the body is not the one its redaction recorded", seq, message_id)
        return
    if not set(entry.parts) | set(entry.scrubbed) <= set(message.redacted) or not all(
        index < len(message.parts) and is_tombstone(message.parts[index], reason) for index in entry.parts
    ):
        report("redaction_mismatch", "a part its redaction replaced is not the tombstone", seq, message_id)


_RECORD_EDITED: Final = (
    "the stored record (time, metadata, counts or tokenizer) is not the one the chain holds"
)


def _since_records(read: list[tuple[int, str, Event]]) -> list[tuple[int, str, Event]]:
    """The events from the first commit this release wrote on: the one that attests the older bodies,
    or whose appends carry their records. A log written before marks had to be explained (a store of
    an earlier release, its imports' hidden records) is checked from there on, never before."""
    for index, (_, recorded_at, event) in enumerate(read):
        if isinstance(event, RecordsAttested) or (isinstance(event, MessageAppended) and event.record):
            while index and read[index - 1][1] == recorded_at:
                index -= 1
            return read[index:]
    return []


def _check_marks(
    session_id: str, events: list[tuple[int, str, Event]], summaries: set[str], problems: list[Problem]
) -> None:
    """Name each mark of a session that no round record or import record explains (one commit is one
    `recorded_at`: the log stamps every event of a commit with the same), and each round record that
    claims a summary and exclusions its log does not hold."""
    for version, _ in unmatched_records(events, summaries):
        _report(
            problems,
            session_id,
            version,
            "round_unmatched",
            "a round record claims messages summarized that no summary and exclusions before it hold "
            "(written past the mutator)",
        )
    for version, mark in unexplained_marks(events, summaries):
        _report(
            problems,
            session_id,
            version,
            "mark_unexplained",
            "a mark no compaction round or import recorded with it explains (written past the mutator)",
            message_id=mark.message_id if isinstance(mark, MessageMarked) else None,
        )


def _report(
    problems: list[Problem],
    session_id: str,
    version: int,
    code: str,
    detail: str,
    seq: int | None = None,
    message_id: str | None = None,
) -> None:
    problems.append(
        Problem(
            code=code, detail=detail, session_id=session_id, version=version, seq=seq, message_id=message_id
        )
    )


def _check_heads(
    heads: Mapping[str, tuple[Any, Any]],
    seen: dict[str, _Seen],
    expected: dict[str, str],
    problems: list[Problem],
) -> dict[str, str]:
    """Each session's head row against its last event, and against the heads the caller kept (a head
    kept before an attestation is still the session's: only attestations follow it)."""
    lasts = {session_id: session.last for session_id, session in seen.items()}
    for session_id in sorted(set(heads) | set(lasts), key=str):
        head, last = heads.get(session_id), lasts.get(session_id)
        if head is None:
            problems.append(
                Problem(code="head_missing", detail="the session has no head row", session_id=session_id)
            )
        elif last is None:
            problems.append(
                Problem(
                    code="session_deleted",
                    detail=f"its head is version {head[0]}; no event is stored",
                    session_id=session_id,
                )
            )
        elif head[0] != last[0]:
            detail = f"its head is version {head[0]}, its last stored event is version {last[0]}"
            code = "events_deleted" if isinstance(head[0], int) and head[0] > last[0] else "head_mismatch"
            problems.append(Problem(code=code, detail=detail, session_id=session_id))
        elif head[1] != last[1]:
            problems.append(
                Problem(
                    code="head_mismatch",
                    detail="its head hash is not its last event's",
                    session_id=session_id,
                )
            )
    for session_id, kept in sorted(expected.items()):
        session = seen.get(session_id)
        if session is None or not any(head.startswith(kept.lower()) for head in session.settled):
            found = session.last[1] if session is not None else None
            detail = f"expected head {kept[:12]}…, " + (
                f"found {found[:12]}…" if found else "the session is gone"
            )
            problems.append(Problem(code="head_unexpected", detail=detail, session_id=session_id))
    return {sid: last[1] for sid, last in lasts.items()}


def _check_body_order(stored: list[str], seen: dict[str, _Seen], problems: list[Problem]) -> None:
    """Bodies are stored in the order they are first appended: within one session, the bodies no
    other session holds come in the order of its history. Rows whose places were swapped (which
    changes what search finds under them) break it."""
    rank = {message_id: n for n, message_id in enumerate(stored)}
    holders: dict[str, int] = {}
    for session in seen.values():
        for message_id in set(session.appended):
            holders[message_id] = holders.get(message_id, 0) + 1
    # By id as text: a damaged row may hold an id of another type (a blob), which does not compare.
    for session_id, session in sorted(seen.items(), key=lambda item: str(item[0])):
        own = [rank[m] for m in session.appended if holders.get(m) == 1 and m in rank]
        for before, after in itertools.pairwise(own):
            if after < before:
                problems.append(
                    Problem(
                        code="body_order",
                        detail="its bodies are not stored in the order it appended them (rows were swapped)",
                        session_id=session_id,
                        message_id=stored[after],
                    )
                )
                break


def _check_anchors(
    anchors: Mapping[str, tuple[tuple[int, str], ...]], seen: dict[str, _Seen], problems: list[Problem]
) -> None:
    """Every head an anchor file kept must be on its session's chain (it may have moved on since):
    a commit acknowledged once is never lost without this saying so, however much is written after
    (`transcript.store.anchor`), until the loss is acknowledged."""
    for session_id, kept in sorted(anchors.items()):
        session = seen.get(session_id)
        for version, digest in kept:
            found = session.anchored.get(version) if session is not None else None
            if found is None:
                held = session.last[0] if session is not None else 0
                problems.append(
                    Problem(
                        code="events_lost",
                        detail=(
                            f"the anchor file holds version {version} of it; the store holds {held} events"
                        ),
                        session_id=session_id,
                    )
                )
            elif found != digest:
                problems.append(
                    Problem(
                        code="anchor_mismatch",
                        detail=(
                            f"event {version} is not the one the anchor file holds: the events after "
                            f"version {version - 1} that it recorded were lost and others written since"
                        ),
                        session_id=session_id,
                        version=version,
                    )
                )
