"""Storing what an importer parsed: every session of one file in one transaction.

Messages are checked, hashed and counted before the transaction opens; then all sessions are written
together, through the mutator (`mutate.imported`), so a bad record anywhere leaves the store exactly as
it was and what the recording says about its own view — the agent's compactions, records the model
never saw — is written as marks of the same transaction. Importing a file again is a no-op for what is
already there, and appends what is new when the stored session is a prefix of the file's (a recorded
session that kept growing). A synthetic "interrupted" result stored for a call that was unanswered at
the end of the file then gives way to the real result: it is excluded from the view, never deleted.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from transcript.formats import detect_format, parse
from transcript.formats.base import FormatError, ParsedSession, Repair
from transcript.formats.growing import PartialLine, noting_partial_lines
from transcript.model.errors import (
    ConflictError,
    InvalidArgument,
    InvalidMessage,
    TooManyRepairs,
    TranscriptError,
)
from transcript.model.events import Event, SessionStarted
from transcript.model.ids import check_session_id
from transcript.model.message import Message
from transcript.session.fold import LiveSession
from transcript.store.bodies import prepare
from transcript.store.port import EventStore, NewBody, SessionWrite, Written
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
    compactions: int = 0
    hidden: int = 0
    superseded: tuple[str, ...] = ()


class ImportReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What `Store.import_file` did: the detected format, one report per session, and the half-written
    last line of a file still being written that was left for the next import (`partial_lines`)."""

    path: str
    format: str
    sessions: tuple[SessionReport, ...]
    partial_lines: tuple[PartialLine, ...] = ()

    @property
    def messages(self) -> int:
        """Messages over all sessions of the file."""
        return sum(s.messages for s in self.sessions)

    @property
    def repairs(self) -> tuple[Repair, ...]:
        """Every repair over all sessions, in order."""
        return tuple(r for s in self.sessions for r in s.repairs)


def import_file(
    store: EventStore,
    counter: TokenCounter,
    path: str | Path,
    format: str = "auto",
    *,
    as_id: str | None = None,
    prefix: str = "",
    allow_repairs: bool = False,
) -> ImportReport:
    """Parse a file (detecting its format unless given) and store its sessions in one transaction;
    `as_id` names its session (and the sub-agents under it), `prefix` goes before every session id.
    A file whose calls would mostly be answered by synthetic results is refused (`TooManyRepairs`)
    unless `allow_repairs`."""
    read = read_import(path, format)
    return store_parsed(
        store,
        counter,
        path,
        read.format,
        renamed(read.sessions, as_id=as_id, prefix=prefix),
        partial_lines=read.partial_lines,
        allow_repairs=allow_repairs,
    )


class ReadFile(NamedTuple):
    """A file as an import reads it: its format, its sessions, the half-written lines left out."""

    format: str
    sessions: list[ParsedSession]
    partial_lines: tuple[PartialLine, ...] = ()


def read_file(path: str | Path, format: str = "auto") -> tuple[str, list[ParsedSession]]:
    """The format of a file (detected unless given) and its sessions as parsed: nothing is stored."""
    read = read_import(path, format)
    return read.format, read.sessions


def read_import(path: str | Path, format: str = "auto") -> ReadFile:
    """The format of a file (detected unless given), its sessions as parsed, and the half-written last
    line of each file read that was left for a later import (a file still being written); nothing is
    stored. A file refused in the format given is refused saying what the file looks like instead."""
    _check_file(path)
    with noting_partial_lines() as partial:
        name = detect_format(path) if format == "auto" else format
        try:
            sessions = parse(path, name)
        except FormatError as exc:
            if format == "auto":
                raise
            raise _looks_like(path, name, exc) from exc
    return ReadFile(name, sessions, tuple(partial.values()))


