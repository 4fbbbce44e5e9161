"""OpenAI Codex CLI rollout JSONL: one `{timestamp, type, payload}` record per line, one session per file.

The conversation is read from the `response_item` records alone: `event_msg` records repeat each user
prompt and assistant text (and carry token counts and UI events), `turn_context` records the model in
use — both are skipped and counted, the model kept on the assistant messages. Items map as follows:
- `message` of role `user` → a user message, but Codex's injected context is marked: an
  `<environment_context>` report is an observation (metadata `observation`), the `AGENTS.md` /
  `<user_instructions>` text a `meta` message; role `developer` (or `system`) → a system message,
  the role kept in metadata so an export can write it back;
- the items of one model response — `reasoning`, an assistant `message`, `function_call`,
  `custom_tool_call`, `local_shell_call` — → one assistant message: reasoning as a reasoning part (its
  summary texts, the first part carrying the encrypted reasoning Codex keeps (`encrypted_content`,
  which only OpenAI's Responses API can read back) as its signature of provider `openai`, so no other
  encoder sends it — files imported before this release keep it in metadata `encrypted_reasoning`; a
  `function_call`'s JSON-string `arguments` are parsed (the string kept when it reads otherwise, or
  raw when not JSON), a custom tool's free-form `input` is kept raw;
- `function_call_output` / `custom_tool_call_output` → the tool result of the call with that `call_id`.
`session_meta` gives the session id (else the file's stem) and metadata. Message ids are
`<session>/<line>`, stable as a live rollout grows. Pairing and repairs are `pairing.History`'s: an
unanswered call gets an interrupted error result, an output that answers no pending call is kept as
user text.

Codex's own compaction — a `compacted` record, `{"message": summary, "replacement_history": [items]?}`
— becomes a compaction of strategy `imported` (`compactions`), so the view after it is what Codex
sent: with `replacement_history`, those items (an item that repeats an earlier message keeps that
message in the view; one that does not is added; the item carrying the summary, or an encrypted
`compaction` item, is the summary message); without it (older releases), what Codex rebuilds on
resume — its initial context (the latest instructions and environment report; system messages always
stay), the user's requests, newest first within Codex's 20,000-token allowance, then the summary.
Everything else before it leaves the view, and stays in the history.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.formats.base import BadRecord, FormatError, ImportedCompaction, ParsedSession, Where
from transcript.formats.files import as_path
from transcript.formats.pairing import (
    History,
    get_str,
    image_part,
    json_lines,
    line_of,
    parse_time,
    read_bytes,
    undated_time,
)
from transcript.model import (
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
)
from transcript.model.errors import InvalidArgument
from transcript.model.usage import Usage, codex_usage

LINE_TYPES: Final = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
CALL_ITEMS: Final = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUT_ITEMS: Final = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
# The response items the older layout wrote bare, one a line (no `{timestamp, type, payload}` wrapper).
RESPONSE_ITEMS: Final = (
    "message",
    "reasoning",
    *CALL_ITEMS,
    *OUTPUT_ITEMS,
    "web_search_call",
    "ghost_snapshot",
    "compaction",
)
OLDER_LAYOUT: Final = "before September 2025: a header line, bare response items, record_type state lines"
ENVIRONMENT_PREFIX: Final = "<environment_context>"
INSTRUCTION_PREFIXES: Final = ("# AGENTS.md instructions", "<user_instructions>")
_META_KEYS: Final = ("cwd", "originator", "cli_version", "source", "model_provider", "git")
# How many tokens of the user's requests Codex keeps after compacting without a replacement history
# (`COMPACT_USER_MESSAGE_MAX_TOKENS`), counted as Codex approximates them: four bytes a token.
KEPT_REQUEST_TOKENS: Final = 20_000
COMPACTION_SOURCE: Final = "codex compacted"
ENCRYPTED_SUMMARY: Final = (
    "[Codex compacted the earlier history here; its summary is encrypted and not shown.]"
)
NO_SUMMARY: Final = "[Codex compacted the earlier history here without a summary.]"
_COMPACTION_ITEMS: Final = ("compaction", "compaction_summary")


@dataclass
class _Response:
    """The items of one model response, gathered into one assistant message."""

    line: int
    created_at: datetime
    parts: list[Part] = field(default_factory=list)
    calls: int = 0
    usage: Usage | None = None


class _Rollout:
    """Reads the records of one rollout in file order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[int] = []
        self.history = History(line_of(self.lines))
        self.session_id = path.stem
        self.metadata: dict[str, Any] = {}
        self.skipped: Counter[str] = Counter()
        self.model: str | None = None
        self.response: _Response | None = None
        self.mtime = undated_time(path)
        self.first_line: int | None = None
        self.compactions: dict[str, ImportedCompaction] = {}
        self.replaced: set[str] = set()  # messages an earlier compaction took out of the view
        self.notes: list[str] = []
        self.usage: dict[str, Usage] = {}
        self._last_reply: str | None = None
        self._total: object = None
        self._waiting: Usage | None = None

    def record(self, record: Any, where: Where) -> None:
        if not isinstance(record, dict):
            raise where.error(f"a record must be a JSON object, not {type(record).__name__}")
        kind = record.get("type")
        if kind not in LINE_TYPES:
            record = self._older(record, where)
            if record is None:
                return
            kind = "response_item"
        payload = record.get("payload")
        if not isinstance(payload, dict):
            raise where.error("'payload' must be an object")
        created_at = where.read(parse_time, record.get("timestamp"), self.mtime)[0]
        if kind == "session_meta":
            self._session_meta(payload, where)
        elif kind == "turn_context":
            model = payload.get("model")
            self.model = model if isinstance(model, str) else self.model
            self.skipped["turn_context"] += 1
        elif kind == "response_item":
            self.lines.append(where.line or 0)
            where.read(self._item, payload, created_at, f"{self.session_id}/{where.line}")
        elif kind == "compacted":
            self.flush()
            self.lines.append(where.line or 0)
            where.read(self._compacted, payload, created_at, f"{self.session_id}/{where.line}", where.line)
        else:
            label = kind if kind != "event_msg" else f"event_msg {payload.get('type')}"
            self.skipped[label] += 1
            if kind == "event_msg" and payload.get("type") == "token_count":
                where.read(self._token_count, payload)

    def _older(self, record: dict[str, Any], where: Where) -> dict[str, Any] | None:
        """A record of the older layout (Codex until September 2025) as this layout's record: the
        header line `{id, timestamp, instructions, git}` as a `session_meta`, a bare response item as a
        `response_item` (its time the header's: bare items record none), `{"record_type": "state"}`
        skipped (None). Anything else is an unknown record."""
        kind = record.get("type")
        if kind is None and record.get("record_type") is not None:
            self.skipped[f"record_type {record.get('record_type')}"] += 1
            return None
        if kind is None and where.line == self.first_line and "id" in record and "timestamp" in record:
            self._session_meta(record, where)
            self.metadata["layout"] = OLDER_LAYOUT
            self.mtime = where.read(parse_time, record.get("timestamp"), self.mtime)[0]
            return None
        if isinstance(kind, str) and kind in RESPONSE_ITEMS and "payload" not in record:
            return {"type": "response_item", "payload": record}
        raise where.error(
            f"unknown record type {kind!r} (expected one of {', '.join(LINE_TYPES)}, or the older layout's "
            "header, record_type and bare response items)"
        )

    def _token_count(self, payload: dict[str, Any]) -> None:
        """A `token_count` event: the billed usage of one model call. Codex writes it after that call's
        items (newer releases) or just before them (0.39), so it goes to the latest response that has
        none yet, else to the next one. A repeat of the same running total bills nothing."""
        info = payload.get("info")
        if info is None:
            return
        if not isinstance(info, dict):
            raise BadRecord("a token_count's 'info' must be an object")
        total = info.get("total_token_usage")
        if total == self._total:
            return
        self._total = total
        try:
            usage = codex_usage(info, self.model)
        except InvalidArgument as exc:
            raise BadRecord(str(exc)) from exc
        if self.response is not None and self.response.usage is None:
            self.response.usage = usage
        elif self.response is None and self._last_reply is not None and self._last_reply not in self.usage:
            self.usage[self._last_reply] = usage
        else:
            self._waiting = usage

    def _session_meta(self, payload: dict[str, Any], where: Where) -> None:
        if self.metadata:
            self.skipped["session_meta (a later one)"] += 1
            return
        session_id = payload.get("id")
        if session_id is not None:
            self.session_id = where.string(payload, "id")
        self.metadata = {key: payload[key] for key in _META_KEYS if payload.get(key) is not None}
        if isinstance(payload.get("instructions"), str):
            self.metadata["instructions"] = payload["instructions"]
        self.metadata.setdefault("format", "codex")

    def _item(self, item: dict[str, Any], created_at: datetime, message_id: str) -> None:
        kind = item.get("type")
        index = len(self.lines) - 1
        if kind == "message":
            role = get_str(item, "role")
            if role == "assistant":
                response = self._response(
                    created_at, new=self.response is not None and self.response.calls > 0
                )
                response.parts.extend(_content(item.get("content"), assistant=True))
                return
            self.flush()
            parts = _content(item.get("content"), assistant=False)
            if role in ("developer", "system"):
                text = "".join(p.text for p in parts if isinstance(p, TextPart))
                message = Message.system(text, id=message_id, created_at=created_at)
                metadata = {"role": role} if role == "developer" else None
                self.history.add(msgspec.structs.replace(message, metadata=metadata), index)
            elif role == "user":
                self.history.add(_user(parts, message_id, created_at), index)
            else:
                raise BadRecord(f"unknown message role {role!r} (expected user, assistant or developer)")
        elif kind == "reasoning":
            current = self.response
            response = self._response(created_at, new=current is not None and bool(current.parts))
            response.parts.extend(_reasoning(item))
        elif kind in CALL_ITEMS:
            response = self._response(created_at)
            response.parts.append(_call(item, kind))
            response.calls += 1
        elif kind in OUTPUT_ITEMS:
            self.flush()
            call_id = get_str(item, "call_id")
            self.history.add_result(
                call_id, _output(item.get("output")), id=message_id, created_at=created_at, index=index
            )
        else:
            self.skipped[f"response_item {kind}"] += 1

    def _compacted(
        self, payload: dict[str, Any], created_at: datetime, message_id: str, line: int | None
    ) -> None:
        """Codex compacted its history here: the summary message, the messages Codex kept, the boundary."""
        index = len(self.lines) - 1
        summary = payload.get("message", "")
        if not isinstance(summary, str):
            raise BadRecord("a compacted record's 'message' must be a string")
        replacement = payload.get("replacement_history")
        before = [m for m in self.history.messages if m.id not in self.replaced]
        encrypted: list[str] = []
        if replacement is None:
            kept = _rebuilt(before, self.notes)
        elif isinstance(replacement, list):
            kept, added, encrypted = self._replacement(before, replacement, summary, message_id, created_at)
            for message in added:
                self.history.add(message, index)
            kept += [message.id for message in added]
        else:
            raise BadRecord("a compacted record's 'replacement_history' must be a list of items")
        text = summary if summary.strip() else (ENCRYPTED_SUMMARY if encrypted else NO_SUMMARY)
        metadata: dict[str, Any] = {"codex": "compacted"}
        if encrypted:
            metadata["encrypted_compaction"] = encrypted
        message = Message(
            id=message_id,
            role="user",
            kind="summary",
            parts=(TextPart(text=text),),
            created_at=created_at,
            metadata=metadata,
        )
        self.history.add(message, index)
        keep = set(kept)
        self.replaced.update(m.id for m in before if m.role != "system" and m.id not in keep)
        self.compactions[message_id] = ImportedCompaction(
            source=COMPACTION_SOURCE, line=line, kept=tuple(kept)
        )

    def _replacement(
        self,
        before: list[Message],
        items: list[Any],
        summary: str,
        message_id: str,
        created_at: datetime,
    ) -> tuple[list[str], list[Message], list[str]]:
        """What a replacement history keeps of the earlier messages, the messages it adds, and its
        encrypted summaries. An item that repeats an earlier message (same role, same text) keeps that
        message; the item that carries the summary is the summary message itself."""
        available = list(before)
        kept: list[str] = []
        added: list[Message] = []
        encrypted: list[str] = []
        for k, item in enumerate(items):
            kind = item.get("type") if isinstance(item, dict) else None
            if kind in _COMPACTION_ITEMS:
                content = item.get("encrypted_content")
                if isinstance(content, str) and content:
                    encrypted.append(content)
                continue
            if kind != "message":
                self.skipped[f"replacement_history {kind}"] += 1
                continue
            role = get_str(item, "role")
            parts = _content(item.get("content"), assistant=role == "assistant")
            text = "".join(p.text for p in parts if isinstance(p, TextPart))
            if role == "user" and summary.strip() and text.strip() == summary.strip():
                continue  # the summary: the summary message shows it
            same = next(
                (
                    m
                    for m in reversed(available)
                    if _role_of(m) == role and m.text == text and not m.tool_calls
                ),
                None,
            )
            if same is not None:
                available.remove(same)
                kept.append(same.id)
            else:
                added.append(_replaced_message(role, parts, text, f"{message_id}/{k}", created_at))
        return kept, added, encrypted

    def _response(self, created_at: datetime, *, new: bool = False) -> _Response:
        if new:
            self.flush()
        if self.response is None:
            self.response = _Response(line=len(self.lines) - 1, created_at=created_at, usage=self._waiting)
            self._waiting = None
        return self.response

    def flush(self) -> None:
        """Close the model response being gathered: its assistant message joins the history."""
        response, self.response = self.response, None
        if response is None:
            return
        if not response.parts:
            return
        index = response.line
        message_id = f"{self.session_id}/{self.lines[index]}"
        calls = [p for p in response.parts if isinstance(p, ToolCall)]
        unique = self.history.unique_calls(calls, message_id, index)
        renamed = iter(unique)
        parts = [next(renamed) if isinstance(p, ToolCall) else p for p in response.parts]
        if not any(isinstance(p, (TextPart, ToolCall)) for p in parts):
            parts.append(TextPart(text=""))
        metadata: dict[str, Any] = {"model": self.model} if self.model else {}
        message = Message(
            id=message_id,
            role="assistant",
            parts=tuple(parts),
            created_at=response.created_at,
            metadata=metadata or None,
        )
        self.history.add(
            Where(str(self.path), self.lines[index]).check(message), index, [c.id for c in calls]
        )
        self._last_reply = message_id
        if response.usage is not None:
            self.usage[message_id] = response.usage


