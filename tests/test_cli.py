"""The `transcript` command line: every command, its success and failure paths, and its exit codes.

Most tests run the commands in-process with click's `CliRunner`; `test_every_command_runs_as_the_script`
runs each one as the installed script in a real subprocess. A recorded SWE-agent run simulated at a
tight budget (so that micro and full compaction both happen) is the shared fixture; commands that write
get their own copy of it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import msgspec
import pytest
from click.testing import CliRunner, Result

from projection.wire.check import check_anthropic_request, check_openai_request
from tests.conftest import CORPUS, PROJECT_ROOT
from transcript import Message, Store, ToolCall, Transcript
from transcript.cli import cli
from transcript.cli.options import EXIT_CHECK_FAILED, EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from transcript.formats import parse
from transcript.model.checkpoint import parse_checkpoint, to_markdown
from transcript.model.result import CompactResult
from transcript.model.state import SessionState
from transcript.session.replay import describe

SCRIPT = Path(sys.executable).parent / "transcript"
SWE_FC = CORPUS / "sweagent_marshmallow-1867_fc.traj"
SWE_GPT4 = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
OPENHANDS_SMALL = CORPUS / "openhands_basic_gui_mode.json"
CLAUDE_SMALL = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"  # a main session and two sub-agents
SIM = "sim/sweagent_marshmallow-1867_fc"
BUDGET = 3_500  # about 45% of the run's final view: micro and full compaction both happen
MODEL_CALLS = 13  # assistant messages of the marshmallow run
SPEC_COMMANDS = {
    "copy",  # issue 28: sessions between stores of either kind (SQLite, PostgreSQL)
    "search",  # issue 12: opt-in full-text search
    "restore",  # issue 25: a state document back into a store
    "backup",  # issue 25: a consistent copy while others write
    "report",  # issue 25: a session as one HTML page
    "redact",  # issue 27: redaction and erasure, the one audited exception
    "erase",
    "purge",
    "scan-secrets",
    "import",
    "simulate",
    "replay",
    "verify",
    "compact",
    "compacts",
    "checkpoint",
    "status",
    "stats",
    "show",
    "sessions",
    "export",
    "fork",
    "demo",
    "mcp",  # issue 24: a read-only MCP server (the [mcp] extra)
}
EVIL = "title\x1b]0;pwned\x07 clear\x1b[2J back\rover"
RAW_CONTROL = ("\x1b", "\x07", "\r")
Arg = str | Path | int


def run(args: Sequence[Arg], code: int | None = EXIT_OK, **kwargs: Any) -> Result:
    """Invoke the CLI in-process and check its exit code (None: the caller checks it); a failure must
    be a clean one."""
    result = CliRunner().invoke(cli, [str(a) for a in args], **kwargs)
    assert code is None or result.exit_code == code, (args, result.output, result.exception)
    code = result.exit_code
    if code != EXIT_OK:
        # A clean failure: click's SystemExit, never an exception escaping the command.
        assert isinstance(result.exception, SystemExit), result.exception
    if code in (EXIT_FAILURE, EXIT_USAGE):
        assert "Error:" in result.stderr and "Traceback" not in result.output
    return result


def run_json(args: Sequence[Arg]) -> Any:
    return json.loads(run(args).stdout)


def copy_db(source: Path, target: Path) -> Path:
    """A consistent copy of a store file (WAL included) through SQLite's backup API."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target


def event_rows(db: Path, session_id: str) -> list[tuple[int, str, str | None, bytes]]:
    """(version, kind, message_id, payload) of every event of a session, straight from SQLite."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT version, kind, message_id, payload FROM events WHERE session_id = ? ORDER BY version",
            (session_id,),
        ).fetchall()
    finally:
        conn.close()


def timeline(db: Path, session: str | None = None) -> list[dict[str, Any]]:
    args: list[Arg] = ["replay", "--db", db, "--format", "json"]
    return run_json([*args, "--session", session] if session else args)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def sim_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The marshmallow run simulated at a tight budget; read-only for the tests (copy it to write)."""
    db = tmp_path_factory.mktemp("sim") / "sim.db"
    run(["simulate", SWE_FC, "--budget", BUDGET, "--db", db])
    return db


@pytest.fixture
def writable(sim_db: Path, tmp_path: Path) -> Path:
    return copy_db(sim_db, tmp_path / "copy.db")


