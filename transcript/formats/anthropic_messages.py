"""Anthropic Messages JSON: a request body (`system` + `messages`) or a bare list of messages.

One session per file, id the file's stem, message ids `<stem>/<index>`; `created_at` is the file's
modification time (the format carries none). `system` (a string or text blocks) becomes one system
message; blocks map one to one (text, base64 image and document, tool_use, thinking with its signature,
redacted_thinking); in a user message each `tool_result` becomes its own tool message, in order, and
the text and media blocks around them become user messages. A `tool_use` whose `input` is a string is
read as raw (non-JSON) arguments, which is how `export` writes those. Pairing and repairs are
`pairing.History`'s, as in `openai_chat`: a result answering no pending call is kept as user text
(`orphan_result_as_text`); a call unanswered before anything else, or at the end, gets an interrupted
error result (`synthetic_result`). Request hints such as `cache_control` and `citations` are not
content and are not kept.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from projection.wire.anthropic import encode_anthropic
from transcript.formats.base import FormatError, ParsedSession, Where
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    THINKING_BLOCKS,
    SessionBuilder,
    decode_json,
    read_bytes,
    thinking_part,
    undated_time,
)
from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResultContent,
    TextPart,
    ToolCall,
    ToolResult,
)
from transcript.model.arguments import check_items

_BYTE_OFFSET: Final = re.compile(r"\(byte (\d+)\)")


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of an Anthropic Messages JSON file; raises `FormatError` naming the bad record."""
    path = as_path(path)
    document = _decode(path)
    where = Where(str(path), None)
    messages: Any
    system: Any
    metadata: dict[str, Any]
    if isinstance(document, list):
        messages, system, metadata = document, None, {}
    elif isinstance(document, dict):
        messages, system = document.get("messages"), document.get("system")
        model = document.get("model")
        metadata = {"model": model} if isinstance(model, str) else {}
    else:
        raise where.error("expected a request body (an object with 'messages') or a list of messages")
    if not isinstance(messages, list):
        raise where.error("'messages' must be a list")
    builder = SessionBuilder(path.stem)
    created_at = undated_time(path)
    if system is not None:
        builder.add("system", _system_parts(system, where.at("system")), where, created_at)
    for index, message in enumerate(messages):
        add_message(builder, message, where.at(f"messages[{index}]"), created_at, index)
    if not builder.messages:
        raise where.error("the file holds no messages")
    return [builder.session(metadata=metadata)]


def _decode(path: Path) -> Any:
    data = read_bytes(path)
    try:
        return decode_json(data)
    except msgspec.DecodeError as exc:
        found = _BYTE_OFFSET.search(str(exc))
        line = data[: int(found.group(1))].count(b"\n") + 1 if found else None
        raise FormatError(path, line, f"not a JSON document: {exc}") from exc


def _system_parts(system: Any, where: Where) -> list[Part]:
    if isinstance(system, str):
        return [TextPart(text=system)]
    if not isinstance(system, list) or not system:
        raise where.error("'system' must be a string or a non-empty list of text blocks")
    return [_text(block, where.at(f"[{i}]")) for i, block in enumerate(system)]


def add_message(
    builder: SessionBuilder, message: Any, where: Where, created_at: datetime, index: int
) -> None:
    if not isinstance(message, dict):
        raise where.error(f"a message must be a JSON object, not {type(message).__name__}")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise where.error(f"unknown role {role!r} (expected user or assistant)")
    content = message.get("content")
    if isinstance(content, str):
        builder.add(role, [TextPart(text=content)], where, created_at, {"index": index})
        return
    if not isinstance(content, list) or not content:
        raise where.error("'content' must be a string or a non-empty list of blocks")
    blocks = [(block, where.at(f".content[{i}]")) for i, block in enumerate(content)]
    if role == "assistant":
        parts = [_assistant_block(block, at) for block, at in blocks]
        builder.add("assistant", parts, where, created_at, {"index": index})
        return
    run: list[Part] = []
    for block, at in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if run:
                builder.add("user", run, where, created_at, {"index": index})
                run = []
            builder.add_result(_tool_result(block, at), at, created_at, {"index": index})
        else:
            run.append(_media_block(block, at, ("text", "image", "document")))
    if run:
        builder.add("user", run, where, created_at, {"index": index})


