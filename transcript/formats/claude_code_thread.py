"""One Claude Code conversation (the main thread, or a sub-agent's) built record by record.

Assistant records sharing one API `message.id` are one assistant message (blocks in order, id = the
first record's `uuid`, `metadata["records"]` counts them); each `tool_result` block of a user record
becomes a tool message, emitted in the order the calls were made, and the record's other blocks follow
as a user message. Claude Code's own compaction — a `compact_boundary` record, then the user record
marked `isCompactSummary` — makes that record a `summary` message and names it in `compactions`, so the
store excludes what it replaced; a synthetic API-error record (`isApiErrorMessage`) is kept as an
assistant message the model never saw (`hidden`). `Branches` tells a real branch (an edit or a retry:
a second reply to one record) from the forks every file has (results hang off their call's record,
bookkeeping records sit in the chain).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from transcript.formats.base import FormatError, ImportedCompaction, Repair, RepairKind, Where
from transcript.formats.claude_code_records import (
    Assistant,
    Document,
    Image,
    Line,
    RedactedThinking,
    Text,
    Thinking,
    ToolResultBlock,
    ToolUse,
    Turn,
    User,
)
from transcript.formats.pairing import interrupted
from transcript.model import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
)


@dataclass
class _Step:
    """An assistant message being merged, and the results that answer its calls."""

    id: str
    api_id: str
    created_at: datetime
    line: int
    parts: list[Part] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    results: dict[str, Message] = field(default_factory=dict)
    deferred: list[Message] = field(default_factory=list)
    model: str | None = None
    usage: dict[str, Any] | None = None
    records: int = 0


class Thread:
    """Builds one session's messages record by record, pairing results with their step's calls."""

    def __init__(self, path: Path, root_line: int) -> None:
        self.path = path
        self.root_line = root_line
        self.messages: list[Message] = []
        self.repairs: list[Repair] = []
        self.warnings: list[str] = []
        self.compactions: dict[str, ImportedCompaction] = {}
        self.hidden: dict[str, str] = {}
        self.opening: str | None = None
        self.step: _Step | None = None
        self.first: Turn | None = None
        self._boundary: ImportedCompaction | None = None

    def add(self, record: User | Assistant, line: int, at: datetime) -> None:
        """Add a user or assistant record."""
        self.first = self.first or record
        if isinstance(record, User):
            self.add_user(record, line, at)
        elif record.is_api_error_message:
            self.add_api_error(record, line, at)
        else:
            self.add_assistant(record, line, at)

    def add_assistant(self, record: Assistant, line: int, at: datetime) -> None:
        message = record.message
        step = self.step
        if step is None or step.api_id != message.id:
            self.flush()
            step = _Step(id=record.uuid, api_id=message.id, created_at=at, line=line, model=message.model)
            self.step = step
        step.records += 1
        step.usage = message.usage if message.usage is not None else step.usage
        blocks = [Text(text=message.content)] if isinstance(message.content, str) else message.content
        for block in blocks:
            if isinstance(block, ToolUse):
                if block.id in step.calls:
                    raise FormatError(self.path, line, f"tool_use id {block.id!r} twice in one message")
                step.calls[block.id] = block.name
            step.parts.append(_assistant_part(block))

    def add_api_error(self, record: Assistant, line: int, at: datetime) -> None:
        """A synthetic record Claude Code wrote when the API call failed: kept, never shown to a model."""
        self.flush()
        content = record.message.content
        blocks = [Text(text=content)] if isinstance(content, str) else content
        parts = [_assistant_part(b) for b in blocks if not isinstance(b, ToolUse)] or [TextPart(text="")]
        metadata = some(api_error=True, api_message_id=record.message.id, model=record.message.model)
        message = Message(
            id=record.uuid, role="assistant", parts=tuple(parts), created_at=at, metadata=metadata
        )
        self.messages.append(self._checked(message, line))
        self.hidden[message.id] = "api_error"
        detail = f"synthetic API error record ({message.text[:80]!r}) kept in the history, out of every view"
        self.repairs.append(Repair(kind="hidden_from_view", detail=detail, message_id=message.id, line=line))

    def compact_boundary(self, trigger: str | None, pre_tokens: int | None, line: int) -> None:
        """Claude Code compacted the conversation here: its summary comes next."""
        self.flush()
        self._boundary = ImportedCompaction(
            source="claude-code compact_boundary", trigger=trigger, pre_tokens=pre_tokens, line=line
        )

    def add_user(self, record: User, line: int, at: datetime) -> None:
        content = record.message.content
        blocks = [Text(text=content)] if isinstance(content, str) else content
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        others = [b for b in blocks if not isinstance(b, ToolResultBlock)]
        for index, result in enumerate(results):
            self._add_result(result, _derived_id(record.uuid, index), line, at)
        if others or not results:
            step = self.step
            waiting = step is not None and len(step.results) < len(step.calls)
            if not (record.is_meta and not results and waiting):
                self.flush()
            parts = [_user_part(b, self.path, line) for b in others] or [TextPart(text="")]
            kind: Literal["message", "summary", "meta"] = "meta" if record.is_meta else "message"
            if record.is_compact_summary:
                kind = "summary"
                boundary = self._boundary or ImportedCompaction(source="claude-code compact summary")
                self.compactions[_derived_id(record.uuid, len(results))] = boundary
            elif not self.messages and self.opening is None:
                self.opening = "".join(p.text for p in parts if isinstance(p, TextPart))
            self._boundary = None
            message_id = _derived_id(record.uuid, len(results))
            user = Message(id=message_id, role="user", parts=tuple(parts), created_at=at, kind=kind)
            if self.step is not None:  # a harness notice while calls wait: after their results
                self.step.deferred.append(self._checked(user, line))
                detail = (
                    f"meta message {message_id!r} came between the calls of message {self.step.id!r} and "
                    "their results; stored after the results"
                )
                self.repairs.append(
                    Repair(kind="notice_after_results", detail=detail, message_id=message_id, line=line)
                )
                return
            self.messages.append(self._checked(user, line))

    def _add_result(self, block: ToolResultBlock, message_id: str, line: int, at: datetime) -> None:
        content = _result_content(block.content, self.path, line)
        step = self.step
        call_id = block.tool_use_id
        if step is not None and call_id in step.calls and call_id not in step.results:
            step.results[call_id] = Message.tool_result(
                call_id,
                content,
                name=step.calls[call_id],
                is_error=bool(block.is_error),
                id=message_id,
                created_at=at,
            )
            return
        answered = step is not None and call_id in step.results
        why = "answers a call that was already answered" if answered else "answers no pending call"
        prefix = f"[tool result for call {call_id!r}{' (error)' if block.is_error else ''}: it {why}; "
        prefix += "kept as text by the importer]\n"
        text = content if isinstance(content, str) else ""
        parts: list[TextPart | ImagePart | DocumentPart] = [TextPart(text=prefix + text)]
        if not isinstance(content, str):
            parts.extend(content)
        orphan = Message(id=message_id, role="user", parts=tuple(parts), created_at=at, kind="meta")
        self._repair("orphan_result_as_text", f"tool_result {why}; kept as text", message_id, call_id, line)
        (step.deferred if step is not None else self.messages).append(self._checked(orphan, line))

    def flush(self, *, final: bool = False) -> None:
        """Close the open step: its message, its results in call order, then anything deferred.

        A call without a result gets a synthetic one in its place; `final`: the thread ends here.
        """
        step, self.step = self.step, None
        if step is None:
            return
        records = step.records if step.records > 1 else None
        metadata = some(api_message_id=step.api_id, model=step.model, usage=step.usage, records=records)
        assistant = Message(
            id=step.id,
            role="assistant",
            parts=tuple(step.parts) or (TextPart(text=""),),
            created_at=step.created_at,
            metadata=metadata or None,
        )
        self.messages.append(self._checked(assistant, step.line))
        for index, (call_id, name) in enumerate(step.calls.items()):
            result = step.results.get(call_id)
            if result is None:
                result, repair = interrupted(
                    call_id,
                    name,
                    step_id=step.id,
                    created_at=step.created_at,
                    id=f"{step.id}/interrupted/{index}",
                    line=step.line,
                    final=final,
                )
                self.repairs.append(repair)
            self.messages.append(result)
        self.messages.extend(step.deferred)

    def close(self) -> None:
        self.flush(final=True)
        if self._boundary is not None:
            self.warnings.append(
                f"a compact_boundary at line {self._boundary.line} has no summary after it: "
                "nothing is excluded for it"
            )

    def _checked(self, message: Message, line: int) -> Message:
        return Where(str(self.path), line).check(message)

    def _repair(self, kind: RepairKind, detail: str, message_id: str, call_id: str, line: int) -> None:
        self.repairs.append(
            Repair(kind=kind, detail=detail, message_id=message_id, call_id=call_id, line=line)
        )


class Branches:
    """The lines of records that start a real branch of the conversation.

    Claude Code threads records by `parentUuid`, and every file forks that tree: a tool result hangs
    off the record of its call, which may already have the next record of a split message as child;
    progress and system records sit in the chain. A real branch is a second reply to one conversation
    record — an edited prompt or a retried answer — found by walking up past bookkeeping records to
    the nearest user or assistant record. A root (no parent) or a parent not in the file (a file that
    starts mid-session, or a compact boundary) starts nothing.
    """

    def __init__(self) -> None:
        self.lines: list[int] = []
        self._nearest: dict[str, str | None] = {}  # record uuid -> itself or its nearest turn ancestor
        self._first_reply: dict[str, tuple[str, str | None]] = {}  # turn uuid -> (child uuid, api id)

    def note(self, record: Line, line: int) -> None:
        uuid = record.uuid
        if uuid is None:
            return
        parent = self._nearest.get(record.parent_uuid) if record.parent_uuid is not None else None
        if not isinstance(record, Turn):
            self._nearest[uuid] = parent
            return
        self._nearest[uuid] = uuid
        if parent is None or _carries_results(record):
            return
        api_id = record.message.id if isinstance(record, Assistant) else None
        first = self._first_reply.setdefault(parent, (uuid, api_id))
        if first[0] != uuid and (api_id is None or first[1] != api_id):
            self.lines.append(line)

    def warning(self) -> str | None:
        if not self.lines:
            return None
        return (
            f"{len(self.lines)} record(s) reply to a record that already has a reply (parentUuid), first "
            f"at line {self.lines[0]}: the file holds branches (edits or retries); imported in file order"
        )


def _carries_results(record: Turn) -> bool:
    content = record.message.content if isinstance(record, User) else None
    return isinstance(content, list) and any(isinstance(b, ToolResultBlock) for b in content)


def _assistant_part(block: Text | Thinking | RedactedThinking | ToolUse) -> Part:
    if isinstance(block, Text):
        return TextPart(text=block.text)
    if isinstance(block, Thinking):
        return ReasoningPart(text=block.thinking, signature=block.signature)
    if isinstance(block, RedactedThinking):
        return RedactedReasoningPart(data=block.data)
    return ToolCall(id=block.id, name=block.name, input=block.input)


def _user_part(block: Text | Image | Document, path: Path, line: int) -> TextPart | ImagePart | DocumentPart:
    if isinstance(block, Text):
        return TextPart(text=block.text)
    source = block.source
    if source.type != "base64" or not source.media_type:
        raise FormatError(path, line, f"media source {source.type!r} is not supported (base64 only)")
    if isinstance(block, Image):
        return ImagePart(media_type=source.media_type, data=source.data)
    return DocumentPart(media_type=source.media_type, data=source.data, title=block.title)


def _result_content(
    content: str | list[Text | Image | Document] | None, path: Path, line: int
) -> str | list[TextPart | ImagePart | DocumentPart]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [_user_part(item, path, line) for item in content]


def _derived_id(uuid: str, index: int) -> str:
    """The id of the `index`-th message one record becomes: its uuid, then `uuid/1`, `uuid/2`, ..."""
    return f"{uuid}/{index}" if index else uuid


def some(**values: Any) -> dict[str, Any]:
    """The values that are not None, by name (metadata that leaves out what a record does not say)."""
    return {key: value for key, value in values.items() if value is not None}
