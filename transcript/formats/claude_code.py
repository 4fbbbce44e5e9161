"""Claude Code session JSONL: one record per line, threaded by `uuid`/`parentUuid`, read in file order.

Each conversation is built by `claude_code_thread.Thread` (split assistant records merged, results in
call order, Claude Code's own compactions and synthetic API errors named). The main conversation is
one session; every sub-agent conversation becomes a child session linked to the `Task`/`Agent` call
that started it, wherever Claude Code wrote it:
- `isSidechain` records in the session file (up to 1.x), linked by the call whose `input.prompt`
  equals the sidechain's first user text (a warning when none does);
- `progress` records with `data.type: "agent_progress"` (2.1.x), each carrying one record of the
  sub-agent, linked by `parentToolUseID`;
- sub-agent files beside the session file, `<session>/subagents/agent-<id>.jsonl` (2.1.x, with an
  `agent-<id>.meta.json` naming the call) or `agent-<id>.jsonl` in the same directory (2.0.x), linked
  by the meta file, then by the agent's `agent_progress` records, then by prompt. A sub-agent found in
  a file is not read again from `agent_progress` records.
The `summary` record becomes the title and metadata. Bookkeeping records (`progress`, `system` but
`compact_boundary`, snapshots, settings, titles, costs) are skipped and counted in the warnings;
`toolUseResult` (a richer copy of a result) is not kept. A branch warning names only real branches
(`claude_code_thread.Branches`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import FormatError, ParsedSession
from transcript.formats.claude_code_records import (
    Assistant,
    Line,
    Progress,
    Summary,
    System,
    ToolUse,
    Turn,
    User,
    agent_progress,
    decode,
)
from transcript.formats.claude_code_thread import Branches, Thread, some
from transcript.formats.files import ReadBudget, as_path, check_folder, read_file
from transcript.formats.pairing import UTF8_BOM, decode_json, read_bytes, undated_time
from transcript.model import Message
from transcript.model.errors import InvalidArgument
from transcript.model.usage import Usage, anthropic_usage

SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent"})


@dataclass
class _Call:
    """A sub-agent call that a sidechain may answer."""

    thread: str | None
    id: str
    prompt: str | None
    description: str | None


@dataclass
class _Agent:
    """A sub-agent seen through its `agent_progress` records: the call that started it, its prompt."""

    call_id: str | None
    prompt: str | None
    line: int


class _Reader:
    """Reads the records of one file in file order and dispatches each to its thread."""

    def __init__(
        self, path: Path, skip_agents: frozenset[str] = frozenset(), *, single: bool = False
    ) -> None:
        self.path = path
        self.single = single
        self.threads: dict[str | None, Thread] = {}
        self.thread_of: dict[str, str | None] = {}
        self.seen: dict[str, int] = {}
        self.summaries: list[dict[str, str]] = []
        self.skipped: Counter[str] = Counter()
        self.session_ids: dict[str, None] = {}
        self.calls: dict[str, _Call] = {}
        self.agents: dict[str, _Agent] = {}  # thread key of an agent_progress sub-agent -> its origin
        self.agent_calls: dict[str, str] = {}  # agentId -> parentToolUseID, from agent_progress records
        self.branches = Branches()
        self._skip_agents = skip_agents
        self._progress_seen: set[str] = set()
        self._mtime: datetime | None = None

    def read(self, data: bytes) -> None:
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if raw.strip():
                self._record(decode(raw, self.path, number), number)
        for thread in self.threads.values():
            thread.close()

    def _record(self, record: Line, line: int) -> None:
        if isinstance(record, Summary):
            self.summaries.append({"summary": record.summary, **some(leaf_uuid=record.leaf_uuid)})
            return
        if record.uuid is not None:
            earlier = self.seen.setdefault(record.uuid, line)
            if earlier != line:
                raise FormatError(self.path, line, f"uuid {record.uuid!r} is already used at line {earlier}")
        self.branches.note(record, line)
        thread = self._thread(record, line)
        if isinstance(record, Progress) and (record.data or {}).get("type") == "agent_progress":
            self._agent_progress(record, line)
            return
        if isinstance(record, System) and record.subtype == "compact_boundary":
            metadata = record.compact_metadata
            trigger, pre_tokens = (metadata.trigger, metadata.pre_tokens) if metadata else (None, None)
            thread.compact_boundary(trigger, pre_tokens, line)
            return
        if not isinstance(record, Turn):
            self.skipped[type(record).__struct_config__.tag] += 1  # type: ignore[index]
            return
        self.session_ids.setdefault(record.session_id)
        self._add(thread, record, line)

    def _add(self, thread: Thread, record: User | Assistant, line: int) -> None:
        at = record.timestamp if record.timestamp is not None else self._undated_time()
        thread.add(record, line, at)
        if isinstance(record, Assistant):
            self._note_calls(record)

    def _thread(self, record: Line, line: int) -> Thread:
        key: str | None = None
        if self.single:
            return self._open(None, line)  # a sub-agent file: one conversation, whatever its parents say
        if record.is_sidechain:
            parent = record.parent_uuid
            # An unknown parent and a main-thread parent (key None) both start a new sidechain.
            key = self.thread_of.get(parent) if parent is not None else None
            if key is None:
                key = record.uuid or f"line-{line}"
        if record.uuid is not None:
            self.thread_of[record.uuid] = key
        return self._open(key, line)

    def _open(self, key: str | None, line: int) -> Thread:
        thread = self.threads.get(key)
        if thread is None:
            thread = self.threads[key] = Thread(self.path, line)
        return thread

    def _agent_progress(self, record: Progress, line: int) -> None:
        """One record of a sub-agent's conversation, carried by a progress record of its call."""
        progress, turn = agent_progress(record, self.path, line)
        agent = progress.agent_id or record.parent_tool_use_id or f"line-{line}"
        if progress.agent_id and record.parent_tool_use_id:
            self.agent_calls.setdefault(progress.agent_id, record.parent_tool_use_id)
        if agent in self._skip_agents:
            self.skipped["agent_progress (read from the sub-agent's file)"] += 1
            return
        key = f"agent:{agent}"
        if key not in self.agents:
            self.agents[key] = _Agent(record.parent_tool_use_id, progress.prompt, line)
        if turn is None or turn.uuid in self._progress_seen:
            self.skipped["agent_progress (no new message)"] += 1
            return
        self._progress_seen.add(turn.uuid)
        thread = self._open(key, line)
        if not thread.messages and thread.step is None and isinstance(turn, Assistant) and progress.prompt:
            at = turn.timestamp or self._undated_time()
            prompt = Message.user(
                progress.prompt, id=f"{key}/prompt", created_at=at, metadata={"from": "prompt"}
            )
            thread.messages.append(prompt)
            thread.opening = progress.prompt
        self._add(thread, turn, line)

    def _note_calls(self, record: Assistant) -> None:
        content = record.message.content
        for block in content if isinstance(content, list) else ():
            if isinstance(block, ToolUse) and block.name in SUBAGENT_TOOLS and isinstance(block.input, dict):
                prompt, description = block.input.get("prompt"), block.input.get("description")
                self.calls[block.id] = _Call(
                    self.thread_of.get(record.uuid),
                    block.id,
                    prompt if isinstance(prompt, str) else None,
                    description if isinstance(description, str) else None,
                )

    def _undated_time(self) -> datetime:
        if self._mtime is None:
            self._mtime = undated_time(self.path)
        return self._mtime


