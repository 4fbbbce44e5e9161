"""SIGKILL at every write of one appended turn: after the crash there is the whole turn or none of it.

A child process opens a prepared store, counts the SQL statements of one `append_turn` with
`sqlite3.Connection.set_trace_callback` and SIGKILLs itself after the k-th, for every k of the
operation. The parent then checks the crashed file read-only (`verify`) and through the facade.

What "after the k-th statement" means: SQLite calls the trace callback when a statement *starts*
running (`SQLITE_TRACE_STMT`), before it has any effect. So the child kills itself when the callback
fires for statement k + 1 — at that moment statements 1..k have run to completion (the store's
connection is in autocommit mode and every write statement is stepped to the end before the next
begins) and statement k + 1 has done nothing. For k = N there is no statement N + 1: the child kills
itself right after `append_turn` returns. k = 0 (killed before the first statement) is included too.
Statements that the trace never reports (SQLite does not trace some pragmas, such as the
`PRAGMA data_version` the facade reads) are reads; every write happens between the traced
`BEGIN IMMEDIATE` and `COMMIT`.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest

from transcript import Message, Store, ToolCall, Transcript, verify
from transcript.store.bodies import prepare

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_only("kills a writer at every SQLite statement")]

SESSION = "s1"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# The child: open the prepared store, append the turn read from a JSON file, die after statement k.
CHILD = r"""
import json, os, signal, sys

import msgspec

from transcript import Message, Transcript

path, session_id, tokenizer, turn_file = sys.argv[1:5]
kill_after, cache_pages = int(sys.argv[5]), int(sys.argv[6])
with open(turn_file, "rb") as f:
    turn = msgspec.json.decode(f.read(), type=list[Message])

t = Transcript.open(path, session_id=session_id, tokenizer=tokenizer)
conn = t.events.recorder.connection
if cache_pages:
    # A tiny page cache makes SQLite spill the uncommitted transaction's pages into the WAL before
    # COMMIT, so a kill leaves uncommitted frames there that recovery must ignore.
    conn.execute(f"PRAGMA cache_size = {cache_pages}")
wal = path + "-wal"
statements = []
wal_sizes = {}

def trace(sql):
    # Called before a statement runs: `len(statements)` statements have completed.
    if len(statements) == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    statements.append(sql)
    if sql in ("BEGIN IMMEDIATE", "COMMIT"):
        wal_sizes[sql] = os.path.getsize(wal) if os.path.exists(wal) else 0

conn.set_trace_callback(trace)
t.append_turn(turn)
conn.set_trace_callback(None)
if len(statements) == kill_after:
    os.kill(os.getpid(), signal.SIGKILL)
