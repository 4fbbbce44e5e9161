"""What the importers share: reading a file, naming a bad record's place, and pairing calls with results.

Nothing here knows a format; a format module maps its records onto these pieces. `History` is the one
place that makes a session pass `LiveSession.check_order`: a result answers the closest preceding
unanswered call of its id in the latest step, a result that answers none is kept as user text
(`orphan_result_as_text`), and every call still unanswered when another message follows or the
session ends gets a synthetic `is_error` result `INTERRUPTED_RESULT` right after its step
(`synthetic_result`) — so no session ends with calls pending, and every repair is named. A harness
notice (a system or developer message) that comes between calls and their results is no reply of the
user's: it is stored right after the step's results (`notice_after_results`), so the calls keep their
real results and the view shows the notice after them. A call of a
tool that ends the session by design (`ending_tools`, OpenHands' `finish`) gets a plain result saying
so instead (`session_end_result`): nothing went wrong. Synthetic results carry metadata
`synthetic: true`, which lets a later import of a grown file supersede them with the real results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from transcript.formats.base import UNDATED, BadRecord, FormatError, ParsedSession, Repair, RepairKind, Where
from transcript.formats.files import ReadBudget, read_file
from transcript.formats.growing import whole_lines
from transcript.model import (
    INTERRUPTED_RESULT,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    ResultContent,
    Role,
    TextPart,
    ToolCall,
    ToolResult,
    check_message,
)
from transcript.model.errors import InvalidMessage
from transcript.model.nesting import MAX_JSON_DEPTH, may_nest_deeper, nests_deeper

UTF8_BOM: Final = b"\xef\xbb\xbf"
TOO_DEEP: Final = f"nested deeper than the {MAX_JSON_DEPTH} levels a stored value may have"


def read_bytes(path: Path, budget: ReadBudget | None = None, *, follow: bool = True) -> bytes:
    """The file's bytes, without a leading UTF-8 byte-order mark: every importer reads its files here,
    so what detection accepts with a BOM the importer reads too, and each file is opened safely
    (`files.read_file`: a regular file within the import's `budget`; a link only when `follow`). JSON
    lines are read up to their last whole line (`growing.whole_lines`: a file still being written)."""
    return whole_lines(path, read_file(path, budget, follow=follow).removeprefix(UTF8_BOM))


def json_lines(path: Path, data: bytes) -> Iterator[tuple[int, Any]]:
    """The records of a JSON lines file with their 1-based line numbers, blank lines skipped; a
    `FormatError` naming the first line that is not JSON."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            try:
                yield number, decode_json(raw)
            except msgspec.DecodeError as exc:
                raise FormatError(path, number, f"not a JSON record: {exc}") from exc


def decode_json(data: bytes | str) -> Any:
    """msgspec's JSON decoding, with nesting deeper than the store takes (`MAX_JSON_DEPTH`, or deeper
    than the decoder can follow) refused as a `msgspec.DecodeError` like any other fault."""
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise msgspec.DecodeError(TOO_DEEP) from None
    if may_nest_deeper(data) and nests_deeper(value):
        raise msgspec.DecodeError(TOO_DEEP)
    return value


def line_of(lines: Sequence[int | None]) -> Callable[[int], int | None]:
    """A `History`'s `line_of` over the lines a caller appends as it reads records (None past the end)."""
    return lambda index: lines[index] if 0 <= index < len(lines) else None


def undated_time(path: Path) -> datetime:
    """The `created_at` of records that carry no time: `UNDATED`, the Unix epoch, never the file's
    modification time (which says when the file was last copied, and made a session that records no
    time look like the newest one)."""
    del path  # (every file's undated records are stored alike)
    return UNDATED


# A high surrogate escape not followed by a low one, or a low one not preceded by a high one.
LONE_SURROGATE: Final = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def decode_document(path: str | Path, data: bytes) -> Any:
    """A whole-file JSON document; a `FormatError` naming the line of the first fault otherwise."""
    try:
        return decode_json(data)
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
    match = LONE_SURROGATE.search(text)
    if match is None:
        return None, None
    reason = f"{match.group()} is a lone UTF-16 surrogate, which is not valid Unicode"
    return text.count("\n", 0, match.start()) + 1, reason


def parse_time(value: object, fallback: datetime) -> tuple[datetime, bool]:
    """A record's ISO 8601 time (naive ones read as UTC) and whether it was naive; `fallback` when absent."""
    if value is None:
        return fallback, False
    if not isinstance(value, str):
        raise BadRecord(f"'timestamp' must be a string, not {type(value).__name__}")
    return iso_time(value)


def iso_time(value: str) -> tuple[datetime, bool]:
    """An ISO 8601 time (a naive one read as UTC) and whether it was naive."""
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


def data_url(url: object) -> tuple[str, str] | None:
    """(media type, base64 payload) of a base64 `data:` URL; None for any other URL (nothing to store)."""
    if not isinstance(url, str):
        return None
    header, comma, payload = url.partition(",")
    if not header.startswith("data:") or not header.endswith(";base64") or not comma:
        return None
    return header[len("data:") :].split(";", 1)[0], payload


def image_part(url: object) -> ImagePart | None:
    """The image of a base64 `data:` URL; None for any other URL."""
    found = data_url(url)
    return ImagePart(media_type=found[0], data=found[1]) if found else None


def tool_call(item: object, where: str, *, lenient: bool = False) -> ToolCall:
    """A call from an OpenAI-style `{"id", "type": "function", "function": {"name", "arguments"}}`.

    `arguments` is a JSON string, kept raw when it is not JSON (`ToolCall.from_arguments`). `lenient`
    is for agents' own logs (SWE-agent, OpenHands), which may also write it as an object or leave it
    out, and do not always say `type`.
    """
    if not isinstance(item, dict):
        raise BadRecord(f"{where} must be a JSON object")
    if not lenient and item.get("type", "function") != "function":
        raise BadRecord(f"{where}: unknown tool call type {item.get('type')!r} (expected 'function')")
    function = get_dict(item, "function") or {}
    call_id, name = item.get("id"), function.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise BadRecord(f"{where} needs a non-empty string 'id' and 'function.name'")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        return ToolCall.from_arguments(id=call_id, name=name, arguments=arguments)
    if lenient and (arguments is None or isinstance(arguments, dict)):
        return ToolCall(id=call_id, name=name, input=arguments or {})
    raise BadRecord(f"{where}: 'arguments' must be a string{' or an object' if lenient else ''}")


def tool_calls(value: object, *, lenient: bool = False) -> list[ToolCall]:
    """The calls of a message's `tool_calls` list (none when it is absent or empty), each read by
    `tool_call`."""
    if not value:
        return []
    if not isinstance(value, list):
        raise BadRecord("'tool_calls' must be a list")
    return [tool_call(item, f"tool_calls[{k}]", lenient=lenient) for k, item in enumerate(value)]


THINKING_BLOCKS: Final = ("thinking", "redacted_thinking")


def thinking_part(block: dict[str, Any]) -> ReasoningPart | RedactedReasoningPart:
    """An Anthropic `thinking` block (its signature kept) or `redacted_thinking` block."""
    if block.get("type") == "redacted_thinking":
        return RedactedReasoningPart(data=get_str(block, "data"))
    signature = block.get("signature")
    if signature is not None and not isinstance(signature, str):
        raise BadRecord("'signature' must be a string")
    return ReasoningPart(text=get_str(block, "thinking"), signature=signature)


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


def interrupted(
    call_id: str, name: str, *, step_id: str, created_at: datetime, id: str, line: int | None, final: bool
) -> tuple[Message, Repair]:
    """The synthetic result of a call that got none (it goes right after its step), and its repair.

    `created_at` is the step's; `final` says the session ended (rather than another message followed).
    """
    result = Message.tool_result(
        call_id, INTERRUPTED_RESULT, name=name, is_error=True, id=id, created_at=created_at
    )
    when = "by the end of the session" if final else "before the next message"
    detail = (
        f"call {call_id!r} ({name}) of message {step_id!r} had no result {when}; "
        f"added an is_error result {INTERRUPTED_RESULT!r}"
    )
    repair = Repair(kind="synthetic_result", detail=detail, message_id=id, call_id=call_id, line=line)
    return msgspec.structs.replace(result, metadata={"synthetic": True}), repair


SESSION_END_RESULT: Final = "[the agent ended the session with this call; no result follows by design]"


def session_end(
    call_id: str, name: str, *, step_id: str, id: str, line: int | None
) -> tuple[Message, Repair]:
    """The plain (not error) result of a call that ends a session by design (OpenHands `finish`), which
    its agent never answers, and its repair."""
    result = Message.tool_result(call_id, SESSION_END_RESULT, name=name, id=id)
    detail = (
        f"call {call_id!r} ({name}) of message {step_id!r} ends the session by design and has no result; "
        f"added a plain result {SESSION_END_RESULT!r}"
    )
    repair = Repair(kind="session_end_result", detail=detail, message_id=id, call_id=call_id, line=line)
    return msgspec.structs.replace(result, metadata={"synthetic": True}), repair


class Pending(NamedTuple):
    """A call of the latest step still waiting for its result."""

    source_id: str  # the call id as the file has it
    call_id: str  # the id stored (renamed when one message used the source id twice)
    name: str
    position: int


class History:
    """Messages in an order the store accepts; every repair that needs is made here, and named.

    `line_of` maps a record's index (as the caller counts records) to its line, asked only for a
    repair. `synthetic_id` names a synthetic result that another message follows; at the end of a
    session it is always `<step id>/interrupted-<k>`, an id no later record of a growing file can
    take, so importing the grown file is refused rather than read past the synthetic result.
    """

    def __init__(
        self,
        line_of: Callable[[int], int | None],
        synthetic_id: Callable[[Message, Pending], str] | None = None,
        *,
        ending_tools: frozenset[str] = frozenset(),
    ) -> None:
        self.messages: list[Message] = []
        self._ending_tools = ending_tools
        self.repairs: list[Repair] = []
        self.warnings: list[str] = []
        self._line_of = line_of
        self._synthetic_id = synthetic_id
        self._pending: list[Pending] = []
        self._step: tuple[Message, int] | None = None
        self._held: list[tuple[Callable[[], Message], int]] = []

    @property
    def step_id(self) -> str | None:
        """The id of the latest assistant message that still has unanswered calls."""
        return self._step[0].id if self._step and self._pending else None

    @property
    def pending_calls(self) -> list[str]:
        """The ids (as the file has them) of the latest step's calls still waiting for their result."""
        return [p.source_id for p in self._pending]

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

        `source_ids` are the file's ids of the message's calls when `unique_calls` renamed any. A system
        message while calls are pending is a harness notice: held until the step's results are in.
        """
        if message.role == "system" and self._pending:
            self.hold(lambda: message, index)
            return
        self.interrupt()
        self.messages.append(message)
        calls = message.tool_calls
        if calls:
            sources = list(source_ids) or [call.id for call in calls]
            self._step = (message, index)
            self._pending = [
                Pending(s, c.id, c.name, k) for k, (s, c) in enumerate(zip(sources, calls, strict=True))
            ]

    def hold(self, notice: Callable[[], Message], index: int) -> None:
        """Keep a harness notice that came while calls are pending (`notice` makes it when it is stored,
        so an id that depends on its place is the place it gets): it goes right after the step's last
        result, or after the synthetic results when the step is closed without them."""
        self._held.append((notice, index))

    def _release(self) -> None:
        held, self._held = self._held, []
        step = self._step[0].id if self._step else "?"
        for notice, index in held:
            message = notice()
            self.messages.append(message)
            role = (message.metadata or {}).get("role", message.role)  # a developer message says so
            detail = (
                f"{role} message {message.id!r} came between the calls of message {step!r} and "
                "their results; stored after the results"
            )
            self.repair("notice_after_results", detail, index, message_id=message.id)

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
        if not self._pending:
            self._release()

    def interrupt(self) -> None:
        """Answer the calls still pending with synthetic results: something other than a result follows."""
        self._close(final=False)

    def finish(self) -> None:
        """End the session: calls still pending get synthetic results too (never left pending)."""
        self._close(final=True)

    def _orphan(self, source_id: str, name: str | None, index: int, message_id: str) -> TextPart:
        """Close the step before a result that answers no pending call; the note that will head it."""
        self.interrupt()
        detail = f"the result of call {source_id!r} answers no pending call; kept as user text"
        self.repair("orphan_result_as_text", detail, index, message_id=message_id, call_id=source_id)
        label = f" ({name})" if name else ""
        return TextPart(text=f"[result of tool call {source_id!r}{label}, which answers no pending call]\n")

    def _close(self, *, final: bool) -> None:
        if not (self._step and self._pending):
            return
        step, index = self._step
        for pending in self._pending:
            if self._synthetic_id is None or final:
                message_id = f"{step.id}/interrupted-{pending.position}"
            else:
                message_id = self._synthetic_id(step, pending)
            if pending.name in self._ending_tools:
                message, repair = session_end(
                    pending.call_id, pending.name, step_id=step.id, id=message_id, line=self._line_of(index)
                )
                message = msgspec.structs.replace(message, created_at=step.created_at)
            else:
                message, repair = interrupted(
                    pending.call_id,
                    pending.name,
                    step_id=step.id,
                    created_at=step.created_at,
                    id=message_id,
                    line=self._line_of(index),
                    final=final,
                )
            self.messages.append(message)
            self.repairs.append(repair)
        self._pending = []
        self._release()


class SessionBuilder:
    """A `History` for formats whose messages carry no ids: each message's id is `<session>/<position>`.

    A synthetic result that another message follows takes the next position as well (the ids these
    formats have always stored); message and tool-result errors name the record's `Where`.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._lines: list[int | None] = []
        self.history = History(self._lines.__getitem__, synthetic_id=self._next_id)

    @property
    def messages(self) -> list[Message]:
        """The messages so far."""
        return self.history.messages

    def add(
        self,
        role: Role,
        parts: Sequence[Part],
        where: Where,
        created_at: datetime,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Append a system, user or assistant message (answering pending calls as interrupted first; a
        system message then is a harness notice, stored after the results: `History.hold`)."""
        index = self._record(where)

        def make() -> Message:
            message = Message(
                id=self._next_id(),
                role=role,
                parts=tuple(parts),
                created_at=created_at,
                metadata=metadata or None,
            )
            return where.check(message)

        if role == "system" and self.history.pending_calls:
            self.history.hold(make, index)
            return
        self.history.interrupt()
        self.history.add(make(), index)

    def add_result(
        self, result: ToolResult, where: Where, created_at: datetime, metadata: dict[str, Any] | None = None
    ) -> None:
        """Append a tool message, or user text saying so when the result answers no pending call."""
        index = self._record(where)
        if not self.history.is_pending(result.call_id):
            self.history.interrupt()  # an orphan's position comes after the synthetic results
        try:
            self.history.add_result(
                result.call_id,
                result.content,
                id=self._next_id(),
                created_at=created_at,
                index=index,
                is_error=result.is_error,
                metadata=metadata or None,
            )
        except InvalidMessage as exc:
            raise where.error(str(exc)) from exc

    def session(self, **fields: Any) -> ParsedSession:
        """The finished session (`fields` go to `ParsedSession`)."""
        history = self.history
        history.finish()
        return ParsedSession(
            session_id=self.session_id,
            messages=history.messages,
            repairs=history.repairs,
            warnings=history.warnings,
            **fields,
        )

    def _next_id(self, *_: object) -> str:
        return f"{self.session_id}/{len(self.history.messages)}"

    def _record(self, where: Where) -> int:
        self._lines.append(where.line)
        return len(self._lines) - 1
