"""SIGKILL at every write of `micro_compact`: after the crash the whole micro step is there or none of it.

A child process opens a prepared session, plans a micro round, counts the SQL statements of
`micro_compact` with `set_trace_callback` and SIGKILLs itself when the callback fires for statement
k + 1 (statements 1..k have completed; see tests/test_crash.py for the exact meaning). The parent
checks the crashed file with `verify` and compares the view with the two possible outcomes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, PYTHON
from transcript import Message, ToolCall, Transcript, verify

pytestmark = pytest.mark.slow
SESSION = "s"

CHILD = r"""
import os, signal, sys
from planner import CompactConfig, plan_micro
from transcript import Transcript

path, kill_after = sys.argv[1], int(sys.argv[2])
t = Transcript.open(path, session_id="s", tokenizer="chars/4")
plan = plan_micro(t.messages(), CompactConfig())
statements = []

def trace(sql):
    if len(statements) == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    statements.append(sql)

t.events.connection.set_trace_callback(trace)
t.apply_micro_plan(plan)
t.events.connection.set_trace_callback(None)
if len(statements) == kill_after:
    os.kill(os.getpid(), signal.SIGKILL)
print(len(statements))
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


def _view(path: Path) -> bytes:
    with Transcript.open(path, session_id=SESSION, readonly=True) as t:
        return t.visible_messages().canonical_json()


def _copy(source: Path, target_dir: Path) -> Path:
    target_dir.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target_dir / source.name}{suffix}")
    return target_dir / source.name


def _run(path: Path, kill_after: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", CHILD, str(path), str(kill_after)], capture_output=True, text=True, cwd=PROJECT_ROOT
    )


def test_micro_compact_is_all_or_nothing_at_every_statement(tmp_path: Path) -> None:
    prepared = tmp_path / "prepared" / "t.db"
    prepared.parent.mkdir()
    _prepare(prepared)
    before = _view(prepared)
    whole = _copy(prepared, tmp_path / "whole")
    finished = _run(whole, -1)
    assert finished.returncode == 0, finished.stderr
    statements = int(finished.stdout)
    after = _view(whole)
    assert after != before and statements >= 3
    outcomes = []
    for k in range(statements + 1):
        crashed = _copy(prepared, tmp_path / f"kill-{k}")
        result = _run(crashed, k)
        assert result.returncode == -9, (k, result.stderr)
        report = verify(crashed)
        assert report.ok, (k, report.problems)
        view = _view(crashed)
        assert view in (before, after), k
        outcomes.append(view == after)
    assert outcomes[0] is False and outcomes[-1] is True
    assert outcomes == sorted(outcomes)
