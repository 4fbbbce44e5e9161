"""Snapshots of a session's fold: what an open loads instead of folding the whole log.

A snapshot holds the fold as of one version — the flags of every message the view shows, the
excluded history as seq ranges, step and turn starts, counts, the pending calls, the round records,
the last served view's digests, title, caps and processes — and no body. It is stored with a chained
record of its digest (`SnapshotRecorded`, the event right after the version it folds to, in the same
transaction). An open loads the newest snapshot the chain proves (`EventLog.snapshot`: its digest,
its event hash and its record; an edited or unrecorded one is passed over), folds only the events
after it, and reads only the bodies of the messages the view shows (`lazy`): the excluded history is
read when something needs it (the planner's input, `messages()`, the title, a re-append of an old
id), by folding the whole log once.

A snapshot is derived: every byte of it is rebuilt from the log (`state_of` over a full fold), which
`verify` does for each stored snapshot (`check_snapshots`), so redaction of the log can rebuild it.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

import msgspec

from projection.caps import ProviderCaps
from transcript.model.errors import ConflictError
from transcript.model.events import ranges_of
from transcript.model.marks import MessageFlags
from transcript.model.message import Message
from transcript.model.processes import ProcessSnapshot
from transcript.model.result import CompactResult
from transcript.model.snapshot import Entry
from transcript.model.usage import Calibration
from transcript.session.fold import LiveSession
from transcript.store.port import Committed, EventStore, LogRecord, SessionWrite, StoredBody
from transcript.store.recorder import Problem

# Events between snapshots written on the per-turn path (a full round writes one of its own): at
# least EVERY, and past 8 × EVERY messages an eighth of the history. A snapshot encodes the whole
# fold, so spaced by the history's length it costs each event the same at any length (at a fixed
# spacing, a 100k-message session spent 38-50 ms every 1,000 events on it: ~0.1 ms a turn, hidden
# under the median turn); an open then folds at most that eighth after it, events whose messages
# the view mostly shows anyway.
EVERY: Final = 1_000
SPACING: Final = 8


def due(since: int, history: int) -> bool:
    """Whether a periodic snapshot is due `since` events after the last one, at `history` messages."""
    return since >= max(EVERY, history // SPACING)


# At close, a snapshot is written sooner: at least CLOSE_EVERY events after the last one, and past
# CLOSE_SPACING x CLOSE_EVERY messages a CLOSE_SPACING-th of the history. The next open then folds
# only what other writers added since: writing one costs about half a microsecond per message of
# the history (38-50 ms at 100k), once; folding an event at open (its body read with it) costs tens
# of microseconds, at every open after.
CLOSE_EVERY: Final = 100
CLOSE_SPACING: Final = 32


def due_at_close(since: int, history: int) -> bool:
    """Whether closing a session writes a snapshot, `since` events after the last one, at `history`
    messages."""
    return since >= max(CLOSE_EVERY, history // CLOSE_SPACING)


# 2: step and turn starts from the last one at or before the excluded history's end (what a lazy
# session uses), not every one of the history. A snapshot of an older format is passed over.
FORMAT: Final = 2

# What stands for a message of the excluded history whose body a lazy open did not read.
UNREAD: Final = Entry(
    seq=-1,
    message=Message(id="", role="user", parts=(), created_at=datetime(1970, 1, 1, tzinfo=UTC)),
    tokens=(),
    flags=MessageFlags(excluded=True),
)


class Shown(msgspec.Struct, frozen=True, array_like=True):
    """A message the view shows: its seq, id and flags."""

    seq: int
    message_id: str
    flags: MessageFlags


class FoldState(msgspec.Struct, frozen=True, kw_only=True):
    """The fold of a session's log as of one version, without bodies (see the module docstring)."""

    format: int = FORMAT
    history: int
    shown: tuple[Shown, ...]
    excluded: tuple[tuple[int, int], ...]
    step_starts: tuple[int, ...]
    turn_starts: tuple[int, ...]
    pending: tuple[tuple[str, str], ...]
    stored_tokens: int
    system_tokens: int
    results: tuple[CompactResult, ...]
    served: tuple[str, ...]
    served_version: int
    title: str | None
    caps: ProviderCaps
    processes: tuple[ProcessSnapshot, ...] | None
    # The newest served view (version, tokens, whether a usage record answers it: the one a usage
    # record names by default; one for an older view folds the whole log), the fits per model, and
    # the model `calibration()` resolves to.
    served_tokens: tuple[tuple[int, int, bool], ...] = ()
    fits: tuple[Calibration, ...] = ()
    calibrated: tuple[str | None, ...] = ()
    # The version of a restore nothing vouched for (`RestoredFrom.unverified`; 0: none).
    unverified: int = 0


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(FoldState)


