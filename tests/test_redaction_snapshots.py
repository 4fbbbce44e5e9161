"""Redaction and erasure leave no secret and no stale state in the snapshots of the fold.

A snapshot holds the fold's state (round records with their checkpoints, the title, the served
view's digests, counts), made from what a redaction rewrites; so a redaction drops the snapshots of
every session it records its event in, and an erasure those of the erased session, in the same
transaction. An open after it folds the log as it is now, a later full round stores a new snapshot,
and a snapshot from before the redaction put back from a copy is passed over and named by `verify`.
Run on every backend that redacts; PostgreSQL refuses both and keeps its snapshots.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.backends import MEMORY, POSTGRES, SQLITE_FILE, SQLITE_MEMORY, OnBackend
from tests.test_redaction import KEY, SECRET, _leaky_session, _quoting_summarizer
from tests.test_snapshots import _grow, _state
from transcript import ConflictError, Message, Store, Transcript, verify
from transcript.model.errors import StoreUnavailable
from transcript.model.redaction import is_tombstone
from transcript.session import snapshots
from transcript.session.verifying import snapshot_problems
from transcript.store.log import EventLog
from transcript.store.memory import MemoryRecorder
from transcript.store.recorder import SnapshotRow
from transcript.store.sqlite import SqliteRecorder
from transcript.store.verify import check

ROOT = Path(__file__).resolve().parent.parent


def _compacted_leak(store: Store, *forks: str) -> tuple[Transcript, str]:
    """The leaky session (and `forks` of it) after a full round whose checkpoint quotes the key, the
    session with a title that names it and a served view: their snapshots hold the key."""
    leak, sid = _leaky_session(store)
    forked = [store.fork(sid, new_session_id=f, summarizer=_quoting_summarizer) for f in forks]
    t = store.session(sid, summarizer=_quoting_summarizer)
    t.set_title(f"deploy with {KEY}")
    for each in (t, *forked):
        _full_round(each)
        each.visible_messages(record=True)
    return t, leak


def _full_round(t: Transcript) -> None:
    assert t.compact(budget_tokens=t.visible_messages().tokens // 3, force=True).outcome == "full_applied"


def _log(store: Store) -> EventLog:
    assert isinstance(store.events, EventLog)
    return store.events


def _snapshots(store: Store, session_id: str) -> list[SnapshotRow]:
    return list(_log(store).recorder.snapshots(session_id))


def _payloads(store: Store) -> str:
    return "\n".join(str(row[3]) for row in _log(store).recorder.scan_snapshots())


def _opened(store: Store, session_id: str) -> tuple[bool, tuple[object, ...]]:
    """A new open of the session in this store: whether it loaded a snapshot, and its state."""
    t = Transcript.attach(store.events, session_id, tokenizer=store.tokenizer)
    t.visible_messages()
    lazy = t._live.lazy  # before the state: an opening title is read from the whole history
    return lazy, _state(t)


def _folded(store: Store, session_id: str) -> tuple[object, ...]:
    """The state a full fold of the log gives (no snapshot loaded)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EventLog, "snapshot", lambda self, session_id: None)
        lazy, state = _opened(store, session_id)
    assert not lazy
    return state


def _clean(store: Store) -> None:
    report = check(_log(store).recorder, extra=snapshot_problems)
    assert report.ok, report.problems


def _put_back(store: Store, session_id: str, rows: list[SnapshotRow]) -> None:
    """Store snapshots again as they were, as a copy of the rows restored by hand would."""
    recorder = _log(store).recorder
    if isinstance(recorder, SqliteRecorder):
        with recorder.connection:
            recorder.connection.executemany(
                "INSERT INTO snapshots (session_id, version, hash, payload, digest) VALUES (?, ?, ?, ?, ?)",
                [(session_id, r.version, r.hash, r.payload, r.digest) for r in rows],
            )
        return
    assert isinstance(recorder, MemoryRecorder)
    recorder._rows.snapshots[session_id] = sorted(rows, key=lambda row: row.version)
    recorder._rows.commits += 1


