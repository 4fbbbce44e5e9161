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
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from projection.view import View
from tests.conftest import CORPUS
from transcript import Store, StoreCorrupted, Transcript, verify
from transcript.session.replay import check_served, timeline, view_at

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
    return build_pristine(tmp_path_factory.mktemp("pristine") / "t.db")


def flipped(data: bytes, rng: random.Random, path: Path) -> Path:
    """A copy of `data` at `path` with one to three bits flipped at random."""
    damaged = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(damaged))
        damaged[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(damaged))
    return path


def build_pristine(path: Path) -> Path:
    """The store every flip damages a copy of: an imported session, compacted, with a served-view
    record, and a fork of it; checkpointed into the one file."""
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


# What a flip is met by: every way a loop, or its owner, reads or writes a session.
OPERATIONS: Final = ("open", "view", "compact", "fork", "replay", "timeline", "export")
# The outcomes a flip may come to in each: it worked, it worked and said what it lived with, or
# `StoreCorrupted` naming what it found. Anything else is a mis-typed corruption.
ALLOWED: Final = frozenset(("ok", "diagnostic", "StoreCorrupted", "not opened"))


def every_operation(path: Path) -> dict[str, str]:
    """Open the store and meet every session with each of `OPERATIONS`, each on its own: what each
    came to (the first outcome other than "ok" over the sessions; "not opened" after a failed open).
    A `StoreCorrupted` must say where."""
    outcomes = dict.fromkeys(OPERATIONS, "ok")

    def met(operation: str, run: Callable[[], object]) -> object:
        try:
            value = run()
        except StoreCorrupted as exc:
            assert "(" in str(exc) or ":" in str(exc), exc  # it says where
            found = "StoreCorrupted"
            value = None
        except Exception as exc:  # any other error, typed or not: counted, not raised
            found = type(exc).__name__
            value = None
            UNTYPED.setdefault(found, []).append(f"{operation}: {exc}"[:300])
        else:
            found = "diagnostic" if getattr(value, "diagnostics", ()) else "ok"
        if outcomes[operation] == "ok":
            outcomes[operation] = found
        return value

    store = met("open", lambda: Store.open(path, tokenizer="chars/4"))
    if not isinstance(store, Store):
        return {op: outcome if op == "open" else "not opened" for op, outcome in outcomes.items()}
    with store:
        sessions = met("open", store.sessions)
        for info in sessions if isinstance(sessions, list) else []:
            _meet_session(store, info.session_id, met)
    return outcomes


def _meet_session(store: Store, sid: str, met: Callable[[str, Callable[[], object]], object]) -> None:
    t = met("view", lambda: store.session(sid))
    if not isinstance(t, Transcript):
        return
    view = met("view", t.visible_messages)
    tokens = view.tokens if isinstance(view, View) else 400
    met("compact", lambda: t.compact(budget_tokens=max(tokens // 2, 200), force=True))
    met("fork", lambda: store.fork(sid, new_session_id=f"{sid}-fork"))
    met("replay", lambda: (check_served(store.events, sid), view_at(store.events, sid, "last")))
    met("timeline", lambda: timeline(store.events, sid))
    met("export", lambda: (t.export_state(), t.write_state(lambda _: None)))


# Errors other than `StoreCorrupted` the operations met, by type, with what they said.
UNTYPED: dict[str, list[str]] = {}


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


# Flips met by every operation (`every_operation`); what each came to, by operation (the run prints it).
OPERATION_FLIPS = 200
BY_OPERATION: dict[str, dict[str, int]] = {}


def test_flipped_bytes_met_by_every_operation_are_corruption_or_a_diagnostic(
    pristine: Path, tmp_path: Path
) -> None:
    """Open, view, compact, fork, replay, timeline and export of a flipped copy each end in success
    (perhaps with a diagnostic) or `StoreCorrupted` naming what it found; never another error
    (`benchmarks/byte_flips.py` runs the same, longer)."""
    data = pristine.read_bytes()
    rng = random.Random(40)
    UNTYPED.clear()
    for n in range(OPERATION_FLIPS):
        path = flipped(data, rng, tmp_path / f"flip-{n}.db")
        for operation, outcome in every_operation(path).items():
            counts = BY_OPERATION.setdefault(operation, {})
            counts[outcome] = counts.get(outcome, 0) + 1
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert not UNTYPED, {name: found[:3] for name, found in UNTYPED.items()}
    assert set(BY_OPERATION) == set(OPERATIONS)
    assert all(set(counts) <= ALLOWED for counts in BY_OPERATION.values()), BY_OPERATION
    assert BY_OPERATION["open"].get("StoreCorrupted") and BY_OPERATION["compact"].get("ok")
