"""Several processes append to one session of one file: every message is stored once, in a dense order.

Four worker processes open `Transcript.open(path, session_id="shared")` and append 250 user messages
each. A write names the version its `Transcript` last saw; when another worker committed in between,
the write raises `ConflictError` with nothing written, the `Transcript` has already caught up, and the
worker simply retries the same append. A run that saw no conflict proves nothing, so the test asserts
that some writer lost a race.

Making races happen: the workers start together (each reports "ready" once its store is open and
waits for "go" on stdin), and each does what a loop does between appends — reads its view and waits
for "the model" (0.5 ms). Without that pause conflicts are rare (a handful per run, sometimes none for
a worker): a worker that finds the write lock taken sleeps in SQLite's busy handler (1, 2, 5, 10 ms
...), while the holder commits and takes the lock again for its next append within microseconds, so
the workers run in long streaks and only each hand-over of the lock costs one conflict. With the pause
the lock is free between a holder's appends, the workers interleave for the whole run, and every time
one commits while another waits for the lock the waiter's expected version is stale: hundreds of
conflicts per run.

`StoreLocked` is retried too, and counted apart: it means a worker waited longer than the busy
timeout for the write lock (`BEGIN IMMEDIATE` failed, so nothing was written). With the default 5 s
timeout and commits that take about a millisecond it should not happen; retrying keeps a slow CI
machine from failing the test for the wrong reason, and a retry is safe because re-appending a message
already in the session with the same content is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from projection.view import View
from tests.helpers import sql
from transcript import Store, verify

pytestmark = pytest.mark.slow

WORKERS = 4
APPENDS = 250
SESSION = "shared"

WORKER = r"""
import hashlib, json, sys, time

from transcript import ConflictError, Message, StoreLocked, Transcript

path, worker, appends = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conflicts = locked = 0
with Transcript.open(path, session_id="shared", tokenizer="chars/4") as t:
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    for i in range(appends):
        message = Message.user(f"worker {worker} says {i}", id=f"w{worker}-{i}")
        t.visible_messages()
        time.sleep(0.0005)
        while True:
            try:
                t.append(message)
                break
            except ConflictError:
                conflicts += 1
            except StoreLocked:
                locked += 1
    # What this worker's live session holds after all its catching up (incremental reads). Each
    # read catches up again, so the view and the history may be taken at different versions.
    view = t.visible_messages()
    view_hash, view_len = hashlib.sha256(view.canonical_json()).hexdigest(), len(view)
    seen = [m.id for m in t.stored_messages()]
    final_version = t.version
print(json.dumps({"worker": worker, "conflicts": conflicts, "locked": locked, "version": final_version,
                  "seen": seen, "view_sha256": view_hash, "view_len": view_len}))
"""


def run_workers(path: Path, script: Path) -> list[dict[str, Any]]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), str(n), str(APPENDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert err == ""
            results.append(json.loads(out))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_four_processes_append_to_one_session(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Store.open(path, tokenizer="chars/4").close()  # migrate once, so the workers race only on appends
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    results = run_workers(path, script)

    total = WORKERS * APPENDS
    with Store.open(path, readonly=True, tokenizer="chars/4") as store:
        rows = sql(store, "SELECT seq, message_id FROM history WHERE session_id = ? ORDER BY seq", [SESSION])
        (events,) = sql(store, "SELECT count(*) FROM events WHERE session_id = ?", [SESSION])[0]
        # The records of the snapshots written on the way and at the workers' closes (one event each).
        (records,) = sql(
            store,
            "SELECT count(*) FROM events WHERE session_id = ? AND kind = 'snapshot_recorded'",
            [SESSION],
        )[0]
        (bodies,) = sql(store, "SELECT count(*) FROM bodies")[0]
        messages = store.session(SESSION, create=False).stored_messages()
    seqs = [seq for seq, _ in rows]
    ids = [message_id for _, message_id in rows]
    assert seqs == list(range(total))
    assert len(set(ids)) == total
    assert sorted(ids) == sorted(f"w{n}-{i}" for n in range(WORKERS) for i in range(APPENDS))
    assert (events - records, bodies) == (total, total) and records <= WORKERS + 1
    assert [m.id for m in messages] == ids
    for n in range(WORKERS):
        own = [int(message_id.split("-")[1]) for message_id in ids if message_id.startswith(f"w{n}-")]
        assert own == list(range(APPENDS)), f"worker {n}'s messages are out of its order"
    # Every worker caught up incrementally to exactly what a fresh read finds (a prefix of it, as
    # others may have appended after it finished); the last one to finish saw everything.
    for r in results:
        seen: list[str] = r["seen"]
        assert len(seen) <= r["version"] <= len(seen) + records and len(seen) >= r["view_len"] >= APPENDS
        assert seen == ids[: len(seen)]
        fresh = View.of(messages[: r["view_len"]], source="canonical", tokens=0)
        assert r["view_sha256"] == hashlib.sha256(fresh.canonical_json()).hexdigest()
    assert total <= max(r["version"] for r in results) <= total + records
    assert verify(path).ok

    conflicts = sum(r["conflicts"] for r in results)
    assert conflicts >= 1, f"no writer lost a race ({results}); the test proved nothing"
