"""Commands that remove what should never have been stored: `redact`, `erase`, `purge`, `scan-secrets`.

Each is the one audited exception to append-only (`Store.redact`, `Store.erase`): recorded in the log,
accepted by `verify`, and the removed bytes purged from the file. Nothing here prints a secret.
"""

from __future__ import annotations

import click
import msgspec

from transcript.cli.options import EXIT_CHECK_FAILED, db_option, format_option, open_store, session_option
from transcript.cli.output import emit, safe
from transcript.cli.picking import pick_session
from transcript.cli.tables import table
from transcript.session.secrets import Finding, scan
from transcript.store.port import Erasure, Purged, Redaction

EXIT_NOT_GONE = EXIT_CHECK_FAILED


def _purged(purged: Purged) -> str:
    return "bytes gone: " + ("yes" if purged.gone else "NO") + f" ({purged.detail})"


@click.command()
@click.argument("message_id", required=False)
@db_option
@session_option
@click.option("--seq", type=int, default=None, help="The message at this seq of --session, not MESSAGE_ID.")
@click.option("--reason", required=True, help="Why (stored in the redaction event, shown in the view).")
@click.option("--part", "parts", type=int, multiple=True, help="Redact this part only (repeatable).")
@click.option("--by", default=None, help="Who redacts (default: this user).")
@format_option
def redact(
    message_id: str | None,
    db_path: str | None,
    session_id: str | None,
    seq: int | None,
    reason: str,
    parts: tuple[int, ...],
    by: str | None,
    fmt: str,
) -> None:
    """Replace a stored message (or parts of it) by a tombstone, everywhere it is held.

    Every session holding it gets a chained `message_redacted` event; summaries, checkpoints, stored
    errors and the search index are scrubbed of it in the same transaction, and the file is vacuumed
    with its WAL truncated. Exit 3 when the removed bytes could not be purged yet.
    """
    if (message_id is None) == (seq is None):
        raise click.UsageError("name the message: MESSAGE_ID, or --seq N (of --session)")
    with open_store(db_path) as store:
        if message_id is None:
            history = store.session(pick_session(store, session_id)).stored_messages()
            if not 0 <= (seq or 0) < len(history):
                raise click.UsageError(f"--seq {seq}: the session has seq 0 to {len(history) - 1}")
            message_id = history[seq or 0].id
        done = store.redact(message_id, reason=reason, parts=list(parts) or None, by=by)
    lines = [
        f"redacted {safe(message_id)} in {len(done.sessions)} sessions "
        f"({', '.join(safe(s) for s in done.sessions)}): {len(done.bodies)} bodies, "
        f"{done.events} event payloads rewritten",
        _purged(done.purged),
        f"salt of the removed-content digest (kept nowhere else): {done.salt}",
    ]
    emit(_shown(done), fmt, text=lines)
    if not done.bytes_gone:
        raise SystemExit(EXIT_NOT_GONE)


def _shown(done: Redaction | Erasure) -> dict[str, object]:
    """A result as the command prints it (without the store's change token)."""
    shown = msgspec.to_builtins(done)
    shown.pop("token", None)
    shown["bytes_gone"] = done.bytes_gone
    return dict(shown)


@click.command()
@click.argument("session_id")
@db_option
@click.option("--reason", required=True, help="Why (stored in the erasure event).")
@click.option("--by", default=None, help="Who erases (default: this user).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@format_option
def erase(session_id: str, db_path: str | None, reason: str, by: str | None, yes: bool, fmt: str) -> None:
    """Remove a whole session: its log becomes one audited erasure event, its bodies are deleted
    unless another session holds them, and the file is compacted."""
    with open_store(db_path) as store:
        session_id = pick_session(store, session_id)
        if not yes:
            click.confirm(f"erase session {safe(session_id)} from {safe(store.path)}?", abort=True)
        done = store.erase(session_id, reason=reason, by=by)
    lines = [
        f"erased {safe(session_id)}: {done.events} events replaced by one session_erased event, "
        f"{done.bodies} bodies deleted",
        _purged(done.purged),
    ]
    emit(_shown(done), fmt, text=lines)
    if not done.bytes_gone:
        raise SystemExit(EXIT_NOT_GONE)


@click.command()
@db_option
def purge(db_path: str | None) -> None:
    """Purge removed bytes again (after a reader that held the WAL open let go)."""
    with open_store(db_path) as store:
        done = store.purge()
    click.echo(_purged(done))
    if not done.gone:
        raise SystemExit(EXIT_NOT_GONE)


@click.command(name="scan-secrets")
@db_option
@session_option
@click.option("--redact", "redacting", is_flag=True, help="Redact the parts found, after a confirmation.")
@click.option("--yes", is_flag=True, help="With --redact: do not ask for confirmation.")
@format_option
def scan_secrets(db_path: str | None, session_id: str | None, redacting: bool, yes: bool, fmt: str) -> None:
    """List likely secrets (API keys, tokens, private keys) in stored messages: session, message,
    part, line and detector — never the secret itself. Every session, or the one --session names.
    Exit 3 when something was found (and kept)."""
    with open_store(db_path, readonly=not redacting) as store:
        sessions = (
            [pick_session(store, session_id)] if session_id else [s.session_id for s in store.sessions()]
        )
        report = scan(store.events, sessions)
        rows = [(f.session_id, f.seq, f.message_id, f.part, f.line, f.detector) for f in report.findings]
        lines = [
            f"scanned {report.messages} messages ({report.parts} parts): "
            f"{len(report.findings)} likely secrets"
        ]
        if rows:
            lines += table(rows, ("session", "seq", "message", "part", "line", "detector"))
        emit(report, fmt, text=lines)
        if not report.findings:
            return
        if not redacting:
            raise SystemExit(EXIT_NOT_GONE)
        if not yes:
            click.confirm(f"redact these {len(_targets(report.findings))} parts?", abort=True, err=True)
        for message_id, parts in _targets(report.findings).items():
            done = store.redact(message_id, reason="secret found by scan-secrets", parts=parts)
            click.echo(f"redacted {safe(message_id)} parts {parts}: {_purged(done.purged)}", err=True)


def _targets(findings: tuple[Finding, ...]) -> dict[str, list[int]]:
    targets: dict[str, list[int]] = {}
    for finding in findings:
        parts = targets.setdefault(finding.message_id, [])
        if finding.part not in parts:
            parts.append(finding.part)
    return targets