@pytest.fixture(scope="module")
def multi_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the three sessions of a Claude Code file (imported, never compacted)."""
    db = tmp_path_factory.mktemp("multi") / "multi.db"
    run(["import", CLAUDE_SMALL, "--db", db])
    return db


@pytest.fixture
def empty_session_db(tmp_path: Path) -> Path:
    """A store with one short session that has never been compacted."""
    db = tmp_path / "short.db"
    with Transcript.open(db, session_id="short") as t:
        t.append(Message.user("hello"))
        t.append(Message.assistant("hi"))
    return db


def test_the_commands_are_the_ones_the_spec_names() -> None:
    assert set(cli.commands) == SPEC_COMMANDS


def test_exit_codes_are_named_constants() -> None:
    assert (EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_CHECK_FAILED) == (0, 1, 2, 3)


@pytest.mark.parametrize("name", sorted(SPEC_COMMANDS))
def test_every_command_and_option_has_help_text(name: str) -> None:
    command = cli.commands[name]
    assert command.help and command.help.strip(), name
    assert command.get_short_help_str().strip(), name
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help and param.help.strip(), f"{name} {param.opts}"


@pytest.mark.parametrize("name", sorted(SPEC_COMMANDS))
def test_every_command_help_exits_zero(name: str) -> None:
    out = run([name, "--help"]).stdout
    assert out.startswith("Usage: ") and name in out.splitlines()[0]
    help_text = cli.commands[name].help or ""
    assert " ".join(help_text.split())[:40] in " ".join(out.split())


def test_top_level_help_lists_every_command_with_its_summary() -> None:
    out = run(["--help"]).stdout
    for name in SPEC_COMMANDS:
        assert f"  {name} " in out
    import tomllib

    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(["--version"]).stdout.strip().endswith(declared)


def test_an_unknown_command_is_a_usage_error() -> None:
    run(["frobnicate"], code=EXIT_USAGE)


def test_sessions_lists_every_session_in_text_json_and_jsonl(multi_db: Path) -> None:
    text = run(["sessions", "--db", multi_db]).stdout.splitlines()
    assert text[0].split() == [
        *("session", "title", "format", "first", "last", "messages", "tokens", "parent", "head")
    ]
    rows = run_json(["sessions", "--db", multi_db, "--format", "json"])
    assert len(rows) == 3 == len(text) - 1
    assert [r["session_id"] for r in rows] == [line.split()[0] for line in text[1:]]
    assert [r["last_at"] for r in rows] == sorted((r["last_at"] for r in rows), reverse=True)
    assert {r["source_format"] for r in rows} == {"claude-code"}
    assert all(r["first_at"] <= r["last_at"] and r["first_at"].startswith("2025-09-07") for r in rows)
    assert sum(r["parent_session_id"] is not None for r in rows) == 2
    heads = {r["session_id"]: r["head_hash"] for r in rows}
    assert all(len(h) == 64 for h in heads.values())
    assert {line.split()[0]: line.split()[-1] for line in text[1:]} == {s: h[:16] for s, h in heads.items()}
    checked: list[str | Path] = [
        "verify",
        "--db",
        multi_db,
        *(f"--expect-head={s}={h}" for s, h in heads.items()),
    ]
    assert run(checked).stdout.splitlines()[-1] == "ok"
    lines = run(["sessions", "--db", multi_db, "--format", "jsonl"]).stdout.splitlines()
    assert [json.loads(line) for line in lines] == rows


def test_sessions_on_a_missing_store_is_a_clean_failure(tmp_path: Path) -> None:
    result = run(["sessions", "--db", tmp_path / "nope.db"], code=EXIT_FAILURE)
    assert "no store at" in result.stderr
    assert not (tmp_path / "nope.db").exists()


def test_the_store_defaults_to_the_environment_then_the_working_directory(
    multi_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = json.loads(run(["sessions", "--format", "json"], env={"TRANSCRIPT_DB": str(multi_db)}).stdout)
    assert len(rows) == 3
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRANSCRIPT_DB", raising=False)
    result = run(["sessions"], code=EXIT_FAILURE)
    assert "transcript.db" in result.stderr
    copy_db(multi_db, tmp_path / "transcript.db")
    assert len(run_json(["sessions", "--format", "json"])) == 3


def test_a_file_that_is_not_a_store_is_a_clean_failure(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all " * 200)
    run(["sessions", "--db", junk], code=EXIT_FAILURE)
    # verify checks the file: one it cannot even open is a check that found a problem
    assert "FAILED" in run(["verify", "--db", junk], code=EXIT_CHECK_FAILED).stdout


def test_import_reports_each_session_and_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "import.db"
    text = run(["import", CLAUDE_SMALL, "--db", db]).stdout.splitlines()
    assert text[0].endswith("claude-code, 3 sessions, 45 messages, 0 repairs")
    assert text[1].split()[:3] == ["session", "messages", "tool"]
    first = run_json(["import", CLAUDE_SMALL, "--db", db, "--output", "json"])
    assert first["format"] == "claude-code"
    assert [s["appended"] for s in first["sessions"]] == [0, 0, 0]  # already there: nothing appended
    assert len(run_json(["sessions", "--db", db, "--format", "json"])) == 3


def test_import_with_an_explicit_format(tmp_path: Path) -> None:
    report = run_json(
        ["import", SWE_GPT4, "--db", tmp_path / "a.db", "--format", "swe-agent", "--output", "json"]
    )
    assert report["format"] == "swe-agent"
    (session,) = report["sessions"]
    assert session["appended"] == session["messages"] == 26


def test_import_failures(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    run(["import", tmp_path / "missing.jsonl", "--db", db], code=EXIT_USAGE)
    run(["import", SWE_GPT4, "--db", db, "--format", "nonsense"], code=EXIT_USAGE)
    junk = tmp_path / "junk.jsonl"
    junk.write_text("garbage{\n")
    assert "cannot tell the format" in run(["import", junk, "--db", db], code=EXIT_FAILURE).stderr
    run(["import", OPENHANDS_SMALL, "--db", db, "--from", "swe-agent"], code=EXIT_FAILURE)
    assert sorted(tmp_path.iterdir()) == [junk]  # a failed command leaves no store behind
    run(["import", SWE_GPT4, "--db", db])
    before = run_json(["sessions", "--db", db, "--format", "json"])
    run(["import", OPENHANDS_SMALL, "--db", db, "--from", "swe-agent"], code=EXIT_FAILURE)
    assert run_json(["sessions", "--db", db, "--format", "json"]) == before  # nothing half-imported


def test_export_the_view_neutral_openai_and_anthropic(sim_db: Path) -> None:
    neutral = run_json(["export", "--db", sim_db])
    shown = run_json(["show", "--db", sim_db, "--format", "json"])
    assert neutral == shown
    openai = run_json(["export", "--db", sim_db, "--wire", "openai"])
    anthropic = run_json(["export", "--db", sim_db, "--wire", "anthropic"])
    assert check_openai_request(openai) == ()
    assert check_anthropic_request(anthropic) == ()
    assert len(openai) == len(neutral["messages"])


def test_export_the_history_in_each_format(sim_db: Path) -> None:
    history = run_json(["export", "--db", sim_db, "--history"])
    assert len(history) == run_json(["sessions", "--db", sim_db, "--format", "json"])[0]["messages"]
    assert sum(1 for m in history if m["role"] == "assistant") == MODEL_CALLS
    lines = run(["export", "--db", sim_db, "--history", "--wire", "openai", "--format", "jsonl"]).stdout
    openai = [json.loads(line) for line in lines.splitlines()]
    assert all(m["role"] for m in openai)
    assert run_json(["export", "--db", sim_db, "--history", "--wire", "openai"]) == openai  # one document
    anthropic = run_json(["export", "--db", sim_db, "--history", "--wire", "anthropic"])
    assert anthropic["messages"][0]["role"] == "user"


def test_export_state_restores_the_same_view(sim_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "state.json"
    result = run(["export", "--db", sim_db, "--state", "-o", out])
    assert result.stdout == "" and f"wrote {out}" in result.stderr
    state = SessionState.from_json(out.read_bytes())
    assert state.session_id == SIM
    other = tmp_path / "restored.db"
    with Store.open(other) as store:
        store.restore(state, session_id="copy")
    restored = run_json(["show", "--db", other, "--format", "json"])
    assert restored.pop("session") == "copy"
    original = run_json(["show", "--db", sim_db, "--format", "json"])
    assert original.pop("session") == SIM and restored == original


def test_export_to_a_file(sim_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "view.json"
    run(["export", "--db", sim_db, "--wire", "openai", "--output", out])
    assert json.loads(out.read_text()) == run_json(["export", "--db", sim_db, "--wire", "openai"])


@pytest.mark.parametrize(
    "flags", [["--state", "--history"], ["--state", "--wire", "openai"], ["--wire", "gemini"]]
)
def test_export_refuses_conflicting_flags(sim_db: Path, flags: list[str]) -> None:
    run(["export", "--db", sim_db, *flags], code=EXIT_USAGE)


def test_export_session_selection(multi_db: Path, tmp_path: Path) -> None:
    assert "pick one with --session" in run(["export", "--db", multi_db], code=EXIT_USAGE).stderr
    assert (
        "no session 'nope'" in run(["export", "--db", multi_db, "--session", "nope"], code=EXIT_USAGE).stderr
    )
    run(["export", "--db", tmp_path / "missing.db"], code=EXIT_FAILURE)
    sid = run_json(["sessions", "--db", multi_db, "--format", "json"])[0]["session_id"]
    assert run_json(["export", "--db", multi_db, "--session", sid])["messages"]


def test_show_the_current_view(sim_db: Path) -> None:
    data = run_json(["show", "--db", sim_db, "--format", "json"])
    assert data["session"] == SIM
    view = data
    lines = run(["show", "--db", sim_db]).stdout.splitlines()
    assert (
        lines[0]
        == f"{SIM}: {len(view['messages'])} messages, {view['tokens']:,} tokens, source {view['source']}"
    )
    headers = [line for line in lines if line.startswith("[")]
    assert [h.split()[0] for h in headers] == [f"[{i}]" for i in range(len(view["messages"]))]
    assert [
        json.loads(line) for line in run(["show", "--db", sim_db, "--format", "jsonl"]).stdout.splitlines()
    ] == data["messages"]  # jsonl: one row per line, the view's messages


def test_show_stored_lists_the_whole_history(sim_db: Path) -> None:
    stored = run_json(["show", "--db", sim_db, "--stored", "--format", "json"])
    assert stored == run_json(["export", "--db", sim_db, "--history"])
    headers = [
        line for line in run(["show", "--db", sim_db, "--stored"]).stdout.splitlines() if line.startswith("[")
    ]
    assert len(headers) == len(stored) > len(run_json(["export", "--db", sim_db])["messages"])


def test_show_at_a_point_is_the_replayed_view(sim_db: Path) -> None:
    point = next(p for p in timeline(sim_db) if p["kind"] == "compact")
    shown = run_json(["show", "--db", sim_db, "--at", point["point"], "--format", "json"])
    assert shown == run_json(["replay", "--db", sim_db, "--at", point["point"], "--format", "json"])
    assert shown["tokens"] == point["view_tokens"] and len(shown["messages"]) == point["messages"]
    last = run_json(["show", "--db", sim_db, "--at", "last", "--format", "json"])
    assert last == run_json(["show", "--db", sim_db, "--format", "json"])


def test_show_failures(sim_db: Path, multi_db: Path, tmp_path: Path) -> None:
    run(["show", "--db", sim_db, "--at", "yesterday"], code=EXIT_USAGE)
    assert "has no point 99999" in run(["show", "--db", sim_db, "--at", "99999"], code=EXIT_FAILURE).stderr
    run(["show", "--db", sim_db, "--format", "xml"], code=EXIT_USAGE)
    run(["show", "--db", multi_db], code=EXIT_USAGE)
    run(["show", "--db", sim_db, "--session", "nope"], code=EXIT_USAGE)
    run(["show", "--db", tmp_path / "missing.db"], code=EXIT_FAILURE)


def test_show_stored_with_at_is_a_usage_error(sim_db: Path) -> None:
    run(["show", "--db", sim_db, "--stored", "--at", "5"], code=EXIT_USAGE)


def test_replay_timeline_text_json_and_jsonl(sim_db: Path) -> None:
    points = timeline(sim_db)
    kinds = [p["kind"] for p in points]
    assert kinds.count("model-call") == MODEL_CALLS and "compact" in kinds
    assert [p["point"] for p in points] == sorted(p["point"] for p in points)
    lines = run(["replay", "--db", sim_db]).stdout.splitlines()
    assert lines[0] == f"session {SIM}"
    assert lines[1].split() == ["point", "kind", "msgs", "view", "tok", "stored", "tok", "change"]
    rows = [line.split() for line in lines[2:]]
    assert [(int(r[0]), r[1]) for r in rows] == [(p["point"], p["kind"]) for p in points]
    assert [int(r[3].replace(",", "")) for r in rows] == [p["view_tokens"] for p in points]
    strategies = {p["result"].get("strategy") for p in points if p["kind"] == "compact"}
    assert {"tool-result-micro", "checkpoint"} <= strategies
    jsonl = run(["replay", "--db", sim_db, "--format", "jsonl"]).stdout.splitlines()
    assert [json.loads(line) for line in jsonl] == points


def test_replay_at_a_point_in_text_json_and_both_wires(sim_db: Path) -> None:
    points = timeline(sim_db)
    for point in (points[0], next(p for p in points if p["kind"] == "compact"), points[-1]):
        at: list[Arg] = ["replay", "--db", sim_db, "--at", point["point"]]
        view = run_json([*at, "--format", "json"])
        assert (view["tokens"], len(view["messages"])) == (point["view_tokens"], point["messages"])
        text = run(at).stdout.splitlines()
        assert text[0] == (
            f"session {SIM} at {point['point']}: {point['messages']} messages, "
            f"{point['view_tokens']:,} tokens, source {view['source']}"
        )
        assert check_openai_request(run_json([*at, "--wire", "openai"])) == ()
        assert check_anthropic_request(run_json([*at, "--wire", "anthropic"])) == ()
    last = run_json(["replay", "--db", sim_db, "--at", "last", "--format", "json"])
    assert last == run_json(["show", "--db", sim_db, "--format", "json"])


def test_replay_diff_names_what_a_full_compaction_changed(sim_db: Path) -> None:
    points = timeline(sim_db)
    full = next(
        i
        for i, p in enumerate(points)
        if p["kind"] == "compact" and p["result"].get("strategy") == "checkpoint"
    )
    before, after = points[full - 1], points[full]
    diff = run_json(["replay", "--db", sim_db, "--diff", before["point"], after["point"], "--format", "json"])
    assert diff["tokens"] == [before["view_tokens"], after["view_tokens"]]
    assert diff["removed"] and diff["added"]  # messages excluded, a summary added
    at_after = run_json(["replay", "--db", sim_db, "--at", after["point"], "--format", "json"])
    assert set(diff["added"]) <= {m["id"] for m in at_after["messages"]}
    assert any(m.get("kind") == "summary" and m["id"] in diff["added"] for m in at_after["messages"])
    text = run(["replay", "--db", sim_db, "--diff", before["point"], after["point"]]).stdout.splitlines()
    assert text[0].startswith(f"{before['point']} -> {after['point']}: ")
    assert sum(line.startswith("  - ") for line in text) == len(diff["removed"])
    assert sum(line.startswith("  + ") for line in text) == len(diff["added"])
    same = run_json(["replay", "--db", sim_db, "--diff", "last", "last", "--format", "json"])
    assert (same["removed"], same["added"], same["changed"]) == ([], [], [])


def test_replay_verify_reports_every_model_call(sim_db: Path) -> None:
    text = run(["replay", "--db", sim_db, "--verify"]).stdout
    assert f"{SIM}: {MODEL_CALLS} served views re-rendered, 0 drifted" in text
    assert run_json(["replay", "--db", sim_db, "--verify", "--format", "json"]) == {
        "verified": MODEL_CALLS,
        "drifts": [],
    }


@pytest.mark.parametrize(
    "flags",
    [
        ["--at", "5", "--verify"],
        ["--at", "5", "--diff", "5", "9"],
        ["--diff", "5", "9", "--verify"],
        ["--at", "soon"],
        ["--at", "1.5"],
        ["--diff", "5", "never"],
        ["--diff", "5"],
        ["--at", "5", "--wire", "gemini"],
        ["--format", "yaml"],
    ],
)
def test_replay_usage_errors(sim_db: Path, flags: list[str]) -> None:
    run(["replay", "--db", sim_db, *flags], code=EXIT_USAGE)


def test_replay_domain_failures(sim_db: Path, multi_db: Path, tmp_path: Path) -> None:
    assert (
        "has no point 100000" in run(["replay", "--db", sim_db, "--at", "100000"], code=EXIT_FAILURE).stderr
    )
    run(["replay", "--db", sim_db, "--diff", "5", "100000"], code=EXIT_FAILURE)
    run(["replay", "--db", sim_db, "--session", "nope"], code=EXIT_USAGE)
    run(["replay", "--db", tmp_path / "missing.db"], code=EXIT_FAILURE)
    assert "holds 3 sessions" in run(["replay", "--db", multi_db, "--verify"], code=EXIT_USAGE).stderr


def test_a_view_with_pending_calls_is_refused_on_the_wire(tmp_path: Path) -> None:
    db = tmp_path / "pending.db"
    with Transcript.open(db, session_id="mid-step") as t:
        t.append(Message.user("list the files"))
        t.append(Message.assistant("", tool_calls=[ToolCall(id="c1", name="Bash", input={"cmd": "ls"})]))
    for args in (
        ["export", "--wire", "openai"],
        ["export", "--wire", "anthropic"],
        ["replay", "--at", "last", "--wire", "openai"],
    ):
        assert "unanswered tool calls: c1" in run([*args, "--db", db], code=EXIT_FAILURE).stderr
    shown = run(["show", "--db", db]).stdout  # the neutral view shows them, with a diagnostic
    assert "PENDING_TOOL_CALLS" in shown


def test_replay_at_a_negative_point_is_refused(sim_db: Path) -> None:
    run(["replay", "--db", sim_db, "--at", "-5"], code=EXIT_USAGE)


def test_replay_wire_without_at_is_a_usage_error(sim_db: Path) -> None:
    run(["replay", "--db", sim_db, "--wire", "openai"], code=EXIT_USAGE)


def test_simulate_prints_the_timeline_and_totals(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = run(["simulate", SWE_FC, "--budget", BUDGET, "--db", db])
    lines = result.stdout.splitlines()
    assert lines[0] == f"session {SIM}"
    assert lines[1].split()[:2] == ["point", "kind"]
    assert any(f"model calls {MODEL_CALLS}, budget {BUDGET:,} tokens" in line for line in lines)
    assert any(line.startswith("tokens sent ") and "prefix breaks" in line for line in lines)
    assert any(line.startswith("rounds recorded ") and "full_applied" in line for line in lines)
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    assert run_json(["sessions", "--db", db, "--format", "json"])[0]["session_id"] == SIM


def test_simulate_json_totals_add_up(tmp_path: Path) -> None:
    (report,) = run_json(
        ["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "s.db", "--format", "json"]
    )
    totals = report["totals"]
    calls = [p for p in report["points"] if p["kind"] == "model-call"]
    assert totals["session"] == SIM and totals["model_calls"] == MODEL_CALLS == len(calls)
    assert totals["tokens_sent"] == sum(p["view_tokens"] for p in calls)
    assert totals["over_budget_calls"] == sum(1 for p in calls if p["view_tokens"] > BUDGET)
    assert sum(totals["outcomes"].values()) == MODEL_CALLS
    assert {"micro_applied", "full_applied"} <= set(totals["outcomes"])
    assert 0 < totals["reused_tokens"] < totals["tokens_sent"]
    assert totals["rounds"] == sum(1 for p in report["points"] if p["kind"] == "compact")


def test_simulate_prices_the_run_against_never_compacting(tmp_path: Path) -> None:
    lines = run(["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "a.db"]).stdout.splitlines()
    cost = next(line for line in lines if line.startswith("cost "))
    assert "never compacting" in cost and "(cached 0.1, uncached 1.25, summarizer output 5)" in cost
    assert any(line.startswith("prefix breaks ") and "(micro " in line for line in lines)
    assert any(line.startswith("calls over budget ") and "futile full rounds" in line for line in lines)
    flat = ["--pricing", "none", "--output-multiplier", "1"]
    other = run(["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "b.db", *flat]).stdout
    assert "(cached 1, uncached 1, summarizer output 1)" in other
    (report,) = run_json(
        ["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "c.db", "--format", "json"]
    )
    economy, calls = report["economy"], report["calls"]
    assert len(calls) == MODEL_CALLS and economy["model_calls"] == MODEL_CALLS
    assert sum(c["cost"] for c in calls) == pytest.approx(economy["cost"])
    assert sum(c["baseline"]["cost"] for c in calls) == pytest.approx(economy["baseline_cost"])
    assert economy["cost_ratio"] == pytest.approx(economy["cost"] / economy["baseline_cost"])
    breaks = sum(1 for c in calls[1:] if not c["prefix_kept"])
    kinds = economy["micro_breaks"] + economy["full_breaks"] + economy["other_breaks"]
    assert economy["prefix_breaks"] == kinds == breaks > 0
    assert all(c["baseline"]["view_tokens"] >= c["view_tokens"] for c in calls)
    run(
        ["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "d.db", "--pricing", "x"], code=EXIT_USAGE
    )
    run(
        ["simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "e.db", "--output-multiplier", "-1"],
        code=EXIT_USAGE,
    )


def test_simulate_every_session_of_a_file_or_just_one(tmp_path: Path) -> None:
    reports = run_json(
        ["simulate", CLAUDE_SMALL, "--budget", 1_000, "--db", tmp_path / "all.db", "--format", "json"]
    )
    assert len(reports) == 3
    assert all(r["totals"]["session"].startswith("sim/") for r in reports)
    only = reports[1]["totals"]["session"].removeprefix("sim/")
    lines = run(
        [
            "simulate",
            CLAUDE_SMALL,
            "--budget",
            1_000,
            "--db",
            tmp_path / "one.db",
            "--session",
            only,
            "--format",
            "jsonl",
        ]
    ).stdout.splitlines()
    assert [json.loads(line)["totals"]["session"] for line in lines] == [f"sim/{only}"]
    assert _without_round_ids(json.loads(lines[0])) == _without_round_ids(reports[1])


def _without_round_ids(report: dict[str, Any]) -> dict[str, Any]:
    """A simulate report less each round's id (a new one every run: the rest must be the same)."""
    calls = [{**call, "result": {**call["result"], "round_id": ""}} for call in report["calls"]]
    points = [
        {**point, "result": {**point["result"], "round_id": ""}} if "result" in point else point
        for point in report.get("points", [])
    ]
    return {**report, "calls": calls, "points": points}


