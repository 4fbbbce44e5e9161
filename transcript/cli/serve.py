"""`transcript mcp`: a read-only MCP server over a store file (`pip install 'transcript-store[mcp]'`).

Its tools answer what the command line answers with `--format json`, the same JSON text: `sessions`
(`transcript sessions`), `search` (`transcript search`), `timeline` (`transcript replay`), `view`
(`transcript replay --at`), `diff` (`transcript replay --diff`), `checkpoint` (`transcript
checkpoint`) and `verify` (`transcript replay --verify`). Every call opens the store read-only, so
it sees what other processes committed and never writes; `session` may be left out when the store
holds one session, or when `--session` named the default. A failure is the tool's error result, its
text the command line's message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import click

from transcript.cli.history import diff_data
from transcript.cli.options import db_option, open_store, session_option, shown_point, view_data
from transcript.cli.output import json_text as _json, safe
from transcript.cli.picking import pick_session
from transcript.cli.sessions import search_rows, session_rows
from transcript.model.checkpoint import to_json
from transcript.model.errors import TranscriptError
from transcript.session.replay import check_served, timeline, view_at
from transcript.session.store import Store

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

NAME: Final = "transcript-store"


def build_server(db_path: str | None, default_session: str | None = None) -> MCPServer:
    """The server: one tool per read-only question the command line answers."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.types import ToolAnnotations
    except ImportError as exc:
        raise click.ClickException(
            "transcript mcp needs the MCP SDK: pip install 'transcript-store[mcp]'"
        ) from exc

    server: MCPServer = MCPServer(
        NAME,
        instructions="Read-only access to a transcript-store file: sessions, search, the model's "
        "view at any point, diffs between points, checkpoints and verification of served views.",
    )
    readonly = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)

    def reading(answer: Callable[[Store, str | None], str]) -> Callable[[str | None], str]:
        def run(session: str | None) -> str:
            try:
                with open_store(db_path, readonly=True) as store:
                    return answer(store, session if session is not None else default_session)
            except (TranscriptError, click.ClickException) as exc:  # the command line's message
                raise ToolError(
                    safe(exc.message if isinstance(exc, click.ClickException) else str(exc))
                ) from exc

        return run

    def sid(store: Store, session: str | None) -> str:
        return pick_session(store, session)

    @server.tool(annotations=readonly)
    def sessions() -> str:
        """Every session of the store: id, message count, version, head hash (as `transcript sessions`)."""
        return reading(lambda store, _: _json(session_rows(store)))(None)

    @server.tool(annotations=readonly)
    def search(phrase: str, session: str | None = None, limit: int = 20) -> str:
        """Messages whose text holds the phrase, best first (as `transcript search`)."""
        return reading(lambda store, s: _json(search_rows(store, phrase, s, limit)))(session)

    @server.tool(name="timeline", annotations=readonly)
    def timeline_of(session: str | None = None) -> str:
        """The session's timeline: one row per model call and compaction (as `transcript replay`)."""
        return reading(lambda store, s: _json(timeline(store.events, sid(store, s))))(session)

    @server.tool(annotations=readonly)
    def view(point: str = "last", session: str | None = None) -> str:
        """The exact view the model was sent at a point: a version or 'last' (as `replay --at`)."""

        def answer(store: Store, s: str | None) -> str:
            chosen = sid(store, s)
            return _json(view_data(view_at(store.events, chosen, shown_point(store, chosen, point)), chosen))

        return reading(answer)(session)

    @server.tool(annotations=readonly)
    def diff(before: str, after: str, session: str | None = None) -> str:
        """What changed in the view between two points (as `transcript replay --diff A B`)."""
        return reading(lambda store, s: _json(diff_data(store, sid(store, s), (before, after))[0]))(session)

    @server.tool(annotations=readonly)
    def checkpoint(session: str | None = None) -> str:
        """The latest checkpoint: what the last full compaction kept of the work (`transcript checkpoint`)."""

        def answer(store: Store, s: str | None) -> str:
            latest = store.session(sid(store, s)).latest_checkpoint()
            if latest is None:
                raise click.ClickException("this session has no checkpoint yet (no full compaction)")
            return to_json(latest)

        return reading(answer)(session)

    @server.tool(annotations=readonly)
    def verify(session: str | None = None) -> str:
        """Re-render every served view and compare (as `transcript replay --verify`): drifts, if any."""
        return reading(lambda store, s: _json(check_served(store.events, sid(store, s))))(session)

    return server


@click.command(name="mcp")
@db_option
@session_option
def mcp_command(db_path: str | None, session_id: str | None) -> None:
    """Serve the store read-only over MCP (stdio): sessions, search, views, diffs, checkpoints, verify.

    Needs the [mcp] extra. --session names the session the tools use when a call names none.
    """
    with open_store(db_path, readonly=True) as store:  # a missing or unreadable file fails here, clearly
        if session_id is not None:
            pick_session(store, session_id)
    build_server(db_path, session_id).run("stdio")