def _looks_like(path: str | Path, name: str, error: FormatError) -> FormatError:
    """The error of a file refused in the format it was said to be, naming the format it looks like."""
    from transcript.formats.registry import describe

    with noting_partial_lines():  # (what detection reads again is noted already)
        try:
            looks = detect_format(path)
        except FormatError:
            return error
    if looks == name:
        return error
    reason = (
        f"{error.reason}; this does not read as {describe(name)}, and the file looks like "
        f"{describe(looks)}: import it with --from {looks} (or without --from: the format is detected)"
    )
    return FormatError(error.path, error.line, reason)


def store_parsed(
    store: EventStore,
    counter: TokenCounter,
    path: str | Path,
    name: str,
    parsed: Sequence[ParsedSession],
    *,
    partial_lines: tuple[PartialLine, ...] = (),
    allow_repairs: bool = False,
    progress: Callable[[int], object] | None = None,
) -> ImportReport:
    """Store the sessions parsed from the file at `path` in format `name`, in one transaction; refused
    (`TooManyRepairs`, nothing stored) when synthetic results would answer too many of its calls,
    unless `allow_repairs` (`progress` is told how many more of the parsed messages were handled, as
    they are)."""
    if not allow_repairs:
        check_repairs(path, name, parsed)
    reports = import_sessions(store, counter, parsed, source=f"{name}:{Path(path).name}", progress=progress)
    return ImportReport(path=str(path), format=name, sessions=tuple(reports), partial_lines=partial_lines)


# A file read rightly needs a synthetic result for a call only where its agent was interrupted: at
# most a fifth of its calls (counted once it has this many); more says the results are not where the
# importer looks (another format, or a newer release of this one).
REPAIRED_SHARE: Final = 0.2
REPAIRED_MIN_CALLS: Final = 10


def repaired_calls(parsed: Sequence[ParsedSession]) -> tuple[int, int]:
    """The calls of the parsed sessions that synthetic "interrupted" results answer, and all calls.
    Calls still pending at the very end of a session (a file still being written) do not count."""
    repaired = calls = 0
    for session in parsed:
        calls += sum(len(m.tool_calls) for m in session.messages)
        tail = len(session.messages)
        while tail > 0 and session.messages[tail - 1].role == "tool":
            tail -= 1
        pending = {m.id for m in session.messages[tail:]}
        repaired += sum(
            1 for r in session.repairs if r.kind == "synthetic_result" and r.message_id not in pending
        )
    return repaired, calls


def check_repairs(path: str | Path, name: str, parsed: Sequence[ParsedSession]) -> None:
    """`TooManyRepairs` when synthetic results would answer more than a fifth of the file's calls."""
    repaired, calls = repaired_calls(parsed)
    if calls < REPAIRED_MIN_CALLS or repaired <= calls * REPAIRED_SHARE:
        return
    raise TooManyRepairs(
        f"{path}: read as {name}, {repaired} of its {calls} tool calls would be answered by a synthetic "
        f"'interrupted' result ({repaired / calls:.0%}; a file read rightly needs at most "
        f"{REPAIRED_SHARE:.0%}): its results are probably written in a way the {name} importer does not "
        "read, so the stored history would say those tools failed; nothing was imported. Try another "
        "format (--from), or import it as it is with --allow-repairs (allow_repairs=True)",
        path=str(path),
        repaired=repaired,
        calls=calls,
    )


def renamed(
    parsed: Sequence[ParsedSession], *, as_id: str | None = None, prefix: str = ""
) -> list[ParsedSession]:
    """The sessions of one file under other ids: `as_id` for its one top-level session (its
    sub-agents, `<id>/<call>`, keep their place under it), `prefix` before every id. The file's
    message ids are kept; each is stored in its new session's namespace, as any import's are."""
    if as_id is None and not prefix:
        return list(parsed)
    if as_id is not None:
        check_session_id(as_id)
    tops = [s.session_id for s in parsed if s.parent_session_id is None]
    if as_id is not None and len(tops) != 1:
        raise InvalidArgument(
            f"the file holds {len(tops)} top-level sessions; a name given for one (as_id) cannot name "
            "them all: give a prefix instead"
        )

    def new_id(old: str | None) -> str | None:
        if old is None:
            return None
        if as_id is not None and (old == tops[0] or old.startswith(f"{tops[0]}/")):
            old = as_id + old[len(tops[0]) :]
        return prefix + old

    return [
        msgspec.structs.replace(
            s,
            session_id=new_id(s.session_id),
            parent_session_id=new_id(s.parent_session_id),
            # A title that only repeated the old id (a file stem) says nothing: `import_title` finds one.
            title=None if s.title == s.session_id else s.title,
        )
        for s in parsed
    ]