def parse(path: str | Path) -> list[ParsedSession]:
    """The sessions of a Claude Code JSONL file and of the sub-agent files beside it: the main
    conversation, then one per sub-agent."""
    path = as_path(path)
    budget = ReadBudget()
    files = _subagent_files(path, budget)
    reader = _Reader(path, frozenset(agent for agent, _, _ in files))
    reader.read(read_bytes(path, budget))
    if not reader.session_ids:
        raise FormatError(path, None, "no user or assistant records: nothing to import")
    session_id = next(iter(reader.session_ids))
    sessions: list[ParsedSession] = []
    main = reader.threads.get(None)
    if main is not None and main.messages:
        sessions.append(_main_session(reader, main, session_id))
    ids: dict[str | None, str] = {None: session_id}
    used: set[str] = set()
    sessions.extend(_children(reader, reader, session_id, ids, used))
    for agent, file, meta in files:
        sub = _Reader(file, single=True)
        sub.read(read_bytes(file, budget, follow=False))
        linked = meta or reader.agent_calls.get(agent)
        sessions.extend(_children(sub, reader, session_id, ids, used, linked=linked, agent=agent))
    if not sessions:
        raise FormatError(path, None, "no conversation in the file: nothing to import")
    sessions[0].warnings.extend(_file_warnings(reader))
    return sessions


