"""The OpenAI Chat Completions encoder: one for a view sent to the API, and for an exported history.

`to_openai` renders a view as a request's `messages` (checked, call ids remapped, media the API takes
or placeholders). `encode_openai(..., archive=True)` writes a stored history so that importing it
again gives the same bodies: ids as stored, reasoning as `reasoning_content`, `is_error` on results,
the `developer` role and `name` a record came with, every media item as it is. Both run the same
functions; the few places where they differ are marked by `archive`. Pure functions: nothing is read
or written and the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from projection.render import media_placeholder
from projection.wire import common
from transcript.model.errors import InvalidArgument, InvalidMessage, UnsupportedItem
from transcript.model.message import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

_KEPT: Final = frozenset(
    {"role", "content", "refusal", "tool_calls", "annotations", "audio", "function_call", "reasoning_content"}
)


def to_openai(view: common.HasMessages | Sequence[Message]) -> list[dict[str, Any]]:
    """The view as Chat Completions `messages`.

    - system → `system`; user, summary and meta messages → `user`: one text part as a string, else
      a list of parts. Images of `common.IMAGE_TYPES` → `image_url` with a data URL; a PDF → a `file` part
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
    return encode_openai(common.sendable(view), archive=False)


def encode_openai(messages: Sequence[Message], *, archive: bool) -> list[dict[str, Any]]:
    """Messages as Chat Completions message objects (a tool message gives one per result)."""
    ids = common.stored_call_ids(messages) if archive else common.wire_call_ids(messages)
    out: list[dict[str, Any]] = []
    for message, wire_ids in zip(messages, ids, strict=True):
        if message.role == "tool":
            out.extend(_result(r, wire_ids[r.call_id], archive) for r in message.tool_results)
        elif message.role == "assistant":
            out.append(_assistant(message, wire_ids, archive))
        else:
            out.append(_turn(message, archive))
    return out


def _turn(message: Message, archive: bool) -> dict[str, Any]:
    metadata = (message.metadata or {}) if archive else {}
    developer = message.role == "system" and metadata.get("role") == "developer"
    out: dict[str, Any] = {"role": "developer" if developer else message.role}
    if isinstance(metadata.get("name"), str):
        out["name"] = metadata["name"]
    out["content"] = _content(message.parts, archive)
    return out


def _content(parts: Sequence[Part], archive: bool) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_part(part, archive) for part in parts]


def _part(part: Part, archive: bool) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart) and (archive or part.media_type in common.IMAGE_TYPES):
        return {"type": "image_url", "image_url": {"url": common.data_url(part.media_type, part.data)}}
    if isinstance(part, DocumentPart):
        if archive or part.media_type == "application/pdf":
            file: dict[str, Any] = {"file_data": common.data_url(part.media_type, part.data)}
            filename = part.title if archive else part.title or "document.pdf"
            if filename is not None:
                file = {"filename": filename, **file}
            return {"type": "file", "file": file}
        text = common.plain_text(part)
        if text is not None:
            return {"type": "text", "text": text}
    if isinstance(part, (ImagePart, DocumentPart)):
        return {"type": "text", "text": media_placeholder(part).text}
    raise TypeError(f"a {part.kind} part has no place in this message")


