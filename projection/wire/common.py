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
from datetime import datetime
from typing import Any, Final, Protocol

import msgspec

from projection.validate import OrderProblem, check_view_order
from transcript.model.errors import (
    InvalidArgument,
    InvalidMessage,
    PendingToolCalls,
    TranscriptError,
    UnsupportedItem,
)
from transcript.model.ids import new_message_id, utc_now
from transcript.model.message import DocumentPart, Message, Part, TextPart, check_message

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


def plain(value: Any, what: str) -> dict[str, Any]:
    """A provider reply (or one item of it) as a plain JSON object: an SDK object is dumped as the API
    sent it, a dict is taken as it is; anything else is `InvalidArgument`."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json", warnings=False)
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be an SDK response object or a dict, not {type(value).__name__}")
    return value


def text_field(value: dict[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    """`value[key]` when it is a string (or None, when `optional`), else `InvalidMessage`."""
    item = value.get(key)
    if item is None and optional:
        return None
    if not isinstance(item, str):
        raise InvalidMessage(f"{where}: {key!r} must be a string, not {type(item).__name__}")
    return item


def list_field(value: dict[str, Any], key: str, where: str) -> list[Any]:
    """`value[key]` when it is a list (None or absent reads as empty), else `InvalidMessage`."""
    item = value.get(key)
    if item is None:
        return []
    if not isinstance(item, list):
        raise InvalidMessage(f"{where}: {key!r} must be a list, not {type(item).__name__}")
    return item


def reply(
    parts: Sequence[Part],
    metadata: dict[str, Any],
    *,
    id: str | None,
    created_at: datetime | None,
) -> Message:
    """The assistant message of one reply: its parts in the reply's order (an empty text part when it
    said nothing), checked; metadata keeps the fields that are not null."""
    if not parts:
        parts = [TextPart(text="")]
    message = Message(
        id=id if id is not None else new_message_id(),
        role="assistant",
        parts=tuple(parts),
        created_at=created_at if created_at is not None else utc_now(),
        metadata={key: value for key, value in metadata.items() if value is not None} or None,
    )
    check_message(message)
    return message


def kept_kind(item: dict[str, Any], kept: dict[str, frozenset[str]], where: str, provider: str) -> str:
    """The `type` of a reply item this store keeps (`kept` maps each to its fields); any other type,
    or a field it does not keep, is `UnsupportedItem` naming it."""
    kind = item.get("type")
    if kind not in kept:
        raise UnsupportedItem(
            f"{where}: a {provider} {kind!r} item cannot be kept and sent back by this store (it keeps "
            f"{', '.join(kept)}); nothing was stored",
            f"{where} ({kind})",
        )
    no_extras(item, kept[kind], where)
    return str(kind)


def no_extras(value: dict[str, Any], known: frozenset[str], where: str) -> None:
    """Refuse a reply item that sets a field this store does not keep (`UnsupportedItem` naming it):
    what cannot be sent back is never dropped silently. Fields left null or empty are no loss."""
    for key, item in value.items():
        if key not in known and item not in (None, False, [], {}, ""):
            raise UnsupportedItem(
                f"{where}: field {key!r} ({value.get('type', 'item')}) cannot be kept and sent back by "
                "this store; nothing was stored",
                f"{where}.{key}",
            )
