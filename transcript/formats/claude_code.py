"""Claude Code session JSONL: one record per line, threaded by `uuid`/`parentUuid`, read in file order.

Assistant records sharing one API `message.id` are one assistant message (blocks in order, id = the
first record's `uuid`, `metadata["records"]` counts them); each `tool_result` block of a user record
becomes a tool message, emitted in the order the calls were made, and the record's other blocks follow
as a user message. `isMeta` user records become `kind="meta"` messages, the `summary` record becomes
the title and metadata, and each `isSidechain` conversation becomes a child session linked to the
`Task`/`Agent` call whose `input.prompt` equals its first user text (a warning when none does).
Repairs: an unanswered call, also one at the end of a thread, gets the synthetic `is_error` result of
`_common.interrupted` right after its step (`synthetic_result`); a result answering no pending call is
kept as a `meta` user text saying so, after the step (`orphan_result_as_text`). Bookkeeping records
(`system`, `progress`, ...) are skipped and counted in the warnings; `toolUseResult` (a richer copy of
a result) is not kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from transcript.formats.base import FormatError, ParsedSession, Repair, RepairKind, Where
from transcript.formats.claude_code_records import (
    Assistant,
    Document,
    Image,
    Line,
    RedactedThinking,
    Summary,
    Text,
    Thinking,
    ToolResultBlock,
    ToolUse,
    Turn,
    User,
    decode,
)
from transcript.formats.pairing import file_time, interrupted
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

SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent"})


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


@dataclass
class _Call:
    """A sub-agent call that a sidechain may answer."""

    thread: str | None
    id: str
    prompt: str
    description: str | None


class _Thread:
    """Builds one session's messages record by record, pairing results with their step's calls."""

    def __init__(self, path: Path, root_line: int) -> None:
        self.path = path
        self.root_line = root_line
        self.messages: list[Message] = []
        self.repairs: list[Repair] = []
        self.warnings: list[str] = []
        self.opening: str | None = None
        self.step: _Step | None = None
        self.last_uuid: str | None = None
        self.unthreaded: list[int] = []
        self.first: Turn | None = None

    def follow(self, uuid: str | None, parent: str | None, line: int) -> None:
        """Note a record's place in the thread (a record not continuing the previous one is a branch)."""
        if uuid is None:
            return
        if self.last_uuid is not None and parent != self.last_uuid:
            self.unthreaded.append(line)
        self.last_uuid = uuid

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

    def add_user(self, record: User, line: int, at: datetime) -> None:
        content = record.message.content
        blocks = [Text(text=content)] if isinstance(content, str) else content
        results = [b for b in blocks if isinstance(b, ToolResultBlock)]
        others = [b for b in blocks if not isinstance(b, ToolResultBlock)]
        for index, result in enumerate(results):
            self._add_result(result, _derived_id(record.uuid, index), line, at)
        if others or not results:
            self.flush()
            parts = [_user_part(b, self.path, line) for b in others] or [TextPart(text="")]
            if not self.messages and self.opening is None:
                self.opening = "".join(p.text for p in parts if isinstance(p, TextPart))
            kind: Literal["message", "meta"] = "meta" if record.is_meta else "message"
            message_id = _derived_id(record.uuid, len(results))
            user = Message(id=message_id, role="user", parts=tuple(parts), created_at=at, kind=kind)
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
        metadata = _some(api_message_id=step.api_id, model=step.model, usage=step.usage, records=records)
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

    def _checked(self, message: Message, line: int) -> Message:
        return Where(str(self.path), line).check(message)

    def _repair(self, kind: RepairKind, detail: str, message_id: str, call_id: str, line: int) -> None:
        self.repairs.append(
            Repair(kind=kind, detail=detail, message_id=message_id, call_id=call_id, line=line)
        )

    def close(self) -> None:
        self.flush(final=True)
        if self.unthreaded:
            self.warnings.append(
                f"{len(self.unthreaded)} record(s) do not continue the record before them (parentUuid), "
                f"first at line {self.unthreaded[0]}: the file holds branches (edits or retries); "
                "imported in file order"
            )


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


