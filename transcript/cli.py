"""The `transcript` command line: a thin click layer over functions that return data.

Results go to stdout (`--format text|json|jsonl` where the output is data), progress and warnings to
stderr. Exit codes are named: domain failures exit 1, bad usage 2, a check that found a problem
(`verify`, `replay --verify`) exits 3.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import click

from transcript.cli_output import FORMATS, emit, message_lines, safe, table, to_builtins
from transcript.db import ENV_VAR, default_path
from transcript.errors import TranscriptError
from transcript.store import Store

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
        help=f"Store file (default: ${ENV_VAR} or ./transcript.db).",
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
    if must_exist and path != ":memory:" and not Path(path).exists():
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


class TranscriptGroup(click.Group):
    """Turns the library's typed errors into clean one-line failures (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TranscriptError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=TranscriptGroup)
@click.version_option(package_name="transcript-store")
def cli() -> None:
    """Append-only, event-sourced conversation memory for LLM agent loops.

    Every command reads or writes one store file (--db, default $TRANSCRIPT_DB or ./transcript.db).
    """


@cli.command()
@db_option
@format_option
def sessions(db_path: str | None, fmt: str) -> None:
    """List the sessions of the store, with their message counts and versions."""
    with open_store(db_path, readonly=True) as store:
        rows = store.sessions()
    emit(
        rows,
        fmt,
        text=table([(s.session_id, s.messages, s.version) for s in rows], ("session", "messages", "version")),
    )


@cli.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@db_option
@click.option(
    "--format",
    "source_format",
    type=click.Choice(["auto", "claude-code", "openhands", "swe-agent", "openai-jsonl", "anthropic-json"]),
    default="auto",
    show_default=True,
    help="Format of FILE.",
)
@click.option(
    "--output", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Report format."
)
def import_(file: Path, db_path: str | None, source_format: str, output: str) -> None:
    """Import a recorded session file (all its sessions in one transaction) and report what was done."""
    with open_store(db_path, must_exist=False) as store:
        report = store.import_file(file, format=source_format)
    lines = [
        f"{safe(str(file))}: {report.format}, {len(report.sessions)} sessions, {report.messages} messages"
    ]
    lines += table(
        [
            (s.session_id, s.messages, s.tool_calls, s.appended, len(s.repairs), len(s.warnings))
            for s in report.sessions
        ],
        ("session", "messages", "tool calls", "new", "repairs", "warnings"),
    )
    for session in report.sessions:
        lines += [
            f"  repair in {safe(session.session_id)}: {r.kind}: {safe(r.detail)}" for r in session.repairs
        ]
        lines += [f"  warning in {safe(session.session_id)}: {safe(w)}" for w in session.warnings]
    emit(report, output, text=lines)


@cli.command()
@db_option
@session_option
@click.option("--stored", is_flag=True, help="Show the stored history instead of the model view.")
@click.option("--at", "point", default=None, help="Show the view at this point (a version, or 'last').")
@format_option
def show(db_path: str | None, session_id: str | None, stored: bool, point: str | None, fmt: str) -> None:
    """Show a session: its current model view (or the stored history), message by message."""
    from transcript.replay import view_at

    if stored and point is not None:
        raise click.UsageError("--stored shows the whole history; it takes no --at")
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, session_id)
        if stored:
            messages = store.session(sid).stored_messages()
            emit(
                messages,
                fmt,
                text=[line for i, m in enumerate(messages) for line in message_lines(m, position=i)],
            )
            return
        view = view_at(store, sid, parse_point(point)) if point else store.session(sid).visible_messages()
    header = f"{safe(sid)}: {len(view)} messages, {view.tokens:,} tokens, source {view.source}"
    lines = [header, *(f"  {d.code}: {safe(d.message)}" for d in view.diagnostics)]
    lines += [line for i, m in enumerate(view.messages) for line in message_lines(m, position=i)]
    emit({"session": sid, "view": view_data(view)}, fmt, text=lines)


@cli.command()
@db_option
@session_option
@click.option(
    "--wire",
    type=click.Choice(["neutral", "openai", "anthropic"]),
    default="neutral",
    show_default=True,
    help="Render for a provider's request format.",
)
@click.option("--history", is_flag=True, help="Export the stored history instead of the model view.")
@click.option("--state", is_flag=True, help="Export the session-state document (Store.restore reads it).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout."
)
def export(
    db_path: str | None, session_id: str | None, wire: str, history: bool, state: bool, output: Path | None
) -> None:
    """Export a session: its model view (optionally in a provider's wire format), history, or state."""
    import msgspec

    if state and (history or wire != "neutral"):
        raise click.UsageError("--state exports the whole log; it takes neither --history nor --wire")
    with open_store(db_path, readonly=True) as store:
        t = store.session(pick_session(store, session_id))
        data: bytes
        if state:
            data = t.export_state().to_json()
        elif history:
            data = _history(t.stored_messages(), wire)
        else:
            view = t.visible_messages()
            rendered: Any = {"openai": view.to_openai, "anthropic": view.to_anthropic}.get(
                wire, lambda: view_data(view)
            )()
            data = msgspec.json.encode(rendered)
    if output is None:
        click.echo(data.decode())
    else:
        output.write_bytes(data + b"\n")
        click.echo(f"wrote {output}", err=True)


def _history(messages: list[Any], wire: str) -> bytes:
    import msgspec

    if wire == "openai":
        from transcript.formats.openai_chat import export as openai_export

        return openai_export(messages).rstrip("\n").encode()
    if wire == "anthropic":
        from transcript.formats.anthropic_messages import export as anthropic_export

        return msgspec.json.encode(anthropic_export(messages))
    return msgspec.json.encode(messages)


def view_data(view: Any) -> dict[str, Any]:
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


def main() -> None:
    """Entry point of the `transcript` script and `python -m transcript`."""
    sys.exit(cli.main(standalone_mode=True))


# The other commands live in their own modules; importing them registers them on `cli`.
from transcript import cli_compact, cli_replay  # noqa: E402, F401

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "cli",
    "db_option",
    "emit",
    "format_option",
    "main",
    "message_lines",
    "open_store",
    "pick_session",
    "session_option",
    "to_builtins",
]
