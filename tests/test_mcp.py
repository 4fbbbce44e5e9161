"""`transcript mcp`: the `mcp` package's own client, in-process, against the server over a store of a
simulated corpus session; every tool answers what the command line prints with `--format json`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from tests.conftest import CORPUS
from transcript.cli import cli
from transcript.cli.serve import build_server

RUN = CORPUS / "sweagent_marshmallow-1867_fc.traj"
SESSION = "sim/sweagent_marshmallow-1867_fc"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mcp") / "transcript.db"
    done = CliRunner().invoke(cli, ["simulate", str(RUN), "--db", str(db), "--budget", "3500"])
    assert done.exit_code == 0, done.output
    CliRunner().invoke(cli, ["search", "TimeDelta", "--db", str(db)])  # builds the full-text index
    return db


def _cli(db: Path, *args: str) -> Any:
    done = CliRunner().invoke(cli, [*args, "--db", str(db), "--format", "json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def _calls(db: Path) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Each tool's arguments, and the command whose `--format json` it must answer."""
    return {
        "sessions": ({}, ["sessions"]),
        "search": ({"phrase": "TimeDelta", "limit": 5}, ["search", "TimeDelta", "--limit", "5"]),
        "timeline": ({"session": SESSION}, ["replay", "--session", SESSION]),
        "view": ({"point": "38", "session": SESSION}, ["replay", "--session", SESSION, "--at", "38"]),
        "diff": ({"before": "9", "after": "38"}, ["replay", "--diff", "9", "38"]),
        "checkpoint": ({}, ["checkpoint"]),
        "verify": ({"session": SESSION}, ["replay", "--verify", "--session", SESSION]),
    }


def _text(result: CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


async def _ask(db: Path, calls: dict[str, dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    async with Client(build_server(str(db))) as client:
        tools = await client.list_tools()
        answers = {}
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
            answers[name] = json.loads(_text(result))
        return [tool.name for tool in tools.tools], answers


def test_every_tool_answers_what_the_command_line_prints(store: Path) -> None:
    digest = hashlib.sha256(store.read_bytes()).hexdigest()
    calls = _calls(store)
    names, answers = asyncio.run(_ask(store, {name: arguments for name, (arguments, _) in calls.items()}))
    assert sorted(names) == sorted(calls)
    for name, (_, command) in calls.items():
        assert answers[name] == _cli(store, *command), name
    assert answers["verify"]["verified"] > 0 and answers["verify"]["drifts"] == []
    assert answers["checkpoint"]["goal"].startswith("We're currently solving")
    assert answers["diff"]["removed"]  # the full round at point 37 took messages out of the view
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest  # read-only: the file is unchanged


def test_tools_are_read_only_and_a_bad_call_is_an_error_result(store: Path) -> None:
    async def main() -> None:
        async with Client(build_server(str(store))) as client:
            tools = (await client.list_tools()).tools
            assert all(tool.annotations is not None and tool.annotations.read_only_hint for tool in tools)
            missing = await client.call_tool("view", {"point": "9999", "session": SESSION})
            assert missing.is_error and "no point 9999" in _text(missing)
            unknown = await client.call_tool("timeline", {"session": "nope"})
            assert unknown.is_error and "no session 'nope'" in _text(unknown)

    asyncio.run(main())


def test_the_command_names_a_missing_store(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["mcp", "--db", str(tmp_path / "absent.db")])
    assert done.exit_code == 1 and "absent.db" in done.output
    assert not (tmp_path / "absent.db").exists()


def test_the_command_serves_over_stdio(store: Path) -> None:
    script = Path(sys.executable).parent / "transcript"
    server = StdioServerParameters(
        command=str(script), args=["mcp", "--db", str(store), "--session", SESSION]
    )

    async def main() -> Any:
        async with Client(server) as client:
            assert "verify" in [tool.name for tool in (await client.list_tools()).tools]
            return json.loads(_text(await client.call_tool("verify", {})))

    assert asyncio.run(main()) == _cli(store, "replay", "--verify")
