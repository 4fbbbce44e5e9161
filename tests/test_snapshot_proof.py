"""Snapshots proven or unused (issue 40): an open takes a snapshot only when the chain proves it.

A snapshot of the fold at version V is stored with its record, a `snapshot_recorded` event at V + 1
(same transaction) naming V and the snapshot's digest. An open takes the newest snapshot whose digest
holds, whose event hash is the chain's at V and whose record is the event after it, chained from that
hash (and on to the next event, or the head); any other is passed over, to an older proven snapshot
or to a fold of the whole log. So an edit of any column of the newest snapshot — its payload with
its digest recomputed, its digest, its version, its hash — makes no open serve a view other than a
full fold's, on SQLite and PostgreSQL alike, and `verify` names the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import msgspec
import pytest

from tests.backends import (
    MEMORY,
    POSTGRES,
    SQLITE_FILE,
    OnBackend,
    _unguarded,
    reseal_event,
    stored_event,
    tamper_snapshot,
)
from tests.test_snapshots import _grow, _state
from transcript import Message, Store, Transcript, WriteRefused, verify
from transcript.model.events import EVENT_ENCODER, MessageAppended, SnapshotRecorded
from transcript.model.hashing import event_hash, snapshot_digest
from transcript.session import snapshots
from transcript.session.replay import check_served
from transcript.store.log import EventLog
from transcript.store.port import SessionWrite
from transcript.store.recorder import RecorderWrite, SnapshotRow

_CODES = {"snapshot_damaged", "snapshot_unproven"}


def _log(store: Store) -> EventLog:
    assert isinstance(store.events, EventLog)
    return store.events


def _two_rounds(store: Store) -> Transcript:
    """A session with two full rounds, so two snapshots (and their records), served views between."""
    t = store.session("s")
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("make the parser accept ISO weeks"))
    _grow(t, 16)
    assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
    _grow(t, 3, start=100)
    t.visible_messages(record=True)
    _grow(t, 12, start=200)
    assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
    _grow(t, 3, start=300)
    t.visible_messages(record=True)
    return t


def _rows(store: Store) -> list[SnapshotRow]:
    """The session's stored snapshots, newest first."""
    return list(_log(store).recorder.snapshots("s"))


def _opened(store: Store) -> tuple[bool, tuple[object, ...]]:
    """A new open of the session (its own fold, whatever this process read before): whether it
    loaded a snapshot, and its state."""
    t = Transcript.attach(store.events, "s", tokenizer=store.tokenizer)
    t.visible_messages()
    lazy = t._live.lazy
    return lazy, _state(t)


