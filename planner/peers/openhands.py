"""OpenHands' `LLMSummarizingCondenser`, from its source (openhands/memory/condenser/impl/
llm_summarizing_condenser.py).

When the view grows past its limit (`len(view) > max_size`; here: its tokens over the budget), the
condenser keeps the first `keep_first` events, forgets the middle and keeps a tail so that the view
comes back to half its limit (`target_size = max_size // 2`: here the tail holds half the budget less
the head); one summary event, placed right after the head (`summary_offset = keep_first`),
summarizes the previous summary and every forgotten event. keep_first is 4 (the setting the issue's
table names; the class default is 1), counted in messages; the head is extended to the end of its
step so that no call is parted from its result, and the tail starts at a step.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from planner.peers.base import PeerState, PeerTools, quiet, summarize, summary_result, view_of
from planner.peers.cuts import is_cut_point, newest_step, tail_start
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot


class OpenHands(msgspec.Struct, frozen=True, kw_only=True):
    """Keep the first `keep_first` messages and a tail of `target` of the budget; summarize the rest."""

    name: ClassVar[str] = "openhands"
    source: ClassVar[str] = "OpenHands LLMSummarizingCondenser (openhands/memory/condenser/impl)"
    keep_first: int = 4
    target: float = 0.5

    def round(
        self, state: PeerState, snapshot: TranscriptSnapshot, budget: int, tools: PeerTools
    ) -> tuple[PeerState, CompactResult]:
        view = view_of(state, snapshot, tools)
        if view.total <= budget:
            return state, quiet(view.total, budget, "within the limit")
        entries = snapshot.entries
        head = min(self.keep_first, len(entries))
        while head < len(entries) and not is_cut_point(entries[head].message):
            head += 1  # the head ends where a step ends
        shown_head = sum(1 for seq in view.seqs if 0 <= seq < head)
        room = int(budget * self.target) - sum(view.tokens[:shown_head])
        start = tail_start(view, room, after=shown_head + 1)
        if start is None:
            start = newest_step(view.messages)
        forgotten = [m for m in view.messages[shown_head:start] if m.role != "system"]
        if start <= shown_head or not [m for m in forgotten if m.kind != "summary"]:
            return state, quiet(view.total, budget, "nothing between the head and the tail to forget")
        tail_seq = view.seqs[start]
        summary = summarize(
            forgotten,
            previous=state.checkpoint,
            snapshot=snapshot,
            budget=budget,
            tools=tools,
            message_id=f"{self.name}-summary-{tail_seq}",
        )
        after = PeerState(
            head=head,
            tail_seq=tail_seq,
            summary=summary.message,
            summary_tokens=summary.tokens,
            checkpoint=summary.checkpoint,
        )
        tokens = view_of(after, snapshot, tools).total
        return after, summary_result(view.total, tokens, budget, summary, state.checkpoint is not None)
