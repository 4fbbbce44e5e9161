"""`determine_compact_action`: what one compaction round should do, from sizes alone.

Below `micro_compact_threshold` of the budget nothing happens (and no counter moves). Above it, micro
compaction runs; it is *enough* when its projected use falls below that threshold. Otherwise, at or
above `auto_compact_threshold`, full compaction is added. A forced round goes straight to full.

With the payback gate on, a micro round below the full threshold runs only when it pays back under
the configured cache prices (`planner.economics`): the budget is not at stake there, so a round that
would cost more in broken cache than it saves waits until it frees enough. At or above the full
threshold the budget is defended first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, TypeAlias

import msgspec

from planner.config import CompactConfig
from planner.economics import RoundEconomics
from transcript.model.errors import InvalidArgument

ActionKind: TypeAlias = Literal["none", "micro", "micro_then_full", "full"]


class CompactAction(msgspec.Struct, frozen=True, kw_only=True):
    """The decision of one round, with the numbers it was made from."""

    kind: ActionKind
    reason: str
    use: float
    projected_use: float


class RoundPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What an automatic round is about to write, shown to a `before_compact` hook first.

    `action` is the trigger's decision and `reason` why; `micro_ids` the messages its micro step would
    shorten (an estimated `estimated_saved_tokens`), `full` whether a full step (a summary) follows;
    `path` is `standard` or `emergency` for a round that defends the budget.
    """

    session_id: str
    version: int
    action: ActionKind
    reason: str
    budget_tokens: int
    view_tokens: int
    micro_ids: tuple[str, ...] = ()
    estimated_saved_tokens: int = 0
    full: bool = False
    forced: bool = False
    path: str = ""


# A host hook asked before an automatic round writes anything: False vetoes the round (recorded as
# outcome `vetoed`, nothing else written), True or None lets it run. Rounds the user asked for
# (`manual=True`) are not put to it.
BeforeCompact = Callable[[RoundPlan], bool | None]


# The largest budget a round takes: far past any model's context, and small enough that every figure
# computed from it (thresholds, prices) stays an exact float.
MAX_BUDGET_TOKENS: Final = 10**15


def check_budget(budget_tokens: object) -> int:
    """A budget is a positive whole number of tokens, at most `MAX_BUDGET_TOKENS`; anything else is
    refused with `InvalidArgument`."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens <= 0:
        raise InvalidArgument(
            f"budget_tokens must be a positive whole number of tokens, not {budget_tokens!r}"
        )
    if budget_tokens > MAX_BUDGET_TOKENS:
        raise InvalidArgument(
            f"budget_tokens must be at most {MAX_BUDGET_TOKENS:,} tokens (a {len(str(budget_tokens))}-digit "
            "number was given)"
        )
    return budget_tokens


def determine_compact_action(
    view_tokens: int,
    budget_tokens: int,
    config: CompactConfig,
    *,
    micro_savings: int = 0,
    force: bool = False,
    economics: RoundEconomics | None = None,
    floor_over_budget: bool = False,
) -> CompactAction:
    """Decide a round: `view_tokens` now, what micro would save, against the budget.

    `economics` are those of the micro round; with `config.payback_gate` they decide a round below
    the full threshold — and above it when `floor_over_budget` says the newest step alone exceeds the
    budget, so no round can defend it.
    """
    check_budget(budget_tokens)
    use = view_tokens / budget_tokens
    projected = max(0, view_tokens - micro_savings) / budget_tokens
    if force:
        return CompactAction(kind="full", reason="forced", use=use, projected_use=projected)
    if use < config.micro_compact_threshold:
        return CompactAction(kind="none", reason="below the micro threshold", use=use, projected_use=use)
    defended = use >= config.auto_compact_threshold and not floor_over_budget
    gated = config.payback_gate and economics is not None and not defended
    if gated and economics is not None and not economics.pays_back:
        return CompactAction(
            kind="none",
            reason=f"micro would not pay back: {_payback(economics)}",
            use=use,
            projected_use=use,
        )
    # Micro alone is enough when it takes the view under the micro threshold; with the payback gate
    # also when it keeps the view under the full threshold and pays for its cache break (else a full
    # round, due soon anyway, is the cheaper defence).
    paying = config.payback_gate and economics is not None and economics.pays_back
    enough = config.auto_compact_threshold if paying else config.micro_compact_threshold
    if projected < enough:
        return CompactAction(
            kind="micro", reason="micro compaction is enough", use=use, projected_use=projected
        )
    if floor_over_budget:
        return CompactAction(
            kind="micro",
            reason="the newest step alone exceeds the budget: micro only",
            use=use,
            projected_use=projected,
        )
    if use >= config.auto_compact_threshold:
        kind: ActionKind = "micro_then_full" if micro_savings > 0 else "full"
        return CompactAction(
            kind=kind, reason="micro alone reclaims too little", use=use, projected_use=projected
        )
    reason = (
        f"below the full threshold: micro pays back ({_payback(economics)})"
        if gated and economics
        else ("below the full threshold: micro only")
    )
    return CompactAction(kind="micro", reason=reason, use=use, projected_use=projected)


def _payback(economics: RoundEconomics) -> str:
    calls = economics.payback_calls
    needed = "never" if calls == float("inf") else f"after {calls:.1f} calls"
    return (
        f"frees {economics.freed_tokens:,} tokens, invalidates {economics.invalidated_tokens:,} cached; "
        f"{needed}, {economics.expected_calls:.1f} expected"
    )
