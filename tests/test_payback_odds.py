"""The payback rule's two estimates (planner.payback): the later calls a round below the full threshold
may count on (`payback_confidence`, read off the session's length by the Lindy rule) and the share of
the next full round it puts off (`payback_defers_full`). The priced policy of before (`priced()`)
counts on as many calls as the session has made and credits no full round."""

from __future__ import annotations

import msgspec
from hypothesis import given, strategies as st

from planner import CachePricing, CompactConfig
from planner.economics import net_gain, payback_calls, round_economics
from planner.payback import deferred_full, expected_calls, micro_economics
from tests.test_economy import _budget, _new, _step
from transcript import Transcript
from transcript.session.facade import live_session

PRICED = CompactConfig.priced()
DEFERS = msgspec.structs.replace(PRICED, payback_defers_full=True)
prices = st.builds(
    lambda read, extra: CachePricing(read=read, write=read + extra),
    st.floats(0.01, 1.0),
    st.floats(0.0, 2.0),
)


def _session(steps: int, *, first: int = 3_000, config: CompactConfig = PRICED) -> Transcript:
    t = _new(config)
    _step(t, 0, first)  # the one stale output, at the top of the view
    for n in range(1, steps):
        _step(t, n, 400)
    return t


@given(
    freed=st.integers(1, 10**6),
    invalidated=st.integers(0, 10**6),
    deferred=st.floats(0.0, 10**6),
    pricing=prices,
)
def test_what_a_round_defers_shortens_its_payback_and_adds_to_its_gain(
    freed: int, invalidated: int, deferred: float, pricing: CachePricing
) -> None:
    calls = payback_calls(freed, invalidated, pricing)
    assert payback_calls(freed, invalidated, pricing, deferred=deferred) <= calls
    plain = round_economics(freed, invalidated, 5.0, pricing)
    credited = round_economics(freed, invalidated, 5.0, pricing, deferred=deferred)
    assert abs(net_gain(credited, pricing) - net_gain(plain, pricing) - deferred) <= 1e-6 * max(1.0, deferred)
    assert not plain.pays_back or credited.pays_back


@given(steps=st.integers(1, 40), confidence=st.floats(0.5, 0.99), budget=st.integers(2_000, 200_000))
def test_the_more_confident_a_round_must_be_the_fewer_calls_it_counts_on(
    steps: int, confidence: float, budget: int
) -> None:
    t = _session(steps)
    snapshot = live_session(t).snapshot()
    view = t.visible_messages().tokens
    stored = t.stored_tokens

    def counted(c: float) -> float:
        config = msgspec.structs.replace(PRICED, payback_confidence=c)
        return expected_calls(snapshot, config, budget_tokens=budget, view_after=view, stored_tokens=stored)

    even = counted(0.5)
    assert even <= steps  # even odds: no more calls than the session has made (the median)
    assert counted(confidence) <= even + 1e-9
    horizon = (PRICED.auto_compact_threshold * budget - view) / (stored / steps)
    assert abs(counted(confidence) - max(0.0, min(steps * (1 - confidence) / confidence, horizon))) < 1e-6


@given(steps=st.integers(2, 30), use=st.floats(0.4, 1.3), freed=st.integers(1, 5_000))
def test_a_round_defers_at_most_one_full_round_and_none_at_the_threshold(
    steps: int, use: float, freed: int
) -> None:
    t = _session(steps, config=DEFERS)
    snapshot = live_session(t).snapshot()
    view = t.visible_messages().tokens
    budget = _budget(t, use)
    freed = min(freed, view)
    args = {
        "freed": freed,
        "budget_tokens": budget,
        "view_after": view - freed,
        "stored_tokens": t.stored_tokens,
    }
    credit = deferred_full(snapshot, DEFERS, **args)
    pricing = DEFERS.cache_pricing
    target = DEFERS.target_tokens(budget)
    one_full = (
        pricing.write * (DEFERS.auto_compact_threshold * budget - target)
        + pricing.output * DEFERS.summary_allowance(budget)
        + (pricing.write - pricing.read) * target
    )
    assert 0.0 <= credit <= one_full + 1e-6
    if view >= DEFERS.auto_compact_threshold * budget:
        assert credit == 0.0  # the full round is due now: that is what the round is weighed against
    assert deferred_full(snapshot, PRICED, **args) == 0.0  # priced(): no credit
    full = micro_economics(
        snapshot,
        DEFERS,
        freed=freed,
        invalidated=view,
        view_tokens_now=view,
        budget_tokens=budget,
        stored_tokens=t.stored_tokens,
        summary_cost=100.0,
        full=True,
    )
    assert full.deferred == 0.0  # a full round defers none: it is one


def test_a_micro_round_that_puts_off_a_full_round_runs_where_it_would_wait_without_that_credit() -> None:
    for config, outcome in ((PRICED, "skipped"), (DEFERS, "micro_applied")):
        t = _session(10)
        result = t.compact(budget_tokens=_budget(t, 0.8), config=config)
        assert result.outcome == outcome
        assert result.expected_calls is not None and result.payback_calls is not None
        assert (result.payback_calls <= result.expected_calls) == (outcome == "micro_applied")


def test_a_round_that_would_pay_back_only_at_even_odds_waits_under_the_shipped_confidence() -> None:
    confident = msgspec.structs.replace(PRICED, payback_confidence=0.9)
    outcomes = []
    for config in (PRICED, confident):
        t = _new(config)
        for n in range(11):
            _step(t, n, 4_000)
        outcomes.append(t.compact(budget_tokens=_budget(t, 0.8), config=config).outcome)
    assert outcomes == ["micro_applied", "skipped"]
    assert CompactConfig().payback_confidence == 0.9 and CompactConfig().payback_defers_full