print(json.dumps({"statements": statements, "wal_sizes": wal_sizes}))
t.close()
"""


class Variant(NamedTuple):
    tokenizer: str
    result_chars: int
    cache_pages: int


VARIANTS = {
    # A tool step with small results, estimated tokens.
    "tool-step": Variant("chars/4", 40, 0),
    # A 100 KB tool result and a 5-page cache: the transaction's pages spill into the WAL before COMMIT.
    "spilled-large-result": Variant("chars/4", 100_000, 5),
}


class State(NamedTuple):
    ids: list[str]
    view: bytes


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def history() -> list[Message]:
    """What the prepared file holds: a finished tool step, then a new user request."""
    return [
        Message.system("You are a coding agent.", id="sys", created_at=at(0)),
        Message.user("run the tests", id="u1", created_at=at(1)),
        Message.assistant(
            "running",
            [ToolCall(id="c0", name="Bash", input={"command": "pytest"})],
            id="a0",
            created_at=at(2),
        ),
        Message.tool_result("c0", "3 passed", name="Bash", id="t0", created_at=at(3)),
        Message.assistant("all 3 tests pass", id="a0b", created_at=at(4)),
        Message.user("now read setup.cfg and pyproject.toml", id="u2", created_at=at(5)),
    ]


def turn(result_chars: int) -> list[Message]:
    """The crashed operation: an assistant message with two calls and both results, one transaction."""
    line = "line of tool output with some words 0123456789 ünïcödé 漢字\n"
    big = (line * (result_chars // len(line) + 1))[:result_chars]
    return [
        Message.assistant(
            "reading both files",
            [
                ToolCall(id="c1", name="Read", input={"path": "setup.cfg"}),
                ToolCall(id="c2", name="Read", input={"path": "pyproject.toml"}),
            ],
            id="a1",
            created_at=at(6),
        ),
        Message.tool_result("c1", big, name="Read", id="r1", created_at=at(7)),
        Message.tool_result("c2", "[project]\nname = 'x'\n", name="Read", id="r2", created_at=at(8)),
    ]


def read_state(path: Path, tokenizer: str) -> State:
    with Transcript.open(path, session_id=SESSION, create=False, tokenizer=tokenizer) as t:
        return State([m.id for m in t.stored_messages()], t.visible_messages().canonical_json())


def copy_store(source: Path, target_dir: Path) -> Path:
    """Copy a store file with its -wal and -shm when present."""
    target_dir.mkdir()
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{source}{suffix}")
        if src.exists():
            shutil.copyfile(src, target_dir / src.name)
    return target_dir / source.name


def run_child(
    script: Path, path: Path, variant: Variant, turn_file: Path, kill_after: int
) -> tuple[int, str]:
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            str(path),
            SESSION,
            variant.tokenizer,
            str(turn_file),
            str(kill_after),
            str(variant.cache_pages),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stderr == "", proc.stderr
    return proc.returncode, proc.stdout


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_kill_after_every_statement_leaves_whole_turn_or_nothing(tmp_path: Path, name: str) -> None:
    variant = VARIANTS[name]
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    the_turn = turn(variant.result_chars)
    turn_file = tmp_path / "turn.json"
    turn_file.write_bytes(msgspec.json.encode(the_turn))

    prepared = tmp_path / "prepared" / "store.db"
    prepared.parent.mkdir()
    with Transcript.open(prepared, session_id=SESSION, tokenizer=variant.tokenizer) as t:
        for message in history():
            t.append(message)
    before = read_state(prepared, variant.tokenizer)
    assert before.ids == [m.id for m in history()]

    # Measure: the operation run once to the end gives N, the statements and the "after" state.
    measured = copy_store(prepared, tmp_path / "measure")
    code, out = run_child(script, measured, variant, turn_file, kill_after=-1)
    assert code == 0
    report: dict[str, Any] = json.loads(out)
    statements: list[str] = report["statements"]
    n = len(statements)
    # One transaction, and nothing written after its COMMIT.
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    assert statements[-1] == "COMMIT"
    commit_at = n  # the 1-based number of the COMMIT statement
    # Kills land between the rows of the turn, not only around one statement: every row is a statement
    # of its own (today a body, a history row and an event per message).
    assert sum(s.startswith("INSERT") for s in statements) >= 2 * len(the_turn)
    if variant.cache_pages:
        assert report["wal_sizes"]["COMMIT"] > report["wal_sizes"]["BEGIN IMMEDIATE"], (
            "the transaction's pages did not spill into the WAL before COMMIT"
        )
    after = read_state(measured, variant.tokenizer)
    assert after.ids == before.ids + [m.id for m in the_turn]
    assert after.view != before.view
    assert verify(measured).ok

    outcomes: dict[int, str] = {}
    for k in range(n + 1):
        crashed = copy_store(prepared, tmp_path / f"kill-{k}")
        code, out = run_child(script, crashed, variant, turn_file, kill_after=k)
        assert code == -signal.SIGKILL, f"k={k}: the child was not killed ({code}): {out}"

        # Read-only first: verify recovers the crashed WAL without writing the file.
        report_k = verify(crashed)
        assert report_k.ok, f"k={k}: {[str(p) for p in report_k.problems]}"

        state = read_state(crashed, variant.tokenizer)
        assert state in (before, after), f"k={k}: part of the turn survived: {state.ids}"
        outcomes[k] = "all" if state == after else "none"
        # Exactly the committed statements count: the turn exists iff COMMIT ran.
        assert outcomes[k] == ("all" if k >= commit_at else "none"), f"k={k} of {n}: {outcomes[k]}"

        # The loop, unsure after a crash, re-appends the turn: stored once, never twice.
        with Transcript.open(crashed, session_id=SESSION, tokenizer=variant.tokenizer) as t:
            t.append_turn(the_turn)
        assert read_state(crashed, variant.tokenizer) == after
        assert verify(crashed).ok

    assert "none" in outcomes.values()
    assert outcomes[n] == "all"


def test_crash_mid_transaction_then_read_write_open_recovers(tmp_path: Path) -> None:
    """A crash mid-transaction, then a read-write open first (it recovers the WAL), then the retry.

    This path uses the default tokenizer (exact counts), so the counts stored by the retry are
    checked against a fresh count.
    """
    variant = Variant("cl100k_base", 5_000, 0)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    the_turn = turn(variant.result_chars)
    turn_file = tmp_path / "turn.json"
    turn_file.write_bytes(msgspec.json.encode(the_turn))
    path = tmp_path / "store.db"
    with Transcript.open(path, session_id=SESSION, tokenizer=variant.tokenizer) as t:
        for message in history():
            t.append(message)
    # Statement 5 is inside the transaction (after BEGIN, the head check and the first inserts).
    code, _ = run_child(script, path, variant, turn_file, kill_after=5)
    assert code == -signal.SIGKILL
    assert Path(f"{path}-wal").exists()

    with Store.open(path, tokenizer=variant.tokenizer) as store:
        assert [info.messages for info in store.sessions()] == [len(history())]
        t = store.session(SESSION, create=False)
        assert t.pending_calls == ()
        t.append_turn(the_turn)
        assert t.pending_calls == ()
        assert [m.id for m in t.stored_messages()] == [m.id for m in history() + the_turn]
        counted = [prepare(m, store.counter).tokens for m in the_turn]
        stored = [entry.tokens for entry in t.messages().entries[len(history()) :]]
        assert stored == counted
        assert stored[1][0] > 1_000  # exact BPE counts, not an empty or placeholder count
    assert verify(path).ok