def test_simulate_prefix_and_an_existing_session(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    run(["simulate", SWE_GPT4, "--budget", 5_000, "--db", db])
    # Run again, it simulates into a new session beside the first and says so; nothing is replaced.
    again = run(["simulate", SWE_GPT4, "--budget", 5_000, "--db", db])
    assert "already exists: simulating into 'sim/sweagent_pydicom-1458_gpt4-2'" in again.stderr
    run(["simulate", SWE_GPT4, "--budget", 2_000, "--db", db, "--prefix", "tight:"])
    ids = {s["session_id"] for s in run_json(["sessions", "--db", db, "--format", "json"])}
    assert ids == {
        "sim/sweagent_pydicom-1458_gpt4",
        "sim/sweagent_pydicom-1458_gpt4-2",
        "tight:sweagent_pydicom-1458_gpt4",
    }


def test_a_failed_simulate_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sub_agents = [
        s["session_id"]
        for s in run_json(["import", CLAUDE_SMALL, "--db", tmp_path / "i.db", "--output", "json"])["sessions"]
    ]
    run(["simulate", CLAUDE_SMALL, "--budget", 1_000, "--db", db, "--session", sub_agents[-1]])
    # A message of the file stored with other content: the whole simulation is refused, none of it kept.
    taken = next(m for m in parse(CLAUDE_SMALL, "auto")[0].messages if m.role == "user")
    with Store.open(db, tokenizer="chars/4") as store:
        store.session("other").append(Message.user("other words", id=taken.id))
    before = run_json(["sessions", "--db", db, "--format", "json"])
    failed = run(["simulate", CLAUDE_SMALL, "--budget", 1_000, "--db", db], code=EXIT_FAILURE)
    assert "already stored with other content" in failed.stderr
    assert run_json(["sessions", "--db", db, "--format", "json"]) == before


def _directive_keeps(db: Path, session_id: str) -> set[tuple[int, int]]:
    keeps = set()
    for _, kind, _, payload in event_rows(db, session_id):
        event = json.loads(payload)
        if kind == "message_marked" and event.get("projection"):
            keeps |= {(e["keep_head"], e["keep_tail"]) for e in event["projection"]["entries"]}
    return keeps


def test_simulate_reads_a_toml_config(tmp_path: Path) -> None:
    config = tmp_path / "policy.toml"
    config.write_text("excerpt_head_chars = 123\nexcerpt_tail_chars = 45\n")
    db = tmp_path / "s.db"
    run(["simulate", SWE_FC, "--budget", BUDGET, "--db", db, "--config", config])
    assert _directive_keeps(db, SIM) == {(123, 45)}


def test_simulate_reads_a_json_config_and_set_overrides_it(tmp_path: Path) -> None:
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"full_compact_enabled": False, "excerpt_head_chars": 99}))
    db = tmp_path / "s.db"
    (report,) = run_json(
        [
            *("simulate", SWE_FC, "--budget", BUDGET, "--db", db, "--config", config),
            *(
                "--set",
                "excerpt_head_chars=77",
                "--set",
                "micro_stale_unit=step",
                "--format",
                "json",
            ),
        ]
    )
    assert "full_applied" not in report["totals"]["outcomes"]
    assert "micro_applied" in report["totals"]["outcomes"]
    assert {head for head, _ in _directive_keeps(db, SIM)} == {77}


