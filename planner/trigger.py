"""`determine_compact_action`: what one compaction round should do, from sizes alone.

Below `micro_compact_threshold` of the budget nothing happens (and no counter moves). Above it, micro
compaction runs; it is *enough* when its projected use falls below that threshold. Otherwise, at or
above `auto_compact_threshold`, full compaction is added. A forced round goes straight to full.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from planner.config import CompactConfig
from transcript.model.errors import InvalidArgument

ActionKind: TypeAlias = Literal["none", "micro", "micro_then_full", "full"]


class CompactAction(msgspec.Struct, frozen=True, kw_only=True):
    """The decision of one round, with the numbers it was made from."""

    kind: ActionKind
    reason: str
    use: float
    projected_use: float


def check_budget(budget_tokens: object) -> int:
    """A budget is a positive whole number of tokens; anything else is refused with `InvalidArgument`."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens <= 0:
        raise InvalidArgument(
            f"budget_tokens must be a positive whole number of tokens, not {budget_tokens!r}"
        )
    return budget_tokens


def determine_compact_action(
    view_tokens: int,
    budget_tokens: int,
    config: CompactConfig,
    *,
    micro_savings: int = 0,
    force: bool = False,
) -> CompactAction:
    """Decide a round: `view_tokens` now, what micro would save, against the budget."""
    check_budget(budget_tokens)
    use = view_tokens / budget_tokens
    projected = max(0, view_tokens - micro_savings) / budget_tokens
    if force:
        return CompactAction(kind="full", reason="forced", use=use, projected_use=projected)
    if use < config.micro_compact_threshold:
        return CompactAction(kind="none", reason="below the micro threshold", use=use, projected_use=use)
    if projected < config.micro_compact_threshold:
        return CompactAction(
            kind="micro", reason="micro compaction is enough", use=use, projected_use=projected
        )
    if use >= config.auto_compact_threshold:
        kind: ActionKind = "micro_then_full" if micro_savings > 0 else "full"
        return CompactAction(
            kind=kind, reason="micro alone reclaims too little", use=use, projected_use=projected
        )
    return CompactAction(
        kind="micro", reason="below the full threshold: micro only", use=use, projected_use=projected
    )
