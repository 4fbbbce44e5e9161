"""A kill at every write of the commit path, on PostgreSQL: a child process appends a turn and then
runs a full compaction round, counting the statements it sends to the server; it kills itself
(SIGKILL) right after the k-th, for every k up to the last. After each kill the store holds the whole
step or none of it: the session is at a head the writer could have reached, `verify` passes, a
resumed transcript renders the view the store's log renders, and it can go on appending.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pgserver import Cluster
from transcript import Message, Store, Transcript, verify
from transcript.session.replay import view_at

pytestmark = pytest.mark.slow

CHILD = r"""
import os, signal, sys

import psycopg

from transcript import LocalSummarizer, Message, Transcript

location, kill_at = sys.argv[1], int(sys.argv[2])
sent = 0


def counted(method):
    def run(self, *args, **kwargs):
        global sent
        result = method(self, *args, **kwargs)
        sent += 1
        if sent == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    return run


t = Transcript.open(location, session_id="s", tokenizer="chars/4")
psycopg.Connection.execute = counted(psycopg.Connection.execute)
psycopg.Cursor.executemany = counted(psycopg.Cursor.executemany)
late = [Message.assistant("the fix: " + "word " * 300, id="late-a"), Message.user("go on", id="late-u")]
t.append_turn(late)
t.compact(budget_tokens=400, force=True, summarizer=LocalSummarizer())
print(sent, flush=True)
"""


def _seed(location: str) -> None:
    with Transcript.open(location, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.system("You are a coding agent.", id="sys"))
        t.append(Message.user("make the failing test pass", id="task"))
        for i in range(6):
            t.append_turn([Message.assistant(f"step {i}: " + "look " * 80, id=f"a{i}")])
            t.append(Message.user(f"next {i}", id=f"u{i}"))


def _child(script: Path, location: str, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), location, str(kill_at)], capture_output=True, text=True, timeout=120
    )


def test_a_kill_at_every_statement_leaves_a_whole_step_or_none(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    probe = postgres_cluster.url()
    _seed(probe)
    whole = _child(script, probe, 0)
    assert whole.returncode == 0, whole.stderr
    statements = int(whole.stdout)
    with Store.open(probe) as store:
        final = store.head("s")[0]
    postgres_cluster.drop_schema(probe)
    assert statements >= 8
    reached: set[int] = set()
    for kill_at in range(1, statements + 1):
        location = postgres_cluster.url()
        _seed(location)
        with Store.open(location) as store:
            start = store.head("s")[0]
        done = _child(script, location, kill_at)
        assert done.returncode == -signal.SIGKILL, (kill_at, done.stderr)
        report = verify(location)
        assert report.ok, (kill_at, [str(p) for p in report.problems])
        with Transcript.open(location, session_id="s", tokenizer="chars/4") as resumed:
            version = resumed.version
            assert start <= version <= final, kill_at
            with Store.open(location, readonly=True) as store:
                logged = view_at(store.events, "s", "last")
            assert json.loads(resumed.visible_messages().canonical_json()) == json.loads(
                logged.canonical_json()
            )
            resumed.append(Message.user("resumed", id="after"))
        reached.add(version)
        postgres_cluster.drop_schema(location)
    # Kills landed before the append, between the append and the round, and after the round's steps.
    assert len(reached) >= 3 and final in reached
