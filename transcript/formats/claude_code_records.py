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
from transcript.formats.pairing import LONE_SURROGATE, TOO_DEEP
from transcript.model.nesting import may_nest_deeper, nests_deeper

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
    agent_id: str | None = None


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
    is_compact_summary: bool = False


class Assistant(Turn, tag="assistant", kw_only=True, frozen=True):
    message: AssistantMessage
    is_api_error_message: bool = False


class Summary(Record, tag="summary", kw_only=True, frozen=True):
    summary: str
    leaf_uuid: str | None = None


class CompactMetadata(msgspec.Struct, rename="camel", frozen=True):
    trigger: str | None = None
    pre_tokens: int | None = None


# Records that carry no conversation (newer versions): skipped, and counted in the warnings — but for a
# `compact_boundary`, which marks Claude Code's own compaction.
class System(Record, tag="system", kw_only=True, frozen=True):
    subtype: str | None = None
    compact_metadata: CompactMetadata | None = None


class FileHistory(Record, tag="file-history-snapshot", frozen=True):
    pass


class Queue(Record, tag="queue-operation", frozen=True):
    pass


class Progress(Record, tag="progress", kw_only=True, frozen=True):
    """Progress of a running tool; `agent_progress` data carries one message of a sub-agent."""

    data: dict[str, Any] | None = None
    parent_tool_use_id: str | None = msgspec.field(default=None, name="parentToolUseID")


# Session settings, titles, costs and other bookkeeping of newer versions: skipped and counted.
class Attachment(Record, tag="attachment", frozen=True):
    pass


class Mode(Record, tag="mode", frozen=True):
    pass


class PermissionMode(Record, tag="permission-mode", frozen=True):
    pass


class AtisLatch(Record, tag="atis-latch", frozen=True):
    pass


class LastPrompt(Record, tag="last-prompt", frozen=True):
    pass


class AiTitle(Record, tag="ai-title", frozen=True):
    pass


class CustomTitle(Record, tag="custom-title", frozen=True):
    pass


class CostState(Record, tag="cost-state", frozen=True):
    pass


Line = (
    User
    | Assistant
    | Summary
    | System
    | FileHistory
    | Queue
    | Progress
    | Attachment
    | Mode
    | PermissionMode
    | AtisLatch
    | LastPrompt
    | AiTitle
    | CustomTitle
    | CostState
)
_DECODER: Final = msgspec.json.Decoder(Line)


class AgentProgress(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """The `data` of an `agent_progress` record: one record of a sub-agent's conversation (`message`,
    shaped like a user or assistant line of the file), the sub-agent's id and its prompt."""

    type: Literal["agent_progress"]
    agent_id: str | None = None
    prompt: str | None = None
    message: dict[str, Any] | None = None


def agent_progress(record: Progress, path: Path, line: int) -> tuple[AgentProgress, User | Assistant | None]:
    """The data of an `agent_progress` record and the sub-agent's record it carries (None when none);
    a `FormatError` naming the line when either is malformed.

    The carried record may leave out what the outer record says (`uuid`, `timestamp`); it takes them
    from the outer record then.
    """
    try:
        progress = msgspec.convert(record.data, AgentProgress)
        inner = progress.message
        if inner is None:
            return progress, None
        fields = {"uuid": f"{record.uuid}/message", "sessionId": "agent", **inner, "isSidechain": True}
        turn = msgspec.convert(fields, User | Assistant)
    except msgspec.ValidationError as exc:
        raise FormatError(path, line, f"not a Claude Code agent_progress record: data: {exc}") from exc
    return progress, turn


def decode(raw: bytes, path: Path, line: int) -> Line:
    """One line of the file; a `FormatError` naming the line when it is not a record we know."""
    try:
        record = _DECODER.decode(raw)
    except RecursionError:
        raise FormatError(path, line, TOO_DEEP) from None
    except msgspec.ValidationError as exc:
        raise FormatError(path, line, f"not a Claude Code record: {exc}") from exc
    except msgspec.DecodeError as exc:
        surrogate = LONE_SURROGATE.search(raw.decode("utf-8", "replace"))
        hint = " (it holds a lone UTF-16 surrogate escape)" if surrogate else ""
        raise FormatError(path, line, f"not valid JSON{hint}: {exc}") from exc
    if may_nest_deeper(raw) and nests_deeper(msgspec.json.decode(raw)):
        raise FormatError(path, line, TOO_DEEP)
    return record
