"""Provider validity of a view: every tool result follows the call it answers, every call is answered.

Calls may be pending only in the last step (the loop is mid-step); `check_view_order` reports them
separately so the read path can show them and the wire adapters can refuse to send them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from transcript.model import Message

RESULT_WITHOUT_CALL: Final = "RESULT_WITHOUT_CALL"
CALL_WITHOUT_RESULT: Final = "CALL_WITHOUT_RESULT"
DUPLICATE_RESULT: Final = "DUPLICATE_RESULT"


class OrderProblem(msgspec.Struct, frozen=True, kw_only=True):
    """One way a view breaks the providers' ordering rules."""

    code: str
    message_id: str
    call_id: str
    detail: str


class OrderReport(msgspec.Struct, frozen=True, kw_only=True):
    """The problems of a view (empty when valid) and the calls still pending at its end."""

    problems: tuple[OrderProblem, ...]
    pending: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the view is valid (pending calls at the very end are allowed)."""
        return not self.problems


def check_view_order(messages: Sequence[Message]) -> OrderReport:
    """Check the ordering rules over a view's messages."""
    problems: list[OrderProblem] = []
    open_calls: dict[str, str] = {}
    answered: set[str] = set()
    step_owner = ""
    for message in messages:
        if message.role == "tool":
            for result in message.tool_results:
                call = result.call_id
                if call in open_calls:
                    del open_calls[call]
                    answered.add(call)
                elif call in answered:
                    problems.append(_problem(DUPLICATE_RESULT, message, call, "a second result for one call"))
                else:
                    problems.append(_problem(RESULT_WITHOUT_CALL, message, call, "no call of this step"))
            continue
        for call in open_calls:
            problems.append(
                OrderProblem(
                    code=CALL_WITHOUT_RESULT,
                    message_id=step_owner,
                    call_id=call,
                    detail=f"unanswered when message {message.id!r} follows",
                )
            )
        open_calls = {}
        answered = set()
        if message.role == "assistant":
            step_owner = message.id
            open_calls = {call.id: message.id for call in message.tool_calls}
    return OrderReport(problems=tuple(problems), pending=tuple(open_calls))


def _problem(code: str, message: Message, call_id: str, detail: str) -> OrderProblem:
    return OrderProblem(code=code, message_id=message.id, call_id=call_id, detail=detail)
