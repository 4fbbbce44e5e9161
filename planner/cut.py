"""The full-compaction cut point: which old messages a checkpoint replaces, which stay verbatim.

Counted in steps: the most recent steps are kept whole while they fit `keep_recent_tokens`, and never
fewer than the last `micro_compact_stale_steps` (the part no round can reduce). Positions are in view
order (an earlier summary shows before its anchor, so it is always summarized again into the new
checkpoint). The cut only falls where no call is separated from its result: before a user message or
before the assistant message that opens a step. A cut inside a turn group is a `split_turn`; the
summarized part of that turn is handed to the summary separately. System messages are never
summarized.
"""

from __future__ import annotations

import msgspec

from planner.config import CompactConfig
from planner.micro import stale_boundary, view_tokens
from planner.observations import is_observation
from transcript.model.order import canonical_order
from transcript.model.snapshot import Entry, TranscriptSnapshot


class CutPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one full compaction replaces: pure data over one session version."""

    session_id: str
    version: int
    next_seq: int
    summarize: tuple[int, ...]
    summarize_ids: tuple[str, ...]
    turn_prefix: tuple[int, ...]
    kept: tuple[int, ...]
    anchor_id: str | None
    split_turn: bool
    summarized_tokens: int
    kept_tokens: int


def plan_cut(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    keep_recent_tokens: int,
    force: bool = False,
    floor_seq: int | None = None,
) -> CutPlan | None:
    """Where to cut, or None when nothing older than the kept window can be summarized.

    `floor_seq` is the first `seq` always kept (default: the kept recent steps, `stale_boundary`).
    """
    visible = canonical_order(snapshot.entries)
    if floor_seq is None:
        floor_seq = stale_boundary(snapshot, config)
    cut = _cut_index(visible, floor_seq, keep_recent_tokens)
    if force and not _has_history(visible, cut):
        starts = [i for i, entry in enumerate(visible) if entry.message.role == "assistant"]
        cut = starts[-1] if starts else len(visible)
    if not _has_history(visible, cut):
        return None
    summarized = [e for e in visible[:cut] if e.message.role != "system"]
    kept = [e for e in visible[cut:] if e.message.role != "system"]
    turn_start = _turn_start(visible, cut)
    split = cut < len(visible) and turn_start != cut
    prefix = [
        e.seq for e in visible[turn_start:cut] if e.message.role != "system" and e.message.kind != "summary"
    ]
    return CutPlan(
        session_id=snapshot.session_id,
        version=snapshot.version,
        next_seq=len(snapshot.entries),
        summarize=tuple(e.seq for e in summarized),
        summarize_ids=tuple(e.message.id for e in summarized),
        turn_prefix=tuple(prefix) if split else (),
        kept=tuple(e.seq for e in kept),
        anchor_id=visible[cut].message.id if cut < len(visible) else None,
        split_turn=split,
        summarized_tokens=sum(view_tokens(e) for e in summarized),
        kept_tokens=sum(view_tokens(e) for e in kept),
    )


def _is_cut_point(entry: Entry) -> bool:
    """Whether the view may be cut just before this message without parting a call from its result."""
    return entry.message.role in ("user", "assistant")


def _cut_index(visible: list[Entry], floor_seq: int, keep_recent_tokens: int) -> int:
    """The earliest cut point whose tail fits the kept budget, but never later than the floor."""
    kept = 0
    best = len(visible)
    for index in range(len(visible) - 1, -1, -1):
        entry = visible[index]
        if entry.message.role != "system":
            kept += view_tokens(entry)
        if not _is_cut_point(entry):
            continue
        if entry.seq >= floor_seq or kept <= keep_recent_tokens:
            best = index
        else:
            break
    return best


def _has_history(visible: list[Entry], cut: int) -> bool:
    return any(entry.message.role != "system" for entry in visible[:cut])


def _turn_start(visible: list[Entry], cut: int) -> int:
    """The index of the user message that opens the turn group the cut falls in (0 when none); an
    observation (tool output carried by a user message) opens none."""
    for index in range(min(cut, len(visible) - 1), -1, -1):
        message = visible[index].message
        if message.role == "user" and message.kind == "message":
            previous = visible[index - 1].message if index else None
            if not is_observation(message, previous):
                return index
    return 0


def irreducible_tokens(
    snapshot: TranscriptSnapshot, config: CompactConfig, *, system_tokens: int | None = None
) -> int:
    """Tokens no round can reduce: system messages and the kept recent steps (pending calls among
    them). With the emergency path, the kept steps can be shortened or fewer kept: then only the
    newest step (and what follows it) is irreducible. `system_tokens`, when the caller keeps that
    sum, spares a pass over the whole session."""
    if config.emergency_path:
        return floor_tokens(snapshot, newest_step_start(snapshot), system_tokens=system_tokens)
    return floor_tokens(snapshot, stale_boundary(snapshot, config), system_tokens=system_tokens)


def floor_tokens(snapshot: TranscriptSnapshot, boundary: int, *, system_tokens: int | None = None) -> int:
    """View tokens of the system messages and of every other message from `boundary` on (summaries
    left out). With `system_tokens` given, only the messages from `boundary` on are read."""
    entries = snapshot.entries
    if system_tokens is None:
        system_tokens = sum(view_tokens(e) for e in entries if _counts(e) and e.message.role == "system")
    return system_tokens + sum(
        view_tokens(e) for e in entries[boundary:] if _counts(e) and e.message.role != "system"
    )


def _counts(entry: Entry) -> bool:
    return not entry.flags.excluded and entry.message.kind != "summary"


def newest_step_start(snapshot: TranscriptSnapshot) -> int:
    """The `seq` of the newest step's assistant message (0 before the first step: all is kept)."""
    return snapshot.step_starts[-1] if snapshot.step_starts else 0


def folds_newest_step(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    budget_tokens: int,
    *,
    system_tokens: int | None = None,
) -> bool:
    """Whether a full step summarizes the newest step too (`CompactConfig.fold_newest_step`): when
    the room a full step leaves beside it (the budget less the system messages, the summary's
    allowance and the step itself) is smaller than the step, keeping it whole only puts the next
    full round off to the next call, where the step is summarized all the same. Only a finished
    step: the model's message and the results of all its calls, nothing after them (no request of
    the user's, no call awaiting its result), and only one that fits the budget."""
    if not config.fold_newest_step or not snapshot.step_starts:
        return False
    start = snapshot.step_starts[-1]
    reply, *after = snapshot.entries[start:]
    if any(entry.message.role != "tool" for entry in after):
        return False
    answered = {result.call_id for entry in after for result in entry.message.tool_results}
    if any(call.id not in answered for call in reply.message.tool_calls):
        return False
    floor = floor_tokens(snapshot, start, system_tokens=system_tokens)
    newest = floor - floor_tokens(snapshot, len(snapshot.entries), system_tokens=system_tokens)
    room = budget_tokens - floor - config.summary_allowance(budget_tokens)
    return floor <= budget_tokens and room < newest


def emergency_floor(
    snapshot: TranscriptSnapshot, config: CompactConfig, room: int, *, system_tokens: int | None = None
) -> int:
    """The first `seq` a full step keeps on the emergency path: the most recent steps, as many as fit
    `room` with the system messages (at most `micro_compact_stale_steps`), never fewer than the newest."""
    starts = snapshot.step_starts
    if not starts:
        return 0
    keep = min(max(config.micro_compact_stale_steps, 1), len(starts))
    for count in range(keep, 1, -1):
        if floor_tokens(snapshot, starts[-count], system_tokens=system_tokens) <= room:
            return starts[-count]
    return starts[-1]
