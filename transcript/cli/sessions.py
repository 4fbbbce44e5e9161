"""Commands that read a store's sessions: sessions, show, search."""

from __future__ import annotations

from typing import Any, Final

import click

from transcript.cli.options import (
    db_option,
    format_option,
    open_store,
    print_view,
    session_option,
    shown_point,
    wire_option,
)
from transcript.cli.output import emit, message_lines, safe, to_builtins
from transcript.cli.picking import by_activity, pick_session
from transcript.cli.tables import cell, clip, table, terminal_width, wide_option
from transcript.formats.base import UNDATED_ISO
from transcript.model.message import Message
from transcript.session.replay import view_at
from transcript.session.store import Store
from transcript.store.port import SearchHit, SessionInfo


@click.command()
@db_option
@wide_option
@format_option
def sessions(db_path: str | None, wide: bool, fmt: str) -> None:
    """List the sessions of the store, the latest activity first: title, source format, the first and
    last message times (the session's own), messages, stored tokens, parent and head hash (keep it to
    check the session later with `verify --expect-head`; json and jsonl give it whole, and the version).

    On a terminal the text table fits its width: titles are cut (with "…"), then the columns that
    matter least are left out (first, parent, head, format, last) and long ids cut; --wide shows every
    column whole."""
    with open_store(db_path, readonly=True) as store:
        rows = by_activity(store.sessions())
        data = session_rows(store)
    emit(
        data,
        fmt,
        text=table(
            [
                (
                    s.session_id,
                    s.title if wide else clip(cell(s.title), TITLE_SHOWN),
                    s.source_format or "-",
                    _minute(s.first_at),
                    _minute(s.last_at),
                    s.messages,
                    s.stored_tokens,
                    s.parent_session_id or "",
                    s.head_hash if wide else s.head_hash[:16],
                )
                for s in rows
            ],
            ("session", "title", "format", "first", "last", "messages", "tokens", "parent", "head"),
            fit_to=None if wide else terminal_width(),
            fit=_SESSIONS_FIT,
        ),
    )


# How `sessions` fits a terminal: the title shorter, then the columns that matter least left out.
_SESSIONS_FIT: Final = (
    ("title", 32),
    ("first", None),
    ("parent", None),
    ("head", None),
    ("session", 48),
    ("title", 24),
    ("format", None),
    ("session", 36),
    ("last", None),
    ("title", 16),
    ("session", 24),
    ("title", 8),
)


def session_row(info: SessionInfo) -> dict[str, Any]:
    """A session as `sessions --format json` lists it."""
    data: dict[str, Any] = to_builtins(info)
    data["source_format"] = info.source_format
    return data


TITLE_SHOWN: Final = 48


def _minute(when: str) -> str:
    """An ISO time to the minute, as a column shows it (`2025-09-07 09:52`); "—" for a session that
    records no time (its messages are stored at `UNDATED`)."""
    if when.startswith(UNDATED_ISO):
        return "—"
    return when[:16].replace("T", " ")


@click.command()
@db_option
@session_option
@click.option("--stored", is_flag=True, help="Show the stored history instead of the model view.")
@click.option("--at", "point", default=None, help="Show the view at this point (a version, or 'last').")
@click.option("--tail", type=click.IntRange(min=1), default=None, help="Only the last N messages shown.")
@click.option(
    "--role",
    type=click.Choice(["system", "user", "assistant", "tool"]),
    multiple=True,
    help="Only messages of this role (repeatable).",
)
@wire_option("The view as a provider's request (JSON).")
@format_option
def show(
    db_path: str | None,
    session_id: str | None,
    stored: bool,
    point: str | None,
    tail: int | None,
    role: tuple[str, ...],
    wire: str,
    fmt: str,
) -> None:
    """Show a session: its current model view (or the stored history), message by message; --tail and
    --role show part of it (positions stay the view's)."""
    if stored and point is not None:
        raise click.UsageError("--stored shows the whole history; it takes no --at")
    if wire != "neutral" and (stored or tail or role):
        raise click.UsageError(
            "--wire prints the whole view as a request; it takes no --stored, --tail or --role"
        )
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, session_id)
        if stored:
            messages = store.session(sid).stored_messages()
            shown = _part(list(enumerate(messages)), tail, role)
            emit(
                [m for _, m in shown],
                fmt,
                text=[line for i, m in shown for line in message_lines(m, position=i)],
            )
            return
        view = (
            view_at(store.events, sid, shown_point(store, sid, point))
            if point
            else store.session(sid).visible_messages()
        )
    header = f"{safe(sid)}: {len(view)} messages, {view.tokens:,} tokens, source {view.source}"
    if not (tail or role):
        print_view(view, sid, header, fmt=fmt, wire=wire)
        return
    shown = _part(list(enumerate(view.messages)), tail, role)
    header += f" (showing {len(shown)})"
    data = {
        "session": sid,
        "messages": to_builtins([m for _, m in shown]),
        "positions": [i for i, _ in shown],
        "source": view.source,
        "tokens": view.tokens,
        "diagnostics": to_builtins(list(view.diagnostics)),
    }
    lines = [header, *(line for i, m in shown for line in message_lines(m, position=i))]
    emit(data, fmt, text=lines, rows=data["messages"])


