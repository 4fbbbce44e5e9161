"""Damaged files: a flipped byte anywhere gives a typed error, or `verify` names the damage, or the
store's content did not change (the byte was in free space).

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
from transcript import Store, TranscriptError, verify

pytestmark = pytest.mark.sqlite_only("damages the SQLite file's bytes and pages")

FLIPS = 150


def _content(path: Path) -> list[str] | None:
    """What the store holds (its tables and triggers as SQL text); None when SQLite cannot read it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [
                line for line in conn.iterdump() if "_sqlite_migrations" not in line or "INSERT" not in line
            ]
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


def _read_everything(path: Path) -> None:
    with Store.open(path, tokenizer="chars/4") as store:
        for info in store.sessions():
            t = store.session(info.session_id)
            assert t.visible_messages().tokens >= 0


@pytest.mark.parametrize("batch", range(5))
def test_flipped_bytes_give_a_typed_error_or_a_named_problem_or_no_change(
    pristine: Path, tmp_path: Path, batch: int
) -> None:
    original = _content(pristine)
    data = pristine.read_bytes()
    rng = random.Random(batch)
    outcomes = {"typed error": 0, "named by verify": 0, "unchanged": 0}
    for n in range(FLIPS // 5):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(damaged))
            damaged[at] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip-{n}.db"
        path.write_bytes(bytes(damaged))
        try:
            report = verify(path)
            _read_everything(path)
        except TranscriptError:
            outcomes["typed error"] += 1
            continue
        if not report.ok:
            outcomes["named by verify"] += 1
        else:
            assert _content(path) == original, f"flip {n} of batch {batch} changed the content unnoticed"
            outcomes["unchanged"] += 1
        path.unlink()
    assert sum(outcomes.values()) == FLIPS // 5
    assert outcomes["typed error"] + outcomes["named by verify"] > 0, outcomes
