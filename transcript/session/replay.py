"""Replay: the model view at any point of a session, rebuilt from its event log alone.

The log is folded event by event into a fresh live session — the same incremental machinery a live
process uses — and the view is taken where the user asks. Two kinds of points matter: `model-call`
(the view just before an assistant message was appended: what the model saw when it wrote it) and
`compact` (the view just after a compaction round). Served-view records are checked against the view
rebuilt at their point, naming the first message that drifted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, TypeAlias

import msgspec

from planner.config import CompactConfig
from projection.digest import digest_view
from projection.view import View
from transcript.model.errors import SessionNotFound, StoreCorrupted, StoreUnavailable, TranscriptError
from transcript.model.events import (
    CompactionRecorded,
    MessageAppended,
    MessageMarked,
    MessageRedacted,
    MessagesExcluded,
    ViewServed,
)
from transcript.model.result import CompactResult
from transcript.session.fold import LiveSession, apply_served
from transcript.store.port import EventStore, LogRecord, StoredBody

PointKind: TypeAlias = Literal["model-call", "compact"]


class Point(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One row of a session's timeline: a point, its view's size, and what changed there."""

    point: int
    kind: PointKind
    messages: int
    view_tokens: int
    stored_tokens: int
    change: str = ""
    result: CompactResult | None = None


