"""OpenAI chat messages: JSONL with one message per line (one session per file) or one
`{"messages": [...]}` per line (`openai-jsonl`), or one JSON document — the array of messages that
`json.dump(messages)` writes from a chat loop, or `{"messages": [...]}` (`openai-json`, `parse_document`).

Roles map as they are (`developer` → system, remembered in metadata so the exporter writes it back);
content is a string, null, or text / `image_url` (data: URLs only; `detail` hints are not kept) /
`file` parts; `tool_calls[].function.arguments` is parsed when it is JSON and kept raw when not;
`reasoning_content` becomes a reasoning part. Session ids are the file's stem (`<stem>:<line>` for
conversation lines), message ids `<session>/<index>`. Pairing and repairs are `pairing.History`'s:
a tool message answering no pending call is kept as user text (`orphan_result_as_text`); a call
unanswered before anything else, or at the end, gets an interrupted error result (`synthetic_result`).
`is_error` on tool messages is our own extension, so an export keeps it; `export` writes a stored
history back as this format.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from projection.wire.openai import encode_openai
from transcript.formats.base import FormatError, ParsedSession, Where
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    SessionBuilder,
    data_url,
    decode_document,
    iso_time,
    json_lines,
    read_bytes,
    tool_call,
    undated_time,
)
from transcript.formats.record_lines import RecordLines
from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    ResultContent,
    TextPart,
    ToolResult,
)
from transcript.model.arguments import check_items

ROLES: Final = ("system", "developer", "user", "assistant", "tool")
_ENCODER: Final = msgspec.json.Encoder()


def parse(path: str | Path) -> list[ParsedSession]:
    """The sessions of an OpenAI chat JSONL file; raises `FormatError` naming the bad line."""
    path = as_path(path)
    default_time = undated_time(path)
    records = list(json_lines(path, read_bytes(path)))
    if not records:
        raise FormatError(path, None, "the file holds no records")
    first = records[0][1]
    if isinstance(first, dict) and "messages" in first and "role" not in first:
        return [_conversation(path, line, record, default_time) for line, record in records]
    builder = SessionBuilder(path.stem)
    for line, record in records:
        where = Where(str(path), line)
        if isinstance(record, dict) and "messages" in record and "role" not in record:
            raise where.error("a conversation line in a file of message lines")
        _add_message(builder, record, where, default_time, {"line": line})
    return [builder.session()]


def parse_document(path: str | Path) -> list[ParsedSession]:
    """The one session of a JSON document of OpenAI chat messages (an array, or `{"messages": [...]}`)."""
    path = as_path(path)
    data = read_bytes(path)
    document = decode_document(path, data)
    key = "messages" if isinstance(document, dict) else None
    messages = document.get("messages") if isinstance(document, dict) else document
    if not isinstance(messages, list) or not messages:
        raise FormatError(path, 1, 'expected a non-empty array of messages, or {"messages": [...]}')
    lines = RecordLines(data, key)
    default_time = undated_time(path)
    builder = SessionBuilder(path.stem)
    for index, item in enumerate(messages):
        where = Where(str(path), lines(index), f"messages[{index}]")
        _add_message(builder, item, where, default_time, {"index": index})
    model = document.get("model") if isinstance(document, dict) else None
    return [builder.session(metadata={"model": model} if isinstance(model, str) else {})]


def _conversation(path: Path, line: int, record: dict[str, Any], default_time: datetime) -> ParsedSession:
    where = Where(str(path), line)
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        raise where.error("'messages' must be a non-empty list")
    builder = SessionBuilder(f"{path.stem}:{line}")
    for index, item in enumerate(messages):
        metadata = {"line": line, "index": index}
        _add_message(builder, item, where.at(f"messages[{index}]"), default_time, metadata)
    model = record.get("model")
    return builder.session(metadata={"model": model} if isinstance(model, str) else {})


def _add_message(
    builder: SessionBuilder, record: Any, where: Where, default_time: datetime, metadata: dict[str, Any]
) -> None:
    if not isinstance(record, dict):
        raise where.error(f"a message must be a JSON object, not {type(record).__name__}")
    role = record.get("role")
    created_at = _created_at(record, where) or default_time
    name = record.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise where.error("'name' must be a string")
        metadata["name"] = name
    if role in ("system", "developer"):
        if role == "developer":
            metadata["role"] = "developer"
        parts = _content(record.get("content"), where, allowed=("text",))
        builder.add("system", parts, where, created_at, metadata)
    elif role == "user":
        parts = _content(record.get("content"), where, allowed=("text", "image_url", "file"))
        builder.add("user", parts, where, created_at, metadata)
    elif role == "assistant":
        builder.add("assistant", _assistant_parts(record, where), where, created_at, metadata)
    elif role == "tool":
        builder.add_result(_tool_result(record, where), where, created_at, metadata)
    else:
        raise where.error(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")


def _created_at(record: dict[str, Any], where: Where) -> datetime | None:
    """The record's own time (`created_at` or `timestamp`: ISO 8601 text or Unix seconds), if any."""
    value = record.get("created_at", record.get("timestamp"))
    if value is None:
        return None
    if isinstance(value, str):
        return where.read(iso_time, value)[0]
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise where.error(f"bad timestamp {value!r}: {exc}") from exc
    raise where.error(f"a timestamp must be ISO 8601 text or Unix seconds, not {type(value).__name__}")


