"""SWE-agent trajectories (`.traj`), and the JSON and history helpers the OpenHands importer shares.

One session per file, read from `history[]` (the copy in `trajectory[].messages` is ignored); the
session id is the file's stem, message ids are `{session}/{index}`, and every message has the file's
modification time (the format has no timestamps). Entries keep their roles: assistant `tool_calls`
become calls and each role `tool` entry the result of the closest preceding unanswered call of its
`tool_call_ids[0]` (call ids repeat across steps); the older style's observations stay user
messages; `is_demo` entries are kept, marked `demo: true`, and `thought`/`action` go to metadata
only when the content does not already hold them. Repairs: a call id used twice in one message is
renamed (`call_id_renamed`), a call still unanswered at the next message gets an interrupted error
result (`synthetic_result`), a result that answers no pending call is kept as user text
(`orphan_result_as_text`).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from transcript.errors import InvalidMessage
from transcript.formats.base import FormatError, ParsedSession, Repair, RepairKind
from transcript.model import (
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    ResultContent,
    TextPart,
    ToolCall,
    check_message,
)

INTERRUPTED: Final = "tool execution was interrupted"
ROLES: Final = ("system", "user", "assistant", "tool")


class BadRecord(Exception):
    """A record is malformed; the caller turns it into a `FormatError` naming the line."""


_WS: Final = re.compile(r"[ \t\n\r]*")
_LONE_SURROGATE: Final = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def decode_document(path: str | Path, data: bytes) -> Any:
    """A whole-file JSON document; a `FormatError` naming the line of the first fault otherwise."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        line, reason = locate_json_error(data)
        raise FormatError(path, line, reason or f"not valid JSON: {exc}") from exc