def _role_of(message: Message) -> str:
    """The role Codex gave a stored message (a developer message is stored as a system message)."""
    if message.role == "system":
        return str((message.metadata or {}).get("role", "system"))
    return message.role


def _replaced_message(role: str, parts: list[Part], text: str, message_id: str, at: datetime) -> Message:
    """A message of a replacement history that repeats no earlier one, mapped as a response item is."""
    if role in ("developer", "system"):
        message = Message.system(text, id=message_id, created_at=at)
        return msgspec.structs.replace(message, metadata={"role": role} if role == "developer" else None)
    if role == "user":
        return _user(parts, message_id, at)
    if role == "assistant":
        return Message(id=message_id, role="assistant", parts=tuple(parts), created_at=at)
    raise BadRecord(f"replacement_history: unknown message role {role!r}")


def _rebuilt(before: list[Message], notes: list[str]) -> list[str]:
    """The earlier messages Codex keeps when it compacts without a replacement history: the latest
    instructions and environment report (its initial context, rebuilt on resume) and the user's
    requests, newest first while they fit Codex's allowance (the one that does not fit, Codex shortens;
    it is kept whole here, and a note says so)."""
    instructions = [m.id for m in before if m.role == "user" and m.kind == "meta"]
    environment = [m.id for m in before if (m.metadata or {}).get("observation") == "environment_context"]
    requests = [
        m
        for m in before
        if m.role == "user"
        and m.kind == "message"
        and not (m.metadata or {}).keys() & {"observation", "orphan_result"}
    ]
    chosen: list[str] = []
    room = KEPT_REQUEST_TOKENS
    for message in reversed(requests):
        if room <= 0:
            break
        tokens = (len(message.text.encode()) + 3) // 4
        chosen.append(message.id)
        if tokens > room:
            notes.append(
                f"Codex kept a shortened copy of request {message.id!r} after compacting; it is kept whole"
            )
        room -= tokens
    order = {m.id: n for n, m in enumerate(before)}
    return sorted({*instructions[-1:], *environment[-1:], *chosen}, key=order.__getitem__)


