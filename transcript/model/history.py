"""The pairing rule every stored history keeps: a tool result answers a pending call of the step
before it, and nothing else follows calls that are still unanswered.

Calls may stay pending only at the very end (the loop is mid-step); a summary message (appended by
full compaction, shown elsewhere in the view) may follow them. Appends, imports and restores all check
a batch with `check_order`, so no path can store a history a provider would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from transcript.model.errors import InvalidMessage
from transcript.model.message import Message, ToolCall, ToolResult


def pending_after(pending: dict[str, str], message: Message) -> dict[str, str]:
    """The calls (id -> tool name) still pending after `message` (a new dict when they change)."""
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


def check_order(pending: Mapping[str, str], messages: Iterable[Message]) -> dict[str, str]:
    """Refuse a batch that would leave a tool result without its call, or a call without its result;
    returns the calls pending after it. `pending` are the calls pending before the batch."""
    open_calls = dict(pending)
    for message in messages:
        if message.role == "tool":
            for result in message.tool_results:
                if result.call_id not in open_calls:
                    raise InvalidMessage(
                        f"message {message.id!r}: tool result answers call {result.call_id!r}, which is "
                        f"not pending (pending: {_names(open_calls)})"
                    )
                del open_calls[result.call_id]
        elif message.kind != "summary" and open_calls:
            raise InvalidMessage(
                f"message {message.id!r}: tool calls {_names(open_calls)} are still unanswered; append "
                "their results first (or call repair_interrupted() after a crash)"
            )
        else:
            open_calls = pending_after(open_calls, message)
    return open_calls


def _names(pending: Mapping[str, str]) -> str:
    return ", ".join(repr(call_id) for call_id in pending) or "none"