def test_simulate_with_set_alone(tmp_path: Path) -> None:
    (report,) = run_json(
        [
            *("simulate", SWE_FC, "--budget", BUDGET, "--db", tmp_path / "s.db"),
            *("--set", "full_compact_enabled=false", "--format", "json"),
        ]
    )
    assert "full_applied" not in report["totals"]["outcomes"]


@pytest.mark.parametrize(
    ("setup", "flags"),
    [
        (None, ["--set", "no_such_setting=1"]),
        (None, ["--set", "micro_field_keep_head_chars"]),
        (None, ["--set", "micro_field_keep_head_chars=lots"]),
        (None, ["--set", "micro_stale_unit=fortnight"]),
        (None, ["--set", "keep_recent_tokens=-1"]),
        (("bad.toml", "micro_field_keep_head_chars = = 1"), []),
        (("bad.json", "{not json"), []),
        (("unknown.toml", "colour = 'blue'"), []),
        (None, ["--config", "missing.toml"]),
    ],
)
def test_simulate_refuses_a_bad_config(
    tmp_path: Path, setup: tuple[str, str] | None, flags: list[str]
) -> None:
    args: list[Arg] = ["simulate", SWE_GPT4, "--budget", 5_000, "--db", tmp_path / "s.db", *flags]
    if setup is not None:
        (tmp_path / setup[0]).write_text(setup[1])
        args += ["--config", tmp_path / setup[0]]
    run([a if a != "missing.toml" else tmp_path / "missing.toml" for a in args], code=EXIT_USAGE)
    assert not (tmp_path / "s.db").exists()