def _check_file(path: object) -> None:
    """A path, or `InvalidArgument`; what the path names is checked as it is read (`formats.files`:
    a regular file of a readable size, or a `FormatError` saying what it is instead)."""
    if not isinstance(path, (str, Path)):
        raise InvalidArgument(f"import_file takes a path, not {type(path).__name__}")


def import_sessions(
    store: EventStore,
    counter: TokenCounter,
    parsed: Sequence[ParsedSession],
    *,
    source: str,
    progress: Callable[[int], object] | None = None,
) -> list[SessionReport]:
    """Store parsed sessions together; returns a report per session."""
    seen: set[str] = set()
    writes: list[SessionWrite] = []
    folds: list[LiveSession | None] = []  # the fold of each session a snapshot is due for
    reports: list[SessionReport] = []
    for session in parsed:
        check_session_id(session.session_id)
        if session.session_id in seen:
            raise InvalidMessage(f"{source}: session id {session.session_id!r} appears twice in one import")
        seen.add(session.session_id)
        write, appended, superseded, session, live = _plan_session(store, counter, session, source, progress)
        writes.append(write)
        folds.append(live if _snapshot_due(live, write, appended) else None)
        reports.append(
            SessionReport(
                session_id=session.session_id,
                messages=len(session.messages),
                tool_calls=sum(len(m.tool_calls) for m in session.messages),
                appended=appended,
                title=import_title(session),
                parent_session_id=session.parent_session_id,
                parent_call_id=session.parent_call_id,
                repairs=tuple(session.repairs),
                warnings=tuple(session.warnings),
                compactions=len(session.compactions),
                hidden=len(session.hidden),
                superseded=superseded,
            )
        )
    from mutate.imported import commit_import

    committed = commit_import(store, writes)
    for write, done, fold in zip(writes, committed, folds, strict=True):
        if fold is not None:
            _snapshot(store, fold, Written.of(write, done))
    return reports


def _snapshot_due(live: LiveSession, write: SessionWrite, appended: int) -> bool:
    """Whether an import's write adds enough to a session for a snapshot at its new head: as many
    events as a close needs (`snapshots.due_at_close`), counted from the import alone (a session
    already far past its newest snapshot gets one at its next close)."""
    from transcript.session import snapshots

    return snapshots.due_at_close(len(write.events), len(live.entries) + appended)


def _snapshot(store: EventStore, live: LiveSession, written: Written) -> None:
    """After a long import, a snapshot of the session at its new head (as a close writes one), so
    the first open of what was imported folds only the snapshot's record and reads only the bodies
    its view shows (a read-only open cannot write one itself): the fold the import planned against,
    with what it wrote folded in. It is a cache of the log: when the store does not take it (another writer
    moved the session on meanwhile) the import stands as it is."""
    from transcript.session import snapshots

    for version, event in written.versioned():
        live.apply(version, event, written.bodies)
    with contextlib.suppress(TranscriptError):  # (the import is committed whatever befalls its cache)
        snapshots.store(store, live)