class RedactionSnapshots(OnBackend):
    """On every backend that redacts."""

    @pytest.fixture
    def store(self, location: str) -> Iterator[Store]:
        with Store.open(location) as store:
            yield store

    def test_a_redaction_drops_the_snapshots_and_an_open_renders_the_redacted_view(
        self, store: Store
    ) -> None:
        t, leak = _compacted_leak(store, "deploy-2")
        assert _snapshots(store, t.session_id) and _snapshots(store, "deploy-2")
        assert KEY in _payloads(store)  # the checkpoint and the title, folded into the snapshots
        assert _opened(store, t.session_id)[0]  # an open loads the snapshot
        done = t.redact(leak, reason="leaked AWS key")
        assert set(done.sessions) == {t.session_id, "deploy-2"}
        # Dropped with the redaction, in its transaction: none left to load, none holding the key.
        assert _snapshots(store, t.session_id) == [] and _snapshots(store, "deploy-2") == []
        for session_id in done.sessions:
            lazy, state = _opened(store, session_id)
            assert not lazy and state == _folded(store, session_id)
            assert KEY not in str(state) and SECRET not in str(state) and "[redacted" in str(state)
        assert _state(t) == _folded(store, t.session_id) and KEY not in (t.title or "")
        _clean(store)
        # The next full round (its summarizer quoting nothing) stores a snapshot of the redacted
        # fold; an open loads it.
        t = store.session(t.session_id)
        _grow(t, 8, start=50)
        _full_round(t)
        (newest, *_) = _snapshots(store, t.session_id)
        assert newest.version > done.versions[t.session_id]
        lazy, state = _opened(store, t.session_id)
        assert lazy and state == _folded(store, t.session_id) == _state(t)
        assert KEY not in _payloads(store) and SECRET not in _payloads(store)
        _clean(store)

    def test_after_a_redaction_the_periodic_snapshot_comes_with_the_next_write(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A long session is not left to full folds: the redacting transcript stores a snapshot of the
        redacted fold with its next write; another one behind it catches up to the redacted fold."""
        monkeypatch.setattr(snapshots, "EVERY", 10)
        t, leak = _compacted_leak(store)
        other = Transcript.attach(store.events, t.session_id, tokenizer=store.tokenizer)
        other.visible_messages()
        done = t.redact(leak, reason="leaked AWS key")
        assert _snapshots(store, t.session_id) == []
        t.append(Message.user("go on"))
        (newest,) = _snapshots(store, t.session_id)
        assert newest.version == t.version - 1 > done.versions[t.session_id]  # then its record
        assert _opened(store, t.session_id) == (True, _folded(store, t.session_id))
        with pytest.raises(ConflictError):  # behind: it catches up, reading the redacted log
            other.append(Message.user("and on"))
        assert other.version == t.version and _state(other) == _state(t)
        other.append(Message.user("and on"))
        assert _opened(store, t.session_id) == (True, _folded(store, t.session_id))
        assert KEY not in _payloads(store)
        _clean(store)

    def test_a_snapshot_from_before_the_redaction_put_back_is_passed_over_and_named(
        self, store: Store
    ) -> None:
        t, leak = _compacted_leak(store)
        kept = _snapshots(store, t.session_id)
        assert kept and KEY in str(kept[0].payload)
        t.redact(leak, reason="leaked AWS key")
        _put_back(store, t.session_id, kept)
        lazy, state = _opened(store, t.session_id)
        assert not lazy and state == _folded(store, t.session_id) and KEY not in str(state)
        problems = check(_log(store).recorder, extra=snapshot_problems).problems
        assert {p.code for p in problems} == {"snapshot_damaged"}
        assert {(p.session_id, p.version) for p in problems} == {(t.session_id, r.version) for r in kept}
        assert all("redaction" in p.detail and "opens pass over it" in p.detail for p in problems)

    def test_an_erasure_deletes_the_session_s_snapshots_and_keeps_the_others(self, store: Store) -> None:
        t, _ = _compacted_leak(store, "kept")
        other = store.session("other")
        other.append(Message.user("an unrelated session"))
        _grow(other, 14)
        assert other.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
        kept = {s: _snapshots(store, s) for s in ("kept", "other")}
        views = {s: _opened(store, s) for s in ("kept", "other")}
        assert all(kept.values()) and all(lazy for lazy, _ in views.values())
        store.erase(t.session_id, reason="erasure request")
        assert _snapshots(store, t.session_id) == []
        assert {s: _snapshots(store, s) for s in ("kept", "other")} == kept
        assert {s: _opened(store, s) for s in ("kept", "other")} == views
        assert store.session(t.session_id).stored_messages() == []
        _clean(store)


class TestSqliteFileRedactionSnapshots(RedactionSnapshots):
    backend = SQLITE_FILE


class TestSqliteMemoryRedactionSnapshots(RedactionSnapshots):
    backend = SQLITE_MEMORY


class TestMemoryRedactionSnapshots(RedactionSnapshots):
    backend = MEMORY


class TestPostgresRefusesAndKeepsItsSnapshots(OnBackend):
    backend = POSTGRES

    def test_redact_and_erase_are_refused_and_the_snapshots_stay(self, location: str) -> None:
        with Store.open(location) as store:
            t, leak = _compacted_leak(store)
            kept, version, before = _snapshots(store, t.session_id), t.version, _state(t)
            assert kept
            with pytest.raises(StoreUnavailable, match="nothing was redacted"):
                store.redact(leak, reason="leaked AWS key")
            with pytest.raises(StoreUnavailable, match="nothing was erased"):
                store.erase(t.session_id, reason="erasure request")
            assert _snapshots(store, t.session_id) == kept and store.head(t.session_id)[0] == version
            assert _opened(store, t.session_id) == (True, before)
        assert verify(location).ok


# A fresh interpreter opens the file read-only: from its snapshot, or (`whole`) by a full fold.
_FRESH = """
import json, sys
from transcript import Transcript
from transcript.store.log import EventLog
if sys.argv[3] == "whole":
    EventLog.snapshot = lambda self, session_id: None
t = Transcript.open(sys.argv[1], session_id=sys.argv[2], readonly=True)
view = t.visible_messages()
rounds = [r.checkpoint is not None and json.dumps(r.checkpoint.critical_context) for r in t.compact_results()]
print(json.dumps([t._live.lazy, view.canonical_json().decode(), view.tokens, t.title, rounds, len(t)]))
"""


def _fresh(path: Path, session_id: str, how: str) -> list[object]:
    run = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), session_id, how],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found: list[object] = json.loads(run.stdout)
    return found


def test_a_fresh_process_renders_the_redacted_view_after_the_redaction_and_its_next_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        t, leak = _compacted_leak(store)
        sid = t.session_id
    lazy, *before = _fresh(path, sid, "snapshot")
    assert lazy is True and KEY in json.dumps(before)  # the view and the title quote it
    with Store.open(path) as store:
        store.redact(leak, reason="leaked AWS key")
    for how in ("snapshot", "whole"):
        lazy, *after = _fresh(path, sid, how)
        assert lazy is False and KEY not in json.dumps(after) and SECRET not in json.dumps(after)
        assert "[redacted" in json.dumps(after) and after != before
    assert verify(path).ok
    with Store.open(path) as store:
        t = store.session(sid)
        _grow(t, 8, start=50)
        _full_round(t)
    lazy, *opened = _fresh(path, sid, "snapshot")
    whole, *folded = _fresh(path, sid, "whole")
    assert (lazy, whole) == (True, False) and opened == folded
    assert KEY not in json.dumps(opened) and "[redacted" in json.dumps(opened)
    conn = sqlite3.connect(path)
    payloads = [payload for (payload,) in conn.execute("SELECT payload FROM snapshots")]
    conn.close()
    assert payloads and not any(KEY in payload or SECRET in payload for payload in payloads)
    assert verify(path).ok


_COUNTER = iter(range(1_000_000))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=3),
    budget=st.integers(min_value=3_000, max_value=6_000),
    pick=st.integers(min_value=0, max_value=1_000),
    after=st.integers(min_value=0, max_value=8),
)
def test_after_a_redaction_every_open_is_a_full_fold_of_the_redacted_log(
    steps: list[int], budget: int, pick: int, after: int
) -> None:
    """Whatever rounds came before (snapshots among them), and whatever follows the redaction, a new
    open gives what a full fold of the log gives, the redacted message is its tombstone, and every
    snapshot left is the fold it claims to be."""
    location = f"memory://redaction-snapshots-{next(_COUNTER)}"
    try:
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            t.append(Message.user("make the parser accept ISO weeks"))
            _grow(t, 16)
            assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
            for n, count in enumerate(steps, start=1):
                _grow(t, count, start=100 * n, size=900)
                t.compact(budget_tokens=budget)
                t.visible_messages(record=True)
            assert _snapshots(store, "s")
            ids = [m.id for m in t.stored_messages() if m.kind != "summary"]
            target = ids[pick % len(ids)]
            t.redact(target, reason="test")
            _grow(t, after, start=900, size=900)
            if after:
                t.compact(budget_tokens=budget, force=after % 2 == 0)
            assert _opened(store, "s")[1] == _folded(store, "s") == _state(t)
            (redacted,) = [m for m in t.stored_messages() if m.id == target]
            assert all(is_tombstone(part, "test") for part in redacted.parts)
            _clean(store)
    finally:
        MemoryRecorder.discard(location)
