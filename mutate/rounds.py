"""One compaction round, from the trigger to the committed result, over data the session hands in.

A round below the micro threshold decides from sizes alone (`quiet_result`): it plans nothing,
writes nothing and moves no counter. Above it: the breaker is consulted; a dry-run `plan_micro`;
shadow mode reports and writes nothing. Each step that writes commits in one transaction together
with the round's result record as of that step: the micro step with its marks; the full step with its
exclusions, summary and the round's final record (same `round_id`, superseding the first). A full
step runs its summarizer outside any transaction, then is checked against the version it was
planned from. If its result would still be over budget, the step is made aggressive (only the
irreducible tail kept, a smaller checkpoint built on the one just made) before anything is written.

The round is written once, as a generator that yields summarizer requests and returns a
`RoundOutcome`: the result and every step it committed, which the session folds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final, NamedTuple

import msgspec

from mutate.breaker import Breaker
from mutate.commit import Written, commit
from mutate.full import full_events
from mutate.micro import marked, micro_marks, repair_marks, shown_message, view_delta, view_token_count
from mutate.summarizing import Attempts, Steps, adrive, attempts, drive
from planner.config import CompactConfig
from planner.cut import (
    emergency_floor,
    floor_tokens,
    folds_newest_step,
    irreducible_tokens,
    newest_step_start,
)
from planner.economics import RoundEconomics
from planner.full import (
    BARE_HINT,
    ERROR_CHARS,
    PreparedFull,
    Reinject,
    bounded_error,
    checkpoint_from,
    fit,
    prepare_full,
    reinjected_content,
    summary_message,
    summary_text,
)
from planner.intent import clip_within
from planner.micro import MicroPlan, check_plan, plan_emergency, plan_micro, stale_boundary, with_entries
from planner.payback import choose_micro, invalidated_tokens, micro_economics
from planner.summary import LocalSummarizer, Summarizer, SummaryRequest, complete, prompt_tokens
from planner.trigger import BeforeCompact, RoundPlan, determine_compact_action
from transcript.model.checkpoint import Checkpoint, to_markdown
from transcript.model.errors import ConflictError
from transcript.model.events import CompactionRecorded, Event, MessageMarked, ProviderCaps, RoundClaimed
from transcript.model.processes import ProcessSnapshot, process_line
from transcript.model.result import CompactResult, RoundPath, Strategy
from transcript.model.snapshot import TranscriptSnapshot
from transcript.store.bodies import prepare
from transcript.store.port import EventStore, NewBody
from transcript.tokens import TokenCounter

_REFITS = 6
_MIN_SUMMARY_TOKENS = 100  # the least room a refit aims at without the emergency path
_EMPTY_MARKDOWN = to_markdown(Checkpoint(), brief=True)


class RoundInput(NamedTuple):
    """What a round reads, handed in by the session as data.

    `view_tokens` and `view_items` describe the current view; `latest` is the last recorded result
    (the breaker rides on it), `checkpoint` the latest checkpoint, `cursor` where micro planning may
    start under this round's config (0 when unknown), `unusable` the messages whose stored directive
    the view cannot use (the round supersedes them), `stored_tokens` the tokens of every stored
    message (how fast the session grows, for the payback rule), `system_tokens` those of its system
    messages, `processes` the processes the host last registered (None: it registered none), which
    every checkpoint the round makes carries; `claim` a round's claim that no record has closed yet
    (another compactor may be paying for its summary); `diagnostics` the storage faults the session's
    fold lives with (a body of the excluded history that is not stored), which the round's result
    carries.
    """

    snapshot: TranscriptSnapshot
    view_tokens: int
    view_items: int
    caps: ProviderCaps
    latest: CompactResult | None
    checkpoint: Checkpoint | None
    system_tokens: int
    cursor: int = 0
    unusable: tuple[str, ...] = ()
    stored_tokens: int = 0
    processes: tuple[ProcessSnapshot, ...] | None = None
    claim: RoundClaimed | None = None
    diagnostics: tuple[str, ...] = ()


# How long a round's claim holds (`RoundClaimed`): longer than any summarizer call, retries included;
# a claim its compactor never closed (it died) stops no round after that.
CLAIM_SECONDS: Final = 600


class Deps(NamedTuple):
    """What a round needs from outside: a token counter, an id source and a clock."""

    counter: TokenCounter
    new_id: Callable[[], str]
    now: Callable[[], datetime]


class RoundOptions(NamedTuple):
    """How a round runs: the budget and config, its dependencies, and what the caller asked for.

    `manual` marks a round the user asked for (not counted by the breaker); `force` goes straight to
    full compaction; `shadow` reports without writing; `summarizer` is the model summarizer (None: the
    local one, by choice); `reinject` the host's re-injection callback; `summary` a summary the caller
    wrote, which the full step takes instead of asking any summarizer; `before_compact` the host's
    hook, asked before an automatic round writes anything (False vetoes it); `reason` why the caller
    asked for the round, recorded as its reason; `focus` what its summary should keep above all.
    """

    budget_tokens: int
    config: CompactConfig
    deps: Deps
    manual: bool = False
    force: bool = False
    shadow: bool = False
    summarizer: Summarizer | None = None
    reinject: Reinject | None = None
    summary: str | None = None
    before_compact: BeforeCompact | None = None
    reason: str | None = None
    focus: str = ""


class RoundOutcome(NamedTuple):
    """The round's result (as recorded, when it was), every step it committed, and the micro cursor
    after it (None: unchanged)."""

    result: CompactResult
    written: tuple[Written, ...] = ()
    cursor: int | None = None


class _Round(NamedTuple):
    """What the steps of one round share: `breaker` as the round found it, `model_given` whether a
    model summarizer could be asked (one was given, and no summary the caller wrote)."""

    store: EventStore
    given: RoundInput
    options: RoundOptions
    breaker: Breaker
    model_given: bool
    # Why the host's re-injection callback gave nothing, when it failed this round (the latest ask).
    reinject_errors: list[str]

    @property
    def budget(self) -> int:
        return self.options.budget_tokens

    @property
    def config(self) -> CompactConfig:
        return self.options.config

    @property
    def deps(self) -> Deps:
        return self.options.deps


def quiet_result(
    view_tokens: int, view_items: int, options: RoundOptions, latest: CompactResult | None
) -> CompactResult | None:
    """The result of a round below the micro threshold (nothing planned, nothing written); None when
    the round must run."""
    if not (options.config.auto_compact_enabled or options.manual or options.force):
        reason = "automatic compaction is disabled"
    else:
        quick = determine_compact_action(
            view_tokens, options.budget_tokens, options.config, force=options.force
        )
        if quick.kind != "none":
            return None
        reason = quick.reason
    base = _base(view_tokens, view_items, options.budget_tokens, options.manual, options.force)
    return Breaker.after(latest).stamp(msgspec.structs.replace(base, reason=reason))


def round_steps(store: EventStore, given: RoundInput, options: RoundOptions) -> Steps[RoundOutcome]:
    """One round (see the module docstring); `run_compact` and `arun_compact` drive it."""
    budget_tokens, config, deps, manual, force, shadow = options[:6]
    snapshot = given.snapshot
    breaker = Breaker.after(given.latest)
    base = msgspec.structs.replace(
        _base(given.view_tokens, given.view_items, budget_tokens, manual, force),
        round_id=deps.new_id(),
        focus=options.focus,
        diagnostics=given.diagnostics,
    )
    micro_on = config.micro_compact_enabled
    # A forced round goes straight to full compaction: the history is scanned for micro candidates only
    # when its emergency path needs them (or a shadow round reports them).
    scan = micro_on and (shadow or not force)
    plan = (
        plan_micro(snapshot, config, since=given.cursor, budget_tokens=budget_tokens)
        if scan
        else _no_plan(snapshot, given.cursor)
    )
    defend = force or given.view_tokens >= config.auto_compact_threshold * budget_tokens
    system = given.system_tokens
    hopeless = (
        defend and config.emergency_path and _floor_left(snapshot, config, plan, system) > budget_tokens
    )
    # A round the user asked for is not gated: they decided it is worth its cache break.
    gated = config.payback_gate and not manual and not force
    cheap = (
        _cheapest_defence(given, config, budget_tokens, plan)
        if gated and defend and not hopeless and micro_on
        else None
    )
    economics = None
    if cheap is not None:
        plan, economics = cheap
    elif plan and gated and not defend:
        # Below the full threshold: the part of the plan whose cache break pays back best.
        chosen = choose_micro(
            snapshot,
            config,
            plan,
            view_tokens_now=given.view_tokens,
            budget_tokens=budget_tokens,
            stored_tokens=given.stored_tokens,
        )
        if chosen is not None:
            plan, economics = chosen
    elif plan and plan.first_seq is not None:
        economics = micro_economics(
            snapshot,
            config,
            freed=plan.estimated_saved_tokens,
            invalidated=invalidated_tokens(snapshot, plan.first_seq),
            view_tokens_now=given.view_tokens,
            budget_tokens=budget_tokens,
            stored_tokens=given.stored_tokens,
        )
    action = determine_compact_action(
        given.view_tokens,
        budget_tokens,
        config,
        micro_savings=plan.estimated_saved_tokens,
        force=force,
        economics=economics if gated else None,
        floor_over_budget=hopeless,
    )
    path: RoundPath = "emergency" if cheap is not None and _reaches_kept_steps(given, config, plan) else ""
    if action.kind in ("micro_then_full", "full"):
        path = "standard"
        if config.emergency_path and not hopeless:
            kept = floor_tokens(snapshot, stale_boundary(snapshot, config), system_tokens=system)
            if kept > budget_tokens:
                path = "emergency"
                if micro_on:
                    if not scan:
                        plan = plan_micro(snapshot, config, since=given.cursor, budget_tokens=budget_tokens)
                    extra = plan_emergency(
                        snapshot,
                        config,
                        need=kept - config.target_tokens(budget_tokens),
                        after=plan.scanned_to,
                    )
                    plan = plan.extended(extra)
    reason = options.reason or (action.reason if options.summary is None else "a summary the caller wrote")
    result = msgspec.structs.replace(
        base, estimated_saved_tokens=plan.estimated_saved_tokens, reason=reason, path=path
    )
    if economics is not None:
        result = _with_economics(result, economics)
    if shadow:
        shadowed = msgspec.structs.replace(
            result,
            outcome="shadowed",
            strategy="tool-result-micro" if plan else None,
            compacted_count=len(plan.message_ids),
            tokens_after=given.view_tokens - plan.estimated_saved_tokens,
        )
        return RoundOutcome(shadowed)
    micro = action.kind in ("micro", "micro_then_full") or path == "emergency"
    marks = micro_marks(snapshot, plan, deps.counter.count) if micro and plan else []
    cursor = plan.scanned_to if micro or not plan else None
    if given.unusable:
        marks = [*marks, *repair_marks(snapshot, given.unusable, config, deps.counter.count)]
    shortened = marked(snapshot, plan, marks, snapshot.version) if marks else snapshot
    if given.unusable:
        # The view was rebuilt around directives it could not use; superseding them makes it the
        # stored one again, whose size only a whole render tells.
        tokens_after = view_token_count(shortened.entries, given.caps)
    else:
        tokens_after = given.view_tokens + view_delta(snapshot, plan, marks, given.caps)
    result = _micro_result(result, marks, tokens_after)
    model_given = options.summarizer is not None and options.summary is None
    run = _Round(store, given, options, breaker, model_given, [])
    needs_full = action.kind in ("full", "micro_then_full") and (
        force or result.tokens_after / budget_tokens >= config.micro_compact_threshold
    )
    if needs_full and not config.full_compact_enabled:
        result = msgspec.structs.replace(
            result, outcome="full_unavailable", reason="full compaction is disabled"
        )
        needs_full = False
    if options.before_compact is not None and not manual and (marks or needs_full):
        proposed = RoundPlan(
            session_id=snapshot.session_id,
            version=snapshot.version,
            action=action.kind,
            reason=reason,
            budget_tokens=budget_tokens,
            view_tokens=given.view_tokens,
            micro_ids=tuple(mark.message_id for mark in marks),
            estimated_saved_tokens=plan.estimated_saved_tokens,
            full=needs_full,
            forced=force,
            path=path,
        )
        try:
            verdict = options.before_compact(proposed)
        except Exception as exc:  # the host's code: the round goes on as if it had said nothing
            verdict = None
            result = msgspec.structs.replace(result, hook_error=bounded_error(exc))
        if verdict is False:
            return _vetoed(store, given, base, proposed)
    if needs_full:
        written: list[Written] = []
        if marks:
            # The full step's record decides what the breaker makes of this round.
            interim = breaker.stamp(_irreducible(shortened, config, budget_tokens, result, system))
            step = _commit_micro(store, snapshot, marks, interim)
            written.append(step)
            snapshot = msgspec.structs.replace(shortened, version=step.version)
            result = _shifted(result, step)
        outcome = yield from _full(run, snapshot, result, written)
        return outcome._replace(cursor=cursor)
    result = _irreducible(shortened, config, budget_tokens, result, system)
    if result.outcome == "skipped":
        quiet = breaker.stamp(msgspec.structs.replace(result, reason=f"{action.reason}; nothing to reclaim"))
        return RoundOutcome(quiet, (), cursor)
    # No model was asked: the breaker is as it was (a manual round that did something closes it).
    final = breaker.finished(manual=manual, asked=False, failed=False, config=config).stamp(result)
    step = _commit_micro(store, snapshot, marks, final)
    return RoundOutcome(_recorded(final, step), (step,), cursor)


def _explained(options: RoundOptions) -> bool:
    """Whether the caller said why the round runs (a reason, or the summary they wrote): that stays its
    reason whatever its steps do."""
    return options.reason is not None or options.summary is not None


def _vetoed(store: EventStore, given: RoundInput, base: CompactResult, proposed: RoundPlan) -> RoundOutcome:
    """Record a round the host's hook vetoed: its record alone, the breaker as it was (a veto is no
    failure, and no round)."""
    result = msgspec.structs.replace(
        base, outcome="vetoed", reason=f"the before_compact hook vetoed it ({proposed.reason})"
    )
    final = Breaker.after(given.latest).stamp(result)
    step = commit(
        store, given.snapshot.session_id, given.snapshot.version, [CompactionRecorded(result=final)]
    )
    return RoundOutcome(_recorded(final, step), (step,))


def _no_plan(snapshot: TranscriptSnapshot, cursor: int) -> MicroPlan:
    """The empty plan of a round with micro compaction switched off (the micro cursor stays put)."""
    return MicroPlan(
        session_id=snapshot.session_id,
        version=snapshot.version,
        entries=(),
        estimated_saved_tokens=0,
        scanned_to=cursor,
        examined=0,
    )


def _cheapest_defence(
    given: RoundInput, config: CompactConfig, budget: int, plan: MicroPlan
) -> tuple[MicroPlan, RoundEconomics] | None:
    """At the full threshold, a micro round that takes the view under the micro threshold, if one does:
    it defends the budget without asking for a summary. When the newest step alone (with the system
    messages and the least of a summary) is above the micro threshold already, no full round could
    take the view lower than that: then a micro round that takes it there, within the budget, is the
    defence. Besides stale results it may shorten those of recent steps that a full round would not
    keep whole anyway (never the newest step), and it breaks the cache as late as it can."""
    if not config.emergency_path:
        return None
    snapshot = given.snapshot
    room = config.target_tokens(budget) - config.summary_allowance(budget)
    floor = emergency_floor(snapshot, config, room, system_tokens=given.system_tokens)
    extra = plan_emergency(snapshot, config, need=given.view_tokens, before=floor, after=plan.scanned_to)
    wider = plan.extended(extra)
    newest = _floor_left(snapshot, config, plan, given.system_tokens)
    goal = max(math.floor(config.micro_compact_threshold * budget), newest + config.summary_allowance(budget))
    return choose_micro(
        snapshot,
        config,
        wider,
        view_tokens_now=given.view_tokens,
        budget_tokens=budget,
        stored_tokens=given.stored_tokens,
        need=given.view_tokens - min(goal, budget) + 1,
    )


def _floor_left(snapshot: TranscriptSnapshot, config: CompactConfig, plan: MicroPlan, system: int) -> int:
    """What no round can take from the view (`planner.cut.irreducible_tokens`), less what the plan
    frees in the newest step: its oversize outputs (`planner.micro.oversize_entries`)."""
    floor = irreducible_tokens(snapshot, config, system_tokens=system)
    if not config.emergency_path:
        return floor
    start = newest_step_start(snapshot)
    freed = max((saved for seq, saved in plan.savings_from() if seq >= start), default=0)
    return floor - freed


def _reaches_kept_steps(given: RoundInput, config: CompactConfig, plan: MicroPlan) -> bool:
    """Whether a plan shortens results of the recent steps a standard round keeps whole."""
    boundary = stale_boundary(given.snapshot, config)
    return any(seq >= boundary for _, seq in plan.positions)


def _with_economics(result: CompactResult, economics: RoundEconomics) -> CompactResult:
    payback = economics.payback_calls
    return msgspec.structs.replace(
        result,
        invalidated_tokens=economics.invalidated_tokens,
        expected_calls=round(economics.expected_calls, 2),
        payback_calls=None if math.isinf(payback) else round(payback, 2),
    )


def run_compact(store: EventStore, given: RoundInput, options: RoundOptions) -> RoundOutcome:
    """Run one round with a synchronous summarizer (or none: the local one, by choice)."""
    return drive(round_steps(store, given, options), options.summarizer or _never)


async def arun_compact(store: EventStore, given: RoundInput, options: RoundOptions) -> RoundOutcome:
    """Run one round; the summarizer may be async."""
    return await adrive(round_steps(store, given, options), options.summarizer or _never)


def _never(request: object) -> str:
    raise AssertionError("no model summarizer was given, so none may be called")


def micro_compact(
    store: EventStore,
    given: RoundInput,
    plan: MicroPlan,
    *,
    deps: Deps,
    config: CompactConfig | None = None,
) -> RoundOutcome:
    """Apply a micro plan made by hand as one manual round: its marks and its record, one transaction.

    The plan is checked first against what micro compaction may shorten under `config` (the session's):
    `IneligiblePlan` for a user's request, a tool input, an error or protected tool's result, a recent
    step. Raises `ConflictError` when the plan was made from another version. Either way nothing is
    written.
    """
    config = config or CompactConfig()
    snapshot = given.snapshot
    marks = micro_marks(snapshot, plan, deps.counter.count)
    check_plan(snapshot, plan, config)
    base = msgspec.structs.replace(
        _base(given.view_tokens, given.view_items, 0, True, False),
        round_id=deps.new_id(),
        reason="a micro plan applied by hand",
        estimated_saved_tokens=plan.estimated_saved_tokens,
    )
    result = _micro_result(base, marks, given.view_tokens + view_delta(snapshot, plan, marks, given.caps))
    if not marks:
        return RoundOutcome(result)
    final = (
        Breaker.after(given.latest)
        .finished(manual=True, asked=False, failed=False, config=config)
        .stamp(result)
    )
    step = _commit_micro(store, snapshot, marks, final)
    return RoundOutcome(_recorded(final, step), (step,))


def _base(view_tokens: int, view_items: int, budget: int, manual: bool, force: bool) -> CompactResult:
    return CompactResult(
        outcome="skipped",
        manual=manual,
        forced=force,
        budget_tokens=budget,
        items_before=view_items,
        items_after=view_items,
        tokens_before=view_tokens,
        tokens_after=view_tokens,
    )


def _micro_result(result: CompactResult, marks: list[MessageMarked], tokens_after: int) -> CompactResult:
    """The result of a micro step that writes these marks (none: skipped), leaving the view at
    `tokens_after` tokens."""
    compacted = tuple(mark.message_id for mark in marks)
    return msgspec.structs.replace(
        result,
        outcome="micro_applied" if marks else "skipped",
        strategy="tool-result-micro" if marks else None,
        tokens_after=tokens_after,
        compacted_count=len(compacted),
        compacted_ids=compacted,
    )


def _commit_micro(
    store: EventStore, snapshot: TranscriptSnapshot, marks: list[MessageMarked], result: CompactResult
) -> Written:
    events: list[Event] = [*marks, CompactionRecorded(result=result)]
    return commit(store, snapshot.session_id, snapshot.version, events)


def _recorded(result: CompactResult, step: Written) -> CompactResult:
    """The result as its record reads back: the version its event got (the step's last), and the view
    it left as committed (a step committed after messages that came meanwhile counts them too)."""
    stored = next((e.result for e in reversed(step.events) if isinstance(e, CompactionRecorded)), result)
    return msgspec.structs.replace(
        result, version=step.version, tokens_after=stored.tokens_after, items_after=stored.items_after
    )


def _full(
    run: _Round, snapshot: TranscriptSnapshot, result: CompactResult, written: list[Written]
) -> Steps[RoundOutcome]:
    """The full step of a round (see the module docstring)."""
    config, budget = run.config, run.budget
    micro_done = result.compacted_count > 0
    floor = None
    if config.emergency_path:
        # Fewer recent steps are kept when they alone would leave the view over the target.
        room = config.target_tokens(budget) - config.summary_allowance(budget)
        floor = emergency_floor(snapshot, config, room, system_tokens=run.given.system_tokens)
        if folds_newest_step(snapshot, config, budget, system_tokens=run.given.system_tokens):
            floor = len(snapshot.entries)  # nothing is kept past the kept window
    prepared = _prepare(run, snapshot, aggressive=False, floor_seq=floor)
    if prepared is None:
        return _no_full(
            run, snapshot, result, written, "nothing older than the kept window can be summarized"
        )
    if config.emergency_path and not run.options.force and _cannot_fit(run, snapshot, prepared):
        return _no_full(
            run,
            snapshot,
            result,
            written,
            "no summary fits beside the newest step: it would leave the view over budget",
        )
    local = None  # the local summarizer's reply to `prepared`, once built (it is also the fallback)
    if config.emergency_path and result.tokens_after <= budget and not run.options.force:
        local = LocalSummarizer().reply(prepared.request)
        if _too_small(run, prepared, complete(local, prepared.request)):
            return _no_full(
                run,
                snapshot,
                result,
                written,
                "what is older than the kept window is smaller than its summary",
            )
    breaker, use_model = (
        run.breaker.consulted(manual=run.options.manual, config=config)
        if run.model_given
        else (run.breaker, False)
    )
    if use_model:
        # Claimed before the model is paid: a compactor that lost the race learns it here.
        claimed = _claim(run, snapshot, result)
        if isinstance(claimed, str):
            lost = msgspec.structs.replace(result, outcome="claimed", reason=claimed)
            return RoundOutcome(lost, tuple(written))
        written.append(claimed)
        snapshot = msgspec.structs.replace(snapshot, version=claimed.version)
        result = _shifted(result, claimed)
    attempt = (yield from attempts(prepared.request)) if use_model else None
    now = run.deps.now()
    summary_id = run.deps.new_id()
    checkpoint, calls = _read(run, prepared, attempt, now, _Calls(), local=local)
    body = _summary(run, prepared, checkpoint, summary_id, now, reinject=True)
    tokens_after = result.tokens_after - prepared.cut.summarized_tokens + sum(body.tokens)
    if tokens_after > budget:
        aggressive = _prepare(
            run, snapshot, aggressive=True, floor_seq=floor, building_on=(prepared, checkpoint)
        )
        if aggressive is not None and len(aggressive.cut.summarize) > len(prepared.cut.summarize):
            attempt = (yield from attempts(aggressive.request)) if use_model else None
            checkpoint, calls = _read(run, aggressive, attempt, now, calls)
            prepared = aggressive
            body = _summary(run, prepared, checkpoint, summary_id, now, reinject=True)
    asked, answered, errors = calls.asked, calls.answered, calls.errors
    model_failed = use_model and calls.fallback
    rest = result.tokens_after - prepared.cut.summarized_tokens
    shown, body = _fitted(run, prepared, checkpoint, body, rest=rest, summary_id=summary_id, now=now)
    tokens_after = rest + sum(body.tokens)
    # The summarizer was asked all the same: what it cost stays on the record.
    spent = msgspec.structs.replace(
        result,
        summary_input_tokens=asked,
        summary_output_tokens=answered,
        summarizer_error=errors.summarizer,
        parse_error=errors.parse,
    )
    if tokens_after >= result.tokens_after:
        return _no_full(
            run,
            snapshot,
            spent,
            written,
            "the summary would not make the view smaller",
            errors.latest,
            breaker=breaker,
            asked=use_model,
            model_failed=model_failed,
        )
    if config.emergency_path and tokens_after > budget and not run.options.force:
        # A checkpoint that leaves the view over budget breaks the cache for nothing: not written
        # (unless the caller forced the round: then they asked for the checkpoint itself).
        return _no_full(
            run,
            snapshot,
            spent,
            written,
            "the summary would leave the view over budget",
            errors.latest,
            breaker=breaker,
            asked=use_model,
            model_failed=model_failed,
        )
    first = min(
        (seq for seq in prepared.cut.summarize if snapshot.entries[seq].message.kind != "summary"),
        default=prepared.cut.next_seq,
    )
    economics = micro_economics(
        snapshot,
        config,
        freed=result.tokens_after - tokens_after,
        invalidated=invalidated_tokens(snapshot, first),
        view_tokens_now=result.tokens_after,
        budget_tokens=budget,
        stored_tokens=run.given.stored_tokens,
        summary_cost=config.cache_pricing.summary_cost(asked, answered),
        full=True,
    )
    result = msgspec.structs.replace(
        result,
        outcome="full_applied",
        strategy=_strategy(prepared),
        reason="micro alone was not enough" if micro_done and not _explained(run.options) else result.reason,
        items_after=result.items_after - len(prepared.cut.summarize) + 1,
        tokens_after=tokens_after,
        delta_count=len(prepared.request.items),
        checkpoint_reused=prepared.previous is not None,
        fallback_used=calls.fallback,
        split_turn=prepared.cut.split_turn,
        checkpoint=shown,
        carried_checkpoint=checkpoint if shown != checkpoint else None,
        summary=_rendered(body, shown),
        failed=model_failed,
        summary_input_tokens=asked,
        summary_output_tokens=answered,
        kept_steps=_steps_in(snapshot, prepared.cut.kept),
        summarizer_error=errors.summarizer,
        parse_error=errors.parse,
        reinject_error=run.reinject_errors[-1] if run.reinject_errors else "",
    )
    result = _with_economics(result, economics)
    after = _without(snapshot, prepared.cut.summarize)
    result = _irreducible(after, config, budget, result, run.given.system_tokens)
    breaker = breaker.finished(
        manual=run.options.manual, asked=use_model, failed=model_failed, config=config, error=errors.latest
    )
    result = breaker.stamp(result)
    step = commit(
        run.store,
        snapshot.session_id,
        snapshot.version,
        full_events(prepared, body, result),
        {body.message.id: body},
    )
    return RoundOutcome(_recorded(result, step), (*written, step))


def _claim(run: _Round, snapshot: TranscriptSnapshot, result: CompactResult) -> Written | str:
    """Claim the round before a model is asked for its summary: the committed claim, or why this
    compactor lost (another's claim is open in the history it read, or committed first)."""
    now = run.deps.now()
    held = run.given.claim
    if held is not None and held.round_id != result.round_id and _lapses(held) > now:
        return (
            f"another compactor claimed this round ({held.round_id}, until {held.until}): "
            "no model was asked, nothing was written"
        )
    until = (now + timedelta(seconds=CLAIM_SECONDS)).isoformat(timespec="seconds")
    try:
        claim = RoundClaimed(round_id=result.round_id, until=until)
        return commit(run.store, snapshot.session_id, snapshot.version, [claim])
    except ConflictError:
        return "another compactor moved the session first (its claim or its round): no model was asked"


def _lapses(claim: RoundClaimed) -> datetime:
    """When a claim lapses (a claim whose time cannot be read has lapsed)."""
    try:
        until = datetime.fromisoformat(claim.until)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return until if until.tzinfo is not None else until.replace(tzinfo=UTC)


def _shifted(result: CompactResult, step: Written) -> CompactResult:
    """The result counting the messages a step was committed after (those that came while it ran)."""
    count, tokens = step.shifted
    if not count:
        return result
    return msgspec.structs.replace(
        result, tokens_after=result.tokens_after + tokens, items_after=result.items_after + count
    )


class _Errors(NamedTuple):
    """The failures of a full step's summarizer calls: the latest error raised, the latest reply that
    did not parse (each type and message, bounded)."""

    summarizer: str = ""
    parse: str = ""
    latest: str = ""

    def seen(self, attempt: Attempts | None, parse_error: str) -> _Errors:
        """These errors updated with one more call (None: the model was not asked)."""
        raised = clip_within(attempt.error, ERROR_CHARS) if attempt is not None and attempt.error else ""
        return _Errors(
            summarizer=raised or self.summarizer,
            parse=parse_error or self.parse,
            latest=raised or parse_error or self.latest,
        )


class _Calls(NamedTuple):
    """A full step's summarizer calls so far: the tokens asked and answered, their errors, and whether
    one fell back to the local summarizer."""

    asked: int = 0
    answered: int = 0
    errors: _Errors = _Errors()
    fallback: bool = False


def _read(
    run: _Round,
    prepared: PreparedFull,
    attempt: Attempts | None,
    now: datetime,
    calls: _Calls,
    *,
    local: Checkpoint | None = None,
) -> tuple[Checkpoint, _Calls]:
    """The checkpoint of one summarizer call for `prepared` (None: the model was not asked; `local`:
    the local summarizer's reply, when already built), and `calls` with that call counted: every
    request sent to the model (prompt-too-long retries too; the one request a model would have been
    sent when none was asked), the answer as the model sent it or would have. A summary the caller
    wrote is read instead, and nothing is counted; the processes the host registered replace the
    checkpoint's."""
    given = run.options.summary
    reading = checkpoint_from(prepared, attempt.text if attempt else None, now, local=local, given=given)
    checkpoint = reading.checkpoint
    if run.given.processes is not None:  # the host's own word on what runs, whoever summarized
        lines = tuple(process_line(p) for p in run.given.processes)
        checkpoint = msgspec.structs.replace(checkpoint, process_snapshots=lines)
    if given is not None:  # the caller wrote it: no summarizer was, or would have been, asked
        return checkpoint, calls
    return checkpoint, _Calls(
        asked=calls.asked
        + sum(_request_tokens(run, r) for r in (attempt.sent if attempt else [prepared.request])),
        answered=calls.answered + run.deps.counter.count(reading.answer),
        errors=calls.errors.seen(attempt, reading.parse_error),
        fallback=calls.fallback or reading.fallback,
    )


def _too_small(run: _Round, prepared: PreparedFull, local: Checkpoint) -> bool:
    """Whether the history a full step would replace is no larger than the summary the local summarizer
    makes of it (`local`; a model's is no cheaper to ask for): then asking for one is futile."""
    body = summary_message(prepared, local, (), message_id="estimate", now=run.deps.now())
    return prepared.cut.summarized_tokens <= run.deps.counter.count(body.text)


def _fitted(
    run: _Round,
    prepared: PreparedFull,
    checkpoint: Checkpoint,
    body: NewBody,
    *,
    rest: int,
    summary_id: str,
    now: datetime,
) -> tuple[Checkpoint, NewBody]:
    """The checkpoint as the view shows it, and the summary showing it: as much of `checkpoint` as fits
    the room `rest` (the view without the summary) leaves in the budget; re-injected files go first.
    On the emergency path the goal gives way last, and when not even an empty checkpoint fits, the
    view shows the short hint alone (a view over budget cannot be sent); the round's record carries
    the whole checkpoint for the next round to merge into."""
    shown, budget, count = checkpoint, run.budget, run.deps.counter.count
    for refit in range(_REFITS):
        if rest + sum(body.tokens) <= budget:
            break
        if not run.config.emergency_path or run.options.force:
            # (A forced round was asked for its checkpoint: it is written even over budget.)
            room = max(budget - rest, _MIN_SUMMARY_TOKENS)
            shown = fit(shown, int(len(to_markdown(shown, brief=True)) * room / sum(body.tokens)))
            body = _summary(run, prepared, shown, summary_id, now, reinject=False)
            continue
        if refit == 0:
            body = _summary(run, prepared, shown, summary_id, now, reinject=False)
        markdown = to_markdown(shown, brief=True)
        own = max(1, count(markdown))
        room = budget - rest - (sum(body.tokens) - own)  # the continuation hint cannot shrink
        if room <= 0 or markdown == _EMPTY_MARKDOWN:
            shown = Checkpoint(
                generated_at=shown.generated_at,
                source_item_count=shown.source_item_count,
                split_turn=shown.split_turn,
            )
            return shown, _summary(run, prepared, shown, summary_id, now, reinject=False, bare=True)
        shown = fit(shown, int(len(markdown) * min(1.0, room / own)), give_way=True)
        body = _summary(run, prepared, shown, summary_id, now, reinject=False)
    return shown, body


def _cannot_fit(run: _Round, snapshot: TranscriptSnapshot, prepared: PreparedFull) -> bool:
    """Whether even the smallest summary a full step could show (the short hint alone) leaves the view
    over budget beside what no round can reduce (the system messages and the newest step): then
    asking for one is paying for nothing."""
    body = summary_message(prepared, Checkpoint(), (), message_id="estimate", now=run.deps.now(), bare=True)
    floor = irreducible_tokens(snapshot, run.config, system_tokens=run.given.system_tokens)
    return floor + run.deps.counter.count(body.text) > run.budget


def _request_tokens(run: _Round, request: SummaryRequest) -> int:
    """The input of one summarizer request, as a text model would be sent it: its framing counted,
    its history priced from the stored counts (`planner.summary.prompt_tokens`)."""
    return prompt_tokens(request, run.deps.counter.count)


def _prepare(
    run: _Round,
    snapshot: TranscriptSnapshot,
    *,
    aggressive: bool,
    floor_seq: int | None,
    building_on: tuple[PreparedFull, Checkpoint] | None = None,
) -> PreparedFull | None:
    return prepare_full(
        snapshot,
        run.config,
        previous=run.given.checkpoint,
        budget_tokens=run.budget,
        force=run.options.force,
        aggressive=aggressive,
        keep_tokens=run.config.kept_tokens(run.budget, run.given.system_tokens),
        shown=lambda entry: shown_message(entry, run.given.caps),
        floor_seq=floor_seq,
        building_on=building_on,
        focus=run.options.focus,
    )


def _without(snapshot: TranscriptSnapshot, excluded: tuple[int, ...]) -> TranscriptSnapshot:
    """The snapshot with these entries excluded, as the full step leaves it (its summary aside)."""
    entries = snapshot.entries
    changed = {
        seq: msgspec.structs.replace(
            entries[seq], flags=msgspec.structs.replace(entries[seq].flags, excluded=True)
        )
        for seq in excluded
    }
    return with_entries(snapshot, changed)


def _steps_in(snapshot: TranscriptSnapshot, kept: tuple[int, ...]) -> int:
    """How many steps (assistant messages) the kept window holds."""
    return sum(1 for seq in kept if snapshot.entries[seq].message.role == "assistant")


def _summary(
    run: _Round,
    prepared: PreparedFull,
    checkpoint: Checkpoint,
    message_id: str,
    now: datetime,
    *,
    reinject: bool,
    bare: bool = False,
) -> NewBody:
    files: list[tuple[str, str]] = []
    if reinject:
        files, error = reinjected_content(prepared, run.options.reinject, run.config, run.budget)
        if error:
            run.reinject_errors.append(error)
    message = summary_message(prepared, checkpoint, files, message_id=message_id, now=now, bare=bare)
    return prepare(message, run.deps.counter)


def _rendered(body: NewBody, shown: Checkpoint) -> str:
    """The rendered checkpoint the summary `body` shows the model (`CompactResult.summary`): its text,
    the files re-injected after it aside (the short hint alone when it shows no checkpoint)."""
    return BARE_HINT if body.message.text == BARE_HINT else summary_text(shown)


def _no_full(
    run: _Round,
    snapshot: TranscriptSnapshot,
    result: CompactResult,
    written: list[Written],
    reason: str,
    error: str = "",
    *,
    breaker: Breaker | None = None,
    asked: bool = False,
    model_failed: bool = False,
) -> RoundOutcome:
    """Record a round whose full step could not make progress (nothing of that step is written).
    `breaker` is the breaker once the model was consulted (default: as the round found it), `asked`
    whether it was asked, `model_failed` whether it gave no checkpoint, `error` the latest error of
    its calls: only a model that was asked and failed counts for the breaker."""
    micro_done = result.compacted_count > 0
    outcome = "micro_applied_then_full_failed" if micro_done else "full_failed"
    result = msgspec.structs.replace(result, outcome=outcome, reason=reason)
    result = _irreducible(snapshot, run.config, run.budget, result, run.given.system_tokens)
    breaker = (breaker or run.breaker).finished(
        manual=run.options.manual, asked=asked, failed=model_failed, config=run.config, error=error
    )
    final = breaker.stamp(result)
    step = commit(run.store, snapshot.session_id, snapshot.version, [CompactionRecorded(result=final)])
    return RoundOutcome(_recorded(final, step), (*written, step))


def _strategy(prepared: PreparedFull) -> Strategy:
    name = "aggressive-checkpoint" if prepared.aggressive else "checkpoint"
    return f"{name}-delta" if prepared.previous is not None else name  # type: ignore[return-value]


def _irreducible(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    budget: int,
    result: CompactResult,
    system_tokens: int,
) -> CompactResult:
    """The result, saying `over_budget_irreducible` when what no round can reduce exceeds the budget:
    with the emergency path, the newest step and the system messages; else the kept recent steps."""
    if result.tokens_after <= budget:
        return result
    floor = irreducible_tokens(snapshot, config, system_tokens=system_tokens)
    if floor <= budget:
        return result
    reason = (
        "the system messages and the newest step alone exceed the budget"
        if config.emergency_path
        else "system messages, the kept recent steps and pending calls alone exceed the budget"
    )
    return msgspec.structs.replace(
        result, outcome="over_budget_irreducible", irreducible_tokens=floor, reason=reason
    )