def _plan_session(
    store: EventStore,
    counter: TokenCounter,
    session: ParsedSession,
    source: str,
    progress: Callable[[int], object] | None = None,
) -> tuple[SessionWrite, int, tuple[str, ...], ParsedSession, LiveSession]:
    """The write that brings the stored session up to the parsed one, how many messages it adds, the
    stored synthetic results it supersedes, the session as stored (its ids in its namespace), and
    the stored session's fold (before the write)."""
    from mutate.imported import Boundary, import_events

    loaded = store.load(session.session_id)
    live = LiveSession(session.session_id, counter.name)
    live.load(loaded.bodies)
    for version, event in loaded.events:
        live.apply(version, event, {})
    if not _stored_before_namespaces(live, session):
        session = in_namespace(session)
    parsed_ids = [message.id for message in session.messages]
    if len(set(parsed_ids)) != len(parsed_ids):
        raise InvalidMessage(f"{source}: session {session.session_id!r} holds one message id twice")
    new, superseded = _align(live, session)
    events: list[Event] = []
    if loaded.version == 0:
        events.append(
            SessionStarted(
                title=import_title(session),
                source=source,
                parent_session_id=session.parent_session_id,
                parent_call_id=session.parent_call_id,
                metadata=session.metadata or None,
            )
        )
    prepared: dict[str, NewBody] = {}
    if progress is not None:
        progress(len(session.messages) - len(new))  # (stored already)
    for message in new:
        item = prepare(message, counter)
        prepared[item.message.id] = item
        if progress is not None:
            progress(1)
    reopened = {
        result.call_id: result.name or "" for message in superseded for result in message.tool_results
    }
    try:
        live.check_order((item.message for item in prepared.values()), reopened=reopened)
    except InvalidMessage as exc:
        raise InvalidMessage(f"{source}: session {session.session_id!r}: {exc}") from exc
    compactions = {
        message_id: Boundary(
            compaction.trigger == "manual", _reason(compaction.source, compaction), compaction.kept
        )
        for message_id, compaction in session.compactions.items()
    }
    events.extend(
        import_events(
            live.entries,
            list(prepared.values()),
            hidden=session.hidden,
            superseded=[message.id for message in superseded],
            compactions=compactions,
            previous=live.results[-1] if live.results else None,
            source=source,
            usage=session.usage,
        )
    )
    write = SessionWrite(session.session_id, loaded.version, events, prepared)
    return write, len(prepared), tuple(message.id for message in superseded), session, live


def import_title(session: ParsedSession) -> str | None:
    """The title an imported session starts with: the one its file gives, unless that only repeats the
    session's id (a file stem, as SWE-agent and OpenHands files give): then the opening of its first
    real user request, harness markup taken out (`planner.intent.first_request`), on one line."""
    if session.title and session.title != session.session_id:
        return session.title
    from planner.intent import first_request

    request = first_request(session.messages)
    # Context a harness wraps in tags around the request (`<uploaded_files>…</uploaded_files>`,
    # `<environment_context>`) is no part of what the user asked, when something else is left.
    request = _WRAPPED.sub(" ", request).strip() or request
    return " ".join(request.split())[:TITLE_CHARS] or session.title


TITLE_CHARS: Final = 80
_WRAPPED: Final = re.compile(r"<([a-z][a-z0-9_-]*)>.*?</\1>", re.DOTALL)


def namespaced(session_id: str, message_id: str) -> str:
    """A message id as an import stores it: in its session's namespace, `<session>/<local id>`.

    The local id is the file's id without the session's own prefix (most importers give it already);
    `%` and `/` in the session id are escaped, so the first `/` always ends the namespace: two sessions
    can never store the same id, and no file can take the ids another file's messages need. A session
    id without either character keeps ids such as `run/3` exactly as they are.
    """
    prefix = f"{session_id}/"
    local = message_id[len(prefix) :] if message_id.startswith(prefix) else message_id
    return f"{session_id.replace('%', '%25').replace('/', '%2F')}/{local}"


