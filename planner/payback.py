"""The payback rule over a snapshot: what a candidate round frees, invalidates and may expect.

`planner.economics` prices a round from three numbers; this module reads them off the session. The
cached tokens a round invalidates are those of the view from the first message it changes to the end
(a provider's cache holds the view's prefix up to there). The calls expected after a round are
estimated from the session itself, without a clock: a session is expected to run about as many more
calls as it has run so far, but what a round below the full threshold frees profits only until the
view grows back to that threshold, where a full round would replace the history it shortened.
"""

from __future__ import annotations

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

    As many as the session has made so far, but no more than the calls until the view, growing as it
    has grown per step so far (`stored_tokens` over the steps), reaches the full threshold again.
    """
    steps = len(snapshot.step_starts)
    if steps == 0:
        return 0.0
    growth = stored_tokens / steps
    if growth <= 0:
        return float(steps)
    room = config.auto_compact_threshold * budget_tokens - view_after
    return max(0.0, min(float(steps), room / growth))


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
) -> RoundEconomics:
    """The economics of a round that frees about `freed` tokens and invalidates `invalidated` cached
    ones (`invalidated_tokens` from the first message it changes); `summary_cost` is what its
    summarizer request costs (a full round's)."""
    calls = expected_calls(
        snapshot,
        config,
        budget_tokens=budget_tokens,
        view_after=view_tokens_now - freed,
        stored_tokens=stored_tokens,
    )
    return round_economics(freed, invalidated, calls, config.cache_pricing, summary_cost=summary_cost)


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
