"""Gemini CLI chat recordings: one JSON object (`sessionId`, `messages[]`), or the newer JSON lines.

The JSON lines form starts with a header record (`sessionId`, `projectHash`, `startTime`, `kind`), then
message records and `{"$set": {...}}` patches of the header; a message record written again under the
same `id` (Gemini CLI adds the tool calls to a message once they ran) replaces the earlier one in its
place — the last write wins. Messages map as follows:
- `user` → a user message (text parts, base64 `inlineData` images); `displayContent`, what the user
  typed when `content` holds an expanded command, goes to metadata;
- `gemini` → an assistant message: each of its `thoughts` (subject and description, summaries the CLI
  shows) a reasoning part, its text, then its `toolCalls`; each call's `result`
  (`functionResponse.response`: `output`, or `error`) becomes the tool result right after, an error for
  status `error` or `cancelled`; `model` and `tokens` go to metadata;
- `info`, `error` and `warning` → notices the CLI showed the user and never sent to the model: kept in
  the history as `meta` user messages, out of every view (`hidden_from_view`).
Session id is `sessionId`, message ids the records' ids (`<message id>/<call id>` for results).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import BadRecord, FormatError, ParsedSession, Repair, Where
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    History,
    decode_json,
    get_str,
    json_lines,
    line_of,
    parse_time,
    read_bytes,
    undated_time,
)
from transcript.formats.record_lines import RecordLines
from transcript.model import ImagePart, Message, Part, ReasoningPart, ResultContent, TextPart, ToolCall

TYPES: Final = ("user", "gemini", "info", "error", "warning")
_HEADER_KEYS: Final = ("projectHash", "startTime", "lastUpdated", "kind")


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a Gemini CLI chat recording (JSON or JSON lines)."""
    path = as_path(path)
    data = read_bytes(path)
    document = _document(data)
    if isinstance(document, dict) and "messages" in document:
        if not isinstance(document.get("messages"), list):
            raise FormatError(path, 1, "a Gemini CLI chat's 'messages' must be a list")
        lines = RecordLines(data, "messages")
        records: list[tuple[Any, int | None, str]] = [
            (item, lines(k), f"messages[{k}]") for k, item in enumerate(document["messages"])
        ]
        header = document
    else:
        header, records = _lines(path, data)
    session_id = header.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise FormatError(path, 1, "'sessionId' must be a non-empty string")
    chat = _Chat(path)
    for record, line, label in records:
        where = Where(str(path), line, label)
        where.read(chat.message, record, where)
    if not chat.history.messages:
        raise FormatError(path, None, "the chat holds no messages")
    chat.history.finish()
    metadata = {key: header[key] for key in _HEADER_KEYS if isinstance(header.get(key), str)}
    return [
        ParsedSession(
            session_id=session_id,
            messages=chat.history.messages,
            metadata=metadata,
            repairs=chat.history.repairs,
            warnings=chat.history.warnings,
            hidden=chat.hidden,
        )
    ]


def _document(data: bytes) -> Any:
    """The file as one JSON document, or None when it is not one (JSON lines)."""
    try:
        return decode_json(data)
    except msgspec.DecodeError:
        return None


def _lines(path: Path, data: bytes) -> tuple[dict[str, Any], list[tuple[Any, int | None, str]]]:
    """The header and the message records of the JSON lines form, the last write of each id in the
    place of its first."""
    header: dict[str, Any] | None = None
    records: dict[str, tuple[Any, int | None, str]] = {}
    for number, record in json_lines(path, data):
        where = Where(str(path), number)
        if not isinstance(record, dict):
            raise where.error(f"a record must be a JSON object, not {type(record).__name__}")
        if header is None:
            if "sessionId" not in record:
                raise where.error("the first record must be the header, with a 'sessionId'")
            header = dict(record)
        elif "$set" in record:
            patch = record["$set"]
            if not isinstance(patch, dict):
                raise where.error("'$set' must be an object")
            header.update(patch)
        elif "id" in record:
            records[where.string(record, "id")] = (record, number, "")
        else:
            raise where.error(
                f"a record must be a message (with 'id') or a '$set' patch; keys {sorted(record)}"
            )
    if header is None:
        raise FormatError(path, None, "the file holds no records")
    return header, list(records.values())


