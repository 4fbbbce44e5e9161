"""Replaying a recorded session as a live loop would have run it, one compaction round per model call.

Messages are appended in their recorded order; before each assistant message (a model call) one round
runs against the budget and the view the model would have been sent is taken — and recorded as
served, so `transcript replay --verify` can check it later. The assistant message and the results
that answer it are then appended as one turn. This is how a policy is tried on real sessions
(`transcript simulate`) and how the test suite checks the promises on the corpus.

The economics (`economy`) use exactly these definitions: reuse at a call is the tokens of the longest
message-granular common prefix with the previous call's view; a break is a call (not the first) whose
common prefix is shorter than the previous view; cost is, over all calls, read × reused + write × (sent
− reused), plus every summarizer request's input at the write price and its output at the output
price (counted as if a model answered, also when the local summarizer did). The baseline is the same
replay with no compaction (`compact=False`). Retention is that of `transcript.session.retention`. With
a peer policy (`planner.peers`) the peer decides each call's view instead, and nothing but the
messages is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

import msgspec

from planner.config import CompactConfig
from planner.economics import CachePricing
from planner.peers import Peer, PeerState, PeerTools, view_of
from projection.digest import digest_view
from projection.view import View
from transcript.model.ids import utc_now
from transcript.model.message import Message
from transcript.model.result import CompactResult
from transcript.model.snapshot import Entry
from transcript.session.facade import Transcript, live_session
from transcript.session.retention import Retention

BreakKind: TypeAlias = Literal["", "micro", "full", "other"]


class ModelCall(msgspec.Struct, frozen=True, kw_only=True):
    """One model call of a replay: the round run before it and the view the model saw.

    `reused_tokens` is the common prefix with the previous call's view; `break_kind` says what broke
    it when `prefix_kept` is false (the round's micro or full step, or something else). `floor_tokens`
    is the newest step with the system messages, as stored: what no round may shorten. `facts` are
    the call's relevant facts and `facts_kept` those the view held (`transcript.session.retention`);
    `after_compaction` says a round at this call or before it changed the view, `after_summary` that
    one wrote a summary.
    """

    point: int
    result: CompactResult
    view_messages: int
    view_tokens: int
    stored_tokens: int
    reused_tokens: int = 0
    prefix_kept: bool = True
    break_kind: BreakKind = ""
    floor_tokens: int = 0
    facts: int = 0
    facts_kept: int = 0
    after_compaction: bool = False
    after_summary: bool = False

    @property
    def full_round(self) -> bool:
        """Whether the round before this call wrote a checkpoint."""
        return self.result.checkpoint is not None and self.result.outcome != "shadowed"


class Simulation(msgspec.Struct, frozen=True, kw_only=True):
    """Every model call of a replayed session, in order, and what they add up to."""

    session_id: str
    budget_tokens: int
    calls: tuple[ModelCall, ...]

    @property
    def outcomes(self) -> dict[str, int]:
        """How many rounds ended in each outcome."""
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call.result.outcome] = counts.get(call.result.outcome, 0) + 1
        return counts

    @property
    def tokens_sent(self) -> int:
        """View tokens over all model calls."""
        return sum(call.view_tokens for call in self.calls)

    @property
    def reused_tokens(self) -> int:
        """Tokens of each view's leading messages that equal the previous call's (a prompt cache's hit)."""
        return sum(call.reused_tokens for call in self.calls)

    @property
    def prefix_breaks(self) -> int:
        """Calls whose view does not start with the whole previous view (a prompt cache is invalidated)."""
        return sum(1 for call in self.calls[1:] if not call.prefix_kept)

    @property
    def rounds(self) -> int:
        """Rounds that did something and were recorded."""
        return sum(1 for call in self.calls if call.result.version)

    def breaks(self, kind: BreakKind) -> int:
        """Prefix breaks of one kind (`micro`, `full`, `other`)."""
        return sum(1 for call in self.calls[1:] if not call.prefix_kept and call.break_kind == kind)

    @property
    def over_budget_calls(self) -> int:
        """Calls whose view was over the budget."""
        return sum(1 for call in self.calls if call.view_tokens > self.budget_tokens)

    @property
    def over_budget_fitting(self) -> int:
        """Calls over the budget although the newest step with the system messages would have fit."""
        return sum(
            1
            for call in self.calls
            if call.view_tokens > self.budget_tokens and call.floor_tokens <= self.budget_tokens
        )

    @property
    def retention(self) -> float:
        """Relevant facts the views kept, over every call after the first compaction (1.0: none)."""
        facts = sum(call.facts for call in self.calls if call.after_compaction)
        return sum(call.facts_kept for call in self.calls if call.after_compaction) / facts if facts else 1.0

    @property
    def futile_full_rounds(self) -> int:
        """Full rounds that left the view over the budget."""
        return sum(1 for call in self.calls if call.full_round and call.view_tokens > self.budget_tokens)

    def cost(self, pricing: CachePricing) -> float:
        """What the model calls and the summarizer requests cost (see the module docstring)."""
        calls = sum(pricing.call_cost(call.view_tokens, call.reused_tokens) for call in self.calls)
        summaries = sum(
            pricing.summary_cost(call.result.summary_input_tokens, call.result.summary_output_tokens)
            for call in self.calls
        )
        return calls + summaries


ViewCheck = Callable[[View, CompactResult], None]


def simulate(
    transcript: Transcript,
    messages: Sequence[Message],
    *,
    budget_tokens: int,
    config: CompactConfig | None = None,
    on_model_call: ViewCheck | None = None,
    record: bool = True,
    compact: bool = True,
    peer: Peer | None = None,
) -> Simulation:
    """Append `messages` to `transcript` with one round and one (recorded) view per model call.

    `compact=False` runs no round at all: the baseline the economics compare with. With `peer`, the
    peer policy decides each call's view instead (`planner.peers`): nothing of it is written, the
    transcript only stores the messages (and no view is recorded).
    """
    calls: list[ModelCall] = []
    previous: tuple[str, ...] = ()
    quiet = CompactResult(outcome="skipped", budget_tokens=budget_tokens)
    # Without compaction every fact is kept (P0 is 100%): nothing to measure.
    retention = Retention(messages) if compact or peer is not None else None
    tools = PeerTools(count=transcript.counter.count, now=utc_now, config=config or CompactConfig())
    state = PeerState()
    compacted = summarized = False
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role != "assistant":
            transcript.append(message)
            index += 1
            continue
        live = live_session(transcript)
        if peer is not None:
            state, result = peer.round(state, live.snapshot(), budget_tokens, tools)
            shown = view_of(state, live.snapshot(), tools)
            view = View.of(shown.messages, source="canonical", tokens=shown.total)
            digests = digest_view(shown.messages)[1]
            counts: Sequence[int] = shown.tokens
        else:
            result = transcript.compact(budget_tokens=budget_tokens, config=config) if compact else quiet
            view = transcript.visible_messages(record=record)
            live = live_session(transcript)
            digests = tuple(live.view_digests(view))
            counts = live.rendered.counts() if view.source in ("persisted", "canonical") else []
        if on_model_call is not None:
            on_model_call(view, result)
        common = _common_prefix(previous, digests)
        kept = common == len(previous)
        compacted = compacted or result.tokens_after < result.tokens_before
        summarized = summarized or _break_kind(result) == "full"
        facts, facts_kept = retention.kept(index, view.messages, digests) if retention else (0, 0)
        calls.append(
            ModelCall(
                point=transcript.version,
                result=result,
                view_messages=len(view),
                view_tokens=view.tokens,
                stored_tokens=transcript.stored_tokens,
                reused_tokens=sum(counts[:common]) if len(counts) == len(digests) else 0,
                prefix_kept=kept,
                break_kind="" if kept else _break_kind(result),
                floor_tokens=live.system_tokens + _newest_step_tokens(live.entries, live.step_starts),
                facts=facts,
                facts_kept=facts_kept,
                after_compaction=compacted,
                after_summary=summarized,
            )
        )
        previous = digests
        end = index + 1
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        transcript.append_turn(messages[index:end])
        index = end
    return Simulation(session_id=transcript.session_id, budget_tokens=budget_tokens, calls=tuple(calls))


def _break_kind(result: CompactResult) -> BreakKind:
    if result.checkpoint is not None and result.outcome != "shadowed":
        return "full"
    if result.compacted_count:
        return "micro"
    return "other"


def _newest_step_tokens(entries: Sequence[Entry], step_starts: Sequence[int]) -> int:
    """Stored tokens of the newest step and whatever follows it (all history before the first step)."""
    start = step_starts[-1] if step_starts else 0
    return sum(entry.token_count for entry in entries[start:] if entry.message.role != "system")


def _common_prefix(before: Sequence[str], after: Sequence[str]) -> int:
    common = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        common += 1
    return common


class Economy(msgspec.Struct, frozen=True, kw_only=True):
    """What a simulated session cost against the same replay with no compaction (the baseline, P0).

    `reuse` is reused / sent over every call but the first (whose cache is always cold):
    `reused_tokens` / `sent_after_first`, and the same for the baseline. `facts` and `facts_kept` are
    summed over the calls after the first compaction (`retention`: their ratio).
    """

    session_id: str
    budget_tokens: int
    pricing: CachePricing
    model_calls: int
    tokens_sent: int
    reused_tokens: int
    reuse: float
    baseline_reuse: float
    sent_after_first: int
    baseline_reused_tokens: int
    baseline_sent_after_first: int
    cost: float
    baseline_cost: float
    micro_breaks: int
    full_breaks: int
    other_breaks: int
    over_budget_calls: int
    over_budget_fitting: int
    futile_full_rounds: int
    summary_input_tokens: int
    summary_output_tokens: int
    facts: int = 0
    facts_kept: int = 0
    full_rounds: int = 0

    @property
    def retention(self) -> float:
        """Relevant facts the views kept after the first compaction (1.0 when there was none)."""
        return self.facts_kept / self.facts if self.facts else 1.0

    @property
    def cost_ratio(self) -> float:
        """Cost against the baseline's."""
        return self.cost / self.baseline_cost if self.baseline_cost else 1.0

    @property
    def prefix_breaks(self) -> int:
        """Every prefix break, whatever caused it."""
        return self.micro_breaks + self.full_breaks + self.other_breaks


def economy(run: Simulation, baseline: Simulation, pricing: CachePricing) -> Economy:
    """The economics of `run` against `baseline` (the same messages replayed with `compact=False`)."""
    return Economy(
        session_id=run.session_id,
        budget_tokens=run.budget_tokens,
        pricing=pricing,
        model_calls=len(run.calls),
        tokens_sent=run.tokens_sent,
        reused_tokens=run.reused_tokens,
        reuse=_reuse(run),
        baseline_reuse=_reuse(baseline),
        sent_after_first=sum(call.view_tokens for call in run.calls[1:]),
        baseline_reused_tokens=baseline.reused_tokens,
        baseline_sent_after_first=sum(call.view_tokens for call in baseline.calls[1:]),
        cost=run.cost(pricing),
        baseline_cost=baseline.cost(pricing),
        micro_breaks=run.breaks("micro"),
        full_breaks=run.breaks("full"),
        other_breaks=run.breaks("other"),
        over_budget_calls=run.over_budget_calls,
        over_budget_fitting=run.over_budget_fitting,
        futile_full_rounds=run.futile_full_rounds,
        summary_input_tokens=sum(call.result.summary_input_tokens for call in run.calls),
        summary_output_tokens=sum(call.result.summary_output_tokens for call in run.calls),
        facts=sum(call.facts for call in run.calls if call.after_compaction),
        facts_kept=sum(call.facts_kept for call in run.calls if call.after_compaction),
        full_rounds=sum(1 for call in run.calls if call.full_round),
    )


def _reuse(run: Simulation) -> float:
    sent = sum(call.view_tokens for call in run.calls[1:])
    return sum(call.reused_tokens for call in run.calls[1:]) / sent if sent else 0.0