def _part(
    messages: list[tuple[int, Message]], tail: int | None, roles: tuple[str, ...]
) -> list[tuple[int, Message]]:
    kept = [(i, m) for i, m in messages if not roles or m.role in roles]
    return kept[-tail:] if tail else kept


@click.command()
@click.argument("phrase")
@db_option
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Search this session only (its id, a unique prefix, its title, or 'latest').",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Most matches shown."
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="One match per session holding it (a message shared by forks and simulated copies is shown "
    "once by default, with the sessions that hold it).",
)
@wide_option
@format_option
def search(
    phrase: str,
    db_path: str | None,
    session_id: str | None,
    limit: int,
    every: bool,
    wide: bool,
    fmt: str,
) -> None:
    """Find messages whose text holds PHRASE (its words in this order), best matches first; a message
    shared by several sessions (forks, simulated copies) is listed once, with the others it is in.

    On a terminal the text table fits its width (the match, then the other columns, cut with "…");
    --wide shows every column whole.

    Full-text search is opt-in: the first search of a file builds its index, and from then on every
    message is indexed as it is stored (nothing is indexed, and nothing is paid, until then).
    """
    with open_store(db_path) as store:
        rows = search_rows(store, phrase, session_id, limit, every=every)
    # The "also in" column only when a match is shared (forks, simulated copies).
    shared = any(r["also_in"] for r in rows)
    lines = table(
        [
            (r["session_id"], r["seq"], r["role"], *([_others(r["also_in"])] if shared else []), r["snippet"])
            for r in rows
        ],
        ("session", "seq", "role", *(["also in"] if shared else []), "match"),
        fit_to=None if wide else terminal_width(),
        fit=_SEARCH_FIT,
    )
    emit(rows, fmt, text=lines if rows else [f"no message holds {safe(phrase)!r}"])


# How `search` fits a terminal: the match cut, then the others (a match shared names its sessions).
_SEARCH_FIT: Final = (
    ("match", 60),
    ("also in", 20),
    ("match", 40),
    ("session", 24),
    ("also in", None),
    ("match", 24),
)


def search_rows(
    store: Store, phrase: str, session_id: str | None, limit: int, *, every: bool = False
) -> list[dict[str, Any]]:
    """What `search --format json` prints: the best matches, a message shared by several sessions
    once with the others it is in (`every`: once per session)."""
    sid = pick_session(store, session_id) if session_id is not None else None
    if every:
        return [to_builtins(h) | {"also_in": []} for h in store.search(phrase, session_id=sid, limit=limit)]
    return _collapsed(lambda n: store.search(phrase, session_id=sid, limit=n), limit)


def session_rows(store: Store) -> list[dict[str, Any]]:
    """What `sessions --format json` prints: every session, the latest activity first."""
    return [session_row(s) for s in by_activity(store.sessions())]


def _collapsed(search: Any, limit: int) -> list[dict[str, Any]]:
    """The best `limit` messages matching, each once: its first hit, and the other sessions holding the
    same stored body. Hits come by rank, and the hits of one body share its rank, so they come
    together: once a message past the first `limit` has shown up (or no hit is left), the sessions of
    each of those are all known. Asked for in growing batches until then."""
    asked = limit
    while True:
        hits: list[SearchHit] = search(asked)
        by_message: dict[str, dict[str, Any]] = {}
        for hit in hits:
            row = by_message.get(hit.message_id)
            if row is None:
                by_message[hit.message_id] = to_builtins(hit) | {"also_in": []}
            elif hit.session_id != row["session_id"] and hit.session_id not in row["also_in"]:
                row["also_in"].append(hit.session_id)
        if len(by_message) > limit or len(hits) < asked:
            return list(by_message.values())[:limit]
        asked *= 4


def _others(sessions: list[str]) -> str:
    if not sessions:
        return ""
    return sessions[0] + (f" +{len(sessions) - 1}" if len(sessions) > 1 else "")
