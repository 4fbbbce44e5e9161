"""Anthropic's `clear_tool_uses_20250919` context edit, as its documentation describes it.

Applied server-side to every request from the full history the client sends: when the input exceeds
the trigger, the oldest tool results are replaced by a placeholder, all but the `keep` most recent
tool uses; tool inputs stay (`clear_tool_inputs` is off by default), nothing is summarized. When the
edit would clear fewer than `clear_at_least` tokens it is not applied. Documented defaults: trigger
100,000 input tokens, keep 3 tool uses; here the trigger is the budget and `clear_at_least` 10% of it.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from planner.peers.base import (
    CLEARED,
    PeerState,
    PeerTools,
    cleared_result,
    quiet,
    result_tokens,
    view_of,
)
from transcript.model.message import ToolResult
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot


class AnthropicClear(msgspec.Struct, frozen=True, kw_only=True):
    """Clear all but the `keep` newest tool results when the history exceeds `trigger` of the budget."""

    name: ClassVar[str] = "anthropic-clear"
    source: ClassVar[str] = (
        "Anthropic context editing, clear_tool_uses_20250919 "
        "(docs.claude.com: build-with-claude/context-editing)"
    )
    trigger: float = 1.0
    keep: int = 3
    clear_at_least: float = 0.1
    exclude_tools: tuple[str, ...] = ()

    def round(
        self, state: PeerState, snapshot: TranscriptSnapshot, budget: int, tools: PeerTools
    ) -> tuple[PeerState, CompactResult]:
        whole = view_of(PeerState(), snapshot, tools).total  # the request as the client sends it
        if whole <= self.trigger * budget:
            return PeerState(), quiet(whole, budget, "below the trigger")
        results = [
            entry
            for entry in snapshot.entries
            if any(isinstance(part, ToolResult) for part in entry.message.parts)
        ]
        older = results[: max(0, len(results) - self.keep)]
        excluded = {name.casefold() for name in self.exclude_tools}
        chosen = [
            entry
            for entry in older
            if not any(
                isinstance(part, ToolResult) and (part.name or "").casefold() in excluded
                for part in entry.message.parts
            )
        ]
        placeholder = tools.count(CLEARED)
        freed = sum(max(0, result_tokens(entry) - placeholder) for entry in chosen)
        if not chosen or freed < self.clear_at_least * budget:
            return PeerState(), quiet(whole, budget, "would clear less than clear_at_least")
        after = PeerState(cleared=frozenset(entry.message.id for entry in chosen))
        tokens = view_of(after, snapshot, tools).total
        return after, cleared_result(whole, tokens, budget, len(chosen))