def test_simulate_failures(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    run(["simulate", SWE_GPT4, "--db", db], code=EXIT_USAGE)  # --budget is required
    run(["simulate", SWE_GPT4, "--budget", 0, "--db", db], code=EXIT_USAGE)
    run(["simulate", tmp_path / "missing.traj", "--budget", 100, "--db", db], code=EXIT_USAGE)
    result = run(["simulate", SWE_GPT4, "--budget", 100, "--db", db, "--session", "nope"], code=EXIT_USAGE)
    assert "no session 'nope' in" in result.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    run(["simulate", junk, "--budget", 100, "--db", db], code=EXIT_FAILURE)


def test_demo_on_a_fresh_store_shows_compaction_happening(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = run(["demo", "--db", db])
    rows = [line.split() for line in result.stdout.splitlines() if line[:6].strip().isdigit()]
    compact_rows = [" ".join(r[5:]) for r in rows if r[1] == "compact"]
    assert any(c.startswith(("tool-result-micro", "checkpoint")) for c in compact_rows), result.stdout
    assert any(line.startswith("model calls ") for line in result.stdout.splitlines())
    assert "session demo-" in result.stderr
    run(["verify", "--db", db, "--served"])


def test_demo_failures(tmp_path: Path) -> None:
    run(["demo", "--db", tmp_path / "d.db", "--budget", 0], code=EXIT_USAGE)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    run(["demo", "--db", junk], code=EXIT_FAILURE)


def test_compact_shadow_writes_nothing(writable: Path) -> None:
    before = run_json(["sessions", "--db", writable, "--format", "json"])
    data = run_json(["compact", "--db", writable, "--budget", 1_000, "--shadow", "--format", "json"])
    assert data["outcome"] == "shadowed" and data["manual"] is True
    assert run_json(["sessions", "--db", writable, "--format", "json"]) == before
    text = run(["compact", "--db", writable, "--budget", 1_000, "--shadow"]).stdout.splitlines()
    assert text[1].startswith(
        f"view {data['tokens_before']:,} -> {data['tokens_after']:,} tokens (budget 1,000)"
    )


def test_compact_full_writes_a_checkpoint_round(writable: Path, tmp_path: Path) -> None:
    again = copy_db(writable, tmp_path / "again.db")
    rounds = len(run_json(["compacts", "--db", writable, "--format", "json"]))
    data = run_json(["compact", "--db", writable, "--budget", 1_500, "--full", "--format", "json"])
    assert data["outcome"] == "full_applied" and data["forced"] and data["manual"]
    assert data["tokens_after"] < data["tokens_before"]
    results = run_json(["compacts", "--db", writable, "--format", "json"])
    assert len(results) == rounds + 1 and results[-1] == data
    assert run_json(["show", "--db", writable, "--format", "json"])["tokens"] == data["tokens_after"]
    run(["verify", "--db", writable, "--served"])
    text = run(["compact", "--db", again, "--budget", 1_500, "--full"]).stdout.splitlines()
    assert text[0].startswith("checkpoint") and text[1].startswith("view ")


def test_compact_failures(writable: Path, multi_db: Path, tmp_path: Path) -> None:
    run(["compact", "--db", writable, "--budget", 100, "--shadow", "--full"], code=EXIT_USAGE)
    run(["compact", "--db", writable], code=EXIT_USAGE)
    run(["compact", "--db", writable, "--budget", -3], code=EXIT_USAGE)
    run(["compact", "--db", multi_db, "--budget", 100], code=EXIT_USAGE)
    run(["compact", "--db", writable, "--budget", 100, "--session", "nope"], code=EXIT_USAGE)
    run(["compact", "--db", tmp_path / "missing.db", "--budget", 100], code=EXIT_FAILURE)
    assert not (tmp_path / "missing.db").exists()


def test_compacts_lists_every_round_with_every_field(sim_db: Path) -> None:
    results = run_json(["compacts", "--db", sim_db, "--format", "json"])
    records = [
        (v, json.loads(payload)["result"].get("round_id"))
        for v, kind, _, payload in event_rows(sim_db, SIM)
        if kind == "compaction_recorded"
    ]
    # one line per round: a round that recorded its micro step, then its full step, shows the latter
    latest = [
        v for i, (v, round_id) in enumerate(records) if i + 1 == len(records) or records[i + 1][1] != round_id
    ]
    assert [r["version"] for r in results] == latest
    text = run(["compacts", "--db", sim_db]).stdout.splitlines()
    assert [line.split(":")[0] for line in text if line.startswith("round")] == [
        f"round {i}" for i in range(1, len(results) + 1)
    ]
    fields = {line.split(":")[0].strip() for line in text if line.startswith("    ")}
    assert {"outcome", "strategy", "tokens_before", "tokens_after", "breaker", "version"} <= fields
    jsonl = run(["compacts", "--db", sim_db, "--format", "jsonl"]).stdout.splitlines()
    assert [json.loads(line) for line in jsonl] == results


def test_compacts_text_shows_every_diagnostic_field(sim_db: Path) -> None:
    text = run(["compacts", "--db", sim_db]).stdout.splitlines()
    fields = {line.split(":")[0].strip() for line in text if line.startswith("    ")}
    assert set(CompactResult.__struct_fields__) - {"checkpoint"} <= fields


def test_compacts_on_a_session_never_compacted(empty_session_db: Path) -> None:
    assert (
        run(["compacts", "--db", empty_session_db]).stdout.strip() == "no compaction round has been recorded"
    )
    assert run_json(["compacts", "--db", empty_session_db, "--format", "json"]) == []


def test_checkpoint_as_markdown_and_json(sim_db: Path) -> None:
    data = run_json(["checkpoint", "--db", sim_db, "--format", "json"])
    assert "TimeDelta serialization precision" in data["goal"]
    md = run(["checkpoint", "--db", sim_db]).stdout
    assert md.startswith("# Checkpoint") and "## Goal" in md
    latest = run_json(["compacts", "--db", sim_db, "--format", "json"])
    assert data == next(r["checkpoint"] for r in reversed(latest) if r.get("checkpoint"))


def test_checkpoint_failures(empty_session_db: Path, sim_db: Path) -> None:
    # Nothing yet is a result, as `compacts` says it: exit 0, and null in JSON.
    assert "no checkpoint yet" in run(["checkpoint", "--db", empty_session_db]).stdout
    assert run_json(["checkpoint", "--db", empty_session_db, "--format", "json"]) is None
    run(["checkpoint", "--db", sim_db, "--format", "xml"], code=EXIT_USAGE)


def test_status_in_text_and_json(sim_db: Path) -> None:
    data = run_json(["status", "--db", sim_db, "--format", "json"])
    assert data["session_id"] == SIM and data["last_outcome"]
    view = run_json(["show", "--db", sim_db, "--format", "json"])
    assert data["view_tokens"] == view["tokens"] and data["visible_messages"] == len(view["messages"])
    text = run(["status", "--db", sim_db]).stdout
    table, _, summary = text.partition("\n\n")
    rows = dict(line.split(None, 1) for line in table.splitlines()[1:])
    assert rows["session_id"] == SIM and rows["view_tokens"] == f"{view['tokens']:,}"
    overview = data.get("overview", {})
    assert {k: rows[k] for k in overview} == {k: str(len(v)) for k, v in overview.items()}
    # The text shows the checkpoint JSON's summary holds, as a person reads it (blank lines as such).
    readable = to_markdown(parse_checkpoint(data["summary"]), readable=True)
    assert summary.startswith("# Checkpoint") and summary.strip() == readable.strip()


def test_stats_in_text_and_json(sim_db: Path) -> None:
    data = run_json(["stats", "--db", sim_db, "--format", "json"])
    assert data["tokens_stored"] > data["tokens_shown"] > 0
    assert data["messages_stored"] > data["messages_shown"]
    assert data["rounds"] == len(run_json(["compacts", "--db", sim_db, "--format", "json"]))
    assert {"tool-result-micro", "checkpoint"} <= set(data["by_strategy"])
    text = run(["stats", "--db", sim_db]).stdout
    assert f"tokens stored / shown    {data['tokens_stored']:,} / {data['tokens_shown']:,}" in text
    assert "saved by tool-result-micro: " in text


@pytest.mark.parametrize("command", ["status", "stats", "compacts", "checkpoint"])
def test_session_commands_need_a_session(command: str, multi_db: Path, tmp_path: Path) -> None:
    run([command, "--db", multi_db], code=EXIT_USAGE)
    run([command, "--db", multi_db, "--session", "nope"], code=EXIT_USAGE)
    run([command, "--db", tmp_path / "missing.db"], code=EXIT_FAILURE)


def test_verify_a_sound_store(sim_db: Path) -> None:
    lines = run(["verify", "--db", sim_db]).stdout.splitlines()
    assert lines[-1] == "ok"
    assert lines[0].endswith("bodies, 1 sessions, " + f"{len(event_rows(sim_db, SIM))} events")
    data = run_json(["verify", "--db", sim_db, "--served", "--format", "json"])
    assert data["report"]["problems"] == [] and data["drifts"] == []
    assert run(["verify", "--db", sim_db, "--served"]).stdout.splitlines()[-1] == "ok"


def test_verify_failures(tmp_path: Path) -> None:
    assert "no such file" in run(["verify", "--db", tmp_path / "missing.db"], code=EXIT_FAILURE).stderr
    run(["verify", "--db", tmp_path / "missing.db", "--format", "csv"], code=EXIT_USAGE)


def _tamper(db: Path, guard: str, statement: str, params: tuple[Any, ...], *, restore_guard: bool) -> None:
    """Drop one guard trigger, run one write, and optionally put the trigger back."""
    conn = sqlite3.connect(db)
    try:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (guard,)
        ).fetchone()
        conn.execute(f"DROP TRIGGER {guard}")
        assert conn.execute(statement, params).rowcount == 1
        if restore_guard:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _first_directive(db: Path) -> tuple[int, str, dict[str, Any]]:
    """The first directive event whose message is still in the view served after it.

    (A full compaction may truncate a message and exclude it in the same round: such a directive is
    in the log but renders in no served view.)"""
    for version, kind, _, payload in event_rows(db, SIM):
        event = json.loads(payload)
        if kind != "message_marked" or not event.get("projection"):
            continue
        view = run_json(["replay", "--db", db, "--at", _served_after(db, version), "--format", "json"])
        if event["message_id"] in {m["id"] for m in view["messages"]}:
            return version, event["message_id"], event
    raise AssertionError("the simulation wrote no directive that a later view shows")


def _served_after(db: Path, version: int) -> int:
    return next(v for v, kind, _, _ in event_rows(db, SIM) if kind == "view_served" and v > version)


def _model_call_points(db: Path) -> list[int]:
    return [p["point"] for p in timeline(db) if p["kind"] == "model-call"]


@pytest.mark.parametrize("restore_guard", [False, True], ids=["guard-dropped", "guard-restored"])
def test_an_edited_directive_is_caught(writable: Path, restore_guard: bool) -> None:
    version, message_id, event = _first_directive(writable)
    keep = event["projection"]["entries"][0]["keep_head"]
    event["projection"]["entries"][0]["keep_head"] = keep // 3
    payload = json.dumps(event, separators=(",", ":"))
    _tamper(
        writable,
        "events_refuse_update",
        "UPDATE events SET payload = ? WHERE session_id = ? AND version = ?",
        (payload, SIM, version),
        restore_guard=restore_guard,
    )
    verified = run(["verify", "--db", writable], code=EXIT_CHECK_FAILED)
    assert (
        f"event_hash: the event's hash chain does not match (session '{SIM}', event {version})"
        in verified.stdout
    )
    assert verified.stdout.splitlines()[-1].startswith("FAILED: event_hash")
    report = json.loads(run(["verify", "--db", writable, "--format", "json"], code=EXIT_CHECK_FAILED).stdout)[
        "report"
    ]
    assert (report["problems"][0]["code"], report["problems"][0]["version"]) == ("event_hash", version)
    assert ("guard_missing" in {p["code"] for p in report["problems"]}) is not restore_guard

    replayed = run(["replay", "--db", writable, "--verify", "--format", "json"], code=EXIT_CHECK_FAILED)
    drift = json.loads(replayed.stdout)["drifts"][0]
    served = _served_after(writable, version)
    assert drift["message_id"] == message_id
    assert drift["point"] in (served - 1, served)
    text = run(["replay", "--db", writable, "--verify"], code=EXIT_CHECK_FAILED).stdout
    assert f"  point {drift['point']}: message {drift['position']} ({message_id}) renders differently" in text


def test_an_edited_body_is_caught(writable: Path) -> None:
    conn = sqlite3.connect(f"file:{writable}?mode=ro", uri=True)
    try:
        (message_id, body) = conn.execute(
            "SELECT message_id, body FROM bodies WHERE message_id = ?", ("sweagent_marshmallow-1867_fc/1",)
        ).fetchone()
    finally:
        conn.close()
    message = json.loads(body)
    assert message["role"] == "user"
    message["parts"][0]["text"] = message["parts"][0]["text"].replace("precision", "PRECISION")
    _tamper(
        writable,
        "bodies_refuse_update",
        "UPDATE bodies SET body = ? WHERE message_id = ?",
        (json.dumps(message, separators=(",", ":")).encode(), message_id),
        restore_guard=True,
    )
    verified = run(["verify", "--db", writable], code=EXIT_CHECK_FAILED).stdout
    assert "body_hash: content hashes to " in verified and f"(message '{message_id}')" in verified
    report = json.loads(run(["verify", "--db", writable, "--format", "json"], code=EXIT_CHECK_FAILED).stdout)[
        "report"
    ]
    assert [(p["code"], p.get("message_id")) for p in report["problems"]] == [
        ("body_record", message_id),  # its stored bytes no longer match the record digest
        ("body_hash", message_id),  # and its content no longer matches its content hash
    ]

    drifts = json.loads(
        run(["replay", "--db", writable, "--verify", "--format", "json"], code=EXIT_CHECK_FAILED).stdout
    )["drifts"]
    first_call = _model_call_points(writable)[0]
    assert drifts[0]["message_id"] == message_id and drifts[0]["point"] in (first_call - 1, first_call)
    text = run(["replay", "--db", writable, "--verify"], code=EXIT_CHECK_FAILED).stdout
    assert f"{len(drifts)} drifted" in text and f"({message_id}) renders differently" in text


def test_a_drift_names_the_model_call_point_of_the_timeline(writable: Path) -> None:
    version, _, event = _first_directive(writable)
    event["projection"]["entries"][0]["keep_head"] = 1
    _tamper(
        writable,
        "events_refuse_update",
        "UPDATE events SET payload = ? WHERE session_id = ? AND version = ?",
        (json.dumps(event).encode(), SIM, version),
        restore_guard=True,
    )
    drift = json.loads(
        run(["replay", "--db", writable, "--verify", "--format", "json"], code=EXIT_CHECK_FAILED).stdout
    )["drifts"][0]
    assert drift["point"] in _model_call_points(writable)


def test_verify_reports_a_payload_rewritten_by_sql_text_functions(writable: Path) -> None:
    version, _, _ = _first_directive(writable)
    _tamper(
        writable,
        "events_refuse_update",
        "UPDATE events SET payload = replace(payload, '\"truncated\":true', '\"truncated\":true ') "
        "WHERE session_id = ? AND version = ?",
        (SIM, version),
        restore_guard=True,
    )
    result = CliRunner().invoke(cli, ["verify", "--db", str(writable)])
    assert result.exit_code == EXIT_CHECK_FAILED, result.exception


@pytest.fixture
def evil_db(tmp_path: Path) -> Path:
    """A session whose stored text tries to retitle, clear and overwrite the terminal."""
    db = tmp_path / "evil.db"
    with Transcript.open(db, session_id="evil") as t:
        t.append(Message.system("You are a careful agent."))
        t.append(Message.user(f"please look at {EVIL}"))
        t.append_turn(
            [
                Message.assistant(
                    f"running {EVIL}", tool_calls=[ToolCall(id="c1", name="Bash", input={"cmd": EVIL})]
                ),
                Message.tool_result("c1", f"output: {EVIL}\n" * 200, name="Bash"),
            ]
        )
        t.append(Message.assistant(f"done: {EVIL}"))
        t.append(Message.user(f"thanks, now {EVIL}"))
    return db


def _assert_escaped(text: str) -> None:
    for char in RAW_CONTROL:
        assert char not in text, repr(text)
    assert "\\x1b]0;pwned\\x07" in text and "\\x1b[2J" in text and "\\x0d" in text


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _texts(item)]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    return []