def _content(content: object, *, assistant: bool) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    if not isinstance(content, list):
        raise BadRecord("a message's 'content' must be a list of parts")
    parts: list[Part] = []
    for k, item in enumerate(content):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(text=get_str(item, "text")))
        elif kind == "refusal" and assistant:
            parts.append(TextPart(text=get_str(item, "refusal")))
        elif kind == "input_image" and not assistant:
            image = image_part(item.get("image_url"))
            if image is None:
                raise BadRecord(f"content[{k}]: only base64 'data:' image URLs can be stored")
            parts.append(image)
        else:
            raise BadRecord(f"content[{k}]: unknown content part type {kind!r}")
    return parts or [TextPart(text="")]


def _user(parts: list[Part], message_id: str, created_at: datetime) -> Message:
    media = [p for p in parts if isinstance(p, (TextPart, ImagePart))]
    text = "".join(p.text for p in parts if isinstance(p, TextPart)).lstrip()
    metadata = {"observation": "environment_context"} if text.startswith(ENVIRONMENT_PREFIX) else None
    message = Message.user(media, id=message_id, created_at=created_at, metadata=metadata)
    if text.startswith(INSTRUCTION_PREFIXES):
        return msgspec.structs.replace(message, kind="meta")
    return message


def _reasoning(item: dict[str, Any]) -> list[ReasoningPart]:
    """A reasoning item as reasoning parts, as `projection.wire.from_responses` reads one: a part per
    summary (or content) text, the first carrying the encrypted content (provider `openai`), the
    item's id when the rollout has it (Codex does not record it, so no wire format sends them)."""
    texts: list[str] = []
    for key in ("summary", "content"):
        blocks = item.get(key) or []
        if not isinstance(blocks, list):
            raise BadRecord(f"reasoning {key!r} must be a list")
        texts.extend(get_str(b, "text") for b in blocks if isinstance(b, dict) and "text" in b)
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise BadRecord("'encrypted_content' must be a string")
    item_id = item.get("id") if isinstance(item.get("id"), str) else None
    if not texts and not encrypted:
        return []
    return [
        ReasoningPart(
            text=text,
            signature=encrypted if k == 0 and encrypted else None,
            provider="openai",
            item_id=item_id,
        )
        for k, text in enumerate(texts or [""])
    ]