def state_of(live: LiveSession) -> FoldState | None:
    """The snapshot of a fold (None when the fold is one no snapshot may stand for: a damaged mark or
    a directive the view cannot use makes the view a rebuilt one, which a full fold re-derives)."""
    if live.rendered.has_problems():
        return None
    shown: list[Shown] = []
    excluded: list[int] = []
    for entry in live.entries:
        if entry.flags.excluded:
            if entry is not UNREAD:
                excluded.append(entry.seq)
        else:
            shown.append(Shown(entry.seq, entry.message.id, entry.flags))
    ranges = ranges_of(excluded) if not live.lazy else _merged(live.excluded_ranges, excluded)
    end = ranges[-1][1] if ranges else 0
    return FoldState(
        history=len(live.entries),
        shown=tuple(shown),
        excluded=ranges,
        step_starts=_from_last_before(live.step_starts, end),
        turn_starts=_from_last_before(live.turn_starts, end),
        pending=tuple(live.pending.items()),
        stored_tokens=live.stored_tokens,
        system_tokens=live.system_tokens,
        results=tuple(live.results),
        served=tuple(live.served),
        served_version=live.served_version,
        title=live.title,
        caps=live.caps,
        processes=live.processes,
        served_tokens=_open_served(live),
        fits=tuple(live.fits.values()),
        calibrated=_calibrated(live),
        unverified=live.unverified,
    )


def _from_last_before(starts: Sequence[int], end: int) -> tuple[int, ...]:
    """The starts from the last one at or before `end` on: a lazy session needs only the newest
    (the open step's calls, the tail a planner's floor counts), and the excluded history's are
    read again whenever the whole log is folded; so a snapshot does not grow with that history."""
    first = max(bisect.bisect_right(starts, end) - 1, 0)
    return tuple(starts[first:])


def _open_served(live: LiveSession) -> tuple[tuple[int, int, bool], ...]:
    """The newest served view, which a usage record names by default."""
    if not live.served_tokens:
        return ()
    newest = max(live.served_tokens)
    return ((newest, live.served_tokens[newest], newest in live.answered),)


def _calibrated(live: LiveSession) -> tuple[str | None, ...]:
    fitted = live.calibration()
    return () if fitted is None else (fitted.model,)


def _merged(ranges: tuple[tuple[int, int], ...], seqs: list[int]) -> tuple[tuple[int, int], ...]:
    """Ranges holding both the given ranges and these seqs."""
    return ranges_of([*(s for start, stop in ranges for s in range(start, stop)), *seqs])


def encode(state: FoldState) -> bytes:
    """A snapshot's payload."""
    return _ENCODER.encode(state)


def store(events: EventStore, live: LiveSession) -> Committed | None:
    """Store a snapshot of a fold at its version: its own small write, whose one event is the chained
    record of the snapshot (`Committed.events`, for the writer to fold; the version moves by one).
    None when nothing was stored: the fold is one no snapshot may stand for, or another writer moved
    the session on meanwhile (the snapshot would stand for an old version)."""
    state = state_of(live)
    if state is None:
        return None
    write = SessionWrite(live.session_id, live.version, (), {}, snapshot=encode(state))
    try:
        (done,) = events.commit([write])
    except ConflictError:
        return None
    return done


class _Format(msgspec.Struct):
    format: int = 0


def older_format(payload: bytes) -> bool:
    """Whether a payload is a snapshot of an older format than this release writes (passed over by
    opens and by `verify`: the next snapshot replaces it)."""
    try:
        return msgspec.json.decode(payload, type=_Format).format < FORMAT
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def decode(payload: bytes) -> FoldState | None:
    """A payload's state; None when it cannot be read (or is of a format this release does not know)."""
    try:
        state = _DECODER.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return state if state.format == FORMAT else None


