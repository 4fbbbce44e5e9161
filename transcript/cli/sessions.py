"""Commands about a store's sessions: sessions, import, show, export, copy."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import click
import msgspec

from transcript.cli.options import (
    db_option,
    format_option,
    open_store,
    pick_session,
    session_option,
    shown_point,
    view_data,
    view_lines,
    wire_data,
    wire_option,
)
from transcript.cli.output import echo_json, emit, message_lines, safe, table
from transcript.formats import IMPORTERS
from transcript.session.replay import view_at


@click.command()
@db_option
@format_option
def sessions(db_path: str | None, fmt: str) -> None:
    """List the sessions of the store: message counts, versions and head hashes (keep a head hash to
    check the session later with `verify --expect-head`)."""
    with open_store(db_path, readonly=True) as store:
        rows = store.sessions()
    emit(
        rows,
        fmt,
        text=table(
            [(s.session_id, s.messages, s.version, s.head_hash[:16]) for s in rows],
            ("session", "messages", "version", "head"),
        ),
    )


@click.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@db_option
@click.option(
    "--format",
    "source_format",
    type=click.Choice(["auto", *IMPORTERS]),
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
        if session.compactions:
            lines.append(
                f"  {session.compactions} compaction(s) the agent made itself imported in "
                f"{safe(session.session_id)} (strategy 'imported')"
            )
        lines += [
            f"  superseded in {safe(session.session_id)}: synthetic result {safe(m)} (a real result followed)"
            for m in session.superseded
        ]
    emit(report, output, text=lines)


@click.command()
@db_option
@session_option
@click.option("--stored", is_flag=True, help="Show the stored history instead of the model view.")
@click.option("--at", "point", default=None, help="Show the view at this point (a version, or 'last').")
@format_option
def show(db_path: str | None, session_id: str | None, stored: bool, point: str | None, fmt: str) -> None:
    """Show a session: its current model view (or the stored history), message by message."""
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
        view = (
            view_at(store.events, sid, shown_point(store, sid, point))
            if point
            else store.session(sid).visible_messages()
        )
    header = f"{safe(sid)}: {len(view)} messages, {view.tokens:,} tokens, source {view.source}"
    emit({"session": sid, "view": view_data(view)}, fmt, text=view_lines(view, header))


@click.command()
@db_option
@session_option
@wire_option("Render for a provider's request format.")
@click.option("--history", is_flag=True, help="Export the stored history instead of the model view.")
@click.option("--state", is_flag=True, help="Export the session-state document (Store.restore reads it).")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout."
)
def export(
    db_path: str | None, session_id: str | None, wire: str, history: bool, state: bool, output: Path | None
) -> None:
    """Export a session: its model view (optionally in a provider's wire format), history, or state."""

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
            data = msgspec.json.encode(wire_data(t.visible_messages(), wire))
    if output is None:
        echo_json(data.decode())
    else:
        write_private(output, data + b"\n")
        click.echo(f"wrote {output}", err=True)


def _history(messages: list[Any], wire: str) -> bytes:

    if wire == "openai":
        from transcript.formats.openai_chat import export as openai_export

        return openai_export(messages).rstrip("\n").encode()
    if wire == "anthropic":
        from transcript.formats.anthropic_messages import export as anthropic_export

        return msgspec.json.encode(anthropic_export(messages))
    return msgspec.json.encode(messages)


def write_private(path: Path, data: bytes) -> None:
    """Write an export readable by its owner only (mode 0600), atomically: the bytes go to a new file
    beside the target, synced, which then replaces the target. A link planted at the path is replaced,
    never followed, and no reader ever sees half an export."""
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as exc:
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise click.ClickException(f"cannot write {safe(str(path))}: {exc.strerror}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@click.command()
@click.argument("phrase")
@db_option
@click.option("--session", "session_id", default=None, help="Search this session only.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Most matches shown."
)
@format_option
def search(phrase: str, db_path: str | None, session_id: str | None, limit: int, fmt: str) -> None:
    """Find messages whose text holds PHRASE (its words in this order), best matches first.

    Full-text search is opt-in: the first search of a file builds its index, and from then on every
    message is indexed as it is stored (nothing is indexed, and nothing is paid, until then).
    """
    with open_store(db_path) as store:
        hits = store.search(phrase, session_id=session_id, limit=limit)
    lines = table(
        [(h.session_id, h.seq, h.role, h.snippet) for h in hits], ("session", "seq", "role", "match")
    )
    emit(hits, fmt, text=lines if hits else [f"no message holds {safe(phrase)!r}"])


@click.command()
@click.argument("source")
@click.argument("destination")
@click.option("--session", "session_ids", multiple=True, help="Copy this session (repeat it); default: all.")
@format_option
def copy(source: str, destination: str, session_ids: tuple[str, ...], fmt: str) -> None:
    """Copy sessions from one store to another (a file or a postgresql:// URL, either way).

    Each session is the very same log in both: its id, events, times and hashes, so `verify` passes
    on both sides and `export --state` gives the same document. A session the destination already
    holds at the same head is left as it is; one it holds otherwise is an error (nothing of it is
    written). Each session is copied in one transaction.
    """
    rows: list[dict[str, Any]] = []
    with open_store(source, readonly=True) as src, open_store(destination, must_exist=False) as dst:
        wanted = list(session_ids) or [info.session_id for info in src.sessions()]
        for session_id in wanted:
            pick_session(src, session_id)
            head = src.head(session_id)
            if dst.has_session(session_id):
                if dst.head(session_id) != head:
                    raise click.ClickException(
                        f"{safe(session_id)}: {dst.path} holds another log of this session; "
                        "nothing of it was copied"
                    )
                outcome = "already there"
            else:
                dst.restore(src.session(session_id).export_state(), exact=True)
                outcome = "copied"
            rows.append({"session_id": session_id, "version": head[0], "head": head[1], "outcome": outcome})
    lines = table(
        [[r["session_id"], r["version"], r["head"][:16], r["outcome"]] for r in rows],
        ["session", "version", "head", ""],
    )
    emit(rows, fmt, text=lines)