class _Chat:
    def __init__(self, path: Path) -> None:
        self.lines: list[int | None] = []
        self.history = History(line_of(self.lines))
        self.hidden: dict[str, str] = {}
        self.mtime = undated_time(path)

    def message(self, record: object, where: Where) -> None:
        if not isinstance(record, dict):
            raise BadRecord(f"a message must be a JSON object, not {type(record).__name__}")
        kind = record.get("type")
        if kind not in TYPES:
            raise BadRecord(f"unknown message type {kind!r} (expected one of {', '.join(TYPES)})")
        message_id = get_str(record, "id")
        created_at = self._time(record.get("timestamp"))
        self.lines.append(where.line)
        index = len(self.lines) - 1
        if kind == "user":
            metadata = {}
            display = record.get("displayContent")
            if display is not None:
                metadata["display_content"] = _text(_parts(display))
            parts = _parts(record.get("content"))
            self.history.add(
                where.check(Message.user(parts, id=message_id, created_at=created_at, metadata=metadata)),
                index,
            )
        elif kind == "gemini":
            self._gemini(record, message_id, created_at, index, where)
        else:
            text = _text(_parts(record.get("content")))
            message = Message.user(text, id=message_id, created_at=created_at, metadata={"gemini_type": kind})
            self.history.add(msgspec.structs.replace(message, kind="meta"), index)
            self.hidden[message_id] = f"gemini_{kind}"
            detail = (
                f"Gemini CLI {kind} notice (shown to the user, never sent to the model) kept out of views"
            )
            self.history.repairs.append(
                Repair(kind="hidden_from_view", detail=detail, message_id=message_id, line=where.line)
            )

    def _gemini(
        self, record: dict[str, Any], message_id: str, created_at: datetime, index: int, where: Where
    ) -> None:
        parts: list[Part] = [ReasoningPart(text=t) for t in _thoughts(record.get("thoughts"))]
        text = _text(_parts(record.get("content")))
        if text or not record.get("toolCalls"):
            parts.append(TextPart(text=text))
        raw_calls = record.get("toolCalls") or []
        if not isinstance(raw_calls, list):
            raise BadRecord("'toolCalls' must be a list")
        calls = [_call(item, k) for k, item in enumerate(raw_calls)]
        unique = self.history.unique_calls([c for c, _ in calls], message_id, index)
        parts.extend(unique)
        metadata = {key: record[key] for key in ("model", "tokens") if record.get(key) is not None}
        message = Message(
            id=message_id,
            role="assistant",
            parts=tuple(parts),
            created_at=created_at,
            metadata=metadata or None,
        )
        self.history.add(where.check(message), index, [c.id for c, _ in calls])
        for (call, item), stored in zip(calls, unique, strict=True):
            content, is_error = _result(item)
            self.history.add_result(
                call.id,
                content,
                id=f"{message_id}/{stored.id}",
                created_at=self._time(item.get("timestamp")) if item.get("timestamp") else created_at,
                index=index,
                name=call.name,
                is_error=is_error,
            )

    def _time(self, value: object) -> datetime:
        return parse_time(value, self.mtime)[0]


def _parts(content: object) -> list[ResultContent]:
    """A message's content: a string, or a list of Gemini parts (`text`, base64 `inlineData`)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list):
        raise BadRecord(f"'content' must be a string or a list of parts, not {type(content).__name__}")
    parts: list[ResultContent] = []
    for k, item in enumerate(content):
        if isinstance(item, str):
            parts.append(TextPart(text=item))
        elif isinstance(item, dict) and "text" in item:
            parts.append(TextPart(text=get_str(item, "text")))
        elif isinstance(item, dict) and isinstance(item.get("inlineData"), dict):
            inline = item["inlineData"]
            parts.append(ImagePart(media_type=get_str(inline, "mimeType"), data=get_str(inline, "data")))
        else:
            keys = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise BadRecord(f"content[{k}]: a part must hold 'text' or 'inlineData' (found {keys})")
    return parts


def _text(parts: list[ResultContent]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _thoughts(thoughts: object) -> list[str]:
    if thoughts is None:
        return []
    if not isinstance(thoughts, list):
        raise BadRecord("'thoughts' must be a list")
    texts = []
    for k, thought in enumerate(thoughts):
        if not isinstance(thought, dict):
            raise BadRecord(f"thoughts[{k}] must be an object")
        subject, description = (
            get_str(thought, "subject", " ").strip(),
            get_str(thought, "description", " ").strip(),
        )
        texts.append(f"{subject}: {description}" if subject and description else subject or description)
    return texts


def _call(item: object, k: int) -> tuple[ToolCall, dict[str, Any]]:
    if not isinstance(item, dict):
        raise BadRecord(f"toolCalls[{k}] must be an object")
    call_id, name = item.get("id"), item.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise BadRecord(f"toolCalls[{k}] needs a non-empty string 'id' and 'name'")
    args = item.get("args", {})
    return ToolCall(id=call_id, name=name, input=args if args is not None else {}), item


def _result(item: dict[str, Any]) -> tuple[str, bool]:
    """A call's result text (the function response's `output`, else its `error`, else what the CLI
    displayed) and whether it is an error."""
    status = item.get("status")
    is_error = status in ("error", "cancelled")
    texts: list[str] = []
    for response in item.get("result") or []:
        function = response.get("functionResponse") if isinstance(response, dict) else None
        body = function.get("response") if isinstance(function, dict) else None
        if isinstance(body, dict) and isinstance(body.get("output"), str):
            texts.append(body["output"])
        elif isinstance(body, dict) and isinstance(body.get("error"), str):
            texts.append(body["error"])
            is_error = True
        elif body is not None:
            texts.append(msgspec.json.encode(body).decode())
    if not texts and isinstance(item.get("resultDisplay"), str):
        texts.append(item["resultDisplay"])
    return "\n".join(texts), is_error
