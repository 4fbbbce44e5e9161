"""Conversations from the `logs.db` of Simon Willison's `llm` (its message store, `llm` 0.36 and later).

`llm` keeps every message once, content-addressed (`messages`: hash, parent hash, role; `parts`: the
message's text, reasoning, tool calls and tool results in order), and a conversation is a thread
(`threads`) pointing at its newest message; each model call is a turn (`turns`: model, billed tokens,
time, the message it ended with). Each thread becomes one session (`llm-<thread id>`, titled by the
thread's name), its messages the chain from the first to the thread's newest, each id
`<thread id>/<k>` (a message shared by two threads, after a fork, is in both). Parts map one to one:
`text` → a text part, `reasoning` → a reasoning part (redacted when `llm` recorded only that reasoning
happened), `tool_call` → a call (a call without an id gets `<message id>/call-<k>`), `tool_result` →
the result of the call with its id (an `exception` makes it an error); an `attachment` has no form
here and is refused naming its message. A turn's tokens are the usage of the assistant message it
ended with.

The file is opened read-only and, unless the database is in use (its `-wal` beside it), as immutable:
nothing is written beside it. A `logs.db` of an older `llm` (a `responses` table, no message store)
is refused with a clear error: `llm` 0.36 keeps new conversations in the message store.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from transcript.formats.base import BadRecord, FormatError, ParsedSession
from transcript.formats.files import as_path, read_file
from transcript.formats.pairing import History, parse_time, undated_time
from transcript.model import Message, Part, ReasoningPart, TextPart, ToolCall
from transcript.model.usage import Usage

SQLITE_HEADER: Final = b"SQLite format 3\x00"
_TABLES: Final = ("threads", "messages", "parts")


def parse(path: str | Path) -> list[ParsedSession]:
    """Every conversation (thread) of an `llm` logs database that holds messages, oldest first."""
    path = as_path(path)
    if read_file(path, peek=len(SQLITE_HEADER)) != SQLITE_HEADER:  # a regular file, read safely
        raise FormatError(path, None, "not an llm logs database (not an SQLite file)")
    connection = _open(path)
    try:
        return _sessions(path, connection)
    except sqlite3.DatabaseError as exc:
        raise FormatError(path, None, f"the llm logs database cannot be read: {exc}") from exc
    finally:
        connection.close()


def _open(path: Path) -> sqlite3.Connection:
    in_use = Path(f"{path}-wal").exists()
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if in_use else "&immutable=1")
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise FormatError(path, None, f"the llm logs database cannot be opened: {exc}") from exc
    connection.row_factory = sqlite3.Row
    return connection


def _sessions(path: Path, db: sqlite3.Connection) -> list[ParsedSession]:
    tables = {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}
    if not set(_TABLES) <= tables:
        if "responses" in tables:
            raise FormatError(
                path, None, "an llm logs database of a release before 0.36 (no message store): not supported"
            )
        raise FormatError(path, None, "not an llm logs database (no threads, messages and parts tables)")
    fallback = undated_time(path)
    turns = _turns(db, tables)
    sessions = []
    for thread in db.execute("select * from threads order by datetime_utc, id").fetchall():
        chain = _chain(path, db, thread["tip_message_hash"], thread["id"])
        if not chain:
            continue
        sessions.append(_session(path, db, thread, chain, turns, fallback))
    if not sessions:
        raise FormatError(path, None, "the llm logs database holds no conversation")
    return sessions


def _turns(db: sqlite3.Connection, tables: set[str]) -> dict[str, sqlite3.Row]:
    if "turns" not in tables:
        return {}
    return {row["tip_message_hash"]: row for row in db.execute("select * from turns order by datetime_utc")}


def _chain(path: Path, db: sqlite3.Connection, tip: str | None, thread: str) -> list[sqlite3.Row]:
    rows: list[sqlite3.Row] = []
    seen: set[str] = set()
    current = tip
    while current is not None:
        if current in seen:
            raise FormatError(path, None, f"thread {thread!r}: its messages form a cycle at {current!r}")
        seen.add(current)
        row = db.execute("select * from messages where hash = ?", (current,)).fetchone()
        if row is None:
            raise FormatError(path, None, f"thread {thread!r}: message {current!r} is missing")
        rows.append(row)
        current = row["parent_hash"]
    rows.reverse()
    return rows


def _session(
    path: Path,
    db: sqlite3.Connection,
    thread: sqlite3.Row,
    chain: list[sqlite3.Row],
    turns: dict[str, sqlite3.Row],
    fallback: datetime,
) -> ParsedSession:
    thread_id = str(thread["id"])
    started, _ = _time(thread["datetime_utc"], fallback)
    history = History(lambda index: None)
    usage: dict[str, Usage] = {}
    when = started
    for k, row in enumerate(chain):
        message_id = f"{thread_id}/{k}"
        turn = turns.get(row["hash"])
        if turn is not None:
            when, _ = _time(turn["datetime_utc"], when)
        where = f"thread {thread_id!r}, message {k} ({row['hash']})"
        try:
            parts = _parts(db, row["hash"])
        except BadRecord as exc:
            raise FormatError(path, None, f"{where}: {exc}") from exc
        _add(history, row["role"], parts, message_id, when, k, where, path)
        if turn is not None and row["role"] == "assistant":
            usage[message_id] = Usage(
                input_tokens=int(turn["input_tokens"] or 0),
                output_tokens=int(turn["output_tokens"] or 0),
                model=turn["resolved_model"] or turn["model"],
            )
    history.finish()
    return ParsedSession(
        session_id=f"llm-{thread_id}",
        messages=history.messages,
        title=thread["name"] or None,
        metadata={"llm_thread": thread_id},
        repairs=history.repairs,
        warnings=history.warnings,
        usage=usage,
    )


def _time(value: object, fallback: datetime) -> tuple[datetime, bool]:
    try:
        return parse_time(value, fallback)
    except BadRecord:
        return fallback, False


def _parts(db: sqlite3.Connection, message_hash: str) -> list[dict[str, Any]]:
    """A message's parts as `llm` writes them (`Part.to_dict`): the type and text columns put back
    into the payload, text borrowed from fragments resolved."""
    out = []
    for row in db.execute("select * from parts where message_hash = ? order by position", (message_hash,)):
        try:
            payload = json.loads(row["payload"]) if row["payload"] else {}
        except ValueError as exc:
            raise BadRecord(f"part {row['position']}: its payload is not JSON") from exc
        if not isinstance(payload, dict):
            raise BadRecord(f"part {row['position']}: its payload is not an object")
        payload["type"] = row["type"]
        if row["text"] is not None:
            payload["text"] = row["text"]
        pieces = payload.pop("text_ref", None)
        if isinstance(pieces, list):
            payload["text"] = "".join(_piece(db, piece) for piece in pieces)
        out.append(payload)
    return out


def _piece(db: sqlite3.Connection, piece: object) -> str:
    if isinstance(piece, dict) and isinstance(piece.get("literal"), str):
        return str(piece["literal"])
    if isinstance(piece, dict) and "fragment" in piece:
        row = db.execute("select content from fragments where id = ?", (piece["fragment"],)).fetchone()
        if row is None:
            raise BadRecord(f"fragment {piece['fragment']!r} is missing")
        return str(row["content"])
    raise BadRecord("a text reference that is neither literal text nor a fragment")


def part_from_dict(part: dict[str, Any], message_id: str, k: int) -> Part | tuple[str, str, bool, str]:
    """One `llm` part (its `to_dict` form) as a part here; a tool result as (call id, output, is error,
    tool name). `BadRecord` for a part with no form here."""
    kind = part.get("type")
    if kind == "text":
        return TextPart(text=_str(part, "text"))
    if kind == "reasoning":
        return ReasoningPart(text=_str(part, "text"))  # redacted: empty, the fact that it happened
    if kind == "tool_call":
        arguments = part.get("arguments") if part.get("arguments") is not None else {}
        call_id = part.get("tool_call_id") or f"{message_id}/call-{k}"
        return ToolCall(id=str(call_id), name=_str(part, "name"), input=arguments)
    if kind == "tool_result":
        call_id = part.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise BadRecord(f"part {k}: a tool result without the id of its call")
        return call_id, _str(part, "output"), part.get("exception") is not None, _str(part, "name")
    raise BadRecord(f"part {k}: a part of type {kind!r} this store has no form for")


def _str(part: dict[str, Any], key: str) -> str:
    value = part.get(key, "")
    if not isinstance(value, str):
        raise BadRecord(f"a {part.get('type')} part's {key!r} must be text, not {type(value).__name__}")
    return value


def _add(
    history: History,
    role: str,
    parts: list[dict[str, Any]],
    message_id: str,
    when: datetime,
    index: int,
    where: str,
    path: Path,
) -> None:
    try:
        converted = [part_from_dict(part, message_id, k) for k, part in enumerate(parts)]
    except BadRecord as exc:
        raise FormatError(path, None, f"{where}: {exc}") from exc
    if role == "tool":
        for k, item in enumerate(converted):
            if not isinstance(item, tuple):
                raise FormatError(path, None, f"{where}: part {k} of a tool message is not a tool result")
            call_id, output, is_error, name = item
            history.add_result(
                call_id,
                output,
                id=f"{message_id}/{k}" if k else message_id,
                created_at=when,
                index=index,
                name=name or None,
                is_error=is_error,
            )
        return
    if any(isinstance(item, tuple) for item in converted):
        raise FormatError(path, None, f"{where}: a tool result in a {role} message")
    typed = [item for item in converted if not isinstance(item, tuple)]
    texts = [p for p in typed if isinstance(p, TextPart)]
    if role == "assistant":
        calls = [p for p in typed if isinstance(p, ToolCall)]
        reasoning = [p for p in typed if isinstance(p, ReasoningPart)]
        message = Message.assistant(
            "".join(p.text for p in texts),
            tool_calls=history.unique_calls(calls, message_id, index),
            reasoning=reasoning,
            id=message_id,
            created_at=when,
        )
    elif role == "user":
        message = Message.user(texts or [TextPart(text="")], id=message_id, created_at=when)
    elif role == "system":
        message = Message.system("".join(p.text for p in texts), id=message_id, created_at=when)
    else:
        raise FormatError(path, None, f"{where}: unknown role {role!r}")
    if len(texts) + sum(isinstance(p, (ToolCall, ReasoningPart)) for p in typed) != len(typed) or (
        role != "assistant" and len(texts) != len(typed)
    ):
        raise FormatError(path, None, f"{where}: a part a {role} message cannot hold")
    history.add(message, index)


__all__ = ["SQLITE_HEADER", "parse", "part_from_dict"]
