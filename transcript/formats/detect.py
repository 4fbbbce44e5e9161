"""Which importer reads a file, told from its content (never from its name alone).

JSON lines are recognised by their first records: Claude Code (`type` user/assistant/summary with
`sessionId`/`uuid`/`leafUuid`), OpenHands evaluation output (`history` + `instance_id`), OpenAI chat
(`role`, or `messages`). A JSON document by its top-level shape: SWE-agent (`history` + `trajectory`),
OpenHands (a list of events with `action`/`observation`), Anthropic Messages (an object with
`messages`, or a list of `{role, content}`). A one-line `{"messages": [...]}` fits both chat formats:
provider-specific fields decide, then the file extension; anything else unsure raises `FormatError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import FormatError
from transcript.formats.pairing import read_bytes

_SNIFF_LINES: Final = 20
_CLAUDE_TYPES: Final = frozenset({"user", "assistant", "summary", "system"})
_CLAUDE_KEYS: Final = ("sessionId", "uuid", "leafUuid")
_OPENAI_ROLES: Final = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS: Final = ("tool_calls", "tool_call_id", "function_call", "reasoning_content", "refusal")
_OPENAI_PARTS: Final = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)


def detect(path: str | Path) -> str:
    """The name of the importer (a key of `transcript.formats.IMPORTERS`) that reads this file."""
    path = Path(path)
    data = read_bytes(path)
    lines = list(islice(_lines(data), _SNIFF_LINES))
    if not lines:
        raise _unsure(path, "the file is empty")
    first = _decode(lines[0])
    if first is _NOT_JSON:
        return _document_format(path, data)
    if len(lines) == 1:
        name = _single_line_format(path, first)
        if name is not None:
            return name
    for line in lines:
        record = _decode(line)
        if record is _NOT_JSON:
            break
        name = _line_format(record)
        if name is not None:
            return name
    raise _unsure(path, "no known record shape in the first JSON lines")


_NOT_JSON: Final = object()


def _lines(data: bytes) -> Iterator[bytes]:
    """The non-blank lines of `data`, lazily (only the first few are ever looked at)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if data[start:end].strip():
            yield data[start:end]
        start = end + 1


def _decode(data: bytes) -> Any:
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return _NOT_JSON


def _unsure(path: Path, reason: str) -> FormatError:
    return FormatError(path, None, f"cannot tell the format: {reason}; pass the format explicitly")


def _line_format(record: Any) -> str | None:
    """The format of a JSON-lines file whose records look like this one, if it is telling."""
    if not isinstance(record, dict):
        return None
    if record.get("type") in _CLAUDE_TYPES and any(key in record for key in _CLAUDE_KEYS):
        return "claude-code"
    if "history" in record and "instance_id" in record:
        return "openhands"
    if isinstance(record.get("role"), str) or isinstance(record.get("messages"), list):
        return "openai-jsonl"
    return None


def _single_line_format(path: Path, value: Any) -> str | None:
    """A one-line file: a JSON document written on one line, or JSON lines with one record."""
    if isinstance(value, dict) and "history" in value and "trajectory" in value:
        return "swe-agent"
    if isinstance(value, dict) and isinstance(value.get("messages"), list) and "role" not in value:
        return _chat_format(path, value, value["messages"])
    if isinstance(value, list):
        return _shape_format(path, value)
    return None


def _document_format(path: Path, data: bytes) -> str:
    """A JSON document spread over lines: its top-level shape decides."""
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise _unsure(path, f"neither JSON lines nor a JSON document ({exc})") from exc
    name = _shape_format(path, value)
    if name is None:
        raise _unsure(path, "a JSON document of no known shape")
    return name


def _shape_format(path: Path, value: Any) -> str | None:
    if isinstance(value, dict):
        if "history" in value and "trajectory" in value:
            return "swe-agent"
        if isinstance(value.get("messages"), list):
            return _anthropic_or_refuse(path, value, value["messages"])
        return None
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        return None
    if any("action" in item or "observation" in item for item in value):
        return "openhands"
    if all("role" in item and "content" in item for item in value):
        return _anthropic_or_refuse(path, None, value)
    return None


def _anthropic_or_refuse(path: Path, body: dict[str, Any] | None, messages: list[Any]) -> str:
    """A whole JSON document of chat messages is Anthropic's; OpenAI chat must be JSON lines."""
    if _looks_openai(messages) and not _looks_anthropic(body, messages):
        raise _unsure(
            path,
            'a JSON document of OpenAI chat messages; write one message (or one {"messages": [...]}) '
            "per line and import it as openai-jsonl",
        )
    return "anthropic-json"


def _chat_format(path: Path, body: dict[str, Any], messages: list[Any]) -> str:
    openai, anthropic = _looks_openai(messages), _looks_anthropic(body, messages)
    if openai != anthropic:
        return "openai-jsonl" if openai else "anthropic-json"
    if not openai:
        by_suffix = {".jsonl": "openai-jsonl", ".json": "anthropic-json"}.get(path.suffix.lower())
        if by_suffix is not None:
            return by_suffix
    raise _unsure(path, "one line of chat messages that fits both openai-jsonl and anthropic-json")


def _looks_openai(messages: list[Any]) -> bool:
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") in _OPENAI_ROLES or any(key in message for key in _OPENAI_KEYS):
            return True
        if _part_types(message) & _OPENAI_PARTS:
            return True
    return False


def _looks_anthropic(body: dict[str, Any] | None, messages: list[Any]) -> bool:
    if body is not None and "system" in body:
        return True
    return any(isinstance(m, dict) and _part_types(m) & _ANTHROPIC_BLOCKS for m in messages)


def _part_types(message: dict[str, Any]) -> set[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return set()
    return {part["type"] for part in content if isinstance(part, dict) and isinstance(part.get("type"), str)}