def _subagent_files(path: Path, budget: ReadBudget) -> list[tuple[str, Path, str | None]]:
    """(agent id, file, the call its meta file names) of every sub-agent file beside a session file.

    2.1.x writes `<session>/subagents/agent-<id>.jsonl` (and `agent-<id>.meta.json`); 2.0.x wrote
    `agent-<id>.jsonl` next to the session file, which is this session's when its first record carries
    the session's id (the file's stem). Every file and folder found here is opened as `files` says:
    never through a link, regular files only, within the import's budget.
    """
    found: list[tuple[str, Path, str | None]] = []
    session_folder = path.with_suffix("")
    if check_folder(session_folder) and check_folder(folder := session_folder / "subagents"):
        for file in sorted(folder.glob("agent-*.jsonl")):
            agent = file.stem.removeprefix("agent-")
            found.append((agent, file, _meta_call(file.with_name(f"{file.stem}.meta.json"), budget)))
    if not path.name.startswith("agent-"):
        for file in sorted(path.parent.glob("agent-*.jsonl")):
            if file != path and _first_session_id(file, budget) == path.stem:
                found.append((file.stem.removeprefix("agent-"), file, None))
    return found


def _meta_call(meta: Path, budget: ReadBudget) -> str | None:
    if not os.path.lexists(meta):
        return None
    try:
        value = decode_json(read_bytes(meta, budget, follow=False))
    except msgspec.DecodeError:
        return None
    call = value.get("toolUseId") if isinstance(value, dict) else None
    return call if isinstance(call, str) and call else None


# How much of a file beside the session is read to tell whose it is: its first record's `sessionId`
# comes first, long before any message text.
_PEEK_BYTES: Final = 1 << 20
_SESSION_ID: Final = re.compile(rb'^\{(?:[^{}\[\]]*?,)?\s*"sessionId"\s*:\s*"([^"\\]*)"')


def _first_session_id(file: Path, budget: ReadBudget) -> str | None:
    """The `sessionId` of a file's first record, read from at most its first `_PEEK_BYTES`."""
    first = read_file(file, budget, follow=False, peek=_PEEK_BYTES).removeprefix(UTF8_BOM)
    first = first.split(b"\n", 1)[0]
    try:
        value = decode_json(first)
    except msgspec.DecodeError:  # not JSON, or a first record longer than the peek: its opening keys
        match = _SESSION_ID.search(first)
        return match.group(1).decode("utf-8", "replace") if match else None
    session = value.get("sessionId") if isinstance(value, dict) else None
    return session if isinstance(session, str) else None


def _main_session(reader: _Reader, thread: Thread, session_id: str) -> ParsedSession:
    metadata: dict[str, Any] = {}
    first = thread.first
    if first is not None:
        metadata.update(some(cwd=first.cwd, version=first.version, git_branch=first.git_branch))
    if reader.summaries:
        metadata["summaries"] = reader.summaries
    return _session(
        thread,
        session_id=session_id,
        title=reader.summaries[-1]["summary"] if reader.summaries else None,
        metadata=metadata,
    )


