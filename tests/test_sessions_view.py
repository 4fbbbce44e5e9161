"""The `sessions` view names a fork's parent, in a new file and in one migrated from release 0.1.0.

A fork's log starts with its `forked_from` event (then the parent's events copied, the parent's own
`session_started` among them), so the view reads the parent from the first of the two it meets.
Migration 0004 only redefines the view: every hash and head stays as it was.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT
from transcript import Message, Store, ToolCall, Transcript, verify

pytestmark = pytest.mark.sqlite_only("reads the SQLite file's SQL views and migrates a SQLite file")

OLD = PROJECT_ROOT / "fixtures" / "stores" / "release-0.1.0.db"


def _parents(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT session_id, parent_session_id FROM sessions").fetchall())
    finally:
        conn.close()


def test_a_fork_shows_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("go"))
        t.append_turn(
            [
                Message.assistant("", tool_calls=[ToolCall(id="c", name="Bash", input={})]),
                Message.tool_result("c", "ok"),
            ]
        )
    with Store.open(path) as store:
        store.fork("s", new_session_id="s-try")
        store.fork("s-try", new_session_id="s-try-again")
    assert _parents(path) == {"s": None, "s-try": "s", "s-try-again": "s-try"}


def test_a_migrated_fork_shows_its_parent_and_keeps_every_hash(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    for suffix in ("", "-wal", "-shm"):
        if (OLD.parent / (OLD.name + suffix)).exists():
            shutil.copy(OLD.parent / (OLD.name + suffix), tmp_path / (path.name + suffix))
    with sqlite3.connect(path) as conn:
        events = conn.execute("SELECT session_id, version, hash FROM events ORDER BY 1, 2").fetchall()
    Store.open(path).close()  # migrates it
    parents = _parents(path)
    assert parents["fork/pydicom@40"] == "sim/pydicom"
    assert parents["sim/pydicom"] is None
    with sqlite3.connect(path) as conn:
        kept = "SELECT session_id, version, hash FROM events WHERE kind <> 'records_attested' ORDER BY 1, 2"
        assert conn.execute(kept).fetchall() == events  # the attestation only adds an event per session
    assert verify(path).ok