def in_namespace(session: ParsedSession) -> ParsedSession:
    """The parsed session with every message id (and every reference to one) in its namespace."""
    sid = session.session_id
    renamed = {message.id: namespaced(sid, message.id) for message in session.messages}
    if all(old == new for old, new in renamed.items()):
        return session
    return msgspec.structs.replace(
        session,
        messages=[msgspec.structs.replace(m, id=renamed[m.id]) for m in session.messages],
        repairs=[
            msgspec.structs.replace(r, message_id=renamed.get(r.message_id, r.message_id))
            if r.message_id
            else r
            for r in session.repairs
        ],
        compactions={renamed.get(k, k): v for k, v in session.compactions.items()},
        hidden={renamed.get(k, k): v for k, v in session.hidden.items()},
        usage={renamed.get(k, k): v for k, v in session.usage.items()},
    )


def _stored_before_namespaces(live: LiveSession, session: ParsedSession) -> bool:
    """Whether the stored session was imported by a release that kept the file's ids as they are: it
    holds one of the file's ids that the namespace would change. Such a session keeps its ids, so
    importing the file again still adds only what is new."""
    if not live.entries:
        return False
    changed = {m.id for m in session.messages if namespaced(session.session_id, m.id) != m.id}
    return any(entry.message.id in changed for entry in live.entries)


def _align(live: LiveSession, session: ParsedSession) -> tuple[list[Message], list[Message]]:
    """The parsed messages not stored yet, in file order, and the stored synthetic results they supersede.

    The stored history must be the start of the parsed one, with two allowances for synthetic results.
    One already excluded (superseded by an earlier import) is passed over. One in the last stored step
    that the file no longer has gives way to what the file now has in its place — the real result, once
    the live session that recorded the unanswered call went on; the results of that step may then be
    stored in another order than the file's (results of one step may come in any order).
    """
    parsed = session.messages
    stored = [e.message for e in live.entries if not (e.flags.excluded and _synthetic(e.message))]
    stored_ids = [message.id for message in stored]
    if [message.id for message in parsed[: len(stored)]] == stored_ids:
        return parsed[len(stored) :], []
    conflict = ConflictError(
        f"session {session.session_id!r} already exists with a different history; nothing was imported"
    )
    parsed_ids = {message.id for message in parsed}
    last_step = max((k for k, m in enumerate(stored) if m.role != "tool"), default=-1)
    superseded = [m for m in stored[last_step + 1 :] if _synthetic(m) and m.id not in parsed_ids]
    gone = {message.id for message in superseded}
    kept, theirs = _blocks([m for m in stored if m.id not in gone]), _blocks(parsed)
    if not kept or len(kept) > len(theirs) or kept[:-1] != theirs[: len(kept) - 1]:
        raise conflict
    last, their_last = kept[-1], theirs[len(kept) - 1]
    if last != their_last and not (last[0] == "tool" and set(last[1:]) <= set(their_last[1:])):
        raise conflict
    done = set(stored_ids)
    at = sum(len(block) - 1 for block in theirs[: len(kept) - 1])
    return [m for m in parsed[at:] if m.id not in done], superseded


def _blocks(messages: list[Message]) -> list[tuple[str, ...]]:
    """The messages as blocks: one per message, but a run of tool messages is one block ("tool", ids)."""
    blocks: list[tuple[str, ...]] = []
    for message in messages:
        if message.role == "tool" and blocks and blocks[-1][0] == "tool":
            blocks[-1] = (*blocks[-1], message.id)
        else:
            blocks.append(("tool", message.id) if message.role == "tool" else ("message", message.id))
    return blocks


def _synthetic(message: Message) -> bool:
    return message.role == "tool" and (message.metadata or {}).get("synthetic") is True


def _reason(source: str, compaction: Any) -> str:
    detail = [f"trigger {compaction.trigger}"] if compaction.trigger else []
    if compaction.pre_tokens is not None:
        detail.append(f"{compaction.pre_tokens:,} tokens before")
    return f"{source}" + (f" ({', '.join(detail)})" if detail else "")