def _session(thread: Thread, **fields: Any) -> ParsedSession:
    return ParsedSession(
        messages=thread.messages,
        repairs=thread.repairs,
        warnings=thread.warnings,
        compactions=thread.compactions,
        hidden=thread.hidden,
        usage=_usage(thread.messages, thread.hidden, thread.warnings),
        **fields,
    )


def _usage(messages: list[Message], hidden: dict[str, str], warnings: list[str]) -> dict[str, Usage]:
    """The billed usage Claude Code recorded for each API call (`message.usage`), by assistant message.
    Records the model never saw (synthetic API errors) were billed for nothing; a usage record that
    cannot be read is left out, with a warning (the message keeps it in its metadata)."""
    usage: dict[str, Usage] = {}
    for message in messages:
        metadata = message.metadata or {}
        if message.role != "assistant" or message.id in hidden or not isinstance(metadata.get("usage"), dict):
            continue
        model = metadata.get("model")
        try:
            usage[message.id] = anthropic_usage(metadata["usage"], model if isinstance(model, str) else None)
        except InvalidArgument as exc:
            warnings.append(f"message {message.id!r}: its usage is not recorded as billed usage ({exc})")
    return usage


def _children(
    reader: _Reader,
    main: _Reader,
    session_id: str,
    ids: dict[str | None, str],
    used: set[str],
    *,
    linked: str | None = None,
    agent: str | None = None,
) -> list[ParsedSession]:
    """One session per sub-agent thread of `reader`, linked to the call that started it.

    `main` is the session file's reader (it knows the calls); `ids` maps a thread key of `main` to its
    session id, `used` holds the calls already linked. A sub-agent file (`agent`) is one thread; its
    meta file or progress records may name its call (`linked`).
    """
    children = []
    for key, thread in reader.threads.items():
        if (key is None and agent is None) or not thread.messages:
            continue
        origin = reader.agents.get(key) if key is not None else None
        call_id = linked or (origin.call_id if origin else None)
        call = main.calls.get(call_id) if call_id else _by_prompt(main.calls, key or "", thread.opening, used)
        if call_id is None and call is not None:
            call_id = call.id
        if call_id is not None and call_id in used:
            call_id, call = None, None
        own = agent or (key.removeprefix("agent:") if origin and key else None)
        if call_id is not None:
            name = f"{session_id}/{call_id}"
        else:
            name = f"{session_id}/agent-{own}" if own else f"{session_id}/sidechain/{key}"
        metadata = some(sidechain_root=key if agent is None else None, agent_id=own)
        child = _session(thread, session_id=name, metadata=metadata)
        if call_id is not None:
            used.add(call_id)
            child.parent_session_id = ids.get(call.thread, session_id) if call else session_id
            child.parent_call_id = call_id
            child.title = call.description if call else None
            if call is None:
                child.warnings.insert(
                    0, f"the call {call_id!r} that started this sub-agent is not in the file"
                )
        else:
            where = (
                f"sub-agent file {reader.path.name}"
                if agent
                else f"sidechain starting at line {thread.root_line}"
            )
            child.warnings.insert(
                0,
                f"{where}: no Task/Agent call in this file has its first user message as prompt; "
                "imported without a parent link",
            )
        if reader is main:
            ids[key] = child.session_id
        children.append(child)
    return children


def _by_prompt(calls: dict[str, _Call], key: str, opening: str | None, used: set[str]) -> _Call | None:
    if opening is None:
        return None
    for exact in (True, False):
        for call in calls.values():
            if call.id in used or call.thread == key or call.prompt is None:
                continue
            if call.prompt == opening if exact else call.prompt.strip() == opening.strip():
                return call
    return None


def _file_warnings(reader: _Reader) -> list[str]:
    warnings = [
        f"skipped {count} {kind!r} record(s) (no conversation content)"
        for kind, count in sorted(reader.skipped.items())
    ]
    branches = reader.branches.warning()
    if branches is not None:
        warnings.append(branches)
    if len(reader.session_ids) > 1:
        warnings.append(f"records carry several sessionIds {list(reader.session_ids)}; imported as one")
    return warnings