def _kind(block: Any, where: Where) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):
        raise where.error("a content block must be an object with a string 'type'")
    return kind


def _text(block: Any, where: Where) -> TextPart:
    if _kind(block, where) != "text":
        raise where.error(f"expected a text block, not {block['type']!r}")
    return TextPart(text=where.string(block, "text"))


def _assistant_block(block: Any, where: Where) -> Part:
    kind = _kind(block, where)
    if kind == "text":
        return TextPart(text=where.string(block, "text"))
    if kind in THINKING_BLOCKS:
        return where.read(thinking_part, block)
    if kind == "tool_use":
        call_id, name = where.string(block, "id"), where.string(block, "name")
        if not call_id or not name:
            raise where.error("a tool_use block needs a non-empty 'id' and 'name'")
        if "input" not in block:
            raise where.error("a tool_use block needs an 'input'")
        value = block["input"]
        if isinstance(value, str):
            return ToolCall(id=call_id, name=name, input=None, raw_input=value)
        return ToolCall(id=call_id, name=name, input=value)
    raise where.error(f"block type {kind!r} is not allowed in an assistant message")


def _media_block(block: Any, where: Where, allowed: tuple[str, ...]) -> TextPart | ImagePart | DocumentPart:
    kind = _kind(block, where)
    if kind not in allowed:
        raise where.error(f"block type {kind!r} is not allowed here (expected {', '.join(allowed)})")
    if kind == "text":
        return TextPart(text=where.string(block, "text"))
    source = block.get("source")
    if not isinstance(source, dict):
        raise where.error(f"an {kind} block needs a 'source' object")
    media_type, data = _source(source, where)
    if kind == "image":
        return ImagePart(media_type=media_type, data=data)
    title = block.get("title")
    if title is not None and not isinstance(title, str):
        raise where.error("'title' must be a string")
    return DocumentPart(media_type=media_type, data=data, title=title)


def _source(source: dict[str, Any], where: Where) -> tuple[str, str]:
    """(media type, base64 payload); a plain-text document source is stored base64-encoded."""
    kind = source.get("type")
    if kind == "base64":
        return where.string(source, "media_type"), where.string(source, "data")
    if kind == "text":
        media_type = source.get("media_type", "text/plain")
        if not isinstance(media_type, str):
            raise where.error("'media_type' must be a string")
        text = where.string(source, "data")
        return media_type, base64.b64encode(text.encode()).decode()
    raise where.error(f"source type {kind!r} cannot be stored (expected base64, or text for a document)")


def _tool_result(block: dict[str, Any], where: Where) -> ToolResult:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise where.error("a tool_result block needs a non-empty string 'tool_use_id'")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise where.error("'is_error' must be true or false")
    content = block.get("content", "")
    body: str | tuple[ResultContent, ...]
    if isinstance(content, str):
        body = content
    elif isinstance(content, list):
        allowed = ("text", "image", "document")
        items = enumerate(content)
        body = tuple(_media_block(item, where.at(f".content[{i}]"), allowed) for i, item in items)
    else:
        raise where.error("a tool_result's 'content' must be a string or a list of blocks")
    return ToolResult(call_id=call_id, content=body, is_error=is_error)


def export(messages: Sequence[Message]) -> dict[str, Any]:
    """A session's stored history as a request-like body, `system` and `messages` (an archive: importing
    it again gives the same bodies; see `projection.wire.anthropic.encode_anthropic`)."""
    return encode_anthropic(check_items(messages, Message, "messages"), archive=True)
