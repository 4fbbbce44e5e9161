"""What the planner and projection read: a session at one version, entry by entry."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

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
    or drop them: `output_changes` holds such changes, (seq, delta) pairs made after `output_sums` was
    frozen, which a prefix sum adds for the seqs before its end (so a copy need not copy the sums).

    The sequences are immutable: tuples, or (from the fold) `transcript.model.chunked.Chunked`
    sequences, which a later snapshot shares all but the changed chunks of, so that making one costs
    what changed since the last, not the whole history. Read them as sequences (index, slice, iterate);
    `plain()` gives the snapshot with tuples.
    """

    session_id: str
    version: int
    entries: Sequence[Entry]
    tokenizer: str
    step_starts: Sequence[int] = ()
    turn_starts: Sequence[int] = ()
    output_sums: bytes = b""
    output_changes: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        # Decoded from JSON, the sequences arrive as lists: made tuples, a decoded snapshot is as
        # immutable as the one encoded, and equal to it.
        for name in ("entries", "step_starts", "turn_starts", "output_changes"):
            value = getattr(self, name)
            if isinstance(value, list):
                msgspec.structs.force_setattr(self, name, tuple(value))

    def plain(self) -> TranscriptSnapshot:
        """This snapshot with tuples for its sequences: what `msgspec` encodes (it knows no
        `Chunked`), and what `Transcript.messages()` returns."""
        if all(isinstance(items, tuple) for items in (self.entries, self.step_starts, self.turn_starts)):
            return self
        return msgspec.structs.replace(
            self,
            entries=tuple(self.entries),
            step_starts=tuple(self.step_starts),
            turn_starts=tuple(self.turn_starts),
        )
