"""Provider wire formats of a view: OpenAI Chat Completions `messages` and an Anthropic Messages body.

Pure functions of the view's messages: nothing is read or written, the input is never mutated, and
the same view always renders to equal output. A view is sent only when the providers' ordering rules
hold (`InvalidView`) and no call is pending (`PendingToolCalls`, SPEC §5). Tool-call ids are remapped
so that every id in a request is unique (and, for Anthropic, matches `^[a-zA-Z0-9_-]+$`); an id's
wire form depends only on the calls before it, so appending to a view never changes its prefix.
`check_openai_request` and `check_anthropic_request` (from `projection.wire_check`) check our
ordering rules on the wire form.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from projection.render import media_placeholder
from projection.validate import OrderProblem, check_view_order
from projection.view import View
from projection.wire_check import ANTHROPIC_ID, WireProblem, check_anthropic_request, check_openai_request
from transcript.errors import PendingToolCalls, TranscriptError
from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

# Image types both providers take; any other image is sent as policy 1's text placeholder.
IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# Anthropic's `tool_use.input` must be an object: other inputs are wrapped under this key, holding
# `ToolCall.arguments` (the raw text exactly as the model produced it, or the JSON of the value).
RAW_INPUT_KEY: Final = "_raw"
# Anthropic's first message must be a user message; a view that starts otherwise gets this one.
LEADING_USER_TEXT: Final = "[conversation continues]"
# Anthropic refuses an error `tool_result` with empty content.
EMPTY_ERROR_TEXT: Final = "[error result without output]"
_NOT_ID_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")
_JSON_ENCODER: Final = msgspec.json.Encoder()

__all__ = [
    "ANTHROPIC_ID",
    "EMPTY_ERROR_TEXT",
    "IMAGE_TYPES",
    "LEADING_USER_TEXT",
    "RAW_INPUT_KEY",
    "InvalidView",
    "WireProblem",
    "check_anthropic_request",
    "check_openai_request",
    "to_anthropic",
    "to_openai",
    "wire_call_ids",
]


class InvalidView(TranscriptError, ValueError):
    """A view breaks the providers' ordering rules (or is empty) and cannot be sent."""

    def __init__(self, message: str, problems: tuple[OrderProblem, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


# --- shared ---------------------------------------------------------------------------------------


def _checked(view: View | Sequence[Message]) -> tuple[Message, ...]:
    """The view's messages, when they may be sent; raises `InvalidView` or `PendingToolCalls`."""
    messages = tuple(view.messages if isinstance(view, View) else view)
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


def _data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def _plain_text(document: DocumentPart) -> str | None:
    """The text of a `text/plain` document whose payload is valid base64 of UTF-8, else None."""
    if document.media_type != "text/plain":
        return None
    try:
        return base64.b64decode(document.data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _copy(value: Any) -> Any:
    """A fresh copy of a JSON value, so a caller editing the request never edits a stored body."""
    return msgspec.json.decode(_JSON_ENCODER.encode(value))


# --- OpenAI Chat Completions ------------------------------------------------------------------------


def to_openai(view: View | Sequence[Message]) -> list[dict[str, Any]]:
    """The view as Chat Completions `messages`.

    - system → `system`; user, summary and meta messages → `user`: one text part as a string, else
      a list of parts. Images of `IMAGE_TYPES` → `image_url` with a data URL; a PDF → a `file` part
      (`filename` is the title, or `document.pdf`); a `text/plain` document → a text part with its
      text; any other media → policy 1's text placeholder (`[image omitted: …]`).
    - assistant → `content` (its text, a list of text parts when there are several, null when it
      only calls tools, "" when it has neither) and `tool_calls` whose `arguments` is
      `ToolCall.arguments`: the raw string exactly as stored when the input was not JSON.
      Reasoning and redacted reasoning are not sent: Chat Completions takes no reasoning input.
    - each tool result → a `tool` message: a string result as it is, a list result as text parts,
      where media become placeholders (tool messages take text only). `is_error` and the tool name
      have no field in this format and are left out; the result text says what happened.
    """
    messages = _checked(view)
    out: list[dict[str, Any]] = []
    for message, ids in zip(messages, wire_call_ids(messages), strict=True):
        if message.role == "tool":
            out.extend(_openai_result(r, ids[r.call_id]) for r in message.tool_results)
        elif message.role == "assistant":
            out.append(_openai_assistant(message, ids))
        else:
            out.append({"role": message.role, "content": _openai_content(message.parts)})
    return out


def _openai_content(parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_openai_part(part) for part in parts]


def _openai_part(part: Part) -> dict[str, Any]:
    if isinstance(part, ImagePart) and part.media_type in IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": _data_url(part.media_type, part.data)}}
    if isinstance(part, DocumentPart):
        if part.media_type == "application/pdf":
            filename = part.title or "document.pdf"
            return {
                "type": "file",
                "file": {"filename": filename, "file_data": _data_url(part.media_type, part.data)},
            }
        text = _plain_text(part)
        if text is not None:
            return {"type": "text", "text": text}
    if isinstance(part, (ImagePart, DocumentPart)):
        return {"type": "text", "text": media_placeholder(part).text}
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    raise TypeError(f"a {part.kind} part has no place in this message")


def _openai_assistant(message: Message, ids: dict[str, str]) -> dict[str, Any]:
    texts = [p for p in message.parts if isinstance(p, TextPart)]
    calls = message.tool_calls
    content: str | list[dict[str, Any]] | None
    if len(texts) == 1:
        content = texts[0].text
    elif texts:
        content = [{"type": "text", "text": p.text} for p in texts]
    else:
        content = None if calls else ""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [
            {"id": ids[c.id], "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return out


def _openai_result(result: ToolResult, wire_id: str) -> dict[str, Any]:
    content: str | list[dict[str, Any]]
    if isinstance(result.content, str):
        content = result.content
    elif not result.content:
        content = ""
    else:
        content = [
            {
                "type": "text",
                "text": item.text if isinstance(item, TextPart) else media_placeholder(item).text,
            }
            for item in result.content
        ]
    return {"role": "tool", "tool_call_id": wire_id, "content": content}


# --- Anthropic Messages -----------------------------------------------------------------------------


def to_anthropic(view: View | Sequence[Message]) -> dict[str, Any]:
    """The view as an Anthropic Messages body: `system` (left out when empty) and `messages`.

    - The system messages before the first other message → `system`, as text blocks. A system
      message later in the view → a user text block `<system>…</system>` in its place (moving it
      into `system` would reorder the prompt and break the cached prefix).
    - user, summary and meta messages → user blocks: images of `IMAGE_TYPES` and PDFs as base64
      blocks, a `text/plain` document as a text-source document, other media as placeholders.
    - assistant → its parts in order: signed reasoning as `thinking` blocks and redacted reasoning
      as `redacted_thinking`, kept whole; reasoning without a (non-empty) signature is left out
      (the API takes a thinking block only with its signature); text; `tool_use`, whose `input` is
      the stored object, or `{"_raw": arguments}` when it is not a JSON object (raw text included).
    - tool results → `tool_result` blocks (`content` a string or blocks, `is_error` when set) in
      the user message that follows the call; consecutive messages of one role are merged into one
      message, so results come first in their user message.
    - Blank text blocks are dropped (the API refuses empty and whitespace-only text); a message
      left with no block is dropped; a result left empty omits `content` (an error result says
      `EMPTY_ERROR_TEXT`). When the first message is not a user message, a user message with
      `LEADING_USER_TEXT` is put before it.
    """
    messages = _checked(view)
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    leading = True
    for message, ids in zip(messages, wire_call_ids(messages, anthropic=True), strict=True):
        if message.role == "system" and leading:
            system.extend(_anthropic_blocks(message.parts))
            continue
        leading = False
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "system":
            blocks = [{"type": "text", "text": f"<system>{message.text}</system>"}]
        elif message.role == "tool":
            blocks = [_anthropic_result(r, ids[r.call_id]) for r in message.tool_results]
        elif message.role == "assistant":
            blocks = _anthropic_assistant(message, ids)
        else:
            blocks = _anthropic_blocks(message.parts)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": LEADING_USER_TEXT}]})
    body: dict[str, Any] = {}
    if system:
        body["system"] = system
    body["messages"] = turns
    return body


def _anthropic_blocks(parts: Sequence[Part]) -> list[dict[str, Any]]:
    blocks = (_anthropic_block(part) for part in parts)
    return [block for block in blocks if block is not None]


def _anthropic_block(part: Part) -> dict[str, Any] | None:
    """One text or media part as a block; None for blank text."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text.strip() else None
    if isinstance(part, ImagePart) and part.media_type in IMAGE_TYPES:
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        return {"type": "image", "source": source}
    if isinstance(part, DocumentPart):
        text = _plain_text(part)
        document: dict[str, Any] | None = None
        if part.media_type == "application/pdf":
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
            document = {"type": "document", "source": source}
        elif text is not None:
            document = {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text},
            }
        if document is not None:
            if part.title is not None:
                document["title"] = part.title
            return document
    if isinstance(part, (ImagePart, DocumentPart)):
        return {"type": "text", "text": media_placeholder(part).text}
    raise TypeError(f"a {part.kind} part has no place in this message")


def _anthropic_assistant(message: Message, ids: dict[str, str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            if part.signature:
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
        elif isinstance(part, RedactedReasoningPart):
            blocks.append({"type": "redacted_thinking", "data": part.data})
        elif isinstance(part, ToolCall):
            blocks.append({"type": "tool_use", "id": ids[part.id], "name": part.name, "input": _input(part)})
        elif isinstance(part, TextPart) and part.text.strip():
            blocks.append({"type": "text", "text": part.text})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    if call.raw_input is None and isinstance(call.input, dict):
        copied: dict[str, Any] = _copy(call.input)
        return copied
    return {RAW_INPUT_KEY: call.arguments}


def _anthropic_result(result: ToolResult, wire_id: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_id}
    content: str | list[dict[str, Any]] | None
    if isinstance(result.content, str):
        content = result.content if result.content.strip() else None
    else:
        content = _anthropic_blocks(result.content) or None
    if content is None and result.is_error:
        content = EMPTY_ERROR_TEXT
    if content is not None:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block