@pytest.mark.parametrize(
    "args",
    [["show"], ["show", "--stored"], ["replay", "--at", "last"], ["replay", "--at", "POINT"]],
    ids=["show", "show-stored", "replay-at-last", "replay-at-point"],
)
def test_text_output_never_lets_stored_text_drive_the_terminal(evil_db: Path, args: list[str]) -> None:
    point = str(
        next(p["point"] for p in timeline(evil_db) if p["kind"] == "model-call" and p["messages"] >= 3)
    )
    args = [point if a == "POINT" else a for a in args]
    text = run([*args, "--db", evil_db]).stdout
    _assert_escaped(text)
    data = run_json([*args, "--db", evil_db, "--format", "json"])
    texts = _texts(data)
    assert sum(EVIL in t for t in texts) >= 2  # user text and the tool result, byte for byte
    assert any(f"output: {EVIL}\n" in t for t in texts)


def test_other_text_outputs_are_escaped_too(evil_db: Path) -> None:
    run(["compact", "--db", evil_db, "--budget", 100, "--full"])
    for args in (["status"], ["checkpoint"], ["compacts"], ["replay"], ["sessions"], ["export", "--history"]):
        out = run([*args, "--db", evil_db]).stdout
        for char in RAW_CONTROL:
            assert char not in out, (args, out)
    goal = run_json(["checkpoint", "--db", evil_db, "--format", "json"])["goal"]
    # The task the user gave, then their latest redirect: exact in JSON.
    assert goal.startswith("please look at") and goal.endswith(f"Then the user asked: thanks, now {EVIL}")
    assert "thanks, now title\\x1b]0;pwned\\x07" in run(["checkpoint", "--db", evil_db]).stdout


