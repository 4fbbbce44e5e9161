"""The records of a Claude Code session file, as msgspec validates them: one tagged union per line.

A line is a `Line` (tagged on `type`) and a content block a `Block` (tagged on `type`); unknown record
and block types are refused, and so is anything of the wrong type, so `claude_code` maps only
well-formed records. The tags are Claude Code's own strings; the class names are ours.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec

from transcript.formats.base import FormatError
from transcript.formats.pairing import LONE_SURROGATE

_Id = Annotated[str, msgspec.Meta(min_length=1)]
_Time = Annotated[datetime, msgspec.Meta(tz=True)]


class Block(msgspec.Struct, tag_field="type", frozen=True):
    """A content block (a tagged union on `type`); unknown block types are refused."""


class Text(Block, tag="text", frozen=True):
    text: str


class Source(msgspec.Struct, frozen=True):
    type: str
    media_type: str = ""
    data: str = ""


class Image(Block, tag="image", frozen=True):
    source: Source


class Document(Block, tag="document", frozen=True):
    source: Source
    title: str | None = None


class Thinking(Block, tag="thinking", frozen=True):
    thinking: str
    signature: str | None = None


class RedactedThinking(Block, tag="redacted_thinking", frozen=True):
    data: str


class ToolUse(Block, tag="tool_use", frozen=True):
    id: _Id
    name: _Id
    input: Any = msgspec.field(default_factory=dict)


class ToolResultBlock(Block, tag="tool_result", frozen=True):
    tool_use_id: _Id
    content: str | list[Text | Image | Document] | None = None
    is_error: bool | None = None


class UserMessage(msgspec.Struct, frozen=True):
    role: Literal["user"]
    content: str | list[Text | Image | Document | ToolResultBlock]


class AssistantMessage(msgspec.Struct, frozen=True):
    role: Literal["assistant"]
    content: str | list[Text | Thinking | RedactedThinking | ToolUse]
    id: _Id
    model: str | None = None
    usage: dict[str, Any] | None = None


class Record(msgspec.Struct, tag_field="type", rename="camel", kw_only=True, frozen=True):
    """A line of the file (a tagged union on `type`); unknown record types are refused."""

    uuid: str | None = None
    parent_uuid: str | None = None
    is_sidechain: bool = False


class Turn(Record, kw_only=True, frozen=True):
    uuid: _Id
    session_id: _Id
    timestamp: _Time | None = None
    cwd: str | None = None
    version: str | None = None
    git_branch: str | None = None


class User(Turn, tag="user", kw_only=True, frozen=True):
    message: UserMessage
    is_meta: bool = False


class Assistant(Turn, tag="assistant", kw_only=True, frozen=True):
    message: AssistantMessage


class Summary(Record, tag="summary", kw_only=True, frozen=True):
    summary: str
    leaf_uuid: str | None = None


# Records that carry no conversation (newer versions): skipped, and counted in the warnings.
class System(Record, tag="system", frozen=True):
    pass


class FileHistory(Record, tag="file-history-snapshot", frozen=True):
    pass


class Queue(Record, tag="queue-operation", frozen=True):
    pass


class Progress(Record, tag="progress", frozen=True):
    pass


Line = User | Assistant | Summary | System | FileHistory | Queue | Progress
_DECODER: Final = msgspec.json.Decoder(Line)


def decode(raw: bytes, path: Path, line: int) -> Line:
    """One line of the file; a `FormatError` naming the line when it is not a record we know."""
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise FormatError(path, line, f"not a Claude Code record: {exc}") from exc
    except msgspec.DecodeError as exc:
        surrogate = LONE_SURROGATE.search(raw.decode("utf-8", "replace"))
        hint = " (it holds a lone UTF-16 surrogate escape)" if surrogate else ""
        raise FormatError(path, line, f"not valid JSON{hint}: {exc}") from exc
