"""What the commands share: the options every command takes, opening the store, picking a session.

Exit codes are named here: domain failures exit 1, bad usage 2, a check that found a problem
(`verify`, `replay --verify`) exits 3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import click

from projection.view import View
from transcript.cli.output import FORMATS, message_lines, safe, to_builtins
from transcript.session.store import Store
from transcript.store.location import ENV_VAR, absent, default_path

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_CHECK_FAILED: Final = 3

F = TypeVar("F", bound=Callable[..., Any])


def db_option(function: F) -> F:
    """`--db`: the store file (default `$TRANSCRIPT_DB` or ./transcript.db)."""
    return click.option(
        "--db",
        "db_path",
        default=None,
        metavar="PATH",
        help=f"Store file or postgresql:// URL (default: ${ENV_VAR} or ./transcript.db).",
    )(function)


def session_option(function: F) -> F:
    """`--session`: needed only when the store holds more than one session."""
    return click.option(
        "--session", "session_id", default=None, help="Session id (needed only when the store holds several)."
    )(function)


def format_option(function: F) -> F:
    """`--format`: text for people, json/jsonl for programs (exact)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="Output format.",
    )(function)


def open_store(db_path: str | None, *, readonly: bool = False, must_exist: bool = True) -> Store:
    """The store of `--db`; a missing file is a clear error for commands that only read."""
    path = db_path or default_path()
    if must_exist and absent(path):
        raise click.ClickException(f"no store at {path} (set --db or ${ENV_VAR})")
    return Store.open(path, readonly=readonly)


def pick_session(store: Store, session_id: str | None) -> str:
    """The session asked for, or the only one; several without `--session` is a usage error."""
    if session_id is not None:
        if not store.has_session(session_id):
            raise click.ClickException(f"no session {session_id!r} in {store.path}")
        return session_id
    sessions = store.sessions()
    if len(sessions) == 1:
        return sessions[0].session_id
    if not sessions:
        raise click.ClickException(f"{store.path} holds no session")
    names = ", ".join(safe(s.session_id) for s in sessions[:10]) + (", ..." if len(sessions) > 10 else "")
    raise click.UsageError(f"{store.path} holds {len(sessions)} sessions; pick one with --session ({names})")


def wire_option(help: str) -> Callable[[F], F]:
    """`--wire`: the view as a provider's request (`neutral` is the library's own form)."""
    return click.option(
        "--wire",
        type=click.Choice(["neutral", "openai", "anthropic"]),
        default="neutral",
        show_default=True,
        help=help,
    )


def wire_data(view: View, wire: str) -> Any:
    """A view as JSON-ready data in the form `--wire` names."""
    if wire == "openai":
        return view.to_openai()
    if wire == "anthropic":
        return view.to_anthropic()
    return view_data(view)


def view_lines(view: View, header: str) -> list[str]:
    """A view as text: the header, its diagnostics, then each message."""
    lines = [header, *(f"  {d.code}: {safe(d.message)}" for d in view.diagnostics)]
    return lines + [line for i, m in enumerate(view.messages) for line in message_lines(m, position=i)]


def view_data(view: View) -> dict[str, Any]:
    """A view as JSON-ready data: its messages, source, tokens and diagnostics."""
    return {
        "messages": to_builtins(list(view.messages)),
        "source": view.source,
        "tokens": view.tokens,
        "diagnostics": to_builtins(list(view.diagnostics)),
    }


def parse_point(point: str | None) -> int | Literal["last"]:
    """A point given on the command line: a version number or 'last'."""
    if point is None or point == "last":
        return "last"
    try:
        value = int(point)
    except ValueError:
        value = 0
    if value < 1:
        raise click.BadParameter(
            f"{point!r} is neither a version number (1 or more) nor 'last'", param_hint="--at"
        )
    return value


def shown_point(store: Store, session_id: str, at: str) -> int | Literal["last"]:
    """The point `--at` names, on the session's timeline: a point between two is snapped back to the
    one before it, and stderr says so."""
    from transcript.session.replay import snap_point

    point, note = snap_point(store.events, session_id, parse_point(at))
    if note:
        click.echo(safe(note), err=True)
    return point
