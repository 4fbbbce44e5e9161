"""The payback rule over a snapshot: what a candidate round frees, invalidates and may expect.

`planner.economics` prices a round from three numbers; this module reads them off the session. The
cached tokens a round invalidates are those of the view from the first message it changes to the end
(a provider's cache holds the view's prefix up to there). The calls expected after a round are
estimated from the session itself, without a clock: a session is expected to run about as many more
calls as it has run so far (fewer, when a round must pay back with more confidence than even odds),
but what a round below the full threshold frees profits only until the view grows back to that
threshold, where a full round would replace the history it shortened — later than without the
round, which saves a share of that full round's cost too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import accumulate

from planner.config import CompactConfig
from planner.economics import RoundEconomics, net_gain, round_economics
from planner.micro import MicroPlan, view_tokens
from transcript.model.snapshot import TranscriptSnapshot


def invalidated_from(snapshot: TranscriptSnapshot, seqs: Iterable[int]) -> dict[int, int]:
    """`invalidated_tokens` for each of `seqs`, in one pass over the entries from the earliest."""
    wanted = sorted(set(seqs))
    if not wanted:
        return {}
    first = wanted[0]
    tokens = [0] * (len(snapshot.entries) - first + 1)
    seen: dict[str, int] = {}
    summaries: list[tuple[str | None, int]] = []
    for entry in snapshot.entries[first:]:
        if entry.flags.excluded:
            continue
        if entry.message.kind == "summary":
            summaries.append((entry.message.anchor, view_tokens(entry)))
            continue
        seen[entry.message.id] = entry.seq
        tokens[entry.seq - first] += view_tokens(entry)
    for anchor, size in summaries:
        # A summary shows just before its anchor: it is invalidated with it.
        if anchor in seen:
            tokens[seen[anchor] - first] += size
    suffix = list(accumulate(reversed(tokens)))[::-1]
    return {seq: suffix[seq - first] for seq in wanted}


def invalidated_tokens(snapshot: TranscriptSnapshot, first_seq: int) -> int:
    """View tokens from the message at `first_seq` to the end of the view.

    Reads only the entries from `first_seq` on (a summary shown among them counts when its anchor is
    one of them), so a round near the end of a long session costs what its tail costs.
    """
    if first_seq >= len(snapshot.entries):
        return 0
    return invalidated_from(snapshot, [first_seq])[first_seq]


def expected_calls(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    budget_tokens: int,
    view_after: int,
    stored_tokens: int,
) -> float:
    """Later calls expected to profit from a round that leaves the view at `view_after` tokens.

    How long a session still runs is read off how long it has run: if every length is as likely as
    its own scale (the Lindy rule), a session of `n` calls runs at least `k` more with probability
    `n / (n + k)`. The calls a round may count on are those it reaches with the config's
    `payback_confidence` (`n × (1 − c) / c`: `n` at 0.5, the median; `n / 9` at 0.9), and no more
    than the calls until the view, growing as it has grown per step so far (`stored_tokens` over
    the steps), reaches the full threshold again.
    """
    steps = len(snapshot.step_starts)
    if steps == 0:
        return 0.0
    confidence = config.payback_confidence
    likely = steps * (1.0 - confidence) / confidence if confidence > 0 else math.inf
    growth = stored_tokens / steps
    if growth <= 0:
        return float(likely)
    room = config.auto_compact_threshold * budget_tokens - view_after
    return max(0.0, min(likely, room / growth))


def deferred_full(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    freed: int,
    budget_tokens: int,
    view_after: int,
    stored_tokens: int,
) -> float:
    """What a round below the full threshold saves by putting off the next full round (0 without
    `config.payback_defers_full` or hysteresis).

    Between full rounds the view grows from the full target to the full threshold; a full round
    costs its summarizer request (the history it replaces, written, and a summary's worth of output)
    and writing the view it leaves. Every token a round frees puts that off by a token of growth, so
    it saves its share of a full round's cost — if the session lasts until the view reaches the
    threshold, which by the Lindy rule (`expected_calls`) it does with probability `n / (n + k)`, `k`
    the calls that takes at the growth so far. A round at the threshold defers nothing: the full
    round it would replace is due now, and is what it is weighed against.
    """
    steps = len(snapshot.step_starts)
    if not (config.payback_defers_full and config.hysteresis) or steps == 0 or freed <= 0:
        return 0.0
    growth = stored_tokens / steps
    threshold = config.auto_compact_threshold * budget_tokens
    after_full = config.target_tokens(budget_tokens)
    cycle = threshold - after_full
    if growth <= 0 or cycle <= 0 or view_after + freed >= threshold:
        return 0.0  # at the threshold the full round is due now: a round defending the budget defers none
    calls = (threshold - view_after) / growth
    reached = steps / (steps + calls)
    pricing = config.cache_pricing
    full_cost = (
        pricing.write * cycle
        + pricing.output * config.summary_allowance(budget_tokens)
        + (pricing.write - pricing.read) * after_full
    )
    return reached * min(1.0, freed / cycle) * full_cost


def micro_economics(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    freed: int,
    invalidated: int,
    view_tokens_now: int,
    budget_tokens: int,
    stored_tokens: int,
    summary_cost: float = 0.0,
    full: bool = False,
) -> RoundEconomics:
    """The economics of a round that frees about `freed` tokens and invalidates `invalidated` cached
    ones (`invalidated_tokens` from the first message it changes); `summary_cost` is what its
    summarizer request costs, with `full` for a full round (which defers no full round: it is one)."""
    view_after = view_tokens_now - freed
    calls = expected_calls(
        snapshot, config, budget_tokens=budget_tokens, view_after=view_after, stored_tokens=stored_tokens
    )
    deferred = (
        0.0
        if full
        else deferred_full(
            snapshot,
            config,
            freed=freed,
            budget_tokens=budget_tokens,
            view_after=view_after,
            stored_tokens=stored_tokens,
        )
    )
    return round_economics(
        freed, invalidated, calls, config.cache_pricing, summary_cost=summary_cost, deferred=deferred
    )


def choose_micro(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    plan: MicroPlan,
    *,
    view_tokens_now: int,
    budget_tokens: int,
    stored_tokens: int,
    need: int | None = None,
) -> tuple[MicroPlan, RoundEconomics] | None:
    """Where a micro round should break the cache, and its economics; None when the plan is empty.

    A micro round changes every candidate from its first changed message on, so the choice is that
    message: the later, the less cache it invalidates, the less it frees. With `need`, the latest
    break that frees at least `need` tokens (None when none does). Without it, of the breaks that
    pay back the one that gains most; when none pays back, the whole plan with its economics (the
    round then waits, and says why).
    """
    points = plan.savings_from()
    if not points:
        return None
    invalidated = invalidated_from(snapshot, (seq for seq, _ in points))
    options = [
        (
            seq,
            micro_economics(
                snapshot,
                config,
                freed=freed,
                invalidated=invalidated[seq],
                view_tokens_now=view_tokens_now,
                budget_tokens=budget_tokens,
                stored_tokens=stored_tokens,
            ),
        )
        for seq, freed in points
    ]
    if need is not None:
        enough = next(((seq, e) for seq, e in options if e.freed_tokens >= need), None)
        return None if enough is None else (plan.from_seq(enough[0]), enough[1])
    paying = [(seq, e) for seq, e in options if e.pays_back]
    if not paying:
        return plan, options[-1][1]
    pricing = config.cache_pricing
    seq, best = max(paying, key=lambda option: net_gain(option[1], pricing))
    return plan.from_seq(seq), best
