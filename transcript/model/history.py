"""The pairing rule every stored history keeps: a tool result answers a pending call of the step
before it, and nothing else follows calls that are still unanswered.

Calls may stay pending only at the very end (the loop is mid-step); a summary message (appended by
full compaction, shown elsewhere in the view) may follow them. Appends, imports and restores all check
a batch with `check_order`, so no path can store a history a provider would refuse.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

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


def split_pair(history: Iterable[tuple[Message, bool]], taken: Collection[str]) -> str | None:
    """Why taking the messages `taken` out of a history would split a call from its result, or None.

    `history` is every message in order with whether it is already out of the view (excluded). A
    result and its call go together or stay together; what is already excluded does not count.
    """
    caller: dict[str, str] = {}  # call id -> the id of the message that made it, in this step
    for message, excluded in history:
        if message.role == "assistant":
            caller = {} if excluded else {call.id: message.id for call in message.tool_calls}
        elif message.role == "tool" and not excluded:
            for result in message.tool_results:
                call = caller.get(result.call_id)
                if call is not None and (call in taken) != (message.id in taken):
                    gone, kept = (call, message.id) if call in taken else (message.id, call)
                    return (
                        f"taking back message {gone!r} would leave message {kept!r} with half of call "
                        f"{result.call_id!r}: take a call and its results back together"
                    )
    return None
