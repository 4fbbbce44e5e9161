"""The mutator's part of an import: the marks, summaries and records a recorded session brings with it.

A recorded session can say what its own agent did to the view — a compaction it made (Claude Code's
`compact_boundary`: everything visible before the agent's summary is excluded and the summary takes
its place, recorded as a round of strategy `imported`) and records the model never saw (kept in the
history, excluded from every view) — and a live file imported again can bring the real result of a call
whose synthetic "interrupted" result is stored: the synthetic result is excluded, never deleted, and
the real one appended after it. `import_events` turns an import into the session's events in log
order; `commit_import` writes every session of one file in one transaction through the writer
capability.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from transcript.model.events import (
    CompactionRecorded,
    Event,
    ImportRecorded,
    MessageAppended,
    MessageMarked,
    UsageRecorded,
)
from transcript.model.result import CompactResult
from transcript.model.snapshot import Entry
from transcript.model.usage import Usage
from transcript.store.port import Committed, EventStore, NewBody, SessionWrite
from transcript.store.writer import writer_for


class Boundary(NamedTuple):
    """An imported compaction, as the recording names it: who triggered it, a line about it, and the
    earlier messages the agent kept in its view."""

    manual: bool
    reason: str
    kept: Collection[str] = ()


def import_events(
    stored: Sequence[Entry],
    appends: Sequence[NewBody],
    *,
    hidden: Collection[str] = (),
    superseded: Sequence[str] = (),
    compactions: Mapping[str, Boundary] | None = None,
    previous: CompactResult | None = None,
    source: str = "",
    usage: Mapping[str, Usage] | None = None,
) -> list[Event]:
    """The events that bring a stored session (`stored`, with its flags) up to an imported one.

    The `superseded` synthetic results are excluded first (results among `appends` answer their calls
    again); then each body is appended, one in `hidden` excluded right after it. A summary named in
    `compactions` is preceded by the exclusion of every visible message before it except system
    messages and those its boundary keeps, and followed by the round's record, which carries the
    breaker state of `previous` (the session's last recorded round) unchanged. When the import hides
    records or supersedes results, an `ImportRecorded` naming them (and the import's `source`) closes
    the events: every mark belongs to a recorded round or a recorded import. A reply named in
    `usage` is preceded by its call's billed usage, beside the tokens of the view just before it (what
    the recording's model was sent).
    """
    compactions = compactions or {}
    usage = usage or {}
    visible: dict[str, tuple[bool, int]] = {
        e.message.id: (e.message.role == "system", e.shown_tokens) for e in stored if not e.flags.excluded
    }
    events: list[Event] = []
    for message_id in superseded:
        events.append(MessageMarked(message_id=message_id, excluded=True))
        visible.pop(message_id, None)
    seq = len(stored)
    for body in appends:
        message_id = body.message.id
        boundary = compactions.get(message_id)
        before = (len(visible), sum(tokens for _, tokens in visible.values()))
        if boundary is not None:
            kept = set(boundary.kept)
            replaced = [key for key, (system, _) in visible.items() if not system and key not in kept]
            events.extend(MessageMarked(message_id=key, excluded=True) for key in replaced)
            for key in replaced:
                del visible[key]
        billed = usage.get(message_id)
        if billed is not None:
            estimate = sum(tokens for _, tokens in visible.values())
            events.append(UsageRecorded(usage=billed, estimate=estimate, message_id=message_id))
        events.append(MessageAppended(seq=seq, message_id=message_id, body_hash=body.hash))
        seq += 1
        if message_id in hidden:
            events.append(MessageMarked(message_id=message_id, excluded=True))
        else:
            visible[message_id] = (body.message.role == "system", _shown(body))
        if boundary is not None:
            after = (len(visible), sum(tokens for _, tokens in visible.values()))
            events.append(CompactionRecorded(result=_result(boundary, before, after, previous)))
    hid = tuple(body.message.id for body in appends if body.message.id in hidden)
    if hid or superseded:
        events.append(ImportRecorded(source=source, hidden=hid, superseded=tuple(superseded)))
    return events


def _shown(body: NewBody) -> int:
    """A new body's tokens as a view counts them (`Entry.shown_tokens`)."""
    return Entry(seq=0, message=body.message, tokens=body.tokens).shown_tokens


def _result(
    boundary: Boundary, before: tuple[int, int], after: tuple[int, int], previous: CompactResult | None
) -> CompactResult:
    replaced = before[0] - (after[0] - 1)
    return CompactResult(
        outcome="full_applied",
        strategy="imported",
        reason=boundary.reason,
        manual=boundary.manual,
        items_before=before[0],
        items_after=after[0],
        tokens_before=before[1],
        tokens_after=after[1],
        compacted_count=replaced,
        delta_count=replaced,
        consecutive_failures=previous.consecutive_failures if previous else 0,
        breaker=previous.breaker if previous else "closed",
        rounds_since_open=previous.rounds_since_open if previous else 0,
    )


def commit_import(store: EventStore, writes: Sequence[SessionWrite]) -> list[Committed]:
    """Write every session of one import in one transaction, marks and summaries included."""
    return writer_for(store).commit(writes)