def _whole(store: Store) -> tuple[object, ...]:
    """The state a fold of the whole log gives (no snapshot looked for)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EventLog, "snapshot", lambda self, session_id: None)
        lazy, state = _opened(store)
    assert not lazy
    return state


def _dropped(payload: bytes) -> bytes:
    """The payload with two entries of `shown` dropped (the view two messages shorter)."""
    state = json.loads(payload)
    assert len(state["shown"]) >= 4
    del state["shown"][1:3]
    return json.dumps(state, separators=(",", ":")).encode()


def _event_hash_at(store: Store, version: int) -> str:
    return stored_event(_log(store), "s", version).hash


def _payload_forged(store: Store, row: SnapshotRow) -> SnapshotRow:
    payload = _dropped(bytes(row.payload, "utf-8") if isinstance(row.payload, str) else row.payload)
    return row._replace(payload=payload, digest=snapshot_digest("s", row.version, row.hash, payload))


def _digest_edited(store: Store, row: SnapshotRow) -> SnapshotRow:
    return row._replace(digest="0" * 64)


def _version_moved(store: Store, row: SnapshotRow) -> SnapshotRow:
    # Two events on (past its record and the next append), with the chain's hash there and the digest
    # recomputed: the fold at V standing for V + 2 would leave that append out of the view.
    version = row.version + 2
    head = _event_hash_at(store, version)
    payload = row.payload.encode() if isinstance(row.payload, str) else row.payload
    return SnapshotRow(version, head, payload, snapshot_digest("s", version, head, payload))


def _hash_edited(store: Store, row: SnapshotRow) -> SnapshotRow:
    head = _event_hash_at(store, row.version - 1)
    payload = row.payload.encode() if isinstance(row.payload, str) else row.payload
    return SnapshotRow(row.version, head, payload, snapshot_digest("s", row.version, head, payload))


EDITS: dict[str, Callable[[Store, SnapshotRow], SnapshotRow]] = {
    "payload-resealed": _payload_forged,
    "digest": _digest_edited,
    "version": _version_moved,
    "hash": _hash_edited,
}


class SnapshotProof(OnBackend):
    @pytest.fixture
    def store(self, location: str) -> Iterator[Store]:
        with Store.open(location, tokenizer="chars/4") as store:
            yield store

    def test_every_snapshot_is_written_with_its_chained_record(self, store: Store) -> None:
        _two_rounds(store)
        rows = _rows(store)
        assert len(rows) == 2
        for row in rows:
            record = stored_event(_log(store), "s", row.version + 1)
            event = msgspec.json.decode(
                record.payload.encode() if isinstance(record.payload, str) else record.payload
            )
            assert record.kind == "snapshot_recorded"
            assert event == {"kind": "snapshot_recorded", "version": row.version, "digest": row.digest}
        found = _log(store).snapshot("s")
        assert found is not None and found.version == rows[0].version
        assert _opened(store) == (True, _whole(store))

    @pytest.mark.parametrize("edit", list(EDITS))
    def test_an_edited_newest_snapshot_is_never_served_and_verify_names_it(
        self, store: Store, location: str, edit: str
    ) -> None:
        t = _two_rounds(store)
        newest, older = _rows(store)
        assert _opened(store) == (True, _whole(store))  # before: the newest snapshot is taken
        forged = EDITS[edit](store, newest)
        tamper_snapshot(_log(store), "s", newest.version, forged)
        assert [row.version for row in _rows(store)][:1] == [forged.version]

        # Not taken: the older snapshot, which the chain proves, is (or a whole fold).
        found = _log(store).snapshot("s")
        assert found is not None and found.version == older.version
        whole = _whole(store)
        assert _opened(store) == (True, whole)
        with Store.open(location, tokenizer="chars/4") as again:  # another connection, another fold
            assert _state(again.session("s")) == whole
            # What is served and recorded is the log's view: replay finds no drift.
            view = again.session("s").visible_messages(record=True)
            assert view.canonical_json() == t.visible_messages().canonical_json()
            assert check_served(again.events, "s").ok

        report = verify(location)
        named = [p for p in report.problems if p.code in _CODES]
        assert [(p.session_id, p.version) for p in named] == [("s", forged.version)], report.problems
        assert named[0].code == "snapshot_damaged" and "opens pass over it" in named[0].detail
        assert {p.code for p in report.problems} == {"snapshot_damaged"}

    def test_a_forged_snapshot_with_its_record_resealed_is_passed_over(
        self, store: Store, location: str
    ) -> None:
        """The record's payload rewritten to name the forged digest, and its stored hash recomputed:
        the next event's hash no longer chains from it, so an open passes the snapshot over (and
        `verify` names the broken chain and the snapshot)."""
        _two_rounds(store)
        newest, older = _rows(store)
        forged = _payload_forged(store, newest)
        tamper_snapshot(_log(store), "s", newest.version, forged)
        at = stored_event(_log(store), "s", newest.version + 1)
        payload = EVENT_ENCODER.encode(SnapshotRecorded(version=forged.version, digest=forged.digest))
        resealed = event_hash(forged.hash, "s", at.version, at.recorded_at, payload)
        reseal_event(_log(store), "s", at.version, payload, resealed)

        found = _log(store).snapshot("s")
        assert found is not None and found.version == older.version
        assert _opened(store) == (True, _whole(store))
        report = verify(location)
        named = [p for p in report.problems if p.code in _CODES]
        assert [(p.code, p.version) for p in named] == [("snapshot_damaged", forged.version)]
        assert len(report.problems) > 1  # the chain break too

    def test_a_snapshot_without_a_record_is_passed_over_and_named_unproven(
        self, store: Store, location: str
    ) -> None:
        """As an older build stored one (the fold at the head, no record): a faithful copy of the
        fold, but nothing in the chain vouches for it."""
        t = _two_rounds(store)
        newest = _rows(store)[0]
        state = snapshots.state_of(t._whole())
        assert state is not None
        payload = snapshots.encode(state)
        head = _log(store).head("s")
        row = SnapshotRow(head[0], head[1], payload, snapshot_digest("s", head[0], head[1], payload))
        _log(store).recorder.insert([RecorderWrite("s", head, [], [], row)])
        assert _rows(store)[0].version == head[0]

        found = _log(store).snapshot("s")
        assert found is not None and found.version == newest.version  # the proven one before it
        assert _opened(store) == (True, _whole(store))
        problems = verify(location).problems
        assert [(p.code, p.version) for p in problems] == [("snapshot_unproven", head[0])]
        assert "opens pass over it" in problems[0].detail

    def test_a_caller_cannot_write_a_snapshot_record(self, store: Store) -> None:
        t = store.session("s")
        t.append(Message.user("hello"))
        record = SnapshotRecorded(version=1, digest="0" * 64)
        with pytest.raises(WriteRefused, match="snapshot_recorded"):
            _log(store).commit([SessionWrite("s", t.version, [record], {})])
        assert store.head("s")[0] == t.version

    def test_a_snapshot_record_is_harmless_to_a_round_planned_before_it(self, store: Store) -> None:
        """Another writer's snapshot (one more event, no message) lands while a round's summary is
        written: the round commits after it, as after an append (`mutate.commit`'s harmless events)."""
        t = store.session("s")
        t.append(Message.user("go"))
        _grow(t, 14)
        other = Transcript.attach(store.events, "s", tokenizer=store.tokenizer)
        landed: list[int] = []

        def summarizer(request: object) -> str:
            other.visible_messages()  # catches up (the round's claim)
            done = snapshots.store(store.events, other._live)
            assert done is not None
            landed.append(done.version)
            return json.dumps({"goal": "make the parser accept ISO weeks", "next_steps": ["run the tests"]})

        budget = t.visible_messages().tokens // 3
        assert t.compact(budget_tokens=budget, force=True, summarizer=summarizer).outcome == "full_applied"
        records = [r.event for r in store.events.read_log("s")[0]]
        assert landed and isinstance(records[landed[0] - 1], SnapshotRecorded)
        assert any(isinstance(e, MessageAppended) for e in records[landed[0] :])  # the summary, after it
        assert _opened(store) == (True, _whole(store))
        assert _state(t) == _whole(store)


class TestSqliteFileSnapshotProof(SnapshotProof):
    backend = SQLITE_FILE


class TestMemorySnapshotProof(SnapshotProof):
    backend = MEMORY


class TestPostgresSnapshotProof(SnapshotProof):
    backend = POSTGRES


def test_a_rewritten_chain_is_the_limit_and_verify_still_names_the_snapshot(tmp_path: object) -> None:
    """A forger who rewrites every stored hash from the record to the head (and the head) makes the
    chain prove the forged snapshot: an open then takes it. That is the limit of a proof by the
    chain; `verify` still names the snapshot (a fold of the log differs from it, and the chain records
    it), and a head kept before (`expect_heads`) names the rewrite."""
    from pathlib import Path

    path = Path(str(tmp_path)) / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        _two_rounds(store)
        log = _log(store)
        kept = log.head("s")
        newest = _rows(store)[0]
        forged = _payload_forged(store, newest)
        tamper_snapshot(log, "s", newest.version, forged)
        prev = forged.hash
        for row in list(log.recorder.events("s", after=newest.version)):
            payload = (
                EVENT_ENCODER.encode(SnapshotRecorded(version=forged.version, digest=forged.digest))
                if row.version == newest.version + 1
                else (row.payload.encode() if isinstance(row.payload, str) else row.payload)
            )
            prev = event_hash(prev, "s", row.version, row.recorded_at, payload)
            reseal_event(log, "s", row.version, payload, prev)
        recorder = log.recorder
        from transcript.store.sqlite import SqliteRecorder

        assert isinstance(recorder, SqliteRecorder)
        _unguarded(recorder, "UPDATE heads SET hash = ? WHERE session_id = 's'", (prev,))
    with Store.open(path, tokenizer="chars/4") as store:
        found = _log(store).snapshot("s")
        assert found is not None and found.version == newest.version  # proven by the rewritten chain
    report = verify(path)
    named = [p for p in report.problems if p.code in _CODES]
    assert [(p.code, p.version) for p in named] == [("snapshot_damaged", newest.version)]
    assert "the chain records it" in named[0].detail and "uses it" in named[0].detail
    held = verify(path, expect_heads={"s": kept[1]})
    assert len(held.problems) > len(report.problems)