def lazy_live(
    session_id: str, tokenizer: str, version: int, state: FoldState, bodies: Mapping[str, StoredBody]
) -> LiveSession | None:
    """A live session from a snapshot and the bodies of the messages it shows (None when a body is
    missing or is not the message it should be: then fold the whole log, which names the damage)."""
    live = LiveSession(session_id, tokenizer, state.caps)
    entries = [UNREAD] * state.history
    positions: dict[str, int] = {}
    for item in state.shown:
        body = bodies.get(item.message_id)
        if body is None or body.message.id != item.message_id or not 0 <= item.seq < state.history:
            return None
        entries[item.seq] = Entry(seq=item.seq, message=body.message, tokens=body.tokens, flags=item.flags)
        positions[item.message_id] = item.seq
    live.entries = entries
    live.positions = positions
    live.outputs = None  # the unread entries' outputs are not known: the planner folds whole first
    live.lazy = True
    live.excluded_ranges = state.excluded
    live.version = version
    live.step_starts = array("q", state.step_starts)
    live.turn_starts = array("q", state.turn_starts)
    live.pending = dict(state.pending)
    live.stored_tokens = state.stored_tokens
    live.system_tokens = state.system_tokens
    live.results = list(state.results)
    live.served = list(state.served)
    live.served_version = state.served_version
    live.title = state.title
    live.processes = state.processes
    live.served_tokens = {version: tokens for version, tokens, _ in state.served_tokens}
    live.answered = {version for version, _, answered in state.served_tokens if answered}
    live.fits = {fit.model: fit for fit in state.fits}
    live.calibrated = state.calibrated
    live.unverified = state.unverified
    live.rendered.reset()
    return live


def check_snapshots(
    store: EventStore, session_id: str, rows: Iterator[tuple[int, str, bytes, bool, str]]
) -> list[Problem]:
    """Each stored snapshot of a session (version, hash, payload, whether its digest holds, and what an
    open makes of it: "proven" when the chain proves it as an open checks it,
    `transcript.store.log.proves`, and an open takes it; "rewritten" when it is proven but a
    redaction or erasure came after it, so an open passes over it; "" when it is not proven) against a
    full fold of the log up to its version. Named: one that does not match the fold
    (`snapshot_damaged`, saying whether an open passes over it or, proven, would use it), one from
    before a redaction or erasure (`snapshot_damaged`: the store drops them, so it was put back), and
    one that matches but that no chained record proves (`snapshot_unproven`: stored by hand or by a
    build that recorded none; opens pass over it). A proven one of an older format is passed over by
    opens, and here."""
    wanted = sorted(rows)
    if not wanted:
        return []
    records, bodies = store.read_log(session_id, until=wanted[-1][0])
    by_version: dict[int, LogRecord] = {r.version: r for r in records}
    live = LiveSession(session_id, "")
    problems: list[Problem] = []
    index = 0
    for version, head, payload, intact, standing in wanted:
        proven = standing == "proven"
        while index < len(records) and records[index].version <= version:
            folded = records[index]
            live.apply(folded.version, folded.event, bodies)
            index += 1
        record = by_version.get(version)
        on_chain = record is not None and record.hash == head
        expected = state_of(live) if on_chain else None
        older = intact and on_chain and older_format(payload)
        if proven and older:
            continue
        found = decode(payload) if intact else None
        matches = expected is not None and found is not None and encode(found) == encode(expected)
        if proven and matches:
            continue
        why = (
            "its digest does not match its bytes"
            if not intact
            else "it names an event hash that is not the chain's"
            if not on_chain
            else None
            if matches or older
            else "it differs from a fold of the log"
        )
        if standing == "rewritten":
            code, detail = (
                "snapshot_damaged",
                "a snapshot of the fold from before a redaction or an erasure rewrote the log (which drops "
                "such snapshots: this one was put back); opens pass over it",
            )
        elif why is None:
            code, detail = (
                "snapshot_unproven",
                f"a snapshot of the fold that no chained record proves (event {version + 1} is not a "
                "chained snapshot_recorded event naming its digest: stored by hand or by a build that "
                "recorded none, or the chain around it changed); opens pass over it",
            )
        elif proven:
            code, detail = (
                "snapshot_damaged",
                f"a snapshot of the fold {why}, and the chain records it (event {version + 1}), so an "
                "open that reaches it uses it: the chain's stored hashes were rewritten from its record "
                "on, or its writer erred (check the head with --expect-head; delete the snapshot)",
            )
        else:
            code, detail = (
                "snapshot_damaged",
                f"a snapshot of the fold {why}, and no chained record proves it; opens pass over it",
            )
        problems.append(Problem(code=code, detail=detail, session_id=session_id, version=version))
    return problems