def _call(item: dict[str, Any], kind: str) -> ToolCall:
    call_id = get_str(item, "call_id")
    if kind == "function_call":
        return ToolCall.from_arguments(
            id=call_id, name=get_str(item, "name"), arguments=get_str(item, "arguments")
        )
    if kind == "custom_tool_call":
        return ToolCall(id=call_id, name=get_str(item, "name"), input=None, raw_input=get_str(item, "input"))
    action = item.get("action")
    if not isinstance(action, dict):
        raise BadRecord("a local_shell_call needs an 'action' object")
    return ToolCall(id=call_id, name="local_shell", input=action)


def _output(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [item.get("text") for item in output if isinstance(item, dict)]
        if all(isinstance(text, str) for text in texts) and len(texts) == len(output):
            return "".join(text for text in texts if isinstance(text, str))
    content = output.get("content") if isinstance(output, dict) else None
    if isinstance(content, str):
        return content
    if output is None:
        return ""
    return msgspec.json.encode(output).decode()


def parse(path: str | Path) -> list[ParsedSession]:
    """The one session of a Codex CLI rollout file; raises `FormatError` naming the bad line."""
    path = as_path(path)
    rollout = _Rollout(path)
    seen = False
    for number, record in json_lines(path, read_bytes(path)):
        where = Where(str(path), number)
        if rollout.first_line is None:
            rollout.first_line = number
        where.read(rollout.record, record, where)
        seen = True
    if not seen:
        raise FormatError(path, None, "the file holds no records")
    rollout.flush()
    history = rollout.history
    history.finish()
    if not history.messages:
        raise FormatError(path, None, "no response_item records: nothing to import")
    kept = {message.id for message in history.messages}
    warnings = [
        f"skipped {count} {kind!r} record(s) (no conversation content)"
        for kind, count in sorted(rollout.skipped.items())
    ]
    return [
        ParsedSession(
            session_id=rollout.session_id,
            messages=history.messages,
            title=None,
            metadata=rollout.metadata,
            repairs=history.repairs,
            warnings=history.warnings + warnings + rollout.notes,
            compactions=rollout.compactions,
            usage={key: value for key, value in rollout.usage.items() if key in kept},
        )
    ]
