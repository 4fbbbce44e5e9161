"""What every peer policy shares: its state between model calls, its view, and its summary.

A peer is another agent framework's compaction policy, re-implemented from its public code and
documentation so that `simulate` and `benchmarks/bench_economy.py` can price it on the same sessions
with the same cost model as the shipped policy. A peer never writes anything: its view is computed
from the session's stored messages and its own state (`PeerState`), a pure value carried from one
model call to the next. Every peer that summarizes uses this library's local summarizer, sized as
the shipped policy sizes its checkpoints (`CompactConfig.summary_tokens`), so that the comparison
is about the policy, not about the summarizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, Final, Protocol

import msgspec

from planner.config import CompactConfig
from planner.full import CONTINUATION_HINT, fit
from planner.intent import task_goal
from planner.summary import SYSTEM_PROMPT, LocalSummarizer, SummaryRequest, complete, prompt_text, serialize
from transcript.model.checkpoint import Checkpoint, to_json, to_markdown
from transcript.model.message import Message, Part, TextPart, ToolResult
from transcript.model.result import CompactResult
from transcript.model.snapshot import Entry, TranscriptSnapshot

# What a cleared tool result shows (opencode's and Anthropic's placeholders say the same).
CLEARED: Final = "[Old tool result content cleared]"


class PeerTools(msgspec.Struct, frozen=True, kw_only=True):
    """What a peer needs from outside: a token counter, a clock, and the config its summaries are
    sized by (the shipped policy's)."""

    count: Callable[[str], int]
    now: Callable[[], datetime]
    config: CompactConfig = CompactConfig()


class PeerState(msgspec.Struct, frozen=True, kw_only=True):
    """A peer's memory between model calls.

    `cleared` names the tool messages whose results show `CLEARED`. With a summary, the view shows
    the system messages, the messages before `head` (by `seq`), the summary, then every message from
    `tail_seq` on; `checkpoint` is the summary's checkpoint, which the next summary builds on.
    """

    cleared: frozenset[str] = frozenset()
    head: int = 0
    tail_seq: int = 0
    summary: Message | None = None
    summary_tokens: int = 0
    checkpoint: Checkpoint | None = None


class PeerView(msgspec.Struct, frozen=True, kw_only=True):
    """The messages one call sends under a peer, with each one's tokens and `seq` (-1: the summary)."""

    messages: tuple[Message, ...]
    tokens: tuple[int, ...]
    seqs: tuple[int, ...]

    @property
    def total(self) -> int:
        """The view's tokens."""
        return sum(self.tokens)


class Peer(Protocol):
    """A peer policy: before each model call, its round from its state and the session so far."""

    name: ClassVar[str]
    source: ClassVar[str]

    def round(
        self, state: PeerState, snapshot: TranscriptSnapshot, budget: int, tools: PeerTools
    ) -> tuple[PeerState, CompactResult]: ...


def view_of(state: PeerState, snapshot: TranscriptSnapshot, tools: PeerTools) -> PeerView:
    """The view a peer in `state` sends (see `PeerState`)."""
    messages: list[Message] = []
    tokens: list[int] = []
    seqs: list[int] = []
    placeholder = tools.count(CLEARED)
    for entry in snapshot.entries:
        message = entry.message
        if message.kind == "summary":
            continue  # a store's own summaries: a peer makes its own
        if state.summary is not None:
            if state.head <= entry.seq < state.tail_seq and message.role != "system":
                continue
            if entry.seq == state.tail_seq:
                messages.append(state.summary)
                tokens.append(state.summary_tokens)
                seqs.append(-1)
        shown, count = shown_entry(entry, state.cleared, placeholder)
        messages.append(shown)
        tokens.append(count)
        seqs.append(entry.seq)
    if state.summary is not None and state.tail_seq >= len(snapshot.entries):
        messages.append(state.summary)
        tokens.append(state.summary_tokens)
        seqs.append(-1)
    return PeerView(messages=tuple(messages), tokens=tuple(tokens), seqs=tuple(seqs))


def shown_entry(entry: Entry, cleared: frozenset[str], placeholder_tokens: int) -> tuple[Message, int]:
    """An entry as a peer shows it (its tool results cleared when `cleared` names it), and its tokens."""
    message = entry.message
    if message.id not in cleared:
        return message, entry.token_count
    parts: list[Part] = []
    tokens = 0
    for index, part in enumerate(message.parts):
        if isinstance(part, ToolResult):
            parts.append(msgspec.structs.replace(part, content=CLEARED))
            tokens += placeholder_tokens
        else:
            parts.append(part)
            tokens += entry.tokens[index] if index < len(entry.tokens) else 0
    return msgspec.structs.replace(message, parts=tuple(parts)), tokens


def result_tokens(entry: Entry) -> int:
    """Tokens of an entry's tool result parts."""
    return sum(
        entry.tokens[index]
        for index, part in enumerate(entry.message.parts)
        if isinstance(part, ToolResult) and index < len(entry.tokens)
    )


class Summarized(msgspec.Struct, frozen=True, kw_only=True):
    """A peer's summary: its checkpoint, the message showing it, and what asking for it cost."""

    checkpoint: Checkpoint
    message: Message
    tokens: int
    input_tokens: int
    output_tokens: int


def summarize(
    shown: Sequence[Message],
    *,
    previous: Checkpoint | None,
    snapshot: TranscriptSnapshot,
    budget: int,
    tools: PeerTools,
    message_id: str,
    sent: int | None = None,
) -> Summarized:
    """The local summarizer's checkpoint of `shown` (messages as the peer's view showed them) on top
    of `previous`, sized as the shipped policy's. What it costs: its input — `sent` tokens when the
    peer sends the conversation itself, else the request as this library serializes it (outputs
    clipped) — and the reply a model would have sent. The task is named only when `shown` does not
    hold it."""
    messages = tuple(m for m in shown if m.kind != "summary" and m.role != "system")
    task = task_goal([entry.message for entry in snapshot.entries])
    config = tools.config
    request = SummaryRequest(
        system_prompt=SYSTEM_PROMPT,
        items=tuple(serialize(m) for m in messages),
        messages=messages,
        previous_checkpoint=previous,
        max_output_tokens=config.summary_tokens(budget),
        goal_hint="" if task and task == task_goal(messages) else task,
        list_cap=config.checkpoint_list_cap,
    )
    reply = LocalSummarizer().reply(request)
    checkpoint = fit(complete(reply, request), request.max_output_tokens * 4)
    text = f"{CONTINUATION_HINT}\n\n{to_markdown(checkpoint, brief=True)}"
    message = Message(
        id=message_id, role="user", kind="summary", parts=(TextPart(text=text),), created_at=tools.now()
    )
    count = tools.count
    return Summarized(
        checkpoint=checkpoint,
        message=message,
        tokens=count(text),
        input_tokens=count(request.system_prompt) + count(prompt_text(request)) if sent is None else sent,
        output_tokens=count(to_json(reply)),
    )


def summary_result(before: int, after: int, budget: int, summary: Summarized, delta: bool) -> CompactResult:
    """The record of a peer's round that summarized (never stored: what `simulate` counts)."""
    return CompactResult(
        outcome="full_applied",
        strategy="checkpoint-delta" if delta else "checkpoint",
        budget_tokens=budget,
        tokens_before=before,
        tokens_after=after,
        checkpoint=summary.checkpoint,
        summary=summary.message.text,
        checkpoint_reused=delta,
        summary_input_tokens=summary.input_tokens,
        summary_output_tokens=summary.output_tokens,
    )


def cleared_result(before: int, after: int, budget: int, count: int) -> CompactResult:
    """The record of a peer's round that cleared tool results."""
    return CompactResult(
        outcome="micro_applied",
        strategy="tool-result-micro",
        budget_tokens=budget,
        tokens_before=before,
        tokens_after=after,
        compacted_count=count,
    )


def quiet(tokens: int, budget: int, reason: str) -> CompactResult:
    """The record of a peer's round that changed nothing."""
    return CompactResult(
        outcome="skipped", budget_tokens=budget, tokens_before=tokens, tokens_after=tokens, reason=reason
    )
