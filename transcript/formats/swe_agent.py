"""SWE-agent trajectories (`.traj`).

One session per file, read from `history[]` (the copy in `trajectory[].messages` is ignored); the
session id is the file's stem, message ids are `{session}/{index}`, and every message has the file's
modification time (the format has no timestamps). Entries keep their roles: assistant `tool_calls`
become calls and each role `tool` entry the result of the closest preceding unanswered call of its
`tool_call_ids[0]` (call ids repeat across steps); the older style's observations stay user
messages, marked `observation: true` when they follow an assistant entry (the environment's answer
to the action in its text; `message_type` alone cannot say it: SWE-agent labels the task statement
`observation` too); `is_demo` entries
are kept, marked `demo: true`, and `thought`/`action` go to metadata only when the content does not
already hold them. Repairs (`pairing.History`): a call id used twice
in one message is renamed (`call_id_renamed`), a call still unanswered at the next message or at the
end gets an interrupted error result (`synthetic_result`), a result that answers no pending call is
kept as user text (`orphan_result_as_text`).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from transcript.formats.base import BadRecord, FormatError, ParsedSession
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    THINKING_BLOCKS,
    History,
    assistant_text,
    decode_document,
    get_str,
    image_part,
    read_bytes,
    thinking_part,
    tool_calls,
    undated_time,
)
from transcript.formats.record_lines import RecordLines
from transcript.model import (
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    ResultContent,
    TextPart,
)
from transcript.model.errors import InvalidMessage

ROLES: Final = ("system", "user", "assistant", "tool")


class _Entry(NamedTuple):
    """One history entry on its way in: the record, its content parts, and its message's id and place."""

    record: dict[str, Any]
    parts: list[ResultContent]
    id: str
    created_at: datetime
    position: int  # in `history`
    metadata: dict[str, Any]


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a SWE-agent trajectory file."""
    path = as_path(path)
    data = read_bytes(path)
    document = decode_document(path, data)
    if not isinstance(document, dict) or not isinstance(document.get("history"), list):
        raise FormatError(path, 1, "a SWE-agent trajectory must be a JSON object with a 'history' list")
    lines = RecordLines(data, "history")
    session_id = path.stem
    created_at = undated_time(path)
    history = History(lines)
    demos = 0
    previous: object = None
    for index, entry in enumerate(document["history"]):
        after_action = isinstance(previous, dict) and previous.get("role") == "assistant"
        try:
            demos += _entry(history, entry, f"{session_id}/{index}", created_at, index, after_action)
        except (BadRecord, InvalidMessage) as exc:
            raise FormatError(path, lines(index), f"history[{index}]: {exc}") from exc
        previous = entry
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


def _entry(
    history: History, entry: object, message_id: str, created_at: datetime, index: int, after_action: bool
) -> bool:
    """Add one history entry; returns whether it is a demonstration entry. `after_action`: the entry
    before it is an assistant's."""
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
        _result(history, _Entry(entry, parts, message_id, created_at, index, metadata))
    elif role == "assistant":
        _assistant(history, _Entry(entry, parts, message_id, created_at, index, metadata))
    elif role == "system":
        message = Message.system(_text_only(parts, role), id=message_id, created_at=created_at)
        history.add(msgspec.structs.replace(message, metadata=metadata or None), index)
    else:
        if after_action:
            metadata["observation"] = True
        history.add(Message.user(parts, id=message_id, created_at=created_at, metadata=metadata), index)
    return demo


def _result(history: History, entry: _Entry) -> None:
    ids = entry.record.get("tool_call_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise BadRecord("a tool entry needs a non-empty 'tool_call_ids' list of non-empty strings")
    if len(ids) > 1:
        # SWE-agent itself sends only the first id to the model ("one tool call per observation").
        history.warnings.append(f"message {entry.id!r}: answers only {ids[0]!r}; also listed: {ids[1:]}")
    content = entry.record["content"] if isinstance(entry.record.get("content"), str) else entry.parts
    history.add_result(
        ids[0],
        content,
        id=entry.id,
        created_at=entry.created_at,
        index=entry.position,
        metadata=entry.metadata or None,
    )


def _assistant(history: History, entry: _Entry) -> None:
    record, metadata, message_id, index = entry.record, entry.metadata, entry.id, entry.position
    text = _text_only(entry.parts, "assistant")
    calls = tool_calls(record.get("tool_calls"), lenient=True)
    thought, action = record.get("thought"), record.get("action")
    if isinstance(thought, str) and thought and thought not in text:
        metadata["thought"] = thought
    # With tool calls, `action` is SWE-agent's rendering of them; without, it is the parsed command.
    if not calls and isinstance(action, str) and action.strip() and action.strip() not in text:
        metadata["action"] = action
    reasoning = _reasoning(record.get("thinking_blocks"))
    if not (text or calls or reasoning):
        history.add(assistant_text("", id=message_id, created_at=entry.created_at, metadata=metadata), index)
        return
    unique = history.unique_calls(calls, message_id, index)
    message = Message.assistant(
        text, unique, reasoning=reasoning, id=message_id, created_at=entry.created_at, metadata=metadata
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
        if kind not in THINKING_BLOCKS:
            raise BadRecord(f"thinking_blocks[{k}]: unknown block type {kind!r}")
        parts.append(thinking_part(block))
    return parts
