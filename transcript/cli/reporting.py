"""`transcript report`: a session as one self-contained HTML file (`transcript.cli.report`)."""

from __future__ import annotations

import click

from transcript.cli.options import db_option, open_store, output_option
from transcript.cli.output import echo
from transcript.cli.picking import pick_session
from transcript.cli.report import gather, page


@click.command()
@click.argument("session", required=False)
@db_option
@click.option(
    "--session",
    "session_id",
    default=None,
    help="The session: its id, a unique prefix of it, its title, or 'latest' (or give it as SESSION).",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=None,
    help="The budget line drawn (default: the budget of the session's last compaction round).",
)
@output_option
def report(session: str | None, db_path: str | None, session_id: str | None, budget: int | None) -> None:
    """Write a session as one self-contained HTML page (no network): view and stored tokens at every
    model call against the budget, a marker per compaction with what it removed and cost, the
    checkpoint, and the exact view at any call (click a point) with what changed since the call
    before. Use -o FILE (stdout otherwise)."""
    if session is not None and session_id is not None:
        raise click.UsageError("name the session once: SESSION or --session")
    with open_store(db_path, readonly=True) as store:
        sid = pick_session(store, session if session is not None else session_id)
        document = page(gather(store, sid, budget))
    echo(document.rstrip("\n"))
