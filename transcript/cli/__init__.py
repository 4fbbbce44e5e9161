"""The `transcript` command line: a thin click layer over functions that return data.

Results go to stdout, or to the file `-o` names (`--format text|json|jsonl`); progress and warnings go
to stderr; exit codes are named in `transcript.cli.options`, the shared vocabulary of options too.
Commands live in modules by subject (`serve` is the MCP server) and are registered here; none of
them imports this module.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import click

from transcript.cli import compaction, history, redaction, reporting, serve, sessions, simulation, transfer
from transcript.cli.files import write_private
from transcript.cli.options import EXIT_CHECK_FAILED, remember_db
from transcript.cli.output import safe, sink
from transcript.model.errors import TranscriptError


class TranscriptGroup(click.Group):
    """Turns every failure into a clean one-line message (exit 1), never a traceback: the library's
    typed errors as they are, anything else named as the bug it is. The result a command sent to
    `-o FILE` is written once it has succeeded (or once a check found a problem: its report is the
    result), never by a command that failed."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
        except SystemExit as exc:
            if exc.code == EXIT_CHECK_FAILED:
                _write_result()
            raise
        except TranscriptError as exc:
            raise click.ClickException(safe(str(exc))) from exc
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError as exc:
            if not _stdout_gone():
                raise click.ClickException(f"internal error, please report it: {safe(str(exc))}") from exc
            # The reader went away (`| head`): stop quietly, as other tools do, and let no flush at
            # exit write to the closed pipe again.
            with contextlib.suppress(OSError, ValueError):  # (a stdout with no file behind it)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            raise SystemExit(1) from None
        except Exception as exc:
            detail = safe(f"{type(exc).__name__}: {exc}")[:500]
            raise click.ClickException(f"internal error, please report it: {detail}") from exc
        _write_result()
        return result


def _stdout_gone() -> bool:
    """Whether stdout is a pipe its reader closed (what a broken pipe from `| head` is): polling
    such a pipe's write end reports an error."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # (no file behind stdout, or no poll here)
        return False


def _write_result() -> None:
    out = sink()
    if out.path is not None:
        if not out.written:
            write_private(out.path, "".join(out.chunks).encode("utf-8", "surrogateescape"))
        click.echo(f"wrote {safe(str(out.path))}", err=True)


@click.group(cls=TranscriptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="transcript-store")
@click.option(
    "--db",
    "db_path",
    default=None,
    metavar="PATH",
    expose_value=False,
    is_eager=True,
    callback=remember_db,
    help="Store file for the command (default: $TRANSCRIPT_DB, or ./transcript.db); a command's own "
    "--db wins.",
)
def cli() -> None:
    """Append-only, event-sourced conversation memory for LLM agent loops.

    Every command reads or writes one store file (--db, before or after the command; default
    $TRANSCRIPT_DB or ./transcript.db). --session picks a session by id, unique prefix, title or
    'latest'; --format text|json|jsonl is the output format; -o FILE writes the result to a file.
    """


for command in (
    sessions.sessions,
    transfer.import_,
    sessions.show,
    transfer.export,
    transfer.copy,
    sessions.search,
    transfer.restore,
    transfer.backup,
    compaction.compact,
    compaction.compacts,
    compaction.checkpoint,
    compaction.status,
    compaction.stats,
    history.replay_command,
    simulation.simulate,
    simulation.demo,
    history.fork,
    history.verify,
    serve.mcp_command,
    reporting.report,
    redaction.redact,
    redaction.erase,
    redaction.purge,
    redaction.scan_secrets,
):
    cli.add_command(command)


def main() -> None:
    """Entry point of the `transcript` script and `python -m transcript`."""
    sys.exit(cli.main(standalone_mode=True))


__all__ = ["cli", "main"]
