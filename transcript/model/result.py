"""`CompactResult`: the record of one compaction round, returned to the caller and kept in the log.

It carries everything a user needs to see why a round did what it did (`transcript compacts`), and the
failure count and breaker state after it, so the breaker survives a restart.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from transcript.model.checkpoint import Checkpoint

Strategy: TypeAlias = Literal[
    "tool-result-micro",
    "checkpoint",
    "checkpoint-delta",
    "aggressive-checkpoint",
    "aggressive-checkpoint-delta",
    "imported",  # a compaction recorded in an imported session (Claude Code's own compact_boundary)
]
Outcome: TypeAlias = Literal[
    "skipped",
    "shadowed",
    "micro_applied",
    "full_applied",
    "micro_applied_then_full_failed",
    "full_failed",
    "full_unavailable",
    "over_budget_irreducible",
    "vetoed",  # the host's `before_compact` hook vetoed an automatic round: nothing else was written
    "claimed",  # another compactor held the round's claim: this one asked no model and recorded nothing
]
BreakerState: TypeAlias = Literal["closed", "open", "half_open"]
# Which path a round took to defend the budget: `standard` (micro, then a checkpoint of the history older
# than the kept recent steps) or `emergency` (the kept steps themselves shortened, or fewer of them kept).
RoundPath: TypeAlias = Literal["", "standard", "emergency"]


class CompactResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one round did: strategy, outcome, sizes before and after, and the failure/breaker state.

    `tokens_*` and `items_*` describe the model view; `estimated_saved_tokens` is the plan's estimate,
    `tokens_before - tokens_after` what the written directives really saved. `round_id` names the
    round: a round that writes twice (its micro step, then its full step) records twice under one id,
    and the later record supersedes the earlier. `version` is the version of the record's event (0
    for a round that recorded nothing); it is set when the record is read, never predicted.

    `checkpoint` is the checkpoint as the view shows it (and the continuation prompt repeats it). When
    it had to shrink to fit the budget, `carried_checkpoint` is the whole checkpoint, which the next
    round builds on (None: the view shows all of it).

    Failures are kept, type and message, at most 500 characters each: `summarizer_error` is what the
    model summarizer raised this round (after its retries), `parse_error` why its reply could not be
    read as a checkpoint; `last_error` is the breaker's memory of the latest such failure, carried
    from round to round until a round's model call succeeds. `reinject_error` is what the host's
    re-injection callback raised (or why its answer was unusable): the summary went without it.
    `focus` is what the caller asked the round's summary to keep above all ("" for none).

    `summary` is the rendered checkpoint the round put in the view in place of the history, exactly as
    the model is given it (the continuation hint and the checkpoint's markdown; the files re-injected
    after it are not part of it): "" when the round put no checkpoint in the view. `hook_error` is
    what the host's `before_compact` hook raised (type and message, at most 500 characters): the
    round went on as if the hook had not objected.
    """

    outcome: Outcome
    strategy: Strategy | None = None
    reason: str = ""
    manual: bool = False
    forced: bool = False
    budget_tokens: int = 0
    items_before: int = 0
    items_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    irreducible_tokens: int = 0
    estimated_saved_tokens: int = 0
    compacted_count: int = 0
    compacted_ids: tuple[str, ...] = ()
    delta_count: int = 0
    checkpoint_reused: bool = False
    fallback_used: bool = False
    split_turn: bool = False
    checkpoint: Checkpoint | None = None
    carried_checkpoint: Checkpoint | None = None
    failed: bool = False
    consecutive_failures: int = 0
    breaker: BreakerState = "closed"
    rounds_since_open: int = 0
    version: int = 0
    round_id: str = ""
    path: RoundPath = ""
    invalidated_tokens: int = 0
    expected_calls: float = 0.0
    payback_calls: float | None = None
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    kept_steps: int = 0
    summarizer_error: str = ""
    parse_error: str = ""
    last_error: str = ""
    reinject_error: str = ""
    focus: str = ""
    summary: str = ""
    hook_error: str = ""
    # Storage faults the round lived with (`BODY_MISSING`: a body of the excluded history that is not
    # stored stood as a placeholder): it ran on what could be read, and says so.
    diagnostics: tuple[str, ...] = ()

    @property
    def saved_tokens(self) -> int:
        """Tokens the round took out of the view."""
        return self.tokens_before - self.tokens_after
