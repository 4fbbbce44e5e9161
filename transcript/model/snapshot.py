"""What the planner and projection read: a session at one version, entry by entry."""

from __future__ import annotations

from transcript.model.marks import NO_FLAGS, MessageFlags
from transcript.model.message import Message, ReasoningPart
from transcript.model.value import Value


class Entry(Value, frozen=True):
    """One message of a session as the planner sees it: position, body, per-part tokens, flags."""

    seq: int
    message: Message
    tokens: tuple[int, ...]
    flags: MessageFlags = NO_FLAGS

    @property
    def token_count(self) -> int:
        """Tokens of the whole stored body (sum over parts)."""
        return sum(self.tokens)

    @property
    def shown_tokens(self) -> int:
        """Tokens of the body as a view counts it: reasoning that no wire format sends counts nothing."""
        parts = self.message.parts
        if self.message.role != "assistant" or not any(isinstance(p, ReasoningPart) for p in parts):
            return sum(self.tokens)
        return sum(
            count
            for part, count in zip(parts, self.tokens, strict=False)
            if not isinstance(part, ReasoningPart) or part.sendable
        )


class TranscriptSnapshot(Value, frozen=True):
    """A session at one version: every entry in `seq` order. The planner's only input.

    `step_starts` holds the `seq` of every assistant message (a step is one model call and the results
    that answer it); `turn_starts` the `seq` of every user message that opens a turn group (not a
    summary, not expanded command text, not an observation). Both are kept as the session grows, so
    planning never has to rescan the history to find where recent steps begin. `output_sums` holds
    the running sums of every entry's output tokens in the view (`planner.micro.output_tokens`) as a
    frozen `transcript.model.sums.PrefixSums`, so the share of recent outputs is found without a walk
    over them; empty when whoever built the snapshot kept none (the planner then walks). A snapshot
    made from another with other entries must change the sums with them (`planner.micro.with_entries`)
    or drop them.
    """

    session_id: str
    version: int
    entries: tuple[Entry, ...]
    tokenizer: str
    step_starts: tuple[int, ...] = ()
    turn_starts: tuple[int, ...] = ()
    output_sums: bytes = b""
