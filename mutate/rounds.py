"""`run_compact` / `arun_compact`: one compaction round, from the trigger to the persisted result.

A round below the micro threshold decides from sizes alone: it plans nothing, writes nothing and moves
no counter. Above it: the breaker is consulted; a dry-run `plan_micro`; shadow mode reports and writes
nothing; micro compaction commits in its own transaction; when micro is not enough at or above the
auto threshold (or the round is forced) a full step follows — its summarizer runs outside any
transaction, then exclusions, summary and the result record commit together. If the result would
still be over budget, that step is made aggressive (only the irreducible tail kept, a smaller
checkpoint built on the one just made) before anything is written.

The round is written once, as a generator that yields summarizer requests; `run_compact` drives it
with a sync summarizer, `arun_compact` with an async one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from mutate.breaker import Breaker
from mutate.full import (
    PreparedFull,
    Reinject,
    checkpoint_from,
    commit_full,
    fit,
    prepare_full,
    reinjected_content,
    summary_message,
)
from mutate.micro import micro_compact
from mutate.summarizing import Steps, adrive, attempts, drive
from planner.config import CompactConfig
from planner.micro import plan_micro, stale_boundary
from planner.trigger import determine_compact_action
from transcript.checkpoint import Checkpoint, to_markdown
from transcript.flagwrite import write_events
from transcript.model import CompactionRecorded, TranscriptSnapshot
from transcript.results import CompactResult, Strategy
from transcript.summary import Summarizer

if TYPE_CHECKING:
    from transcript.session import Transcript

_REFITS = 4
_MIN_SUMMARY_TOKENS = 100


def run_compact(
    transcript: Transcript,
    *,
    budget_tokens: int,
    config: CompactConfig | None = None,
    manual: bool = False,
    force: bool = False,
    shadow: bool = False,
    summarizer: Summarizer | None = None,
    reinject: Reinject | None = None,
) -> CompactResult:
    """Run one round with a synchronous summarizer (None: the local one, by choice)."""
    steps = _round(
        transcript,
        budget_tokens,
        config or transcript.config,
        manual,
        force,
        shadow,
        summarizer is not None,
        reinject,
    )
    return drive(steps, summarizer or _never)


async def arun_compact(
    transcript: Transcript,
    *,
    budget_tokens: int,
    config: CompactConfig | None = None,
    manual: bool = False,
    force: bool = False,
    shadow: bool = False,
    summarizer: Summarizer | None = None,
    reinject: Reinject | None = None,
) -> CompactResult:
    """Run one round; the summarizer may be async."""
    steps = _round(
        transcript,
        budget_tokens,
        config or transcript.config,
        manual,
        force,
        shadow,
        summarizer is not None,
        reinject,
    )
    return await adrive(steps, summarizer or _never)


def _never(request: object) -> str:
    raise AssertionError("no model summarizer was given, so none may be called")


def _round(
    t: Transcript,
    budget: int,
    config: CompactConfig,
    manual: bool,
    force: bool,
    shadow: bool,
    has_model: bool,
    reinject: Reinject | None,
) -> Steps[CompactResult]:
    before = t.visible_messages()
    breaker = Breaker.after(t.latest_compact_result()).starting(manual=manual, config=config)
    base = CompactResult(
        outcome="skipped",
        manual=manual,
        forced=force,
        budget_tokens=budget,
        items_before=len(before),
        items_after=len(before),
        tokens_before=before.tokens,
        tokens_after=before.tokens,
    )
    quick = determine_compact_action(before.tokens, budget, config, force=force)
    if quick.kind == "none":
        return Breaker.after(t.latest_compact_result()).stamp(
            msgspec.structs.replace(base, reason=quick.reason)
        )
    plan = plan_micro(t.messages(), config, since=t.micro_cursor(config))
    action = determine_compact_action(
        before.tokens, budget, config, micro_savings=plan.estimated_saved_tokens, force=force
    )
    result = msgspec.structs.replace(
        base, estimated_saved_tokens=plan.estimated_saved_tokens, reason=action.reason
    )
    if shadow:
        return msgspec.structs.replace(
            result,
            outcome="shadowed",
            strategy="tool-result-micro" if plan else None,
            compacted_count=len(plan.message_ids),
            tokens_after=before.tokens - plan.estimated_saved_tokens,
        )
    compacted: list[str] = []
    if action.kind in ("micro", "micro_then_full") and plan:
        compacted = micro_compact(t, plan)
    if action.kind in ("micro", "micro_then_full") or not plan:
        t.advance_micro_cursor(config, plan.scanned_to)
    after = t.visible_messages()
    result = msgspec.structs.replace(
        result,
        outcome="micro_applied" if compacted else "skipped",
        strategy="tool-result-micro" if compacted else None,
        items_after=len(after),
        tokens_after=after.tokens,
        compacted_count=len(compacted),
        compacted_ids=tuple(compacted),
    )
    needs_full = action.kind in ("full", "micro_then_full") and (
        force or after.tokens / budget >= config.micro_compact_threshold
    )
    if needs_full and not config.full_compact_enabled:
        result = msgspec.structs.replace(
            result, outcome="full_unavailable", reason="full compaction is disabled"
        )
        needs_full = False
    if needs_full:
        return (yield from _full(t, budget, config, manual, force, breaker, has_model, reinject, result))
    failed = not compacted and before.tokens / budget >= config.auto_compact_threshold
    result = _irreducible(t, config, budget, result)
    if result.outcome == "skipped" and not failed and breaker.state == "closed":
        return breaker.stamp(msgspec.structs.replace(result, reason=f"{action.reason}; nothing to reclaim"))
    return record(t, breaker.finished(manual=manual, failed=failed, config=config).stamp(result))


def _full(
    t: Transcript,
    budget: int,
    config: CompactConfig,
    manual: bool,
    force: bool,
    breaker: Breaker,
    has_model: bool,
    reinject: Reinject | None,
    result: CompactResult,
) -> Steps[CompactResult]:
    """The full step of a round (see the module docstring)."""
    micro_done = result.compacted_count > 0
    prepared = prepare_full(t, config, budget_tokens=budget, force=force, aggressive=False)
    if prepared is None:
        return _no_full(
            t, config, budget, manual, breaker, result, "nothing older than the kept window can be summarized"
        )
    use_model = has_model and breaker.allows_model
    text = (yield from attempts(prepared.request)).text if use_model else None
    checkpoint, fallback = checkpoint_from(prepared, text)
    model_failed = use_model and fallback
    summary = summary_message(prepared, checkpoint, reinjected_content(prepared, reinject, config, budget))
    body = t.store.prepare(summary)
    tokens_after = result.tokens_after - prepared.cut.summarized_tokens + sum(body.tokens)
    if tokens_after > budget:
        aggressive = prepare_full(t, config, budget_tokens=budget, force=force, aggressive=True)
        if aggressive is not None and len(aggressive.cut.summarize) > len(prepared.cut.summarize):
            aggressive = _building_on(aggressive, prepared, checkpoint)
            text = (yield from attempts(aggressive.request)).text if use_model else None
            checkpoint, again = checkpoint_from(aggressive, text)
            fallback, model_failed = fallback or again, model_failed or (use_model and again)
            prepared = aggressive
            summary = summary_message(
                prepared, checkpoint, reinjected_content(prepared, reinject, config, budget)
            )
            body = t.store.prepare(summary)
            tokens_after = result.tokens_after - prepared.cut.summarized_tokens + sum(body.tokens)
    rest = result.tokens_after - prepared.cut.summarized_tokens
    for _ in range(_REFITS):
        if rest + sum(body.tokens) <= budget:
            break
        # Still over budget: make the checkpoint fit the room that is left (re-injected files go first).
        room = max(budget - rest, _MIN_SUMMARY_TOKENS)
        checkpoint = fit(checkpoint, int(len(to_markdown(checkpoint)) * room / sum(body.tokens)))
        body = t.store.prepare(summary_message(prepared, checkpoint, ()))
    tokens_after = rest + sum(body.tokens)
    if tokens_after >= result.tokens_after:
        return _no_full(
            t, config, budget, manual, breaker, result, "the summary would not make the view smaller"
        )
    result = msgspec.structs.replace(
        result,
        outcome="full_applied",
        strategy=_strategy(prepared),
        reason="micro alone was not enough" if micro_done else result.reason,
        items_after=result.items_after - len(prepared.cut.summarize) + 1,
        tokens_after=tokens_after,
        delta_count=len(prepared.request.items),
        checkpoint_reused=prepared.previous is not None,
        fallback_used=fallback,
        split_turn=prepared.cut.split_turn,
        checkpoint=checkpoint,
        failed=model_failed,
    )
    result = _irreducible(t, config, budget, result)
    result = breaker.finished(manual=manual, failed=model_failed, config=config).stamp(result)
    commit_full(t, prepared, body, result)
    return t.latest_compact_result() or result


def _no_full(
    t: Transcript,
    config: CompactConfig,
    budget: int,
    manual: bool,
    breaker: Breaker,
    result: CompactResult,
    reason: str,
) -> CompactResult:
    """Record a round whose full step could not make progress (nothing of that step is written)."""
    micro_done = result.compacted_count > 0
    failed = not micro_done and result.tokens_before / budget >= config.auto_compact_threshold
    outcome = "micro_applied_then_full_failed" if micro_done else "full_failed"
    result = msgspec.structs.replace(result, outcome=outcome, reason=reason)
    result = _irreducible(t, config, budget, result)
    return record(t, breaker.finished(manual=manual, failed=failed, config=config).stamp(result))


def _building_on(aggressive: PreparedFull, first: PreparedFull, checkpoint: Checkpoint) -> PreparedFull:
    """The aggressive step's request: only what the first step kept, on top of the first checkpoint."""
    already = len(first.request.messages)
    request = msgspec.structs.replace(
        aggressive.request,
        items=aggressive.request.items[already:],
        messages=aggressive.request.messages[already:],
        previous_checkpoint=checkpoint,
    )
    return msgspec.structs.replace(aggressive, request=request, previous=first.previous)


def _strategy(prepared: PreparedFull) -> Strategy:
    name = "aggressive-checkpoint" if prepared.aggressive else "checkpoint"
    return f"{name}-delta" if prepared.previous is not None else name  # type: ignore[return-value]


def _irreducible(t: Transcript, config: CompactConfig, budget: int, result: CompactResult) -> CompactResult:
    """The result, saying `over_budget_irreducible` when what no round can reduce exceeds the budget."""
    if result.tokens_after <= budget:
        return result
    floor = irreducible_tokens(t.messages(), config)
    if floor <= budget:
        return result
    return msgspec.structs.replace(
        result,
        outcome="over_budget_irreducible",
        irreducible_tokens=floor,
        reason="system messages, the kept recent steps and pending calls alone exceed the budget",
    )


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
        if entry.flags.excluded or entry.message.kind == "summary":
            continue
        if entry.seq >= boundary or entry.message.role == "system":
            total += entry.token_count
    return total
