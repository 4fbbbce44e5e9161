"""What a host shows or sends after compaction: the continuation prompt and the light status.

The continuation prompt re-anchors the model on the checkpoint (goal, constraints, blocked items,
next steps, critical context, work in progress) so it carries on instead of starting over or asking
again; after a split-turn cut it warns that the checkpoint covers only the first part of the turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from transcript.results import BreakerState, CompactResult
from transcript.summary import clip, latest_goal

if TYPE_CHECKING:
    from transcript.session import Transcript

SPLIT_TURN_WARNING = (
    "The checkpoint covers only the first part of the current turn; the messages after it are the "
    "latest part of that same turn."
)


def continuation_prompt(result: CompactResult) -> str:
    """The hidden prompt that re-anchors the model after the round that produced `result`."""
    how = result.strategy or result.outcome
    lines = [f"Context was compacted ({how}). Continue the same task; do not restart it."]
    checkpoint = result.checkpoint
    if checkpoint is not None:
        if checkpoint.goal:
            lines.append(f"Goal: {checkpoint.goal}")
        for title, items in (
            ("Constraints", checkpoint.constraints),
            ("Blocked", checkpoint.blocked),
            ("Next steps", checkpoint.next_steps),
            ("Critical context", checkpoint.critical_context),
            ("In progress", checkpoint.in_progress),
        ):
            if items:
                lines.append(f"{title}:")
                lines.extend(f"- {item}" for item in items)
    if result.split_turn:
        lines.append(SPLIT_TURN_WARNING)
    return "\n".join(lines)


class Status(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session at a glance, for status lines and dashboards."""

    session_id: str
    version: int
    messages: int
    visible_messages: int
    view_tokens: int
    stored_tokens: int
    goal: str = ""
    last_outcome: str | None = None
    last_strategy: str | None = None
    rounds: int = 0
    breaker: BreakerState = "closed"
    consecutive_failures: int = 0
    pending_calls: tuple[str, ...] = ()


def status_of(transcript: Transcript) -> Status:
    """The status of a session as its transcript last read it."""
    view = transcript.visible_messages()
    snapshot = transcript.messages()
    results = transcript.compact_results()
    last = results[-1] if results else None
    checkpoint = transcript.latest_checkpoint()
    goal = checkpoint.goal if checkpoint is not None and checkpoint.goal else ""
    return Status(
        session_id=transcript.session_id,
        version=snapshot.version,
        messages=len(snapshot.entries),
        visible_messages=len(view),
        view_tokens=view.tokens,
        stored_tokens=transcript.stored_tokens,
        goal=clip(goal or latest_goal([entry.message for entry in snapshot.entries]), 300),
        last_outcome=last.outcome if last else None,
        last_strategy=last.strategy if last else None,
        rounds=len(results),
        breaker=last.breaker if last else "closed",
        consecutive_failures=last.consecutive_failures if last else 0,
        pending_calls=transcript.pending_calls,
    )
