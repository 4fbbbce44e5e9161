"""The live, in-memory state of one session, kept current event by event.

A live process reads the whole session once and then only what is new, so the cost of a turn does
not grow with the session's length: an append adds one entry and extends the cached view; a mark
replaces one entry and drops the cached view order. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from projection.canonical import canonical_order, needs_reorder
from projection.view import View
from transcript.errors import InvalidMessage, StoreCorrupted
from transcript.model import (
    Entry,
    Event,
    Message,
    MessageAppended,
    MessageMarked,
    ToolCall,
    ToolResult,
    TranscriptSnapshot,
    apply_mark,
)


class LiveSession:
    """Entries in `seq` order, an index by message id, the calls still pending, and the view cache."""

    def __init__(self, session_id: str, tokenizer: str) -> None:
        self.session_id = session_id
        self.tokenizer = tokenizer
        self.version = 0
        self.entries: list[Entry] = []
        self.positions: dict[str, int] = {}
        self.pending: dict[str, str] = {}
        self._order: list[Entry] | None = []
        self._shown: list[Message] = []
        self._tokens = 0
        self._view: View | None = None

    # --- applying what the log says ----------------------------------------------------------------

    def add(self, message: Message, tokens: tuple[int, ...]) -> Entry:
        """Append one message at the next `seq`."""
        entry = Entry(seq=len(self.entries), message=message, tokens=tokens)
        self.positions[message.id] = entry.seq
        self.entries.append(entry)
        self.pending = _pending_after(self.pending, message)
        self._view = None
        if self._order is not None:
            if needs_reorder(entry):
                self._order = None
            else:
                self._order.append(entry)
                self._shown.append(message)
                self._tokens += entry.token_count
        return entry

    def mark(self, mark: MessageMarked) -> None:
        """Apply one mark event to the flags of its message."""
        position = self.positions.get(mark.message_id)
        if position is None:
            return
        entry = self.entries[position]
        flags = apply_mark(entry.flags, mark)
        if flags != entry.flags:
            self.entries[position] = msgspec.structs.replace(entry, flags=flags)
            self._order = None
            self._view = None

    def apply(
        self, version: int, event: Event, bodies: Mapping[str, tuple[Message, tuple[int, ...]]]
    ) -> None:
        """Apply one event read from the log (`bodies` holds the bodies its appends refer to)."""
        if isinstance(event, MessageAppended):
            message, tokens = bodies[event.message_id]
            if event.seq != len(self.entries):
                raise StoreCorrupted(
                    f"session {self.session_id!r}: event {version} appends seq {event.seq}, "
                    f"expected {len(self.entries)} (run `transcript verify`)"
                )
            self.add(message, tokens)
        elif isinstance(event, MessageMarked):
            self.mark(event)
        self.version = version

    # --- what callers read -------------------------------------------------------------------------

    def view(self) -> View:
        """The canonical view (excluded left out, summaries at their anchors), cached until a change."""
        if self._view is None:
            if self._order is None:
                self._order = canonical_order(self.entries)
                self._shown = [e.message for e in self._order]
                self._tokens = sum(e.token_count for e in self._order)
            self._view = View(messages=tuple(self._shown), source="canonical", tokens=self._tokens)
        return self._view

    def snapshot(self) -> TranscriptSnapshot:
        """The planner's input: every entry at the current version."""
        return TranscriptSnapshot(
            session_id=self.session_id,
            version=self.version,
            entries=tuple(self.entries),
            tokenizer=self.tokenizer,
        )

    def check_order(self, messages: Iterable[Message]) -> None:
        """Refuse a batch that would leave a tool result without its call, or a call without its result.

        Calls may stay pending only at the end (the loop is mid-step); anything else appended while
        calls are pending would give providers an invalid history.
        """
        pending = dict(self.pending)
        for message in messages:
            if message.role == "tool":
                for result in message.tool_results:
                    if result.call_id not in pending:
                        raise InvalidMessage(
                            f"message {message.id!r}: tool result answers call {result.call_id!r}, which is "
                            f"not pending (pending: {_names(pending)})"
                        )
                    del pending[result.call_id]
            elif message.kind != "summary" and pending:
                raise InvalidMessage(
                    f"message {message.id!r}: tool calls {_names(pending)} are still unanswered; append "
                    "their results first (or call repair_interrupted() after a crash)"
                )
            else:
                pending = _pending_after(pending, message)


def _pending_after(pending: dict[str, str], message: Message) -> dict[str, str]:
    """The calls still pending after `message` (a new dict; `pending` is left as it was)."""
    role = message.role
    if role == "assistant":
        return {part.id: part.name for part in message.parts if isinstance(part, ToolCall)}
    if role == "tool":
        if not pending:
            return pending
        remaining = dict(pending)
        for part in message.parts:
            if isinstance(part, ToolResult):
                remaining.pop(part.call_id, None)
        return remaining
    if message.kind == "summary" or not pending:
        return pending
    return {}


def _names(pending: Mapping[str, str]) -> str:
    return ", ".join(repr(call_id) for call_id in pending) or "none"
