"""A fleet on one PostgreSQL store: 8 worker processes share 4 sessions, each running the agent loop
(a compaction round before every model call, with the local summarizer; the served view recorded; the
reply and its tool result appended as one turn), retrying on `ConflictError`, while the test kills
workers at seeded random moments (SIGKILL) and starts them again.

Each worker keeps a journal of the turns the store acknowledged (a line, fsync'd, after `append_turn`
returned). Afterwards: every session verifies; every acknowledged turn is in its session's history
exactly once (0 lost); no message is stored twice, in one session or across them (0 duplicated), and a
message the journals do not name is at most the one turn a kill interrupted after its commit; and every
served view re-renders to the hash recorded when it was served (0 drifted). A run that saw no conflict
and no kill proves nothing: both are asserted.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.pgserver import Cluster
from transcript import Store, verify
from transcript.session.replay import check_served

pytestmark = pytest.mark.slow

WORKERS = 8
SESSIONS = 4
TURNS = 30  # per worker, over all its lives
SEED = 20261201
# Filled by the test, printed by conftest's summary.
FLEET: dict[str, int] = {}

WORKER = r"""
import json, os, random, sys, time

from transcript import ConflictError, LocalSummarizer, Message, StoreLocked, ToolCall, Transcript

location, journal_path = sys.argv[1], sys.argv[5]
worker, turns, sessions = (int(arg) for arg in sys.argv[2:5])
done = 0
if os.path.exists(journal_path):
    with open(journal_path) as journal:
        done = sum(1 for line in journal if line.endswith("\n"))
life = int(sys.argv[6])
rng = random.Random(f"{worker}-{life}")
conflicts = 0
journal = open(journal_path, "a")
summarizer = LocalSummarizer()


def retried(action):
    global conflicts
    while True:
        try:
            return action()
        except (ConflictError, StoreLocked):
            conflicts += 1


while done < turns:
    session_id = f"session-{rng.randrange(sessions)}"
    with Transcript.open(location, session_id=session_id, tokenizer="chars/4") as t:
        def start():
            if not len(t):
                t.append_turn([Message.system("You are a coding agent.", id=f"{session_id}-system"),
                               Message.user("make the failing tests pass", id=f"{session_id}-task")])
        retried(start)
        for _ in range(rng.randrange(1, 5)):
            if done >= turns:
                break
            retried(lambda: t.compact(budget_tokens=1_200, summarizer=summarizer))
            retried(lambda: t.visible_messages(record=True))
            time.sleep(rng.random() * 0.005)  # the model thinks
            # A life of its own in the id: a kill between the commit and the journal line leaves that
            # turn stored and unacknowledged, and the next life appends its own turn, not that id again.
            turn_id = f"w{worker}-l{life}-t{done}"
            call = ToolCall(id=f"{turn_id}-call", name="Bash", input={"command": f"pytest -k case{done}"})
            text = f"worker {worker} runs case {done}"
            answer = Message.assistant(text, tool_calls=[call], id=f"{turn_id}-a")
            result = Message.tool_result(call.id, f"case {done}: " + "ok " * rng.randrange(20, 120),
                                         name="Bash", id=f"{turn_id}-r")
            retried(lambda: t.append_turn([answer, result]))
            journal.write(json.dumps({"session": session_id, "ids": [answer.id, result.id]}) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
            done += 1
print(json.dumps({"conflicts": conflicts}), flush=True)
"""


def _start(script: Path, location: str, worker: int, journal: Path, life: int) -> subprocess.Popen[str]:
    args = [str(script), location, str(worker), str(TURNS), str(SESSIONS), str(journal), str(life)]
    return subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_fleet_with_kills_loses_duplicates_and_drifts_nothing(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    location = postgres_cluster.url()
    Store.open(location).close()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    journals = [tmp_path / f"journal-{n}.jsonl" for n in range(WORKERS)]
    lives = [0] * WORKERS
    procs = [_start(script, location, n, journals[n], 0) for n in range(WORKERS)]
    rng = random.Random(SEED)
    kills = conflicts = 0
    deadline = time.monotonic() + 150
    try:
        while any(proc.poll() is None for proc in procs):
            assert time.monotonic() < deadline, "the fleet did not finish in time"
            time.sleep(rng.uniform(0.3, 1.2))
            running = [n for n, proc in enumerate(procs) if proc.poll() is None]
            if not running or kills >= 12:
                continue
            victim = rng.choice(running)
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].communicate(timeout=30)
            kills += 1
            lives[victim] += 1
            procs[victim] = _start(script, location, victim, journals[victim], lives[victim])
        for proc in procs:
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            conflicts += json.loads(out)["conflicts"]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()  # a failed run leaves no open pipe to the next test
    try:
        _check(location, journals, kills, conflicts)
    finally:
        postgres_cluster.drop_schema(location)


def _check(location: str, journals: list[Path], kills: int, conflicts: int) -> None:
    acknowledged: dict[str, list[str]] = {}
    for journal in journals:
        lines = journal.read_text().splitlines()
        assert len(lines) == TURNS, journal
        for line in lines:
            entry = json.loads(line)
            acknowledged.setdefault(entry["session"], []).extend(entry["ids"])
    report = verify(location)
    assert report.ok, [str(p) for p in report.problems]
    stored: Counter[str] = Counter()
    lost = drifted = served = rounds = 0
    with Store.open(location, readonly=True) as store:
        for info in store.sessions():
            transcript = store.session(info.session_id)
            history = [m.id for m in transcript.stored_messages()]
            rounds += sum(result.outcome.endswith("applied") for result in transcript.compact_results())
            stored.update(history)
            lost += len(set(acknowledged.get(info.session_id, [])) - set(history))
            check = check_served(store.events, info.session_id)
            drifted += len(check.drifts)
            served += check.verified
    duplicated = sum(count - 1 for count in stored.values() if count > 1)
    named = {message_id for ids in acknowledged.values() for message_id in ids}
    unacknowledged = [
        message_id for message_id in stored if message_id not in named and message_id.startswith("w")
    ]
    FLEET.update(
        workers=WORKERS,
        sessions=len(acknowledged),
        turns=len(named) // 2,
        kills=kills,
        conflicts=conflicts,
        lost=lost,
        duplicated=duplicated,
        drifted=drifted,
        served=served,
        rounds=rounds,
        unacknowledged=len(unacknowledged) // 2,
    )
    assert (lost, duplicated, drifted) == (0, 0, 0)
    assert len(unacknowledged) <= 2 * kills  # at most the one turn each kill interrupted after commit
    assert kills and conflicts and served and rounds, (
        "no kill, conflict, served view or round: it proved nothing"
    )
    assert FLEET["turns"] == WORKERS * TURNS