def test_session_ids_in_a_usage_error_are_escaped(tmp_path: Path) -> None:
    db = tmp_path / "ids.db"
    with Store.open(db) as store:
        store.session(f"evil{EVIL}").append(Message.user("hi"))
        store.session("plain").append(Message.user("hello"))
    assert "\\x1b]0;pwned" in run(["sessions", "--db", db]).stdout
    result = run(["show", "--db", db], code=EXIT_USAGE)
    for char in RAW_CONTROL:
        assert char not in result.stderr


def test_no_full_compaction_grows_the_view_and_a_growth_would_show_one_sign(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    run(["simulate", OPENHANDS_SMALL, "--budget", 1_000, "--db", db])
    compactions = [p["result"] for p in timeline(db) if p["kind"] == "compact"]
    assert compactions  # the budget is tight enough for rounds to run
    checkpoints = [
        r for r in compactions if (r.get("strategy") or "").endswith(("checkpoint", "checkpoint-delta"))
    ]
    assert all(r["tokens_after"] < r["tokens_before"] for r in checkpoints)
    assert "(--" not in run(["replay", "--db", db]).stdout
    grew = CompactResult(
        outcome="micro_applied", strategy="tool-result-micro", tokens_before=100, tokens_after=189
    )
    assert describe(grew).endswith("(+89 tok)")


def test_fork_at_a_point_starts_from_the_parents_view(writable: Path) -> None:
    point = _model_call_points(writable)[6]
    out = run(["fork", "--db", writable, "--at", point]).stdout
    child = f"{SIM}@{point}"
    assert out.startswith(f"forked {SIM} at {point} into {child} (")
    parent_view = run_json(["replay", "--db", writable, "--session", SIM, "--at", point, "--format", "json"])
    child_view = run_json(["show", "--db", writable, "--session", child, "--format", "json"])
    assert child_view["messages"] == parent_view["messages"] and child_view["tokens"] == parent_view["tokens"]
    named = run(["fork", "--db", writable, "--session", SIM, "--as", "try-2"]).stdout
    assert "into try-2 (" in named
    assert {s["session_id"] for s in run_json(["sessions", "--db", writable, "--format", "json"])} == {
        SIM,
        child,
        "try-2",
    }
    run(["verify", "--db", writable, "--served"])


def test_fork_failures(writable: Path, tmp_path: Path) -> None:
    run(["fork", "--db", writable, "--as", "a"])
    run(["fork", "--db", writable, "--session", SIM, "--as", "a"])  # the same fork again: nothing written
    assert (
        "already exists"
        in run(["fork", "--db", writable, "--session", SIM, "--at", 3, "--as", "a"], code=EXIT_FAILURE).stderr
    )
    run(["fork", "--db", writable, "--session", SIM, "--at", "later"], code=EXIT_USAGE)
    run(["fork", "--db", writable, "--session", SIM, "--at", 100_000, "--as", "b"], code=EXIT_FAILURE)
    run(["fork", "--db", writable, "--session", "nope"], code=EXIT_USAGE)
    run(["fork", "--db", writable], code=EXIT_USAGE)  # several sessions now
    run(["fork", "--db", tmp_path / "missing.db"], code=EXIT_FAILURE)


def _parent_snapshot(db: Path) -> dict[str, str]:
    """Every view of the parent, as the CLI prints it (exact stdout)."""
    snapshot = {
        "timeline": run(["replay", "--db", db, "--session", SIM, "--format", "json"]).stdout,
        "show": run(["show", "--db", db, "--session", SIM, "--format", "json"]).stdout,
        "show-text": run(["show", "--db", db, "--session", SIM]).stdout,
        "anthropic": run(["export", "--db", db, "--session", SIM, "--wire", "anthropic"]).stdout,
        "state-events": json.dumps(
            json.loads(run(["export", "--db", db, "--session", SIM, "--state"]).stdout)["events"]
        ),
        "verify": run(["replay", "--db", db, "--session", SIM, "--verify"]).stdout,
    }
    for point in json.loads(snapshot["timeline"]):
        snapshot[f"at {point['point']}"] = run(
            ["replay", "--db", db, "--session", SIM, "--at", point["point"], "--format", "json"]
        ).stdout
    return snapshot


def test_a_forks_compactions_leave_the_parent_alone(writable: Path) -> None:
    point = _model_call_points(writable)[6]
    before = _parent_snapshot(writable)
    run(["fork", "--db", writable, "--session", SIM, "--at", point, "--as", "child"])
    first = run_json(
        ["compact", "--db", writable, "--session", "child", "--budget", 1_200, "--full", "--format", "json"]
    )
    assert first["outcome"] == "full_applied"
    with Transcript.open(writable, session_id="child") as t:
        t.append(Message.assistant("a different idea, tried only on the fork"))
        t.append(Message.user("go on with it " * 300))
        t.append(Message.assistant("fork work " * 300))
        t.append(Message.user("and now?"))
    second = run_json(
        ["compact", "--db", writable, "--session", "child", "--budget", 1_200, "--full", "--format", "json"]
    )
    assert second["outcome"] == "full_applied"
    run(["compact", "--db", writable, "--session", "child", "--budget", 300])

    assert _parent_snapshot(writable) == before

    parent = event_rows(writable, SIM)
    later = {
        mid for version, kind, mid, _ in parent if kind == "message_appended" and version > point and mid
    }
    assert later  # the parent went on after the fork point
    child_events = event_rows(writable, "child")
    child_appended = [mid for _, kind, mid, _ in child_events if kind == "message_appended" and mid]
    conn = sqlite3.connect(f"file:{writable}?mode=ro", uri=True)
    try:
        bodies = {
            mid: body
            for mid in child_appended
            for (body,) in conn.execute("SELECT body FROM bodies WHERE message_id = ?", (mid,))
        }
    finally:
        conn.close()
    summaries = [json.loads(b) for b in bodies.values() if json.loads(b).get("kind") == "summary"]
    assert len(summaries) >= 2  # the fork wrote its own summaries, anchored in its own history
    for text in [p for *_, p in child_events] + list(bodies.values()):
        for message_id in later:
            assert json.dumps(message_id) not in text, message_id
    assert not later & set(child_appended)
    assert all(s["anchor"] in child_appended for s in summaries if s.get("anchor"))
    run(["verify", "--db", writable, "--served"])


SCRIPT_CASES: list[tuple[str, list[str], Callable[[str], bool]]] = [
    ("sessions", ["sessions"], lambda out: SIM in out),
    ("search", ["search", "precision", "--limit", "2"], lambda out: "[precision]" in out.lower()),
    ("import", ["import", str(SWE_GPT4)], lambda out: "swe-agent, 1 sessions, 26 messages" in out),
    ("export", ["export", "--wire", "openai"], lambda out: check_openai_request(json.loads(out)) == ()),
    ("show", ["show", "--at", "last"], lambda out: out.startswith(f"{SIM}: ")),
    (
        "replay",
        ["replay", "--verify"],
        lambda out: f"{MODEL_CALLS} served views re-rendered, 0 drifted" in out,
    ),
    (
        "simulate",
        ["simulate", str(OPENHANDS_SMALL), "--budget", "1000", "--format", "json"],
        lambda out: bool(json.loads(out)),
    ),
    ("demo", ["demo"], lambda out: " compact " in out),
    ("fork", ["fork", "--at", "21", "--as", "forked"], lambda out: "into forked (" in out),
    ("verify", ["verify", "--served"], lambda out: out.splitlines()[-1] == "ok"),
    ("compact", ["compact", "--budget", "1500", "--full"], lambda out: out.startswith("checkpoint")),
    ("compacts", ["compacts"], lambda out: out.startswith("round 1: ")),
    ("checkpoint", ["checkpoint", "--format", "json"], lambda out: "goal" in json.loads(out)),
    ("status", ["status", "--format", "json"], lambda out: json.loads(out)["session_id"] == SIM),
    ("stats", ["stats", "--format", "json"], lambda out: json.loads(out)["session"] == SIM),
    (
        "copy",
        ["copy", "{db}", "copied.db", "--format", "json"],
        lambda out: {row["outcome"] for row in json.loads(out)} == {"copied"},
    ),
    # serving over stdio is tested with the mcp client itself (tests/test_mcp.py)
    ("mcp", ["mcp", "--help"], lambda out: "read-only over MCP" in out),
    ("restore", ["restore", "state.json", "--as", "again"], lambda out: out.startswith("restored again: ")),
    ("backup", ["backup", "backup.db"], lambda out: out.endswith("bytes), verified\n")),
    ("report", ["report"], lambda out: out.startswith("<!doctype html>") and "circle class='call'" in out),
    ("scan-secrets", ["scan-secrets"], lambda out: "0 likely secrets" in out),
    ("purge", ["purge"], lambda out: out.startswith("bytes gone: yes")),
    ("erase", ["erase", SIM, "--reason", "test", "--yes"], lambda out: out.startswith(f"erased {SIM}: ")),
]
# `redact` needs a stored message's id: its own script test below.


def _script(args: list[str], cwd: Path, db: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRANSCRIPT_DB"}
    if db is not None:
        env["TRANSCRIPT_DB"] = str(db)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_the_script_cases_cover_every_command() -> None:
    assert {name for name, _, _ in SCRIPT_CASES} | {"redact"} == SPEC_COMMANDS


def test_redact_runs_as_the_script(writable: Path, tmp_path: Path) -> None:
    with Store.open(writable, readonly=True) as store:
        target = store.session(SIM).stored_messages()[3].id
    done = _script(["redact", target, "--reason", "test"], tmp_path, writable)
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout.startswith(f"redacted {target} in ") and "bytes gone: yes" in done.stdout


@pytest.mark.parametrize(("name", "args", "check"), SCRIPT_CASES, ids=[c[0] for c in SCRIPT_CASES])
def test_every_command_runs_as_the_script(
    writable: Path, tmp_path: Path, name: str, args: list[str], check: Callable[[str], bool]
) -> None:
    db = tmp_path / "fresh.db" if name == "demo" else writable
    if name == "restore":
        assert _script(["export", "--state", "-o", "state.json"], tmp_path, db).returncode == EXIT_OK
    done = _script([arg.replace("{db}", str(db)) for arg in args], tmp_path, db)
    assert done.returncode == EXIT_OK, done.stderr
    assert check(done.stdout), done.stdout
    assert "Traceback" not in done.stderr


def test_the_script_exit_codes(writable: Path, tmp_path: Path) -> None:
    missing = _script(["status"], tmp_path, None)  # ./transcript.db does not exist
    assert missing.returncode == EXIT_FAILURE
    assert missing.stderr.startswith("Error: no store at transcript.db") and "Traceback" not in missing.stderr
    usage = _script(["replay", "--at", "5", "--verify"], tmp_path, writable)
    assert usage.returncode == EXIT_USAGE and "Usage:" in usage.stderr
    version, _, event = _first_directive(writable)
    event["projection"]["entries"][0]["keep_tail"] = 0
    _tamper(
        writable,
        "events_refuse_update",
        "UPDATE events SET payload = ? WHERE session_id = ? AND version = ?",
        (json.dumps(event).encode(), SIM, version),
        restore_guard=True,
    )
    for args in (["verify"], ["replay", "--verify"]):
        failed = _script(args, tmp_path, writable)
        assert failed.returncode == EXIT_CHECK_FAILED, failed.stderr
        assert "Traceback" not in failed.stderr


def test_simulate_refuses_up_front_a_file_an_earlier_release_stored_differently(tmp_path: Path) -> None:
    # The previous release stored old-style SWE-agent observations without the metadata that marks
    # them; a simulation shares bodies with that import, so it cannot store this release's version.
    db = tmp_path / "t.db"
    (session,) = parse(SWE_GPT4, "swe-agent")
    older = [msgspec.structs.replace(m, metadata=None) for m in session.messages[:6]]
    with Store.open(db, tokenizer="chars/4") as store:
        for message in older:
            store.session("sweagent_pydicom-1458_gpt4").append(message)
        assert store.stored_differently(session.messages) == [
            m.id for m, old in zip(session.messages, older, strict=False) if m.metadata
        ]
    before = db.read_bytes()
    result = CliRunner().invoke(cli, ["simulate", str(SWE_GPT4), "--db", str(db), "--budget", "3500"])
    assert result.exit_code == EXIT_FAILURE
    assert "already stored with other content" in result.output and "--db" in result.output
    assert db.read_bytes() == before
