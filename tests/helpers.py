"""Helpers that read a store's file as SQL, for tests only (the library has no such API)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from transcript import Message, Store, Transcript
from transcript.model import MessageFlags, MessageMarked, apply_mark
from transcript.store.log import EventLog
from transcript.store.sqlite import SqliteRecorder


def connection(target: Store | Transcript | EventLog) -> sqlite3.Connection:
    """The raw connection behind a SQLite store (a file or `:memory:`)."""
    events = target if isinstance(target, EventLog) else target.events
    assert isinstance(events, EventLog) and isinstance(events.recorder, SqliteRecorder)
    return events.recorder.connection


def dump(target: Store | Transcript | EventLog) -> list[str]:
    """The file's content as SQL text: what tests compare to prove a file was left as it was."""
    return list(connection(target).iterdump())


def sql(
    target: Store | Transcript | EventLog, query: str, params: Sequence[Any] = ()
) -> list[tuple[Any, ...]]:
    """All rows of one SQL statement run on the store's own connection."""
    return connection(target).execute(query, params).fetchall()


def fold_marks(marks: Iterable[MessageMarked]) -> dict[str, MessageFlags]:
    """The flags per message id that a sequence of mark events leaves (the reference fold)."""
    flags: dict[str, MessageFlags] = {}
    for mark in marks:
        flags[mark.message_id] = apply_mark(flags.get(mark.message_id, MessageFlags()), mark)
    return flags


def write_marks(
    target: Store | Transcript, session_id: str, expected_version: int, marks: Sequence[MessageMarked]
) -> int:
    """Write mark events as the mutator would (tests that plant marks, good or bad); the new version."""
    from transcript.store.port import SessionWrite
    from transcript.store.writer import FlagWriter

    (done,) = FlagWriter(target.events).commit([SessionWrite(session_id, expected_version, marks, {})])
    return done.version


def append_summary(transcript: Transcript, summary: Message) -> int:
    """Append a summary message as the mutator would (its body prepared and counted); the new version."""
    from transcript.model import MessageAppended
    from transcript.store.bodies import prepare
    from transcript.store.port import SessionWrite
    from transcript.store.writer import FlagWriter

    body = prepare(summary, transcript.counter)
    event = MessageAppended(seq=len(transcript), message_id=body.message.id, body_hash=body.hash)
    write = SessionWrite(transcript.session_id, transcript.version, [event], {body.message.id: body})
    (done,) = FlagWriter(transcript.events).commit([write])
    return done.version
