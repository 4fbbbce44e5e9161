"""What both providers' encoders share: which messages may be sent, call ids on the wire, media.

A view is sent only when the providers' ordering rules hold (`InvalidView`) and no call is pending
(`PendingToolCalls`). Tool-call ids are remapped so that every id in a request is unique (and, for
Anthropic, matches `^[a-zA-Z0-9_-]+$`); an id's wire form depends only on the calls before it, so
appending to a view never changes its prefix. An archive (an export of the stored history) keeps every
id as stored.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, Final, Protocol

import msgspec

from projection.validate import OrderProblem, check_view_order
from transcript.model.errors import PendingToolCalls, TranscriptError
from transcript.model.message import DocumentPart, Message

# Image types both providers take; any other image is sent as policy 1's text placeholder.
IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_NOT_ID_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")
_JSON_ENCODER: Final = msgspec.json.Encoder()


class InvalidView(TranscriptError, ValueError):
    """A view breaks the providers' ordering rules (or is empty) and cannot be sent."""

    def __init__(self, message: str, problems: tuple[OrderProblem, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class HasMessages(Protocol):
    """Anything holding a view's messages (a `projection.view.View`)."""

    @property
    def messages(self) -> Sequence[Message]: ...


def sendable(view: HasMessages | Sequence[Message]) -> tuple[Message, ...]:
    """The view's messages, when they may be sent; raises `InvalidView` or `PendingToolCalls`."""
    messages = tuple(view if isinstance(view, Sequence) else view.messages)
    if not messages:
        raise InvalidView("an empty view has nothing to send")
    report = check_view_order(messages)
    if report.problems:
        first = report.problems[0]
        raise InvalidView(
            f"the view breaks the providers' ordering rules: {first.code} for call {first.call_id!r} "
            f"at message {first.message_id!r} ({len(report.problems)} problem(s))",
            report.problems,
        )
    if report.pending:
        raise PendingToolCalls(
            f"the view ends with unanswered tool calls: {', '.join(report.pending)}", report.pending
        )
    return messages


def wire_call_ids(messages: Sequence[Message], *, anthropic: bool = False) -> list[dict[str, str]]:
    """Per message, stored call id -> wire id for the calls it makes or the results it carries.

    Ids are assigned in view order: an id keeps its form when it is not taken yet (for Anthropic,
    characters outside `[a-zA-Z0-9_-]` become `_` first), else gets the first free `-2`, `-3`, ...
    suffix — the second use of `abc` becomes `abc-2`. A result takes the wire id of the call of its
    own step, the closest preceding call with that id. Results that answer no call of their step
    (which `check_view_order` refuses) keep their id as it is.
    """
    used: set[str] = set()
    next_suffix: dict[str, int] = {}
    step: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for message in messages:
        if message.role == "tool":
            out.append({r.call_id: step.get(r.call_id, r.call_id) for r in message.tool_results})
            continue
        step = {}
        for call in message.tool_calls:
            base = _NOT_ID_CHAR.sub("_", call.id) if anthropic else call.id
            wire = base
            while wire in used:
                suffix = next_suffix.get(base, 2)
                next_suffix[base] = suffix + 1
                wire = f"{base}-{suffix}"
            used.add(wire)
            step[call.id] = wire
        out.append(dict(step))
    return out


def stored_call_ids(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Per message, every call id mapped to itself: an archive keeps the ids as stored."""
    out: list[dict[str, str]] = []
    for message in messages:
        ids = [r.call_id for r in message.tool_results] + [c.id for c in message.tool_calls]
        out.append({call_id: call_id for call_id in ids})
    return out


def data_url(media_type: str, data: str) -> str:
    """A base64 data URL."""
    return f"data:{media_type};base64,{data}"


def plain_text(document: DocumentPart, *, exact: bool = False) -> str | None:
    """The text of a `text/plain` document whose payload is valid base64 of UTF-8, else None.

    `exact=True` also asks that the text encodes back to the very same payload (an archive must
    read back byte for byte).
    """
    if document.media_type != "text/plain":
        return None
    try:
        text = base64.b64decode(document.data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if exact and base64.b64encode(text.encode()).decode() != document.data:
        return None
    return text


def copied(value: Any) -> Any:
    """A fresh copy of a JSON value, so a caller editing the request never edits a stored body."""
    return msgspec.json.decode(_JSON_ENCODER.encode(value))