class Drift(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A served-view record that the log no longer renders: where, and the first message that differs."""

    point: int
    position: int | None = None
    message_id: str | None = None
    detail: str


class ServedCheck(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How many served-view records were re-rendered, every one that drifted, and every one that no
    longer renders because a message it showed was redacted since (`redacted`: not drift — the
    redaction event, named in the detail, changed what was stored)."""

    verified: int
    drifts: tuple[Drift, ...]
    redacted: tuple[Drift, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every recorded view renders again exactly."""
        return not self.drifts


class Replayer:
    """Folds one session's log, stopping at points to look at the view."""

    def __init__(self, store: EventStore, session_id: str, *, until: int | None = None) -> None:
        records, bodies = store.read_log(session_id, until)
        if not records and until is None:
            raise SessionNotFound(f"no session {session_id!r} in {store.path}")
        self._start(session_id, records, bodies)
        self._stored = True

    @classmethod
    def over(cls, session_id: str, records: list[LogRecord], bodies: dict[str, StoredBody]) -> Replayer:
        """A replayer over a log held in memory (a document about to be restored, say)."""
        replayer = cls.__new__(cls)
        replayer._start(session_id, records, bodies)
        return replayer

    def _start(self, session_id: str, records: list[LogRecord], bodies: dict[str, StoredBody]) -> None:
        self.session_id = session_id
        self.records, self.bodies = records, bodies
        self.live = LiveSession(session_id, "")
        self.config = CompactConfig()
        self._excluded: list[int] = []
        self._summary: tuple[int, str | None] | None = None
        # Read from a store (not a document held in memory): what cannot be folded was damaged since
        # it was written, `StoreCorrupted` whatever it broke.
        self._stored = False

    @property
    def head(self) -> int:
        """The last version of the log read."""
        return self.records[-1].version if self.records else 0

    def view(self) -> View:
        """The view at the current point of the fold."""
        return self.live.view(self.config)

    def opens_call(self, record: LogRecord) -> bool:
        """Whether this event appends an assistant message: the state before it is a model call."""
        event = record.event
        return isinstance(event, MessageAppended) and self._body(event).message.role == "assistant"

    def apply(self, record: LogRecord) -> None:
        """Fold one more event."""
        if not self._stored:
            self._apply(record)
            return
        try:
            self._apply(record)
        except (StoreCorrupted, StoreUnavailable):
            raise
        except (TranscriptError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise StoreCorrupted(
                f"session {self.session_id!r}: event {record.version} of its stored log cannot be folded "
                f"({exc}) (run `transcript verify`)"
            ) from exc

    def _apply(self, record: LogRecord) -> None:
        event = record.event
        if isinstance(event, MessageAppended):
            body = self._body(event)
            self.live.apply(record.version, event, {event.message_id: body})
            if body.message.kind == "summary":
                anchor = body.message.anchor
                self._summary = (event.seq, self._seq_of(anchor) if anchor else None)
        else:
            if isinstance(event, MessageMarked) and event.excluded:
                seq = self._seq_of(event.message_id)
                if seq is not None:
                    self._excluded.append(int(seq))
            elif isinstance(event, MessagesExcluded):
                self._excluded.extend(s for s in event.seqs() if s < len(self.live.entries))
            self.live.apply(record.version, event, {})

    def _seq_of(self, message_id: str) -> str | None:
        position = self.live.positions.get(message_id)
        return None if position is None else str(position)

    def full_change(self) -> str:
        """What the full compaction folded since the last call said: excluded range, summary, anchor."""
        parts = []
        if self._excluded:
            low, high = min(self._excluded), max(self._excluded)
            parts.append(f"seq {low}–{high} excluded" if low != high else f"seq {low} excluded")
        if self._summary is not None:
            seq, anchor = self._summary
            parts.append(f"summary (seq {seq})" + (f" anchored before seq {anchor}" if anchor else ""))
        self._excluded, self._summary = [], None
        return ", ".join(parts)

    def _body(self, event: MessageAppended) -> StoredBody:
        body = self.bodies.get(event.message_id)
        if body is None:
            raise StoreCorrupted(
                f"session {self.session_id!r}: the log appends {event.message_id!r} but no body is stored "
                "for it (run `transcript verify`)"
            )
        return body

    def point(self, kind: PointKind, change: str = "", result: CompactResult | None = None) -> Point:
        view = self.view()
        return Point(
            point=self.live.version,
            kind=kind,
            messages=len(view),
            view_tokens=view.tokens,
            stored_tokens=self.live.stored_tokens,
            change=change,
            result=result,
        )

    def finish(self) -> None:
        """Fold the whole log read."""
        for record in self.records:
            self.apply(record)


def timeline(store: EventStore, session_id: str) -> list[Point]:
    """Every model-call and compact point of a session, in order."""
    replayer = Replayer(store, session_id)
    points: list[Point] = []
    for record in replayer.records:
        if replayer.opens_call(record):
            points.append(replayer.point("model-call", _since(points, replayer)))
        rounds = len(replayer.live.results)
        replayer.apply(record)
        if isinstance(record.event, CompactionRecorded):
            result = replayer.live.results[-1]  # stamped with its version by the fold
            change = describe(result)
            if result.strategy and result.strategy != "tool-result-micro":
                change = f"{result.strategy}: {replayer.full_change()} ({-result.saved_tokens:+,} tok)"
            point = replayer.point("compact", change, result)
            if len(replayer.live.results) == rounds:
                points[-1] = point  # the round's later record (its full step) superseded the earlier one
            else:
                points.append(point)
    return points


def _since(points: list[Point], replayer: Replayer) -> str:
    previous = next((p for p in reversed(points) if p.kind == "model-call"), None)
    if previous is None:
        return ""
    appended = replayer.point("model-call").messages - previous.messages
    return f"{appended:+d} messages since the last call" if appended else ""


def describe(result: CompactResult) -> str:
    """One line saying what a compaction round changed."""
    saved = result.tokens_before - result.tokens_after
    if result.strategy == "tool-result-micro":
        return f"{result.strategy}: {result.compacted_count} results truncated ({-saved:+,} tok)"
    if result.strategy:
        detail = f"{result.strategy}: {result.delta_count} messages summarized ({-saved:+,} tok)"
        if result.fallback_used:
            detail += ", local summary"
        return detail
    return f"{result.outcome}: {result.reason}"


def snap_point(
    store: EventStore, session_id: str, point: int | Literal["last"]
) -> tuple[int | Literal["last"], str]:
    """The point to show for `point`: itself when it is on the timeline (a model call, a compaction)
    or the session's last version; else the timeline point before it, with a note saying so — the
    view between two points is one no model saw (a result whose call is not in it yet, or nothing at
    all). `TranscriptError` when no point comes at or before it."""
    if point == "last":
        return point, ""
    points = [p.point for p in timeline(store, session_id)]
    head = store.head(session_id)[0]
    if point == head or point in points:
        return point, ""
    if point > head:
        raise TranscriptError(f"session {session_id!r} has no point {point} (its last is {head})")
    before = [p for p in points if p < point]
    if not before:
        first = f"its first point is {points[0]}" if points else "it has no model call or compaction yet"
        raise TranscriptError(
            f"session {session_id!r} has no point at or before {point} ({first}; its last is {head})"
        )
    note = f"point {point} is between timeline points (no model saw that view): showing point {before[-1]}"
    return before[-1], f"{note}, the one before it"


def view_at(store: EventStore, session_id: str, point: int | Literal["last"]) -> View:
    """The view at one point: after every event up to and including version `point`."""
    until = None if point == "last" else point
    replayer = Replayer(store, session_id, until=until)
    if until is not None and replayer.head < until:
        raise TranscriptError(f"session {session_id!r} has no point {point} (its last is {replayer.head})")
    replayer.finish()
    return replayer.view()


def call_views(store: EventStore, session_id: str) -> Iterator[tuple[int, View]]:
    """The view at every model-call point, in order, in one pass over the log: each is the view
    `view_at` gives at that point (what the model was sent before the assistant message it answered)."""
    replayer = Replayer(store, session_id)
    for record in replayer.records:
        if replayer.opens_call(record):
            yield replayer.live.version, replayer.view()
        replayer.apply(record)


def check_served(store: EventStore, session_id: str) -> ServedCheck:
    """Re-render the view at every served-view record and compare it with what was recorded."""
    return served_check(Replayer(store, session_id))


def served_check(replayer: Replayer) -> ServedCheck:
    """`check_served` over any replayer (it folds the whole log).

    As recording does, each check hashes only the messages rendered since the previous one (the live
    view keeps every other digest), so checking a log costs in proportion to what it changed, not
    to the length of every view it served."""
    served: list[str] = []
    verified = 0
    drifts: list[Drift] = []
    redacted: list[Drift] = []
    # Where each rewritten body was redacted (its first redaction event), to tell it from drift.
    redactions: dict[str, int] = {}
    for record in replayer.records:
        if isinstance(record.event, MessageRedacted):
            for entry in record.event.bodies:
                redactions.setdefault(entry.message_id, record.version)
    for record in replayer.records:
        event = record.event
        if not isinstance(event, ViewServed):
            replayer.apply(record)
            continue
        apply_served(served, event)
        verified += 1
        view = replayer.view()
        rendered = replayer.live.rendered
        if view.source in ("persisted", "canonical"):
            view_hash, length, _ = rendered.digest()
            rendered.recorded(record.version)
        else:
            view_hash, all_digests = digest_view(view.messages)
            length = len(all_digests)
        if view_hash != event.view_hash or event.length != length:
            digests = digest_view(view.messages)[1]
            drift = _first_drift(record.version, view, digests, served, event)
            since = [redactions[m.id] for m in view.messages if redactions.get(m.id, 0) > record.version]
            if since:
                detail = (
                    f"redacted since: event {min(since)} (message_redacted) rewrote what this view showed"
                )
                redacted.append(msgspec.structs.replace(drift, detail=detail))
            else:
                drifts.append(drift)
        replayer.apply(record)
    return ServedCheck(verified=verified, drifts=tuple(drifts), redacted=tuple(redacted))


def _first_drift(
    version: int, view: View, digests: tuple[str, ...], served: list[str], event: ViewServed
) -> Drift:
    for position, (now, then) in enumerate(zip(digests, served, strict=False)):
        if now != then:
            message = view.messages[position]
            return Drift(
                point=version,
                position=position,
                message_id=message.id,
                detail=f"message {position} ({message.id}) renders differently than when it was served",
            )
    return Drift(
        point=version,
        detail=f"the view now has {len(digests)} messages; {event.length} were served",
    )