def locate_json_error(data: bytes) -> tuple[int | None, str | None]:
    """The 1-based line of what msgspec refused, and a clearer reason for a lone surrogate.

    msgspec reports a lone surrogate escape as truncated input; Python's json accepts it, so a text
    Python parses but msgspec refuses is searched for one.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data.count(b"\n", 0, exc.start) + 1, None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, None
    except RecursionError:
        return None, None
    match = _LONE_SURROGATE.search(text)
    if match is None:
        return None, None
    reason = f"{match.group()} is a lone UTF-16 surrogate, which is not valid Unicode"
    return text.count("\n", 0, match.start()) + 1, reason


class RecordLines:
    """The line where each element of a document's array starts, found only when first asked for.

    `key` names the array under the top-level object (None: the document is the array). Importers
    ask only when naming a bad record or a repair, so a clean import never scans the text twice.
    """

    def __init__(self, data: bytes, key: str | None = None) -> None:
        self._data = data
        self._key = key
        self._lines: list[int] | None = None

    def __call__(self, index: int) -> int | None:
        if self._lines is None:
            self._lines = self._scan()
        return self._lines[index] if 0 <= index < len(self._lines) else None

    def _scan(self) -> list[int]:
        try:
            text = self._data.decode("utf-8")
            offsets = _array_offsets(text, self._key)
        except (ValueError, IndexError, RecursionError):
            return []
        newlines = [match.start() for match in re.finditer("\n", text)]
        return [bisect.bisect(newlines, offset) + 1 for offset in offsets]


def _array_offsets(text: str, key: str | None) -> list[int]:
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if key is not None:
        if text[pos] != "{":
            return []
        pos = _skip(text, pos + 1)
        while text[pos] == '"':
            name, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = _skip(text, _skip(text, pos) + 1)  # past the ':'
            if name == key:
                break
            pos = _skip(text, decoder.raw_decode(text, pos)[1])
            pos = _skip(text, pos + 1) if text[pos] == "," else pos
        else:
            return []
    if text[pos] != "[":
        return []
    offsets = []
    pos = _skip(text, pos + 1)
    while text[pos] != "]":
        offsets.append(pos)
        pos = _skip(text, decoder.raw_decode(text, pos)[1])
        pos = _skip(text, pos + 1) if text[pos] == "," else pos
    return offsets


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def file_time(path: Path) -> datetime:
    """The file's modification time in UTC: the `created_at` of records that carry no timestamp."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def parse_time(value: object, fallback: datetime) -> tuple[datetime, bool]:
    """A record's timestamp (naive ones read as UTC) and whether it was naive; `fallback` when absent."""
    if value is None:
        return fallback, False
    if not isinstance(value, str):
        raise BadRecord(f"'timestamp' must be a string, not {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadRecord(f"'timestamp' {value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC), True
    return moment, False


def get_str(record: dict[str, Any], key: str, default: str | None = None) -> str:
    """`record[key]`, which must be a string; `default` when absent or null (required when None)."""
    value = record.get(key)
    if value is None and default is not None:
        return default
    if value is None:
        raise BadRecord(f"{key!r} is missing")
    if not isinstance(value, str):
        raise BadRecord(f"{key!r} must be a string, not {type(value).__name__}")
    return value


def get_dict(record: dict[str, Any], key: str) -> dict[str, Any] | None:
    """`record[key]`, which must be an object when present."""
    value = record.get(key)
    if value is not None and not isinstance(value, dict):
        raise BadRecord(f"{key!r} must be an object, not {type(value).__name__}")
    return value


class _Pending(NamedTuple):
    source_id: str  # the call id as the file has it
    call_id: str  # the id stored (renamed when one message used the source id twice)
    name: str
    position: int


class History:
    """Messages in an order the store accepts; every repair that needs is made here, and named."""

    def __init__(self, line_of: Callable[[int], int | None]) -> None:
        self.messages: list[Message] = []
        self.repairs: list[Repair] = []
        self.warnings: list[str] = []
        self._line_of = line_of
        self._pending: list[_Pending] = []
        self._step: tuple[Message, int] | None = None

    @property
    def step_id(self) -> str | None:
        """The id of the latest assistant message that still has unanswered calls."""
        return self._step[0].id if self._step and self._pending else None

    def is_pending(self, source_id: str) -> bool:
        """Whether a call with this id (as the file has it) is still waiting for its result."""
        return any(p.source_id == source_id for p in self._pending)

    def repair(self, kind: RepairKind, detail: str, index: int, **ids: str | None) -> None:
        """Name one change made to the history."""
        self.repairs.append(Repair(kind=kind, detail=detail, line=self._line_of(index), **ids))

    def unique_calls(self, calls: Sequence[ToolCall], message_id: str, index: int) -> list[ToolCall]:
        """The calls of one message with ids made unique (the store refuses one id twice in a message)."""
        seen: set[str] = set()
        unique = []
        for call in calls:
            new_id, n = call.id, 1
            while new_id in seen:
                n += 1
                new_id = f"{call.id}#{n}"
            if new_id != call.id:
                detail = f"call id {call.id!r} is used twice in one message; this one is stored as {new_id!r}"
                self.repair("call_id_renamed", detail, index, message_id=message_id, call_id=call.id)
                call = msgspec.structs.replace(call, id=new_id)
            seen.add(new_id)
            unique.append(call)
        return unique

    def add(self, message: Message, index: int, source_ids: Sequence[str] = ()) -> None:
        """Append a message other than a tool result; an assistant's calls become pending.

        `source_ids` are the file's ids of the message's calls when `unique_calls` renamed any.
        """
        self._interrupt()
        self.messages.append(message)
        calls = message.tool_calls
        if calls:
            sources = list(source_ids) or [call.id for call in calls]
            self._step = (message, index)
            self._pending = [
                _Pending(s, c.id, c.name, k) for k, (s, c) in enumerate(zip(sources, calls, strict=True))
            ]

    def add_result(
        self,
        source_id: str,
        content: str | Sequence[ResultContent],
        *,
        id: str,
        created_at: datetime,
        index: int,
        name: str | None = None,
        is_error: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Append the result of the closest preceding unanswered call with this id, or keep it as text."""
        match = next((p for p in self._pending if p.source_id == source_id), None)
        if match is None:
            extra = {"orphan_result": source_id} | ({"is_error": True} if is_error else {})
            note = self._orphan(source_id, name, index, id)
            body = [TextPart(text=content)] if isinstance(content, str) else list(content)
            self.messages.append(
                Message.user([note, *body], id=id, created_at=created_at, metadata=(metadata or {}) | extra)
            )
            return
        self._pending.remove(match)
        result = Message.tool_result(
            match.call_id, content, name=name or match.name, is_error=is_error, id=id, created_at=created_at
        )
        self.messages.append(msgspec.structs.replace(result, metadata=metadata) if metadata else result)

    def finish(self) -> None:
        """End the session: calls still pending stay pending (allowed at the end), with a warning."""
        if self._step and self._pending:
            names = ", ".join(f"{p.call_id!r} ({p.name})" for p in self._pending)
            self.warnings.append(
                f"message {self._step[0].id!r}: unanswered calls left pending at the end: {names}"
            )

    def _orphan(self, source_id: str, name: str | None, index: int, message_id: str) -> TextPart:
        """Close the step before a result that answers no pending call; the note that will head it."""
        self._interrupt()
        detail = f"the result of call {source_id!r} answers no pending call; kept as user text"
        self.repair("orphan_result_as_text", detail, index, message_id=message_id, call_id=source_id)
        label = f" ({name})" if name else ""
        return TextPart(text=f"[result of tool call {source_id!r}{label}, which answers no pending call]\n")

    def _interrupt(self) -> None:
        if not (self._step and self._pending):
            return
        step, index = self._step
        for pending in self._pending:
            synthetic = Message.tool_result(
                pending.call_id,
                INTERRUPTED,
                name=pending.name,
                is_error=True,
                id=f"{step.id}/interrupted-{pending.position}",
                created_at=step.created_at,
            )
            self.messages.append(synthetic)
            detail = (
                f"call {pending.call_id!r} ({pending.name}) of message {step.id!r} had no result before "
                "the next message; an interrupted error result was added"
            )
            self.repair("synthetic_result", detail, index, message_id=synthetic.id, call_id=pending.call_id)
        self._pending = []


def assistant_text(
    text: str, *, id: str, created_at: datetime, metadata: dict[str, Any] | None = None
) -> Message:
    """An assistant message of text only, kept even when empty (a message needs one part)."""
    message = Message(
        id=id,
        role="assistant",
        parts=(TextPart(text=text),),
        created_at=created_at,
        metadata=metadata or None,
    )
    check_message(message)
    return message


def tool_call(item: object, where: str) -> ToolCall:
    """A call from an OpenAI-style `{"id", "function": {"name", "arguments"}}` object."""
    if not isinstance(item, dict):
        raise BadRecord(f"{where} must be an object")
    function = get_dict(item, "function")
    call_id, name = item.get("id"), function.get("name") if function else None
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise BadRecord(f"{where} needs a non-empty 'id' and 'function.name'")
    arguments = function.get("arguments") if function else None
    if isinstance(arguments, str):
        return ToolCall.from_arguments(id=call_id, name=name, arguments=arguments)
    if arguments is None or isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, input=arguments or {})
    raise BadRecord(f"{where}: 'arguments' must be a string or an object")


_DATA_URL: Final = re.compile(r"data:([\w.+/-]+);base64,(.*)", re.DOTALL)


def image_part(url: str) -> ImagePart | None:
    """The image of a base64 `data:` URL; None for any other URL."""
    match = _DATA_URL.fullmatch(url)
    return ImagePart(media_type=match.group(1), data=match.group(2)) if match else None


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a SWE-agent trajectory file."""
    path = Path(path)
    data = path.read_bytes()
    document = decode_document(path, data)
    if not isinstance(document, dict) or not isinstance(document.get("history"), list):
        raise FormatError(path, 1, "a SWE-agent trajectory must be a JSON object with a 'history' list")
    lines = RecordLines(data, "history")
    session_id = path.stem
    created_at = file_time(path)
    history = History(lines)
    demos = 0
    for index, entry in enumerate(document["history"]):
        try:
            demos += _entry(history, entry, f"{session_id}/{index}", created_at, index)
        except (BadRecord, InvalidMessage) as exc:
            raise FormatError(path, lines(index), f"history[{index}]: {exc}") from exc
    history.finish()
    metadata: dict[str, Any] = {}
    info = document.get("info")
    if isinstance(info, dict) and isinstance(info.get("exit_status"), str):
        metadata["exit_status"] = info["exit_status"]
    if demos:
        metadata["demo_messages"] = demos
    session = ParsedSession(
        session_id=session_id,
        messages=history.messages,
        title=session_id,
        metadata=metadata,
        repairs=history.repairs,
        warnings=history.warnings,
    )
    return [session]


def _entry(history: History, entry: object, message_id: str, created_at: datetime, index: int) -> bool:
    """Add one history entry; returns whether it is a demonstration entry."""
    if not isinstance(entry, dict):
        raise BadRecord("a history entry must be a JSON object")
    role = entry.get("role")
    if role not in ROLES:
        raise BadRecord(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    parts = _content(entry.get("content"), allow_none=role == "assistant")
    metadata: dict[str, Any] = {}
    if isinstance(entry.get("message_type"), str):
        metadata["message_type"] = entry["message_type"]
    demo = entry.get("is_demo") is True
    if demo:
        metadata["demo"] = True
    if role == "tool":
        _result(history, entry, parts, message_id, created_at, index, metadata)
    elif role == "assistant":
        _assistant(history, entry, parts, message_id, created_at, index, metadata)
    elif role == "system":
        message = Message.system(_text_only(parts, role), id=message_id, created_at=created_at)
        history.add(msgspec.structs.replace(message, metadata=metadata or None), index)
    else:
        history.add(Message.user(parts, id=message_id, created_at=created_at, metadata=metadata), index)
    return demo


def _result(
    history: History,
    entry: dict[str, Any],
    parts: list[ResultContent],
    message_id: str,
    created_at: datetime,
    index: int,
    metadata: dict[str, Any],
) -> None:
    ids = entry.get("tool_call_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise BadRecord("a tool entry needs a non-empty 'tool_call_ids' list of non-empty strings")
    if len(ids) > 1:
        # SWE-agent itself sends only the first id to the model ("one tool call per observation").
        history.warnings.append(f"message {message_id!r}: answers only {ids[0]!r}; also listed: {ids[1:]}")
    content = entry["content"] if isinstance(entry.get("content"), str) else parts
    history.add_result(
        ids[0], content, id=message_id, created_at=created_at, index=index, metadata=metadata or None
    )


def _assistant(
    history: History,
    entry: dict[str, Any],
    parts: list[ResultContent],
    message_id: str,
    created_at: datetime,
    index: int,
    metadata: dict[str, Any],
) -> None:
    text = _text_only(parts, "assistant")
    raw_calls = entry.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise BadRecord("'tool_calls' must be a list")
    calls = [tool_call(item, f"tool_calls[{k}]") for k, item in enumerate(raw_calls)]
    thought, action = entry.get("thought"), entry.get("action")
    if isinstance(thought, str) and thought and thought not in text:
        metadata["thought"] = thought
    # With tool calls, `action` is SWE-agent's rendering of them; without, it is the parsed command.
    if not calls and isinstance(action, str) and action.strip() and action.strip() not in text:
        metadata["action"] = action
    reasoning = _reasoning(entry.get("thinking_blocks"))
    if not (text or calls or reasoning):
        history.add(assistant_text("", id=message_id, created_at=created_at, metadata=metadata), index)
        return
    unique = history.unique_calls(calls, message_id, index)
    message = Message.assistant(
        text, unique, reasoning=reasoning, id=message_id, created_at=created_at, metadata=metadata
    )
    history.add(message, index, [call.id for call in calls])


def _content(value: object, *, allow_none: bool) -> list[ResultContent]:
    """The parts of an entry's `content`: a string, or a list of text and image blocks."""
    if isinstance(value, str):
        return [TextPart(text=value)]
    if value is None and allow_none:
        return []
    if not isinstance(value, list):
        raise BadRecord(f"'content' must be a string or a list of blocks, not {type(value).__name__}")
    parts: list[ResultContent] = []
    for k, block in enumerate(value):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(TextPart(text=get_str(block, "text")))
        elif kind == "image_url":
            url = block.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            image = image_part(url) if isinstance(url, str) else None
            if image is None:
                raise BadRecord(f"content[{k}]: only base64 'data:' image URLs can be stored")
            parts.append(image)
        else:
            raise BadRecord(f"content[{k}]: unknown block type {kind!r}")
    return parts


def _text_only(parts: list[ResultContent], role: str) -> str:
    if not all(isinstance(part, TextPart) for part in parts):
        raise BadRecord(f"a {role} entry can hold text only")
    return "".join(part.text for part in parts if isinstance(part, TextPart))


def _reasoning(blocks: object) -> list[ReasoningPart | RedactedReasoningPart]:
    """Thinking blocks (Anthropic models), signatures kept."""
    if blocks is None:
        return []
    if not isinstance(blocks, list):
        raise BadRecord("'thinking_blocks' must be a list")
    parts: list[ReasoningPart | RedactedReasoningPart] = []
    for k, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "thinking":
            signature = block.get("signature")
            if signature is not None and not isinstance(signature, str):
                raise BadRecord(f"thinking_blocks[{k}]: 'signature' must be a string")
            parts.append(ReasoningPart(text=get_str(block, "thinking"), signature=signature))
        elif kind == "redacted_thinking":
            parts.append(RedactedReasoningPart(data=get_str(block, "data")))
        else:
            raise BadRecord(f"thinking_blocks[{k}]: unknown block type {kind!r}")
    return parts
