"""The `transcript` command line: a thin click layer over functions that return data.

Progress and warnings go to stderr, results to stdout; domain failures exit 1, bad usage exits 2.
"""

from __future__ import annotations

import sys
from typing import Final

import click

from transcript.db import default_path
from transcript.errors import TranscriptError
from transcript.model import new_message_id

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1


@click.group()
@click.version_option(package_name="transcript-store")
def cli() -> None:
    """Append-only, event-sourced conversation memory for LLM agent loops."""


@cli.command()
@click.option(
    "--db", "db_path", default=None, help="Store file (default: $TRANSCRIPT_DB or ./transcript.db)."
)
@click.option(
    "--turns", default=40, show_default=True, type=click.IntRange(1, 100_000), help="Agent steps to append."
)
@click.option("--seed", default=7, show_default=True, help="Seed of the synthetic session.")
def demo(db_path: str | None, turns: int, seed: int) -> None:
    """Append a synthetic agent session turn by turn and print the model view's size after each turn."""
    from transcript.session import Transcript
    from transcript.synthetic import SyntheticSession

    path = db_path or default_path()
    session_id = f"demo-{new_message_id()}"
    try:
        with Transcript.open(path, session_id=session_id) as transcript:
            click.echo(f"store {path}, session {session_id}", err=True)
            click.echo(f"{'turn':>5} {'messages':>9} {'view tokens':>12}")
            for number, turn in enumerate(SyntheticSession(seed).turns(), start=1):
                transcript.append_turn(turn)
                view = transcript.visible_messages()
                click.echo(f"{number:>5} {len(view.messages):>9} {view.tokens:>12,}")
                if number >= turns:
                    break
    except TranscriptError as exc:
        raise click.ClickException(str(exc)) from exc


def main() -> None:
    """Entry point of the `transcript` script and `python -m transcript`."""
    sys.exit(cli.main(standalone_mode=True))
