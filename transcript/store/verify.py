"""`verify`: re-derive everything a store promises from its raw rows and name what does not match.

Triggers prevent tampering through SQL; this detects it when they were bypassed. It checks every
stored byte that can change a view or a count: each body's content hash and record digest (its
`created_at`, metadata, token counts and tokenizer), the counts against a recount (`deep=True`),
every session's hash chain, the history columns against the payloads, each session's head row
against its last event (so a deleted tail or a deleted session is named while the head row is
untouched), and the guard triggers by their SQL text. Where the head row was edited consistently too,
only an anchor kept elsewhere can tell: `expect_heads` compares heads with hashes the caller kept.
SQLite's own integrity check runs first (damaged pages or indexes). It opens the file read-only
(`mode=ro`) and never migrates or writes; it raises only when the file cannot be read at all.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from transcript.model.codec import decode_message
from transcript.model.errors import TranscriptError
from transcript.model.events import EVENT_DECODER, MessageAppended, MessageMarked
from transcript.model.hashing import GENESIS, body_hash, event_hash, record_digest
from transcript.store import connection as db, schema
from transcript.tokens import get_counter, message_tokens

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
    heads: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing was found wrong."""
        return not self.problems

    @property
    def first(self) -> Problem | None:
        """The first mismatch found, or None."""
        return self.problems[0] if self.problems else None


def verify(
    path: str | Path, *, deep: bool = False, expect_heads: Mapping[str, str] | None = None
) -> VerifyReport:
    """Check a store file end to end (see the module docstring).

    `deep=True` also recounts every body's tokens with the tokenizer that counted them.
    `expect_heads` maps session ids to head hashes kept elsewhere (e.g. printed by `transcript
    sessions --format json` earlier); a session whose head differs, or that is gone, is named.
    """
    target = str(path)
    # Damaged text is read with its bad bytes escaped, so the checks below can name it.
    conn = db.connect(target, readonly=True, timeout=5.0, synchronous="FULL", text_errors="surrogateescape")
    try:
        with db.translated(f"verifying {target}"):
            return _verify(conn, target, deep, dict(expect_heads or {}))
    finally:
        conn.close()


def _verify(conn: sqlite3.Connection, path: str, deep: bool, expected: dict[str, str]) -> VerifyReport:
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
        _check_pages(conn, problems)
        hashes = dict(_check_bodies(conn, problems, deep))
        sessions, events, lasts = _check_sessions(conn, hashes, problems)
        heads = _check_heads(conn, lasts, expected, problems)
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
        heads=heads,
    )


def _check_pages(conn: sqlite3.Connection, problems: list[Problem]) -> None:
    """SQLite's own check of the file's pages and indexes (a damaged index can hide rows)."""
    found = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
    if found != ["ok"]:
        problems.extend(Problem(code="file_damaged", detail=str(detail)) for detail in found)


def _check_bodies(conn: sqlite3.Connection, problems: list[Problem], deep: bool) -> Iterator[tuple[str, str]]:
    rows = conn.execute("SELECT message_id, hash, tokenizer, tokens, body, digest FROM bodies ORDER BY id")
    for message_id, stored_hash, tokenizer, tokens, body, digest in rows:
        yield message_id, stored_hash
        report = functools.partial(_body_problem, problems, message_id)
        if not all(isinstance(v, (bytes, str)) for v in (tokens, body, tokenizer, stored_hash, digest)):
            report("body_type", "a column holds a value of a type the store never writes")
            continue
        if _digest(body, tokens, tokenizer) != digest:
            report("body_record", "the stored record (time, metadata, counts or tokenizer) was edited")
        try:
            message = decode_message(_raw(body))
            counts = _TOKENS.decode(_raw(tokens))
        except (msgspec.DecodeError, TranscriptError) as exc:
            report("body_unreadable", str(exc))
            continue
        if message.id != message_id:
            report("body_id", f"body says id {message.id!r}")
        actual = body_hash(message)
        if actual != stored_hash:
            report("body_hash", f"content hashes to {actual[:12]}…, stored hash is {stored_hash[:12]}…")
        if len(counts) != len(message.parts) or any(count < 0 for count in counts):
            report("body_tokens", "token counts do not match the parts")
        elif deep:
            _recount(report, message, counts, tokenizer)


def _recount(report: Any, message: Any, counts: tuple[int, ...], tokenizer: str) -> None:
    try:
        counter = get_counter(tokenizer)
    except TranscriptError:
        report("body_tokenizer", f"counted by {tokenizer!r}, a tokenizer this release does not know")
        return
    recount = message_tokens(message, counter)
    if recount != counts:
        report("body_recount", f"stored counts {sum(counts):,} tokens, a recount gives {sum(recount):,}")


def _body_problem(problems: list[Problem], message_id: str, code: str, detail: str) -> None:
    problems.append(Problem(code=code, detail=detail, message_id=message_id))


def _digest(body: bytes | str, tokens: bytes | str, tokenizer: str) -> str | None:
    """The record digest of a row as stored; None when damaged text cannot even be hashed."""
    try:
        return record_digest(_raw(body), _raw(tokens), tokenizer)
    except UnicodeEncodeError:
        return None


