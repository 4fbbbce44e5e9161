"""Storing what an importer parsed: every session of one file in one transaction.

Messages are checked, hashed and counted before the transaction opens; then all sessions are written
together, so a bad record anywhere leaves the store exactly as it was. Importing a file again is a
no-op for what is already there, and appends what is new when the stored session is a prefix of the
file's (a recorded session that kept growing).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from transcript.formats import detect_format, parse
from transcript.formats.base import FormatError, ParsedSession, Repair
from transcript.model.errors import ConflictError, InvalidArgument, InvalidMessage
from transcript.model.events import Event, MessageAppended, SessionStarted
from transcript.model.ids import check_session_id
from transcript.session.fold import LiveSession
from transcript.store.bodies import prepare
from transcript.store.port import EventStore, NewBody, SessionWrite
from transcript.tokens import TokenCounter


class SessionReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One imported session: its size, what was newly written, and every repair and warning."""

    session_id: str
    messages: int
    tool_calls: int
    appended: int
    title: str | None = None
    parent_session_id: str | None = None
    parent_call_id: str | None = None
    repairs: tuple[Repair, ...] = ()
    warnings: tuple[str, ...] = ()


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What `Store.import_file` did: the detected format and one report per session."""

    path: str
    format: str
    sessions: tuple[SessionReport, ...]

    @property
    def messages(self) -> int:
        """Messages over all sessions of the file."""
        return sum(s.messages for s in self.sessions)

    @property
    def repairs(self) -> tuple[Repair, ...]:
        """Every repair over all sessions, in order."""
        return tuple(r for s in self.sessions for r in s.repairs)


def import_file(
    store: EventStore, counter: TokenCounter, path: str | Path, format: str = "auto"
) -> ImportReport:
    """Parse a file (detecting its format unless given) and store its sessions in one transaction."""
    _check_file(path)
    name = detect_format(path) if format == "auto" else format
    parsed = parse(path, name)
    reports = import_sessions(store, counter, parsed, source=f"{name}:{Path(path).name}")
    return ImportReport(path=str(path), format=name, sessions=tuple(reports))


# The largest file an import reads (recorded sessions run to tens of MB; this refuses a mistake).
MAX_IMPORT_BYTES: Final = 1 << 30


def _check_file(path: object) -> None:
    """A regular file of a readable size, or a `FormatError` saying what it is instead."""
    if not isinstance(path, (str, Path)):
        raise InvalidArgument(f"import_file takes a path, not {type(path).__name__}")
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise FormatError(path, None, f"cannot read it: {getattr(exc, 'strerror', None) or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise FormatError(path, None, f"{kind}; an import reads a recorded session file")
    if info.st_size > MAX_IMPORT_BYTES:
        raise FormatError(path, None, f"{info.st_size:,} bytes; an import reads at most {MAX_IMPORT_BYTES:,}")


def import_sessions(
    store: EventStore, counter: TokenCounter, parsed: Sequence[ParsedSession], *, source: str
) -> list[SessionReport]:
    """Store parsed sessions together; returns a report per session."""
    seen: set[str] = set()
    writes: list[SessionWrite] = []
    reports: list[SessionReport] = []
    for session in parsed:
        check_session_id(session.session_id)
        if session.session_id in seen:
            raise InvalidMessage(f"{source}: session id {session.session_id!r} appears twice in one import")
        seen.add(session.session_id)
        write, appended = _plan_session(store, counter, session, source)
        writes.append(write)
        reports.append(
            SessionReport(
                session_id=session.session_id,
                messages=len(session.messages),
                tool_calls=sum(len(m.tool_calls) for m in session.messages),
                appended=appended,
                title=session.title,
                parent_session_id=session.parent_session_id,
                parent_call_id=session.parent_call_id,
                repairs=tuple(session.repairs),
                warnings=tuple(session.warnings),
            )
        )
    store.commit(writes)
    return reports


def _plan_session(
    store: EventStore, counter: TokenCounter, session: ParsedSession, source: str
) -> tuple[SessionWrite, int]:
    """The write that brings the stored session up to the parsed one, and how many messages it adds."""
    loaded = store.load(session.session_id)
    live = LiveSession(session.session_id, counter.name)
    for body in loaded.bodies:
        live.add(body.message, body.tokens)
    stored_ids = [entry.message.id for entry in live.entries]
    parsed_ids = [message.id for message in session.messages]
    if parsed_ids[: len(stored_ids)] != stored_ids:
        raise ConflictError(
            f"session {session.session_id!r} already exists with a different history; nothing was imported"
        )
    if len(set(parsed_ids)) != len(parsed_ids):
        raise InvalidMessage(f"{source}: session {session.session_id!r} holds one message id twice")
    events: list[Event] = []
    if loaded.version == 0:
        events.append(
            SessionStarted(
                title=session.title,
                source=source,
                parent_session_id=session.parent_session_id,
                parent_call_id=session.parent_call_id,
                metadata=session.metadata or None,
            )
        )
    prepared: dict[str, NewBody] = {}
    for index, message in enumerate(session.messages[len(stored_ids) :], start=len(stored_ids)):
        item = prepare(message, counter)
        prepared[item.message.id] = item
        events.append(MessageAppended(seq=index, message_id=item.message.id, body_hash=item.hash))
    try:
        live.check_order(item.message for item in prepared.values())
    except InvalidMessage as exc:
        raise InvalidMessage(f"{source}: session {session.session_id!r}: {exc}") from exc
    return SessionWrite(session.session_id, loaded.version, events, prepared), len(prepared)
