"""SIGKILL at every statement of a compaction round: each step commits with its record, or not at all.

A child process opens a prepared session, runs one round — a micro round, or a round whose micro step
is followed by a full step with a model summarizer — counts its SQL statements with
`set_trace_callback` and SIGKILLs itself when the callback fires for statement k + 1 (statements 1..k
have completed; see tests/test_crash.py for the exact meaning), for every k. After each kill the
parent finds `verify` passing and the log in exactly one of three states: nothing of the round; the
micro step with its record; or both steps, the second with the round's final record (same round id).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT, PYTHON
from transcript import Message, ToolCall, Transcript, verify

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_only("kills a writer at every SQLite statement")]
SESSION = "s"

CHILD = r"""
import os, signal, sys
from planner import CompactConfig
from transcript import Transcript

path, kill_after, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def model(request):
    return '{"goal": "goal", "done": ["ran the steps"], "next_steps": ["carry on"]}'

# The priced policy (policy 2's head and tail): under a third of the view, shortening results alone
# cannot defend the budget, so a full step follows (policy 3's excerpts would defend it alone).
t = Transcript.open(path, session_id="s", tokenizer="chars/4", config=CompactConfig.priced())
budget = t.visible_messages().tokens // (2 if kind == "micro" else 3)
statements = []

def trace(sql):
    if len(statements) == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    statements.append(sql)

t.events.recorder.connection.set_trace_callback(trace)
if kind == "micro":
    result = t.compact(budget_tokens=budget, config=CompactConfig.priced(full_compact_enabled=False))
else:
    result = t.compact(budget_tokens=budget, summarizer=model)
t.events.recorder.connection.set_trace_callback(None)
if len(statements) == kill_after:
    os.kill(os.getpid(), signal.SIGKILL)
print(len(statements), result.outcome)
"""


def _prepare(path: Path) -> None:
    with Transcript.open(path, session_id=SESSION, tokenizer="chars/4") as t:
        t.append(Message.system("sys"))
        t.append(Message.user("goal"))
        for n in range(7):
            call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
            t.append_turn(
                [
                    Message.assistant(f"step {n}", tool_calls=[call]),
                    Message.tool_result(f"c{n}", f"line {n}\n" * 300, name="Bash"),
                ]
            )


def _events(path: Path, after: int) -> list[tuple[str, dict[str, Any]]]:
    """(kind, payload) of the session's events after version `after`, straight from the file."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT kind, payload FROM events WHERE session_id = ? AND version > ? ORDER BY version",
            (SESSION, after),
        ).fetchall()
    finally:
        conn.close()
    return [(kind, json.loads(payload)) for kind, payload in rows]


def _state(events: list[tuple[str, dict[str, Any]]]) -> str:
    """Which of the three allowed states a round's events are in; anything else fails the test."""
    if not events:
        return "nothing"
    kinds = [kind for kind, _ in events]
    if kinds[-1] == "snapshot_recorded":  # after a full round, its snapshot (a write of its own)
        events, kinds = events[:-1], kinds[:-1]
        assert kinds[-1] == "compaction_recorded", kinds
    records = [payload["result"] for kind, payload in events if kind == "compaction_recorded"]
    micro = [payload for kind, payload in events if kind == "message_marked" and payload.get("truncated")]
    assert micro and kinds[: len(micro)] == ["message_marked"] * len(micro), kinds
    assert kinds[len(micro)] == "compaction_recorded", kinds
    if len(kinds) == len(micro) + 1:
        assert records[0]["outcome"] == "micro_applied" or records[0]["outcome"] == "full_unavailable"
        return "micro step"
    rest = kinds[len(micro) + 1 :]
    # A round that asks a model claims the session before it pays (`RoundClaimed`): its own step.
    assert rest[0] == "round_claimed", kinds
    if len(rest) == 1:
        return "claimed"
    rest = rest[1:]
    assert rest == ["messages_excluded", "message_appended", "compaction_recorded"], kinds
    assert len(records) == 2 and records[0]["round_id"] == records[1]["round_id"]
    assert records[1]["outcome"] == "full_applied"
    return "both steps"


def _copy(source: Path, target_dir: Path) -> Path:
    target_dir.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target_dir / source.name}{suffix}")
    return target_dir / source.name


def _run(path: Path, kill_after: int, kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", CHILD, str(path), str(kill_after), kind],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
    )


@pytest.mark.parametrize(("kind", "final"), [("micro", "micro step"), ("micro-then-full", "both steps")])
def test_a_round_leaves_nothing_or_whole_steps_with_their_records(
    tmp_path: Path, kind: str, final: str
) -> None:
    prepared = tmp_path / "prepared" / "t.db"
    prepared.parent.mkdir()
    _prepare(prepared)
    with Transcript.open(prepared, session_id=SESSION, readonly=True) as t:
        start = t.version
    whole = _copy(prepared, tmp_path / "whole")
    finished = _run(whole, -1, kind)
    assert finished.returncode == 0, finished.stderr
    statements = int(finished.stdout.split()[0])
    assert _state(_events(whole, start)) == final
    seen = []
    for k in range(statements + 1):
        crashed = _copy(prepared, tmp_path / f"kill-{k}")
        result = _run(crashed, k, kind)
        assert result.returncode == -9, (k, result.stderr)
        report = verify(crashed)
        assert report.ok, (k, report.problems)
        seen.append(_state(_events(crashed, start)))
        with Transcript.open(crashed, session_id=SESSION, readonly=True) as t:
            t.visible_messages()  # the crashed file opens and renders
    order = ["nothing", "micro step", "claimed", "both steps"]
    assert seen[0] == "nothing" and seen[-1] == final
    assert seen == sorted(seen, key=order.index)
    assert set(seen) == set(order[: order.index(final) + 1]) - ({"claimed"} if kind == "micro" else set())
