"""`run_compact`: one compaction round, from the trigger decision to the persisted result record.

A round below the micro threshold decides from sizes alone, plans nothing, writes nothing and moves no
counter. Above it: dry-run `plan_micro`; shadow mode reports the estimate and writes nothing; micro
compaction commits in its own transaction; full compaction is added when micro is not enough at or
above the auto threshold. A round that did something records its `CompactResult` as an event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from mutate.micro import micro_compact
from planner.config import CompactConfig
from planner.micro import plan_micro, stale_boundary
from planner.trigger import determine_compact_action
from transcript.flagwrite import write_events
from transcript.model import CompactionRecorded, TranscriptSnapshot
from transcript.results import CompactResult

if TYPE_CHECKING:
    from transcript.session import Transcript


def run_compact(
    transcript: Transcript,
    *,
    budget_tokens: int,
    config: CompactConfig | None = None,
    manual: bool = False,
    force: bool = False,
    shadow: bool = False,
) -> CompactResult:
    """Run one round on a session and return its result record (see the module docstring)."""
    config = config or transcript.config
    before = transcript.visible_messages()
    previous = transcript.latest_compact_result()
    base = CompactResult(
        outcome="skipped",
        manual=manual,
        forced=force,
        budget_tokens=budget_tokens,
        items_before=len(before.messages),
        items_after=len(before.messages),
        tokens_before=before.tokens,
        tokens_after=before.tokens,
        consecutive_failures=previous.consecutive_failures if previous else 0,
        breaker=previous.breaker if previous else "closed",
        rounds_since_open=previous.rounds_since_open if previous else 0,
    )
    quick = determine_compact_action(before.tokens, budget_tokens, config, micro_savings=0, force=force)
    if quick.kind == "none":
        return msgspec.structs.replace(base, reason=quick.reason)
    snapshot = transcript.messages()
    plan = plan_micro(snapshot, config, since=transcript.micro_cursor(config))
    action = determine_compact_action(
        before.tokens, budget_tokens, config, micro_savings=plan.estimated_saved_tokens, force=force
    )
    estimate = msgspec.structs.replace(
        base, estimated_saved_tokens=plan.estimated_saved_tokens, reason=action.reason
    )
    if shadow:
        return msgspec.structs.replace(
            estimate,
            outcome="shadowed",
            strategy="tool-result-micro" if plan else None,
            compacted_count=len(plan.message_ids),
            tokens_after=before.tokens - plan.estimated_saved_tokens,
        )
    compacted: list[str] = []
    if action.kind in ("micro", "micro_then_full") and plan:
        compacted = micro_compact(transcript, plan)
    if action.kind in ("micro", "micro_then_full") or not plan:
        transcript.advance_micro_cursor(config, plan.scanned_to)
    after = transcript.visible_messages()
    result = msgspec.structs.replace(
        estimate,
        outcome="micro_applied" if compacted else "skipped",
        strategy="tool-result-micro" if compacted else None,
        items_after=len(after.messages),
        tokens_after=after.tokens,
        compacted_count=len(compacted),
        compacted_ids=tuple(compacted),
    )
    if (
        action.kind in ("full", "micro_then_full")
        and after.tokens / budget_tokens >= config.micro_compact_threshold
    ):
        result = msgspec.structs.replace(
            result,
            outcome="full_unavailable",
            reason="micro alone is not enough and full compaction is unavailable",
        )
    if after.tokens > budget_tokens:
        irreducible = irreducible_tokens(transcript.messages(), config)
        if irreducible > budget_tokens:
            result = msgspec.structs.replace(
                result,
                outcome="over_budget_irreducible",
                irreducible_tokens=irreducible,
                reason="system messages, the kept recent steps and pending calls alone exceed the budget",
            )
    if result.outcome == "skipped":
        return msgspec.structs.replace(result, reason=f"{action.reason}; nothing to reclaim")
    return record(transcript, result)


def record(transcript: Transcript, result: CompactResult) -> CompactResult:
    """Persist a round's result as an event (its own small transaction) and return it as recorded."""
    recorded = msgspec.structs.replace(result, version=transcript.version + 1)
    write_events(
        transcript.store, transcript.session_id, transcript.version, [CompactionRecorded(result=recorded)]
    )
    transcript.refresh()
    return recorded


def irreducible_tokens(snapshot: TranscriptSnapshot, config: CompactConfig) -> int:
    """Tokens no round can reduce: system messages, the kept recent steps (pending calls among them)."""
    boundary = stale_boundary(snapshot, config)
    total = 0
    for entry in snapshot.entries:
        if entry.flags.excluded:
            continue
        if entry.seq >= boundary or entry.message.role == "system":
            total += entry.token_count
    return total
