"""The command line on every fixture of the formats added for real users' files: import, export the view
in both wire formats (our validators and the SDKs' request types), simulate at a tight budget, then
`replay --verify`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from projection.wire.check import check_anthropic_request, check_openai_request
from tests.conftest import PROJECT_ROOT
from tests.test_wire import anthropic_sdk_problem, openai_sdk_problem
from transcript.cli import cli
from transcript.cli.options import EXIT_OK

FORMATS = PROJECT_ROOT / "fixtures" / "formats"
FILES = sorted(  # (Cline's ui_messages.json is read with its task's history)
    p
    for p in FORMATS.rglob("*.json*")
    if "subagents" not in p.parts and not p.name.endswith(".meta.json") and p.name != "ui_messages.json"
)


def invoke(args: list[str]) -> Result:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == EXIT_OK, (args, result.output)
    return result


def _json(args: list[str]) -> Any:
    return json.loads(invoke(args).stdout)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_import_export_simulate_and_verify(path: Path, tmp_path: Path) -> None:
    db, sim = str(tmp_path / "t.db"), str(tmp_path / "sim.db")
    report = _json(["import", str(path), "--db", db, "--output", "json"])
    assert report["format"] == path.relative_to(FORMATS).parts[0]
    for session in report["sessions"]:
        sid = session["session_id"]
        base = ["export", "--db", db, "--session", sid]
        history = _json([*base, "--history"])
        assert len(history) == session["messages"]
        assert (
            sum(len([p for p in m["parts"] if p["kind"] == "tool_call"]) for m in history)
            == session["tool_calls"]
        )
        openai, anthropic = _json([*base, "--wire", "openai"]), _json([*base, "--wire", "anthropic"])
        assert check_openai_request(openai) == () and openai_sdk_problem(openai) is None, sid
        assert check_anthropic_request(anthropic) == () and anthropic_sdk_problem(anthropic) is None, sid
        # simulate at 40% of the final view, then re-render every view it served
        tokens = _json(["show", "--db", db, "--session", sid, "--format", "json"])["tokens"]
        args = [
            "simulate",
            str(path),
            "--db",
            sim,
            "--session",
            sid,
            "--budget",
            str(max(200, tokens * 2 // 5)),
        ]
        (run,) = _json([*args, "--format", "json"])
        model_calls = sum(
            1 for m in history if m["role"] == "assistant" and not (m.get("metadata") or {}).get("api_error")
        )
        assert run["totals"]["model_calls"] == model_calls
        verified = _json(["replay", "--db", sim, "--session", f"sim/{sid}", "--verify", "--format", "json"])
        assert verified == {"verified": model_calls, "drifts": []}


def test_the_import_command_offers_every_format() -> None:
    from transcript.formats import IMPORTERS

    text = CliRunner().invoke(cli, ["import", "--help"]).output
    assert all(name in text for name in IMPORTERS)
