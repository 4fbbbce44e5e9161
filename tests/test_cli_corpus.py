"""The command line on every recorded corpus session: simulate at a tight budget, then replay.

Each session of each corpus file is simulated on its own (`simulate FILE --session S`) at 40% of its
final uncompacted view, as measured by `import` + `show` in a scratch store. Then, for every simulated
session: `replay --verify` re-renders as many served views as the session has model calls (counted from
`export --history`, independently of simulate), the timeline's model-call token counts are the ones
simulate saw live (captured from the run itself and from the recorded served-view events), and the view
at every model-call and compact point renders as OpenAI and Anthropic requests that both validators
accept.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from projection.wire.check import check_anthropic_request, check_openai_request
from tests.conftest import CORPUS
from transcript.cli import cli, simulation as cli_simulation
from transcript.cli.options import EXIT_OK
from transcript.session.simulate import Simulation, simulate

CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.name != "README.md")
SHARE = 0.4
PREFIX = "sim/"


def invoke(args: list[str]) -> Result:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == EXIT_OK, (args, result.output)
    return result


@dataclass(frozen=True)
class SimulatedSession:
    """One corpus session after `simulate`: what it was run with and what was seen live."""

    source: str
    budget: int
    assistant_messages: int
    totals: dict[str, Any]
    simulate_points: list[dict[str, Any]]
    live: Simulation

    @property
    def session_id(self) -> str:
        return PREFIX + self.source


@dataclass(frozen=True)
class SimulatedFile:
    db: Path
    sessions: list[SimulatedSession]


def _measure(path: Path, scratch: Path) -> list[tuple[str, int, int]]:
    """Per session of the file: id, final view tokens uncompacted, assistant messages (via the CLI)."""
    report = json.loads(invoke(["import", str(path), "--db", str(scratch), "--output", "json"]).stdout)
    measured = []
    for session in report["sessions"]:
        sid = session["session_id"]
        shown = json.loads(
            invoke(["show", "--db", str(scratch), "--session", sid, "--format", "json"]).stdout
        )
        history = json.loads(invoke(["export", "--db", str(scratch), "--session", sid, "--history"]).stdout)
        assistants = sum(1 for message in history if message["role"] == "assistant")
        measured.append((sid, shown["tokens"], assistants))
    return measured


def _simulate_file(path: Path, workdir: Path) -> SimulatedFile:
    db = workdir / "sim.db"
    sessions = []
    for sid, tokens, assistants in _measure(path, workdir / "scratch.db"):
        budget = max(1, int(tokens * SHARE))
        live: list[Simulation] = []

        def recording(
            *args: Any, _live: list[Simulation] = live, _real: Any = simulate, **kwargs: Any
        ) -> Simulation:
            run: Simulation = _real(*args, **kwargs)
            if kwargs.get("compact", True):  # not the no-compaction baseline the costs compare with
                _live.append(run)
            return run

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cli_simulation, "simulate_session", recording)
            out = invoke(
                [
                    *("simulate", str(path), "--budget", str(budget), "--session", sid),
                    *("--db", str(db), "--prefix", PREFIX, "--format", "json"),
                ]
            )
        (report,) = json.loads(out.stdout)
        (run,) = live
        sessions.append(
            SimulatedSession(
                source=sid,
                budget=budget,
                assistant_messages=assistants,
                totals=report["totals"],
                simulate_points=report["points"],
                live=run,
            )
        )
    return SimulatedFile(db=db, sessions=sessions)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SimulatedFile]:
    return {path.name: _simulate_file(path, tmp_path_factory.mktemp(path.stem[:20])) for path in CORPUS_FILES}


def _served_tokens(db: Path, session_id: str) -> list[tuple[int, int]]:
    """(version, tokens) of every served-view event, read straight from SQLite."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT version, payload FROM events WHERE session_id = ? AND kind = 'view_served' "
            "ORDER BY version",
            (session_id,),
        ).fetchall()
    finally:
        conn.close()
    return [(version, json.loads(payload)["tokens"]) for version, payload in rows]