def _content(content: Any, where: Where, *, allowed: tuple[str, ...]) -> list[ResultContent]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list) or not content:
        raise where.error("'content' must be a string or a non-empty list of parts")
    return [_content_part(item, where.at(f".content[{i}]"), allowed) for i, item in enumerate(content)]


def _content_part(item: Any, where: Where, allowed: tuple[str, ...]) -> ResultContent:
    kind = item.get("type") if isinstance(item, dict) else None
    if kind not in allowed:
        raise where.error(f"content part type {kind!r} is not allowed here (expected {', '.join(allowed)})")
    if kind == "text":
        return TextPart(text=where.string(item, "text"))
    if kind == "image_url":
        image = item.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        media_type, data = _data_url(url, where)
        return ImagePart(media_type=media_type, data=data)
    file = item.get("file")
    if not isinstance(file, dict):
        raise where.error("a file part needs a 'file' object")
    media_type, data = _data_url(file.get("file_data"), where)
    title = file.get("filename")
    if title is not None and not isinstance(title, str):
        raise where.error("'filename' must be a string")
    return DocumentPart(media_type=media_type, data=data, title=title)


def _data_url(url: Any, where: Where) -> tuple[str, str]:
    found = data_url(url)
    if found is None:
        raise where.error("only data: URLs with a base64 payload can be stored (remote URLs cannot)")
    return found


def _assistant_parts(record: dict[str, Any], where: Where) -> list[Part]:
    if record.get("function_call") is not None:
        raise where.error("the legacy 'function_call' field is not supported (use 'tool_calls')")
    parts: list[Part] = []
    reasoning = record.get("reasoning_content")
    if reasoning is not None:
        if not isinstance(reasoning, str):
            raise where.error("'reasoning_content' must be a string")
        if reasoning:
            parts.append(ReasoningPart(text=reasoning))
    content = record.get("content")
    if content is not None:
        parts.extend(_content(content, where, allowed=("text",)))
    refusal = record.get("refusal")
    if refusal is not None:
        parts.append(TextPart(text=where.string(record, "refusal")))
    calls = record.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise where.error("'tool_calls' must be a list")
        parts.extend(where.read(tool_call, call, f"tool_calls[{i}]") for i, call in enumerate(calls))
    return parts or [TextPart(text="")]


def _tool_result(record: dict[str, Any], where: Where) -> ToolResult:
    call_id = record.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise where.error("a tool message needs a non-empty string 'tool_call_id'")
    is_error = record.get("is_error", False)
    if not isinstance(is_error, bool):
        raise where.error("'is_error' must be true or false")
    content = record.get("content")
    body: str | tuple[ResultContent, ...]
    if isinstance(content, str):
        body = content
    else:
        body = tuple(_content(content, where, allowed=("text", "image_url", "file")))
    return ToolResult(call_id=call_id, content=body, is_error=is_error)


def export(messages: Sequence[Message]) -> str:
    """A session's stored history as OpenAI chat JSONL, one message per line (an archive: importing
    it again gives the same bodies; see `projection.wire.openai.encode_openai`)."""
    given = check_items(messages, Message, "messages")
    return "".join(_ENCODER.encode(record).decode() + "\n" for record in encode_openai(given, archive=True))
