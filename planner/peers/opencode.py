"""opencode's compaction, from its source (packages/opencode/src/session/compaction.ts).

Two tiers. `prune` walks back from the newest tool output, counting the outputs' tokens: the newest
`PRUNE_PROTECT` tokens of outputs are protected, every older completed output (not an error, not a
protected tool such as `skill`) is a candidate, and the walk stops at an output already pruned or at
the summary. The candidates are pruned — shown as "[Old tool result content cleared]", whole — only
when together they free more than `PRUNE_MINIMUM`. opencode's constants are 40,000 and 20,000
tokens of a 200,000-token window: here 20% and 10% of the budget. opencode prunes after the model
has answered, so the newest step's outputs (not yet seen) are never pruned; here the walk runs before
every model call. With `skip_turns` the walk first passes over the last two user turns
(opencode's `if (turns < 2) continue`: in a session of one request, nothing is ever pruned).

When the view still overflows the budget, the session is summarized: everything before the
`preserve_recent` tail (0: the whole history, as opencode's summary did before it kept a recent
tail; its newest release keeps 25% of the usable context). Its summarizer prompt serializes the
conversation with tool outputs truncated at 2,000 characters, as this library's request does.

`keep_newest` is no opencode setting: it keeps the newest step out of the summary (what the model
has not seen yet stays whole, as this library's policies keep it), to compare the policies under
that one rule.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from planner.observations import is_observation
from planner.peers.base import (
    PeerState,
    PeerTools,
    cleared_result,
    quiet,
    result_tokens,
    summarize,
    summary_result,
    view_of,
)
from planner.peers.cuts import tail_start
from transcript.model.message import ToolResult
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot

PROTECTED_TOOLS = frozenset({"skill"})


class OpenCode(msgspec.Struct, frozen=True, kw_only=True):
    """Prune old tool outputs whole; summarize on overflow (see the module docstring)."""

    name: ClassVar[str] = "opencode"
    source: ClassVar[str] = "opencode SessionCompaction (packages/opencode/src/session/compaction.ts)"
    protect: float = 0.2
    minimum: float = 0.1
    preserve_recent: float = 0.0
    skip_turns: bool = False
    keep_newest: bool = False

    def round(
        self, state: PeerState, snapshot: TranscriptSnapshot, budget: int, tools: PeerTools
    ) -> tuple[PeerState, CompactResult]:
        before = view_of(state, snapshot, tools)
        pruned = self.prune(state, snapshot, budget)
        if pruned:
            state = msgspec.structs.replace(state, cleared=state.cleared | pruned)
        view = view_of(state, snapshot, tools) if pruned else before
        if view.total <= budget:
            if pruned:
                return state, cleared_result(before.total, view.total, budget, len(pruned))
            return state, quiet(view.total, budget, "no overflow")
        first = view.seqs.index(-1) + 1 if -1 in view.seqs else 0  # after the previous summary
        start = None
        if self.preserve_recent > 0:
            start = tail_start(view, int(budget * self.preserve_recent), after=first)
        if start is None or start == first:
            start = len(view.messages)  # nothing recent is kept: all of it is summarized
        if self.keep_newest:
            newest = max((i for i, m in enumerate(view.messages) if m.role == "assistant"), default=start)
            start = max(first, min(start, newest))
        tail = view.seqs[start] if start < len(view.messages) else len(snapshot.entries)
        summary = summarize(
            [m for m in view.messages[:start] if m.role != "system"],
            previous=state.checkpoint,
            snapshot=snapshot,
            budget=budget,
            tools=tools,
            message_id=f"{self.name}-summary-{tail}",
        )
        after = PeerState(
            cleared=state.cleared,
            tail_seq=tail,
            summary=summary.message,
            summary_tokens=summary.tokens,
            checkpoint=summary.checkpoint,
        )
        tokens = view_of(after, snapshot, tools).total
        return after, summary_result(before.total, tokens, budget, summary, state.checkpoint is not None)

    def prune(self, state: PeerState, snapshot: TranscriptSnapshot, budget: int) -> frozenset[str]:
        """The tool messages the walk prunes now (none when they would free too little)."""
        total = pruned = turns = 0
        chosen: list[str] = []
        entries = snapshot.entries
        newest = snapshot.step_starts[-1] if snapshot.step_starts else 0
        for entry in reversed(entries):
            message = entry.message
            if message.role == "user" and message.kind == "message":
                previous = entries[entry.seq - 1].message if entry.seq else None
                turns += not is_observation(message, previous)
            if entry.seq > newest or (self.skip_turns and turns < 2):
                continue
            if state.summary is not None and entry.seq < state.tail_seq:
                break  # the walk stops at the summary
            results = [p for p in message.parts if isinstance(p, ToolResult)]
            if not results or all(p.is_error for p in results):
                continue
            if any((p.name or "").casefold() in PROTECTED_TOOLS for p in results):
                continue
            if message.id in state.cleared:
                break  # pruned before: what is older was pruned or kept then
            size = result_tokens(entry)
            total += size
            if total <= self.protect * budget:
                continue
            pruned += size
            chosen.append(message.id)
        return frozenset(chosen) if pruned > self.minimum * budget else frozenset()


class OpenCodeTurns(OpenCode, frozen=True, kw_only=True):
    """opencode with its rule of passing over the last two user turns before pruning."""

    name: ClassVar[str] = "opencode-turns"
    skip_turns: bool = True
