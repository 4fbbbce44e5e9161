"""Damaged files: a flipped byte anywhere gives `StoreCorrupted`, or a session that opens with
`MARK_UNREADABLE`, or a store that works (and `verify` names the damage, or the content did not
change: the byte was in free space).

A small store (an imported session, compacted, with a served-view record, and a second session) is
written once; then, for seeded random positions, a copy of the file gets one, two or three bits
flipped and is opened, read (every session, its view) and verified. What must never happen: an error
that is not a `TranscriptError`, or content that changed while `verify` says the file is fine.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from transcript import Store, StoreCorrupted, verify

pytestmark = pytest.mark.sqlite_only("damages the SQLite file's bytes and pages")

FLIPS = 1_000
BATCHES = 4
# What every flip came to, over all batches (the test run prints it).
OUTCOMES: dict[str, int] = {}


def _content(path: Path) -> list[str] | None:
    """What the store holds (its tables and triggers as SQL text); None when SQLite cannot read it.
    The migrations table is left out: sqlite-utils writes it, and `verify` never compares it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [line for line in conn.iterdump() if "_sqlite_migrations" not in line]
        finally:
            conn.close()
    except sqlite3.Error:
        return None


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pristine") / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        store.import_file(CORPUS / "sweagent_pydicom-1458_gpt4.traj")
        t = store.session(store.sessions()[0].session_id)
        t.compact(budget_tokens=t.visible_messages().tokens // 2, manual=True)
        t.visible_messages(record=True)
        store.fork(t.session_id, new_session_id="second")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def _use(path: Path) -> str:
    """Open the store and use every session as a loop would: its view, a re-append of a stored
    message (a no-op on an intact store), a forced round. The outcome: fine, or MARK_UNREADABLE."""
    outcome = "fine"
    with Store.open(path, tokenizer="chars/4") as store:
        for info in store.sessions():
            t = store.session(info.session_id)
            view = t.visible_messages()
            if any(d.code == "MARK_UNREADABLE" for d in view.diagnostics):
                outcome = "MARK_UNREADABLE"
            stored = t.stored_messages()
            if stored:
                t.append(stored[len(stored) // 2])
            t.compact(budget_tokens=max(view.tokens // 2, 200), force=True)
    return outcome


@pytest.mark.parametrize("batch", range(BATCHES))
def test_flipped_bytes_are_corruption_a_diagnostic_or_nothing(
    pristine: Path, tmp_path: Path, batch: int
) -> None:
    """Each flip ends one of three ways: `StoreCorrupted` (naming what it found), a session that opens
    with `MARK_UNREADABLE`, or a store that works — and then `verify` names the damage, or the content
    did not change (the byte was in free space). Never another error, typed or not."""
    original = _content(pristine)
    data = pristine.read_bytes()
    rng = random.Random(batch)
    outcomes = {"StoreCorrupted": 0, "MARK_UNREADABLE": 0, "fine": 0}
    for n in range(FLIPS // BATCHES):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(damaged))
            damaged[at] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip-{n}.db"
        path.write_bytes(bytes(damaged))
        try:
            report = verify(path)
            if report.ok:
                assert _content(path) == original, f"flip {n} of batch {batch} changed the content unnoticed"
            outcome = _use(path)
        except StoreCorrupted as exc:
            assert "(" in str(exc) or ":" in str(exc)  # it says where
            outcome = "StoreCorrupted"
        outcomes[outcome] += 1
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    for name, count in outcomes.items():
        OUTCOMES[name] = OUTCOMES.get(name, 0) + count
    assert sum(outcomes.values()) == FLIPS // BATCHES
    assert outcomes["StoreCorrupted"] and outcomes["fine"], outcomes
