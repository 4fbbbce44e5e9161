"""Old spellings of the command line, kept for one release: each still works and says on stderr what
replaces it (the CHANGELOG lists them; they go in 0.3.0)."""

from __future__ import annotations

from typing import Final

import click

REMOVED_IN: Final = "0.3.0"


def warn(old: str, new: str) -> None:
    """Say on stderr that `old` is an old spelling of `new`."""
    click.echo(f"warning: `{old}` is an old spelling, removed in {REMOVED_IN}; use `{new}`", err=True)


def input_format(fmt: str, source_format: str | None, command: str) -> tuple[str, str | None]:
    """`--format NAME` where NAME is an input format (`import`'s old spelling of `--from`): the output
    format and the input format meant."""
    if fmt in ("text", "json", "jsonl"):
        return fmt, source_format
    warn(f"{command} --format {fmt}", f"{command} --from {fmt}")
    return "text", source_format or fmt