class _Reader:
    """Reads the records in file order and dispatches each to its thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.threads: dict[str | None, _Thread] = {}
        self.thread_of: dict[str, str | None] = {}
        self.seen: dict[str, int] = {}
        self.summaries: list[dict[str, str]] = []
        self.skipped: Counter[str] = Counter()
        self.session_ids: dict[str, None] = {}
        self.calls: list[_Call] = []
        self._mtime: datetime | None = None

    def read(self, data: bytes) -> None:
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if raw.strip():
                self._record(decode(raw, self.path, number), number)
        for thread in self.threads.values():
            thread.close()

    def _record(self, record: Line, line: int) -> None:
        if isinstance(record, Summary):
            self.summaries.append({"summary": record.summary, **_some(leaf_uuid=record.leaf_uuid)})
            return
        if record.uuid is not None:
            earlier = self.seen.setdefault(record.uuid, line)
            if earlier != line:
                raise FormatError(self.path, line, f"uuid {record.uuid!r} is already used at line {earlier}")
        thread = self._thread(record, line)
        thread.follow(record.uuid, record.parent_uuid, line)
        if not isinstance(record, Turn):
            self.skipped[type(record).__struct_config__.tag] += 1  # type: ignore[index]
            return
        self.session_ids.setdefault(record.session_id)
        thread.first = thread.first or record
        at = record.timestamp if record.timestamp is not None else self._file_time()
        if isinstance(record, User):
            thread.add_user(record, line, at)
        else:
            thread.add_assistant(record, line, at)
            self._note_calls(record)

    def _thread(self, record: Line, line: int) -> _Thread:
        key: str | None = None
        if record.is_sidechain:
            parent = record.parent_uuid
            # An unknown parent and a main-thread parent (key None) both start a new sidechain.
            key = self.thread_of.get(parent) if parent is not None else None
            if key is None:
                key = record.uuid or f"line-{line}"
        if record.uuid is not None:
            self.thread_of[record.uuid] = key
        thread = self.threads.get(key)
        if thread is None:
            thread = self.threads[key] = _Thread(self.path, line)
        return thread

    def _note_calls(self, record: Assistant) -> None:
        content = record.message.content
        for block in content if isinstance(content, list) else ():
            if isinstance(block, ToolUse) and block.name in SUBAGENT_TOOLS and isinstance(block.input, dict):
                prompt, description = block.input.get("prompt"), block.input.get("description")
                if isinstance(prompt, str):
                    thread = self.thread_of.get(record.uuid)
                    text = description if isinstance(description, str) else None
                    self.calls.append(_Call(thread, block.id, prompt, text))

    def _file_time(self) -> datetime:
        if self._mtime is None:
            self._mtime = file_time(self.path)
        return self._mtime


def _some(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def parse(path: str | Path) -> list[ParsedSession]:
    """The sessions of a Claude Code JSONL file: the main conversation, then one per sidechain."""
    reader = _Reader(Path(path))
    reader.read(Path(path).read_bytes())
    if not reader.session_ids:
        raise FormatError(path, None, "no user or assistant records: nothing to import")
    session_id = next(iter(reader.session_ids))
    sessions: list[ParsedSession] = []
    main = reader.threads.get(None)
    if main is not None and main.messages:
        sessions.append(_main_session(reader, main, session_id))
    sessions.extend(_child_sessions(reader, session_id))
    sessions[0].warnings.extend(_file_warnings(reader))
    return sessions


def _main_session(reader: _Reader, thread: _Thread, session_id: str) -> ParsedSession:
    metadata: dict[str, Any] = {}
    first = thread.first
    if first is not None:
        metadata.update(_some(cwd=first.cwd, version=first.version, git_branch=first.git_branch))
    if reader.summaries:
        metadata["summaries"] = reader.summaries
    return ParsedSession(
        session_id=session_id,
        messages=thread.messages,
        title=reader.summaries[-1]["summary"] if reader.summaries else None,
        metadata=metadata,
        repairs=thread.repairs,
        warnings=thread.warnings,
    )


def _child_sessions(reader: _Reader, session_id: str) -> list[ParsedSession]:
    """One session per sidechain, linked to the sub-agent call whose prompt opened it."""
    ids: dict[str | None, str] = {None: session_id}
    used: set[int] = set()
    children = []
    for key, thread in reader.threads.items():
        if key is None:
            continue
        call = _link(reader.calls, key, thread.opening, used)
        if call is not None and call.thread not in ids:
            call = None
        child = ParsedSession(
            session_id=f"{session_id}/{call.id}" if call else f"{session_id}/sidechain/{key}",
            messages=thread.messages,
            metadata={"sidechain_root": key},
            repairs=thread.repairs,
            warnings=thread.warnings,
        )
        if call is not None:
            child.parent_session_id, child.parent_call_id = ids[call.thread], call.id
            child.title = call.description
        else:
            child.warnings.insert(
                0,
                f"sidechain starting at line {thread.root_line}: no Task/Agent call in this file has "
                "its first user message as prompt; imported without a parent link",
            )
        ids[key] = child.session_id
        children.append(child)
    return children


def _link(calls: list[_Call], key: str, opening: str | None, used: set[int]) -> _Call | None:
    if opening is None:
        return None
    for exact in (True, False):
        for index, call in enumerate(calls):
            if index in used or call.thread == key:
                continue
            if call.prompt == opening if exact else call.prompt.strip() == opening.strip():
                used.add(index)
                return call
    return None


def _file_warnings(reader: _Reader) -> list[str]:
    warnings = [
        f"skipped {count} {kind!r} record(s) (no conversation content)"
        for kind, count in sorted(reader.skipped.items())
    ]
    if len(reader.session_ids) > 1:
        warnings.append(f"records carry several sessionIds {list(reader.session_ids)}; imported as one")
    return warnings
