"""Which importer reads a file, told from its content (never from its name alone).

JSON lines are recognised by their first records: Claude Code (`type` user/assistant/summary with
`sessionId`/`uuid`/`leafUuid`), Codex CLI (`{timestamp, type: session_meta|response_item|..., payload}`, or
the older layout's `{id, timestamp, instructions}` header and `{"record_type": "state"}` lines), Gemini CLI
(a header with `sessionId` and `projectHash`), OpenHands evaluation and resolver output (`history` +
`instance_id`, `issue` or `instruction`), OpenAI chat (`role`, or `messages`). A JSON document by its top-
level shape: SWE-agent (`history` + `trajectory`), mini-swe-agent (`trajectory_format: mini-swe-agent-…`, or
a list of messages holding `<returncode>` output, or a `.traj.json` file), Cline and Roo Code (a list of
messages named `api_conversation_history.json`, or whose tool results are written back as `[tool for 'x']
Result:` user text), Gemini CLI (`sessionId` + `messages` with `type`), OpenHands (a list of events with
`action`/`observation`), and chat messages — OpenAI's (`openai-json`) when provider-specific fields say so,
else Anthropic's (an object with `messages`, or a list of `{role, content}`). A one-line `{"messages":
[...]}` fits both chat line formats: provider-specific fields decide, then the file extension. An SQLite
database is `llm`'s logs.db (`llm-logs`). Anything else raises `FormatError` naming the formats tried and
what the file looked like.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import FormatError
from transcript.formats.cline import HISTORY_FILE as _CLINE_FILE, RESULT_HEADER as _CLINE_RESULT
from transcript.formats.codex import LINE_TYPES as _CODEX_TYPES
from transcript.formats.files import as_path, read_file
from transcript.formats.llm_logs import SQLITE_HEADER as _SQLITE_HEADER
from transcript.formats.mini_swe_agent import FORMAT_PREFIX as _MINI_SWE_AGENT_PREFIX
from transcript.formats.pairing import decode_json, read_bytes
from transcript.formats.registry import IMPORTERS, describe

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
    path = as_path(path)
    if read_file(path, peek=len(_SQLITE_HEADER)) == _SQLITE_HEADER:
        return "llm-logs"  # the one database format: llm's logs.db
    data = read_bytes(path)
    lines = list(islice(_lines(data), _SNIFF_LINES))
    if not lines:
        raise _unsure(path, "the file is empty")
    first = _decode(lines[0])
    if first is _NOT_JSON:
        return _document_format(path, data)
    if (
        isinstance(first, dict)
        and "sessionId" in first
        and "projectHash" in first
        and "messages" not in first
    ):
        return "gemini-cli"
    if len(lines) == 1:
        name = _shape_format(path, first, one_line=True)
        if name is not None:
            return name
    for line in lines:
        record = _decode(line)
        if record is _NOT_JSON:
            break
        name = _line_format(record)
        if name is not None:
            return name
    raise _unsure(
        path, "no known record shape in the first JSON lines", _looks(first, "JSON lines"), _closest(first)
    )


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
        return decode_json(data)
    except msgspec.DecodeError:
        return _NOT_JSON


def _unsure(path: Path, reason: str, looks: str | None = None, closest: str | None = None) -> FormatError:
    seen = f"; the file looks like {looks}" if looks else ""
    seen += f"; {closest}" if closest else ""
    return FormatError(
        path,
        None,
        f"cannot tell the format: {reason}{seen}; tried {', '.join(IMPORTERS)}; "
        "name the format if it is one of them (transcript import --from NAME; format=NAME in the API)",
    )


# The fields each format's records (or documents) have, for naming the closest format to a file none
# reads: format -> the keys of its first record or of its top-level object (a list: of its first item).
_FIELDS: Final = {
    "claude-code": ("type", "sessionId", "uuid", "message"),
    "codex": ("timestamp", "type", "payload"),
    "gemini-cli": ("sessionId", "projectHash", "messages"),
    "openhands": ("history", "instance_id"),
    "swe-agent": ("history", "trajectory"),
    "mini-swe-agent": ("trajectory_format", "info", "messages"),
    "openai-jsonl": ("role", "content"),
    "anthropic-json": ("messages", "system"),
}


def _closest(value: Any) -> str | None:
    """The format whose fields the value (its first item, for a list) has most of, and what it lacks."""
    record = value[0] if isinstance(value, list) and value else value
    if not isinstance(record, dict):
        return None
    best = max(_FIELDS, key=lambda name: sum(key in record for key in _FIELDS[name]) / len(_FIELDS[name]))
    fields = _FIELDS[best]
    has = [key for key in fields if key in record]
    if not has:
        return None
    missing = [key for key in fields if key not in record]
    return (
        f"closest: {describe(best)}, whose records have {', '.join(fields)}; this one has "
        f"{', '.join(has)} but not {', '.join(missing)}"
        if missing
        else f"closest: {describe(best)}, whose fields it has, but not in the shape that format writes"
    )


def _looks(value: Any, kind: str = "a JSON document") -> str:
    """A short description of a decoded record or document, for an error message."""
    if kind == "JSON lines":
        return f"JSON lines whose first record is {_shape(value)}"
    return f"{kind}: {_shape(value)}"


def _shape(value: Any, depth: int = 0) -> str:
    if isinstance(value, dict):
        keys = sorted(value)
        listed = ", ".join(keys[:8]) + (f", … ({len(keys)} keys)" if len(keys) > 8 else "")
        shape = f"an object with keys {listed}" if keys else "an empty object"
        kind = value.get("type", value.get("role"))
        if isinstance(kind, str):
            shape += f" ({'type' if 'type' in value else 'role'} {kind[:40]!r})"
        messages = value.get("messages")
        if depth == 0 and isinstance(messages, list) and messages:
            shape += f", its first message {_shape(messages[0], depth + 1)}"
        return shape
    if isinstance(value, list):
        if not value:
            return "an empty array"
        first = f", the first {_shape(value[0], depth + 1)}" if depth == 0 else ""
        return f"an array of {len(value)} item(s){first}"
    return f"a {type(value).__name__} value"


def _line_format(record: Any) -> str | None:
    """The format of a JSON-lines file whose records look like this one, if it is telling."""
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    kind = kind if isinstance(kind, str) else None  # a mangled record's "type" may be any value
    if kind in _CLAUDE_TYPES and any(key in record for key in _CLAUDE_KEYS):
        return "claude-code"
    if kind in _CODEX_TYPES and isinstance(record.get("payload"), dict):
        return "codex"
    if "type" not in record and (
        "record_type" in record
        or ({"id", "timestamp", "instructions"} <= record.keys() and "history" not in record)
    ):
        return "codex"  # the older rollout layout: a header line, then `record_type` state lines
    if "history" in record and any(key in record for key in ("instance_id", "issue", "instruction")):
        return "openhands"
    if isinstance(record.get("role"), str) or isinstance(record.get("messages"), list):
        return "openai-jsonl"
    return None


def _document_format(path: Path, data: bytes) -> str:
    """A JSON document spread over lines: its top-level shape decides."""
    try:
        value = decode_json(data)
    except msgspec.DecodeError as exc:
        start = data[:60].decode("utf-8", "replace")
        raise _unsure(
            path, f"neither JSON lines nor a JSON document ({exc})", f"text starting {start!r}"
        ) from exc
    name = _shape_format(path, value)
    if name is None:
        raise _unsure(path, "a JSON document of no known shape", _looks(value), _closest(value))
    return name


def _shape_format(path: Path, value: Any, *, one_line: bool = False) -> str | None:
    """The format of a JSON document of this shape, if any. `one_line`: the whole file is this one line,
    a document written on one line or JSON lines with one record, so an object of chat `messages`
    (without a `role` of its own) fits either chat line format (`_chat_format` decides)."""
    if isinstance(value, dict):
        if "history" in value and "trajectory" in value:
            return "swe-agent"
        own = _own_document(value)
        if own is not None:
            return own
        if isinstance(value.get("messages"), list):
            if not one_line:
                return _chat_document(path, value, value["messages"])
            if "role" not in value:
                return _chat_format(path, value, value["messages"])
        return None
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        return None
    if any("action" in item or "observation" in item for item in value):
        return "openhands"
    if all("role" in item for item in value):
        return _chat_document(path, None, value)
    return None


def _own_document(value: dict[str, Any]) -> str | None:
    """mini-swe-agent and Gemini CLI documents, which hold `messages` of their own shape."""
    trajectory = value.get("trajectory_format")
    info = value.get("info")
    if (isinstance(trajectory, str) and trajectory.startswith(_MINI_SWE_AGENT_PREFIX)) or (
        isinstance(info, dict) and "mini_version" in info and "messages" in value
    ):
        return "mini-swe-agent"
    messages = value.get("messages")
    typed = isinstance(messages, list) and all(
        isinstance(m, dict) and "type" in m and "role" not in m for m in messages
    )
    return "gemini-cli" if "sessionId" in value and typed else None


def _chat_document(path: Path, body: dict[str, Any] | None, messages: list[Any]) -> str:
    """A whole JSON document of chat messages: mini-swe-agent's trajectory (its harness's `<returncode>`
    observations, or a `.traj.json` name), OpenAI's messages (`openai-json`) when provider-specific
    fields say so, else Anthropic's."""
    if body is None and (path.name.endswith(".traj.json") or _returncodes(messages)):
        return "mini-swe-agent"
    if body is None and (path.name == _CLINE_FILE or _written_back(messages)):
        return "cline"
    if _looks_openai(messages) and not _looks_anthropic(body, messages):
        return "openai-json"
    return "anthropic-json"


