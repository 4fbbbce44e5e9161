"""Claude Code's auto-compact: one summary of the whole conversation when the context is nearly full.

From Claude Code's documented behaviour (`/compact`, auto-compact): when the conversation reaches the
auto-compact threshold, the whole conversation so far is sent to the model to be summarized, and the
session continues from the summary alone; the next compaction summarizes the previous summary with
what came after it. The threshold is 92% of the budget (Claude Code's long-standing auto-compact
point of the context window). The summarizer's input is priced as Claude Code sends it: the whole
conversation (the view without its system messages). Its re-reading of recently read files after a
compaction is left out: the host re-injects those (`reinject=`) under every policy alike.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from planner.peers.base import PeerState, PeerTools, quiet, summarize, summary_result, view_of
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot


class ClaudeCode(msgspec.Struct, frozen=True, kw_only=True):
    """One summary of everything at `threshold` of the budget."""

    name: ClassVar[str] = "claude-code"
    source: ClassVar[str] = "Claude Code auto-compact (docs.claude.com: /compact); threshold 92%"
    threshold: float = 0.92

    def round(
        self, state: PeerState, snapshot: TranscriptSnapshot, budget: int, tools: PeerTools
    ) -> tuple[PeerState, CompactResult]:
        view = view_of(state, snapshot, tools)
        if view.total < self.threshold * budget:
            return state, quiet(view.total, budget, "below the auto-compact threshold")
        conversation = [(m, t) for m, t in zip(view.messages, view.tokens, strict=True) if m.role != "system"]
        tail = len(snapshot.entries)
        summary = summarize(
            [m for m, _ in conversation],
            previous=state.checkpoint,
            snapshot=snapshot,
            budget=budget,
            tools=tools,
            message_id=f"{self.name}-summary-{tail}",
            sent=sum(t for _, t in conversation),
        )
        after = PeerState(
            tail_seq=tail,
            summary=summary.message,
            summary_tokens=summary.tokens,
            checkpoint=summary.checkpoint,
        )
        tokens = view_of(after, snapshot, tools).total
        return after, summary_result(view.total, tokens, budget, summary, state.checkpoint is not None)
