"""The continuation prompt: what a host sends the model after a compaction round.

The continuation prompt re-anchors the model on the checkpoint (goal, summary, constraints, blocked items,
next steps, critical context, work in progress, running processes, files edited) so it carries on instead of
starting over or asking again; after a split-turn cut it warns that the checkpoint covers only the
first part of the turn. After a round that summarized nothing it says nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from transcript.model.result import CompactResult

SPLIT_TURN_WARNING = (
    "The checkpoint covers only the first part of the current turn; the messages after it are the "
    "latest part of that same turn."
)


def continuation_prompt(result: CompactResult, *, processes: Sequence[str] | None = None) -> str:
    """The hidden prompt that re-anchors the model after the round that produced `result`; empty after
    a round that left no checkpoint (nothing was summarized, so there is nothing to re-anchor on).
    `processes` are the running processes as the host registered them since (None: the checkpoint's)."""
    checkpoint = result.checkpoint
    if checkpoint is None:
        return ""
    if processes is not None:
        checkpoint = msgspec.structs.replace(checkpoint, process_snapshots=tuple(processes))
    how = result.strategy or result.outcome
    lines = [f"Context was compacted ({how}). Continue the same task; do not restart it."]
    if checkpoint.goal:
        lines.append(f"Goal: {checkpoint.goal}")
    if checkpoint.summary:
        lines.append(f"Summary: {checkpoint.summary}")
    for title, items in (
        ("Constraints", checkpoint.constraints),
        ("Blocked", checkpoint.blocked),
        ("Next steps", checkpoint.next_steps),
        ("Critical context", checkpoint.critical_context),
        ("In progress", checkpoint.in_progress),
        ("Processes", checkpoint.process_snapshots),
        ("Files edited", checkpoint.files),
    ):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"- {item}" for item in items)
    if result.split_turn:
        lines.append(SPLIT_TURN_WARNING)
    return "\n".join(lines)