def _written_back(messages: list[Any]) -> bool:
    """Whether tool results are written back as user text (`[tool for 'x'] Result:`, as Cline and Roo
    Code do) after `tool_use` blocks, with no `tool_result` block anywhere."""
    blocks = [
        (m.get("role"), block)
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict)
    ]
    kinds = {block.get("type") for _, block in blocks}
    return (
        "tool_use" in kinds
        and "tool_result" not in kinds
        and any(
            role == "user" and isinstance(block.get("text"), str) and _CLINE_RESULT.match(block["text"])
            for role, block in blocks
        )
    )


def _returncodes(messages: list[Any]) -> bool:
    return any(
        isinstance(m, dict)
        and m.get("role") == "user"
        and isinstance(m.get("content"), str)
        and m["content"].lstrip().startswith("<returncode>")
        for m in messages
    )


def _chat_format(path: Path, body: dict[str, Any], messages: list[Any]) -> str:
    openai, anthropic = _looks_openai(messages), _looks_anthropic(body, messages)
    if openai != anthropic:
        return "openai-jsonl" if openai else "anthropic-json"
    if not openai:
        by_suffix = {".jsonl": "openai-jsonl", ".json": "anthropic-json"}.get(path.suffix.lower())
        if by_suffix is not None:
            return by_suffix
    raise _unsure(
        path,
        "one line of chat messages that fits both openai-jsonl and anthropic-json",
        _looks(body, "one line"),
    )


def _looks_openai(messages: list[Any]) -> bool:
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if (isinstance(role, str) and role in _OPENAI_ROLES) or any(key in message for key in _OPENAI_KEYS):
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
