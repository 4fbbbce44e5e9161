"""`verify`: re-derive everything a store promises from its raw rows and name what does not match.

Triggers prevent tampering through SQL; this detects it when they were bypassed. It re-hashes every
body, walks every session's hash chain, checks that the history columns of every event are exactly
what its payload says, and that every mark names a message of its session. It opens the file
read-only (`mode=ro`) and never migrates or writes.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec

from transcript.model import (
    EVENT_DECODER,
    MessageAppended,
    MessageMarked,
)
from transcript.model.codec import decode_message
from transcript.model.errors import TranscriptError
from transcript.model.hashing import GENESIS, body_hash, event_hash
from transcript.store import connection as db, schema

_TOKENS: Final = msgspec.json.Decoder(tuple[int, ...])


class Problem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One mismatch: a stable code, what is wrong, and where."""

    code: str
    detail: str
    session_id: str | None = None
    version: int | None = None
    seq: int | None = None
    message_id: str | None = None

    def __str__(self) -> str:
        where = [
            f"{name} {value!r}" if isinstance(value, str) else f"{name} {value}"
            for name, value in (
                ("session", self.session_id),
                ("event", self.version),
                ("seq", self.seq),
                ("message", self.message_id),
            )
            if value is not None
        ]
        return f"{self.code}: {self.detail}" + (f" ({', '.join(where)})" if where else "")


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` checked and every problem it found, content problems first."""

    path: str
    schema: tuple[str, ...]
    bodies: int
    sessions: int
    events: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when nothing was found wrong."""
        return not self.problems

    @property
    def first(self) -> Problem | None:
        """The first mismatch found, or None."""
        return self.problems[0] if self.problems else None


def verify(path: str | Path) -> VerifyReport:
    """Check a store file end to end. Raises only when the file cannot be read at all."""
    target = str(path)
    conn = db.connect(target, readonly=True, timeout=5.0, synchronous="FULL")
    try:
        with db.translated(f"verifying {target}"):
            return _verify(conn, target)
    finally:
        conn.close()


def _verify(conn: sqlite3.Connection, path: str) -> VerifyReport:
    problems: list[Problem] = []
    applied = schema.applied(conn)
    if tuple(applied) != schema.KNOWN:
        problems.append(
            Problem(
                code="schema",
                detail=f"migrations {applied} recorded, this release expects {list(schema.KNOWN)}",
            )
        )
        return VerifyReport(
            path=path, schema=tuple(applied), bodies=0, sessions=0, events=0, problems=tuple(problems)
        )
    conn.execute("BEGIN")
    try:
        hashes = dict(_check_bodies(conn, problems))
        sessions, events = _check_sessions(conn, hashes, problems)
        _check_guards(conn, problems)
    finally:
        conn.execute("ROLLBACK")
    return VerifyReport(
        path=path,
        schema=tuple(applied),
        bodies=len(hashes),
        sessions=sessions,
        events=events,
        problems=tuple(problems),
    )


def _check_bodies(conn: sqlite3.Connection, problems: list[Problem]) -> Iterator[tuple[str, str]]:
    rows = conn.execute("SELECT message_id, hash, tokens, body FROM bodies ORDER BY id")
    for message_id, stored_hash, tokens, body in rows:
        yield message_id, stored_hash
        try:
            message = decode_message(body)
            counts = _TOKENS.decode(tokens)
        except (msgspec.DecodeError, TranscriptError) as exc:
            problems.append(Problem(code="body_unreadable", detail=str(exc), message_id=message_id))
            continue
        if message.id != message_id:
            problems.append(
                Problem(code="body_id", detail=f"body says id {message.id!r}", message_id=message_id)
            )
        actual = body_hash(message)
        if actual != stored_hash:
            problems.append(
                Problem(
                    code="body_hash",
                    detail=f"content hashes to {actual[:12]}…, stored hash is {stored_hash[:12]}…",
                    message_id=message_id,
                )
            )
        if len(counts) != len(message.parts):
            problems.append(
                Problem(
                    code="body_tokens", detail="token counts do not match the parts", message_id=message_id
                )
            )


def _check_sessions(
    conn: sqlite3.Connection, hashes: dict[str, str], problems: list[Problem]
) -> tuple[int, int]:
    session_ids = [
        sid for (sid,) in conn.execute("SELECT DISTINCT session_id FROM events ORDER BY session_id")
    ]
    total = 0
    for session_id in session_ids:
        total += _check_session(conn, session_id, hashes, problems)
    return len(session_ids), total


def _check_session(
    conn: sqlite3.Connection, session_id: str, hashes: dict[str, str], problems: list[Problem]
) -> int:
    members: set[str] = set()
    prev = GENESIS
    count = 0
    next_seq = 0
    rows = conn.execute(
        "SELECT version, kind, seq, message_id, recorded_at, payload, hash FROM events "
        "WHERE session_id = ? ORDER BY version",
        (session_id,),
    )
    for version, kind, row_seq, row_message_id, recorded_at, payload, stored_hash in rows:
        count += 1
        report = functools.partial(_report, problems, session_id, version)
        if isinstance(payload, str):
            # Rewritten by a SQL text function (replace(), ||): the row was edited outside the store.
            report("event_type", "payload is stored as TEXT, not the BLOB the store writes")
            payload = payload.encode()
        if version != count:
            report("event_gap", f"expected event {count}")
            count = version
        if event_hash(prev, session_id, version, recorded_at, payload) != stored_hash:
            report("event_hash", "the event's hash chain does not match")
        prev = stored_hash
        try:
            event = EVENT_DECODER.decode(payload)
        except msgspec.DecodeError as exc:
            report("event_unreadable", str(exc))
            continue
        if event.kind != kind:
            report("event_kind", f"kind column {kind!r}, payload {event.kind!r}")
        if isinstance(event, MessageAppended):
            seq, message_id = event.seq, event.message_id
            if seq != next_seq:
                report("seq_gap", f"expected seq {next_seq}", seq, message_id)
            if (row_seq, row_message_id) != (seq, message_id):
                report(
                    "history_mismatch",
                    f"the history row says seq {row_seq} holds {row_message_id!r}",
                    seq,
                    message_id,
                )
            stored = hashes.get(message_id)
            if stored is None:
                report("body_missing", "no body stored for this message", seq, message_id)
            elif stored != event.body_hash:
                report(
                    "body_changed", "the stored body's hash differs from the one appended", seq, message_id
                )
            members.add(message_id)
            next_seq = seq + 1
        else:
            if row_seq is not None or row_message_id is not None:
                report(
                    "history_extra", "a history row on an event that appends nothing", row_seq, row_message_id
                )
            if isinstance(event, MessageMarked) and event.message_id not in members:
                report("mark_unknown", "marks a message not in the session", message_id=event.message_id)
    return count


def _report(
    problems: list[Problem],
    session_id: str,
    version: int,
    code: str,
    detail: str,
    seq: int | None = None,
    message_id: str | None = None,
) -> None:
    problems.append(
        Problem(
            code=code, detail=detail, session_id=session_id, version=version, seq=seq, message_id=message_id
        )
    )


def _check_guards(conn: sqlite3.Connection, problems: list[Problem]) -> None:
    present = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for name in schema.GUARDS:
        if name not in present:
            problems.append(Problem(code="guard_missing", detail=f"trigger {name} was dropped"))
