"""The `transcript` command line: a thin click layer over functions that return data.

Results go to stdout (`--format text|json|jsonl` where the output is data), progress and warnings to
stderr; exit codes are named in `transcript.cli.options`. Commands live in modules by subject
(`sessions`, `compaction`, `history`, `serve`) and are registered here; none of them imports this module.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from transcript.cli import compaction, history, serve, sessions
from transcript.cli.output import safe
from transcript.model.errors import TranscriptError


class TranscriptGroup(click.Group):
    """Turns every failure into a clean one-line message (exit 1), never a traceback: the library's
    typed errors as they are, anything else named as the bug it is."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TranscriptError as exc:
            raise click.ClickException(safe(str(exc))) from exc
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            detail = safe(f"{type(exc).__name__}: {exc}")[:500]
            raise click.ClickException(f"internal error, please report it: {detail}") from exc


@click.group(cls=TranscriptGroup)
@click.version_option(package_name="transcript-store")
def cli() -> None:
    """Append-only, event-sourced conversation memory for LLM agent loops.

    Every command reads or writes one store file (--db, default $TRANSCRIPT_DB or ./transcript.db).
    """


for command in (
    sessions.sessions,
    sessions.import_,
    sessions.show,
    sessions.export,
    sessions.copy,
    sessions.search,
    compaction.compact,
    compaction.compacts,
    compaction.checkpoint,
    compaction.status,
    compaction.stats,
    history.replay_command,
    history.simulate,
    history.demo,
    history.fork,
    history.verify,
    serve.mcp_command,
):
    cli.add_command(command)


def main() -> None:
    """Entry point of the `transcript` script and `python -m transcript`."""
    sys.exit(cli.main(standalone_mode=True))


__all__ = ["cli", "main"]
