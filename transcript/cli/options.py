"""What the commands share: one vocabulary of options, opening the store, printing a view.

The vocabulary, the same in every command (the README's table): `--db PATH` (also before the command),
`--session` (an id, a unique prefix, a title or `latest`: `transcript.cli.picking`), `--format
text|json|jsonl` (always the output format, one shape per format), `--from` (the input format of a
file), `-o/--output FILE` (the result goes to a new 0600 file instead of stdout, or through a FIFO or
a character device: `files.write_to`), `--wire` (a printed
view in a provider's request form), `--at` (a point of the timeline), `-h/--help`.

Exit codes are named here: domain failures exit 1, bad usage 2, a check that found a problem
(`verify`, `replay --verify`) exits 3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import click

from projection.view import View
from transcript.cli import legacy
from transcript.cli.files import check_store_path, created_or_removed
from transcript.cli.output import FORMATS, emit, message_lines, safe, send_to, to_builtins
from transcript.session.store import Store
from transcript.store.location import ENV_VAR, absent, default_path

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_CHECK_FAILED: Final = 3
WIRES: Final = ("neutral", "openai", "responses", "anthropic")

F = TypeVar("F", bound=Callable[..., Any])
_GLOBAL_DB: Final = "transcript.db"


def remember_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """The group's `--db`: kept for every command that is not given its own."""
    if value is not None:
        ctx.meta[_GLOBAL_DB] = value
    return value


def db_option(function: F) -> F:
    """`--db`: the store file (default: the one given before the command, `$TRANSCRIPT_DB`, or
    ./transcript.db)."""
    return click.option(
        "--db",
        "db_path",
        default=None,
        metavar="PATH",
        help=f"Store file or postgresql:// URL (default: --db before the command, ${ENV_VAR}, or "
        "./transcript.db).",
    )(function)


def store_path(db_path: str | None) -> str:
    """The store a command works on: its own `--db`, the group's, `$TRANSCRIPT_DB`, ./transcript.db."""
    ctx = click.get_current_context(silent=True)
    given = db_path or (ctx.meta.get(_GLOBAL_DB) if ctx is not None else None)
    return str(given or default_path())


def session_option(function: F) -> F:
    """`--session`: needed only when the store holds more than one session."""
    return click.option(
        "--session",
        "session_id",
        default=None,
        help="The session: its id, a unique prefix of it, its title, or 'latest' (needed only when "
        "the store holds several).",
    )(function)


_LEGACY_FORMAT: Final = "transcript.legacy-format"


def _send(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None and ctx.command.name == "import" and str(value) in ("text", "json"):
        legacy.warn(f"import --output {value}", f"import --format {value}")
        ctx.meta[_LEGACY_FORMAT] = str(value)
        value = None
    send_to(value)


def legacy_format(fmt: str) -> str:
    """`--format`, or the report format `import --output text|json` named (its old spelling)."""
    found = click.get_current_context().meta.get(_LEGACY_FORMAT)
    return str(found) if found is not None else fmt


def output_option(function: F) -> F:
    """`-o/--output FILE`: the result goes to a new file (mode 0600, replaced whole) instead of stdout, or
    through the FIFO or character device FILE names."""
    return click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_send,
        help="Write the result to this file (a new one, mode 0600, that replaces FILE whole) instead of "
        "stdout; a FIFO or a character device (or a link to one) is written through.",
    )(function)


def format_option(function: F) -> F:
    """`--format text|json|jsonl` (the output format: text for people, json one document, jsonl one
    row per line) and `-o/--output`."""
    return format_choice(FORMATS)(function)


def format_choice(choices: tuple[str, ...], default: str = "text") -> Callable[[F], F]:
    """`--format` with these choices, and `-o/--output`."""

    def decorate(function: F) -> F:
        function = click.option(
            "--format",
            "fmt",
            type=click.Choice(choices),
            default=default,
            show_default=True,
            help="Output format: text for people; json, one document; jsonl, one row per line.",
        )(function)
        return output_option(function)

    return decorate


@contextlib.contextmanager
def open_store(db_path: str | None, *, readonly: bool = False, create: bool = False) -> Iterator[Store]:
    """The store of `--db`. A command that only reads needs the file; one that may create it
    (`create=True`) removes the file again when it fails before storing any session."""
    path = store_path(db_path)
    check_store_path(path)
    if not create and absent(path):
        raise click.ClickException(f"no store at {safe(path)} (set --db or ${ENV_VAR})")
    with (
        created_or_removed(path) if create else contextlib.nullcontext(),
        Store.open(path, readonly=readonly) as store,
    ):
        yield store


def wire_option(help: str) -> Callable[[F], F]:
    """`--wire`: the view as a provider's request (`neutral` is the library's own form)."""
    return click.option("--wire", type=click.Choice(WIRES), default="neutral", show_default=True, help=help)


def wire_data(view: View, wire: str) -> Any:
    """A view as JSON-ready data in the form `--wire` names."""
    if wire == "openai":
        return view.to_openai()
    if wire == "responses":
        return view.to_responses()
    if wire == "anthropic":
        return view.to_anthropic()
    return view_data(view)


def view_lines(view: View, header: str) -> list[str]:
    """A view as text: the header, its diagnostics, then each message."""
    lines = [header, *(f"  {d.code}: {safe(d.message)}" for d in view.diagnostics)]
    return lines + [line for i, m in enumerate(view.messages) for line in message_lines(m, position=i)]


def view_data(view: View, session: str | None = None) -> dict[str, Any]:
    """A view as JSON-ready data: its session, messages, source, tokens and diagnostics."""
    data: dict[str, Any] = {} if session is None else {"session": session}
    return data | {
        "messages": to_builtins(list(view.messages)),
        "source": view.source,
        "tokens": view.tokens,
        "diagnostics": to_builtins(list(view.diagnostics)),
    }


def print_view(view: View, session: str, header: str, *, fmt: str, wire: str) -> None:
    """A view in the shape `--format` and `--wire` name: text lines; one JSON document; one message (or
    request item) per JSON line. A wire request is JSON: text prints it as one document."""
    if wire == "neutral":
        data = view_data(view, session)
        emit(data, fmt, text=view_lines(view, header), rows=data["messages"])
        return
    request = wire_data(view, wire)
    if fmt == "jsonl":
        if wire == "anthropic":
            raise click.UsageError(
                "an Anthropic request is one document (system and messages): use --format json"
            )
        emit(request, fmt)
    else:
        emit(request, "json")


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