def test_the_corpus_has_every_agent_format() -> None:
    assert len(CORPUS_FILES) == 6
    assert {p.name.split("_")[0] for p in CORPUS_FILES} == {"claude-code", "openhands", "sweagent"}


def test_tight_budgets_make_compaction_happen(simulated: dict[str, SimulatedFile]) -> None:
    strategies: dict[str, int] = {}
    for simulated_file in simulated.values():
        for session in simulated_file.sessions:
            for call in session.live.calls:
                if call.result.strategy:
                    strategies[call.result.strategy] = strategies.get(call.result.strategy, 0) + 1
    assert strategies.get("tool-result-micro", 0) > 0, strategies
    assert strategies.get("checkpoint", 0) > 0, strategies


@pytest.mark.parametrize("name", [p.name for p in CORPUS_FILES])
def test_simulate_reports_one_call_per_assistant_message(
    simulated: dict[str, SimulatedFile], name: str
) -> None:
    for session in simulated[name].sessions:
        assert session.assistant_messages > 0
        assert session.totals["model_calls"] == session.assistant_messages
        assert session.totals["budget_tokens"] == session.budget
        assert len(session.live.calls) == session.assistant_messages
        assert session.totals["tokens_sent"] == session.live.tokens_sent


@pytest.mark.parametrize("name", [p.name for p in CORPUS_FILES])
def test_replay_verify_rerenders_every_model_call(simulated: dict[str, SimulatedFile], name: str) -> None:
    db = simulated[name].db
    for session in simulated[name].sessions:
        args = ["replay", "--db", str(db), "--session", session.session_id, "--verify"]
        data = json.loads(invoke([*args, "--format", "json"]).stdout)
        assert data == {"verified": session.assistant_messages, "drifts": []}
        text = invoke(args).stdout
        assert f": {session.assistant_messages} served views re-rendered, 0 drifted" in text


@pytest.mark.parametrize("name", [p.name for p in CORPUS_FILES])
def test_replay_json_tokens_are_the_ones_seen_live(simulated: dict[str, SimulatedFile], name: str) -> None:
    db = simulated[name].db
    for session in simulated[name].sessions:
        args = ["replay", "--db", str(db), "--session", session.session_id]
        points = json.loads(invoke([*args, "--format", "json"]).stdout)
        calls = [p for p in points if p["kind"] == "model-call"]
        live = session.live.calls
        assert [p["view_tokens"] for p in calls] == [c.view_tokens for c in live]
        assert [p["messages"] for p in calls] == [c.view_messages for c in live]
        assert [p["stored_tokens"] for p in calls] == [c.stored_tokens for c in live]
        assert [p["point"] for p in calls] == [c.point for c in live]
        assert [(p["point"], p["view_tokens"]) for p in calls] == _served_tokens(db, session.session_id)
        # Every round that was recorded is a compact point, at the version it was recorded as.
        recorded = [c.result.version for c in live if c.result.version]
        assert [p["point"] for p in points if p["kind"] == "compact"] == recorded
        assert points == session.simulate_points
        lines = invoke([*args, "--format", "jsonl"]).stdout.splitlines()
        assert [json.loads(line) for line in lines] == points


@pytest.mark.parametrize("name", [p.name for p in CORPUS_FILES])
def test_every_point_renders_valid_provider_requests(simulated: dict[str, SimulatedFile], name: str) -> None:
    db = simulated[name].db
    kinds: set[str] = set()
    for session in simulated[name].sessions:
        base = ["replay", "--db", str(db), "--session", session.session_id]
        points = json.loads(invoke([*base, "--format", "json"]).stdout)
        for point in points:
            kinds.add(point["kind"])
            at = [*base, "--at", str(point["point"])]
            openai = json.loads(invoke([*at, "--wire", "openai"]).stdout)
            anthropic = json.loads(invoke([*at, "--wire", "anthropic"]).stdout)
            where = f"{session.session_id} at {point['point']} ({point['kind']})"
            assert check_openai_request(openai) == (), where
            assert check_anthropic_request(anthropic) == (), where
    assert "model-call" in kinds
    if any(c.result.version for s in simulated[name].sessions for c in s.live.calls):
        assert "compact" in kinds