def _chained(prev: str, session_id: str, version: int, recorded_at: str, payload: bytes) -> str | None:
    """An event's chained hash as stored; None when damaged text cannot even be hashed."""
    try:
        return event_hash(prev, session_id, version, recorded_at, payload)
    except UnicodeEncodeError:
        return None


def _raw(value: bytes | str) -> bytes:
    """A column's bytes as stored (text was read with its undecodable bytes escaped)."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _check_sessions(
    conn: sqlite3.Connection, hashes: dict[str, str], problems: list[Problem]
) -> tuple[int, int, dict[str, tuple[int, str]]]:
    # One pass over every event, grouped here: a session id damaged into text that is not UTF-8
    # could not even be sent back to SQLite as a query parameter.
    rows = conn.execute(
        "SELECT session_id, version, kind, seq, message_id, recorded_at, payload, hash FROM events "
        "ORDER BY session_id, version"
    )
    total = 0
    lasts: dict[str, tuple[int, str]] = {}
    for session_id, group in itertools.groupby(rows, key=lambda row: row[0]):
        count, last = _check_session(session_id, (row[1:] for row in group), hashes, problems)
        total += count
        lasts[session_id] = last
    return len(lasts), total, lasts


def _check_session(
    session_id: str, rows: Iterator[tuple[Any, ...]], hashes: dict[str, str], problems: list[Problem]
) -> tuple[int, tuple[int, str]]:
    members: set[str] = set()
    prev = GENESIS
    count = 0
    next_seq = 0
    last = (0, GENESIS)
    for version, kind, row_seq, row_message_id, recorded_at, payload, stored_hash in rows:
        count += 1
        last = (version, stored_hash)
        report = functools.partial(_report, problems, session_id, version)
        if isinstance(payload, bytes):
            # Rewritten as a BLOB (X'..', a cast): the row was edited outside the store.
            report("event_type", "payload is stored as a BLOB, not the JSON text the store writes")
        elif isinstance(payload, str):
            payload = _raw(payload)
        if (
            not isinstance(payload, bytes)
            or not isinstance(recorded_at, str)
            or not isinstance(stored_hash, str)
        ):
            report("event_type", "a column holds a value of a type the store never writes")
            prev = stored_hash if isinstance(stored_hash, str) else prev
            continue
        if version != count:
            report("event_gap", f"expected event {count}")
            count = version
        if _chained(prev, session_id, version, recorded_at, payload) != stored_hash:
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
    return count, last


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


def _check_heads(
    conn: sqlite3.Connection,
    lasts: dict[str, tuple[int, str]],
    expected: dict[str, str],
    problems: list[Problem],
) -> dict[str, str]:
    """Each session's head row against its last event, and against the heads the caller kept."""
    heads: dict[str, tuple[Any, Any]] = {
        row[0]: (row[1], row[2]) for row in conn.execute("SELECT session_id, version, hash FROM heads")
    }
    for session_id in sorted(set(heads) | set(lasts)):
        head, last = heads.get(session_id), lasts.get(session_id)
        if head is None:
            problems.append(
                Problem(code="head_missing", detail="the session has no head row", session_id=session_id)
            )
        elif last is None:
            problems.append(
                Problem(
                    code="session_deleted",
                    detail=f"its head is version {head[0]}; no event is stored",
                    session_id=session_id,
                )
            )
        elif head[0] != last[0]:
            detail = f"its head is version {head[0]}, its last stored event is version {last[0]}"
            code = "events_deleted" if isinstance(head[0], int) and head[0] > last[0] else "head_mismatch"
            problems.append(Problem(code=code, detail=detail, session_id=session_id))
        elif head[1] != last[1]:
            problems.append(
                Problem(
                    code="head_mismatch",
                    detail="its head hash is not its last event's",
                    session_id=session_id,
                )
            )
    for session_id, kept in sorted(expected.items()):
        found = lasts.get(session_id, (0, None))[1]
        if found != kept:
            detail = f"expected head {kept[:12]}…, " + (
                f"found {found[:12]}…" if found else "the session is gone"
            )
            problems.append(Problem(code="head_unexpected", detail=detail, session_id=session_id))
    return {sid: last[1] for sid, last in lasts.items()}


def _check_guards(conn: sqlite3.Connection, problems: list[Problem]) -> None:
    """Every guard trigger and every view present, with exactly the SQL this release creates."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')")
    present = {(kind, name): sql for kind, name, sql in rows}
    for name, sql in schema.GUARD_SQL.items():
        if ("trigger", name) not in present:
            problems.append(Problem(code="guard_missing", detail=f"trigger {name} was dropped"))
        elif present["trigger", name] != sql:
            problems.append(Problem(code="guard_changed", detail=f"trigger {name} does not do what it must"))
    for name, sql in schema.VIEW_SQL.items():
        if present.get(("view", name)) != sql:
            problems.append(
                Problem(code="view_changed", detail=f"view {name} is missing or not what it must be")
            )