def _assistant(message: Message, ids: dict[str, str], archive: bool) -> dict[str, Any]:
    texts = [p for p in message.parts if isinstance(p, TextPart)]
    calls = message.tool_calls
    out: dict[str, Any] = {"role": "assistant"}
    metadata = (message.metadata or {}) if archive else {}
    if isinstance(metadata.get("name"), str):
        out["name"] = metadata["name"]
    reasoning = "".join(p.text for p in message.parts if isinstance(p, ReasoningPart))
    if archive and reasoning:
        out["reasoning_content"] = reasoning
    content: str | list[dict[str, Any]] | None
    if len(texts) == 1:
        content = texts[0].text
    elif texts:
        content = [{"type": "text", "text": p.text} for p in texts]
    else:
        content = None if calls or archive else ""
    out["content"] = content
    if calls:
        out["tool_calls"] = [
            {"id": ids[c.id], "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return out


def _result(result: ToolResult, wire_id: str, archive: bool) -> dict[str, Any]:
    content: str | list[dict[str, Any]]
    if isinstance(result.content, str):
        content = result.content
    elif archive:
        content = [_part(item, archive) for item in result.content]
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
    out: dict[str, Any] = {"role": "tool", "tool_call_id": wire_id, "content": content}
    if archive and result.is_error:
        out["is_error"] = True
    return out


def from_openai(
    reply: Any, *, choice: int | None = None, id: str | None = None, created_at: datetime | None = None
) -> Message:
    """An OpenAI Chat Completions reply as one assistant message: a `ChatCompletion` (its one choice, or
    `choice`), a choice, or a `ChatCompletionMessage` — SDK objects or their JSON as dicts.

    `content` → text (a `refusal` too), then each function call with its `arguments` string kept
    exactly (`ToolCall.from_arguments`: the string is sent back byte for byte), a `reasoning_content`
    some compatible servers add → reasoning that no wire format sends. Metadata keeps `provider`,
    `model`, `response_id`, `finish_reason` and the completion's `usage` as reported. What cannot be kept
    and sent back (a custom tool call, audio, annotations) is `UnsupportedItem` naming it; several
    choices without `choice` are `InvalidArgument`.
    """
    data = common.plain(reply, "an OpenAI reply")
    completion: dict[str, Any] = {}
    if "choices" in data:
        completion = data
        choices = common.list_field(data, "choices", "an OpenAI completion")
        if choice is None and len(choices) != 1:
            raise InvalidArgument(f"the completion has {len(choices)} choices: name one with choice=")
        index = 0 if choice is None else choice
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(choices):
            raise InvalidArgument(f"choice {index!r} is not one of the completion's {len(choices)} choices")
        data = common.plain(choices[index], f"choices[{index}]")
    finish = common.text_field(data, "finish_reason", "an OpenAI choice", optional=True)
    if "message" in data:
        data = common.plain(data["message"], "the choice's message")
    if data.get("role", "assistant") != "assistant":
        raise InvalidMessage(f"not an OpenAI assistant message: role {data.get('role')!r}")
    common.no_extras(data, _KEPT, "the message")
    parts: list[Part] = []
    reasoning = data.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ReasoningPart(text=reasoning))
    for key in ("audio", "function_call"):
        if data.get(key):
            raise UnsupportedItem(
                f"an OpenAI message with {key!r} cannot be kept and sent back by this store", key
            )
    if data.get("annotations"):
        raise UnsupportedItem(
            "an OpenAI message with annotations cannot be kept and sent back by this store", "annotations"
        )
    content = data.get("content")
    if isinstance(content, list):
        for index, item in enumerate(content):
            item = common.plain(item, f"content[{index}]")
            if item.get("type") not in ("text", "refusal"):
                raise UnsupportedItem(
                    f"content[{index}]: a {item.get('type')!r} part cannot be kept", f"content[{index}]"
                )
            parts.append(TextPart(text=common.text_field(item, item["type"], f"content[{index}]")))
    elif content is not None:
        parts.append(TextPart(text=common.text_field(data, "content", "an OpenAI message")))
    refusal = common.text_field(data, "refusal", "an OpenAI message", optional=True)
    if refusal:
        parts.append(TextPart(text=refusal))
    for index, call in enumerate(common.list_field(data, "tool_calls", "an OpenAI message")):
        parts.append(_reply_call(common.plain(call, f"tool_calls[{index}]"), f"tool_calls[{index}]"))
    metadata = {
        "provider": "openai",
        "model": common.text_field(completion, "model", "an OpenAI completion", optional=True),
        "response_id": common.text_field(completion, "id", "an OpenAI completion", optional=True),
        "finish_reason": finish,
        "usage": common.plain(completion["usage"], "usage") if completion.get("usage") is not None else None,
    }
    return common.reply(parts, metadata, id=id, created_at=created_at)


def _reply_call(call: dict[str, Any], where: str) -> ToolCall:
    if call.get("type", "function") != "function":
        raise UnsupportedItem(
            f"{where}: a {call.get('type')!r} tool call cannot be sent back as a function call; "
            "nothing was stored",
            f"{where} ({call.get('type')})",
        )
    common.no_extras(call, frozenset({"id", "type", "function"}), where)
    function = common.plain(call.get("function"), f"{where}.function")
    common.no_extras(function, frozenset({"name", "arguments"}), f"{where}.function")
    return ToolCall.from_arguments(
        id=common.text_field(call, "id", where),
        name=common.text_field(function, "name", f"{where}.function"),
        arguments=common.text_field(function, "arguments", f"{where}.function"),
    )
