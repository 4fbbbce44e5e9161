"""Resume by snapshot: an open loads the newest snapshot of the fold, folds only what follows it, and
reads only the bodies the view shows; the rest of the history is read when something needs it.

A snapshot is written after every full round and every so many events (`snapshots.due`), with one
event, its chained record (`snapshot_recorded`); a damaged one is named by `verify` and passed over
by an open. Fresh processes check that
an open from a snapshot and a full fold of the log give the same view, byte for byte.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from planner import CompactConfig
from tests.backends import MEMORY, POSTGRES, SQLITE_FILE, SQLITE_MEMORY, OnBackend
from transcript import ConflictError, InvalidMessage, Message, Store, ToolCall, Transcript, Usage, verify
from transcript.model import hashing
from transcript.model.hashing import snapshot_digest
from transcript.session import snapshots
from transcript.session.importing import read_file, renamed, store_parsed
from transcript.store.log import EventLog
from transcript.store.port import Committed, SessionWrite
from transcript.store.recorder import BodyRow, ContentRow

ROOT = Path(__file__).resolve().parent.parent


def _grow(t: Transcript, steps: int, *, start: int = 0, size: int = 1_200) -> None:
    for n in range(start, start + steps):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [
                Message.assistant(f"step {n}: reading src/m{n}.py", tool_calls=[call]),
                Message.tool_result(f"c{n}", f"line {n} of the file\n" * (size // 20), name="Read"),
            ]
        )


def _compacted(store: Store) -> Transcript:
    t = store.session("s")
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("make the parser accept ISO weeks"))
    _grow(t, 16)
    assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
    _grow(t, 3, start=100)
    t.visible_messages(record=True)
    return t


def _state(t: Transcript) -> tuple[object, ...]:
    view = t.visible_messages()
    return (
        view.canonical_json(),
        view.tokens,
        view.source,
        len(t),
        t.version,
        t.stored_tokens,
        t.pending_calls,
        [r.round_id for r in t.compact_results()],
        t.title,
    )


class SnapshotBehaviour(OnBackend):
    """The same on every backend that a second open shares."""

    @pytest.fixture(autouse=True)
    def _shared(self) -> None:
        if not self.backend.shared:
            pytest.skip(f"{self.backend.name}: a reopen is another store")

    def test_a_reopen_reads_only_the_bodies_its_view_shows(self, location: str) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            before = _state(_compacted(store))
        store = Store.open(location, tokenizer="chars/4")
        assert isinstance(store.events, EventLog)
        read: list[str] = []
        bodies, contents = store.events.recorder.bodies, store.events.recorder.contents

        def reading(ids: Sequence[str]) -> Iterator[BodyRow]:
            read.extend(ids)
            return bodies(ids)

        def reading_contents(ids: Sequence[str]) -> Iterator[ContentRow]:
            read.extend(ids)
            return contents(ids)

        # (Either way of reading a body counts: whole rows, or what a session's read needs of them.)
        store.events.recorder.bodies = reading  # type: ignore[method-assign,assignment]
        store.events.recorder.contents = reading_contents  # type: ignore[method-assign,assignment]
        t = store.session("s")
        view = t.visible_messages()
        shown = {m.id for m in view.messages}
        assert read and set(read) <= shown and len(read) < len(t) // 2
        assert _state(t) == before
        store.close()

    def test_after_a_lazy_open_messages_returns_every_message_as_a_full_open_does(
        self, location: str
    ) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            whole = _compacted(store).messages()
        with Store.open(location, tokenizer="chars/4") as store:
            again = store.session("s").messages()
        assert again == whole and any(e.flags.excluded for e in again.entries)

    def test_a_lazy_session_goes_on_appending_compacting_and_reopening(self, location: str) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            _compacted(store)
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            _grow(t, 12, start=200)
            assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
            _grow(t, 2, start=300)
            before = _state(t)
            whole = t.messages()
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            assert _state(t) == before and t.messages() == whole

    def test_re_appending_a_message_a_lazy_open_did_not_read_is_a_no_op(self, location: str) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            old = next(
                e.message for e in t.messages().entries if e.flags.excluded and e.message.role == "user"
            )
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            version = t.version
            assert t.append(old) == old and t.version == version

    def test_re_appending_old_results_calls_and_billed_turns_after_a_lazy_open_is_as_after_a_full_one(
        self, location: str
    ) -> None:
        # The checks before the write (pairing, usage) see only what the lazy open read: a turn they
        # refuse is checked again against the whole history.
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            entries = t.messages().entries
            result = next(e.message for e in entries if e.flags.excluded and e.message.role == "tool")
            call = next(
                e.message
                for e in entries
                if e.flags.excluded
                and any(c.id == result.tool_results[0].call_id for c in e.message.tool_calls)
            )
            user = next(e.message for e in entries if e.flags.excluded and e.message.role == "user")
            t.record_usage(Usage(input_tokens=100, output_tokens=10))
        fresh = Message.user("after the old ones")
        for turn, usage, added in (
            ([result], None, 0),
            ([call, result, fresh], None, 1),
            ([user], Usage(input_tokens=100, output_tokens=10), 0),
        ):
            with Store.open(location, tokenizer="chars/4") as store:
                t = store.session("s")
                version = t.version
                assert t.append_turn(turn, usage=usage) == turn and t.version == version + added
        with (
            Store.open(location, tokenizer="chars/4") as store,
            pytest.raises(InvalidMessage, match="not pending"),  # still refused when it is wrong
        ):
            store.session("s").append(Message.tool_result("c-none", "orphan"))

    def test_a_lazy_append_of_new_messages_looks_no_body_up(self, location: str) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            old = next(
                e.message for e in t.messages().entries if e.flags.excluded and e.message.role == "user"
            )
        store = Store.open(location, tokenizer="chars/4")
        assert isinstance(store.events, EventLog)
        lookups: list[list[str]] = []
        bodies = store.events.recorder.bodies

        def reading(ids: Sequence[str]) -> Iterator[BodyRow]:
            lookups.append(list(ids))
            return bodies(ids)

        t = store.session("s")
        t.visible_messages()
        store.events.recorder.bodies = reading  # type: ignore[method-assign,assignment]
        for size in (1, 4):
            lookups.clear()
            t.append_turn([Message.user(f"note {size}.{k}") for k in range(size)])
            assert lookups == []  # new messages: inserted without looking (the database refuses a taken id)
        # A turn that holds a message of the unread history is read whole, and the old one is a no-op.
        version = t.version
        fresh = Message.user("after the old one")
        assert t.append_turn([old, fresh]) == [old, fresh] and t.version == version + 1
        assert [e.message.id for e in t.messages().entries].count(old.id) == 1
        store.close()

    def test_a_lazy_session_retracts_a_message_it_did_not_read_as_a_full_open_does(
        self, location: str
    ) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            old = next(
                e.message.id for e in t.messages().entries if e.flags.excluded and e.message.role == "user"
            )
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            view = t.visible_messages()
            t.retract([old], reason="the user took it back")
            flags = {e.message.id: e.flags for e in t.messages().entries}
            assert flags[old].retracted and t.visible_messages().messages == view.messages
            after = t.messages()
        with Store.open(location, tokenizer="chars/4") as store:
            assert store.session("s").messages() == after

    def test_a_snapshot_is_one_recorded_event_and_a_second_writer_catches_up_to_it(
        self, location: str
    ) -> None:
        with (
            Store.open(location, tokenizer="chars/4") as one,
            Store.open(location, tokenizer="chars/4") as two,
        ):
            first = one.session("s")
            first.append(Message.user("hello"))
            second = two.session("s")
            _grow(first, 14)
            version = first.version
            assert first.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
            assert first.version == version + 4  # the round's three events and its snapshot's record
            with pytest.raises(ConflictError):  # behind: it catches up to the round, not past it
                second.append_turn([Message.assistant("still here")])
            assert second.version == first.version
            second.append_turn([Message.assistant("still here")])
            assert second.version == first.version + 1 and second.visible_messages() == (
                Transcript.attach(two.events, "s").visible_messages()
            )

    def test_the_periodic_snapshot_comes_every_so_many_events(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(snapshots, "EVERY", 10)
        with Store.open(location, tokenizer="chars/4") as store:
            t = store.session("s")
            t.append(Message.user("go"))
            _grow(t, 8)
            assert isinstance(store.events, EventLog)
            found = store.events.snapshot("s")
            assert found is not None and found.version >= 10 and t.version - found.version < 10

    def test_a_close_writes_a_snapshot_once_the_session_moved_well_past_the_last(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(snapshots, "CLOSE_EVERY", 6)
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            t = store.session("s")
            t.append(Message.user("go"))
            _grow(t, 2)  # 5 events: fewer than CLOSE_EVERY, no snapshot at close
            t.close()
            assert store.events.snapshot("s") is None
            t = store.session("s")
            _grow(t, 1, start=2)  # 7 events
            state = _state(t)
            t.close()
            found = store.events.snapshot("s")
            assert found is not None and found.version == 7 and t.version == 8  # and its record
            again = store.session("s")
            assert _state(again) == (*state[:4], 8, *state[5:])  # the same, one record later
            again.close()  # nothing new since: nothing written
            assert store.events.snapshot("s") == found
            t = store.session("s")
            _grow(t, 3, start=3)  # 14 events, the transcript still in use when the store closes
        with Store.open(location, tokenizer="chars/4") as store:  # closing the store closed it
            assert isinstance(store.events, EventLog)
            found = store.events.snapshot("s")
            assert found is not None and found.version == 14

    def test_a_close_that_cannot_write_its_snapshot_writes_nothing_and_closes(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(snapshots, "CLOSE_EVERY", 2)
        with (
            Store.open(location, tokenizer="chars/4") as one,
            Store.open(location, tokenizer="chars/4") as two,
        ):
            assert isinstance(one.events, EventLog)
            first = one.session("s")
            _grow(first, 2)
            second = two.session("s")
            second.append(Message.user("moved on"))
            first.close()  # behind the other writer: its snapshot would stand for an old version
            assert one.events.snapshot("s") is None
            with Store.open(location, tokenizer="chars/4", readonly=True) as reader:
                assert isinstance(reader.events, EventLog)
                reader.session("s").close()  # a read-only store writes no snapshot
                assert reader.events.snapshot("s") is None and len(reader.session("s")) == 5
            third = one.session("s")
            state = _state(third)
        third.close()  # its store is closed (or, in memory, still there): the close goes on
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            # Closing the store closed `third` first, which wrote a snapshot and its record (one event).
            found = store.events.snapshot("s")
            assert found is not None and found.version == state[4]
            version = state[4] + 1
            assert _state(store.session("s")) == (*state[:4], version, *state[5:])

    def test_periodic_snapshots_are_spaced_by_the_history_s_length(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Each encodes the whole fold: at a fixed spacing their cost per event would grow with it.
        monkeypatch.setattr(snapshots, "EVERY", 4)
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            t = store.session("s", create=True)
            written: list[int] = []
            histories: list[int] = []  # the messages each snapshot folds (its version also counts records)
            for index in range(400):
                t.append(Message.user(f"note {index}"))
                found = store.events.snapshot("s")
                if found is not None and (not written or found.version != written[-1]):
                    written.append(found.version)
                    state = snapshots.decode(found.payload)
                    assert state is not None
                    histories.append(state.history)
            gaps = [later - earlier for earlier, later in itertools.pairwise(written)]
            assert len(written) < 400 // 4 // 2 and gaps[-1] >= 300 // snapshots.SPACING
            assert all(
                gap >= max(4, history // snapshots.SPACING)
                for gap, history in zip(gaps, histories, strict=False)
            )
            assert t.version - written[-1] < max(4, len(t) // snapshots.SPACING) + 1

    def test_a_snapshot_keeps_no_step_start_of_the_excluded_history_but_the_last(self, location: str) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            assert isinstance(store.events, EventLog)
            found = store.events.snapshot("s")
            assert found is not None
            state = snapshots.decode(found.payload)
            whole = t.messages()
        assert state is not None and state.excluded
        end = state.excluded[-1][1]
        starts = [seq for seq in whole.step_starts if seq < state.history]  # as of the snapshot
        before = [seq for seq in starts if seq <= end]
        assert len(before) > 1 and list(state.step_starts) == [before[-1], *(s for s in starts if s > end)]

    def test_a_long_import_writes_a_snapshot_at_each_session_s_new_head(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A recorded compaction (marks and a summary) and a file of three sessions, each longer
        # than CLOSE_EVERY events; the small one stays under it.
        monkeypatch.setattr(snapshots, "CLOSE_EVERY", 30)
        compacted = ROOT / "fixtures/formats/claude-code/compact_boundary_2.1.14_entire.jsonl"
        several = ROOT / "fixtures/corpus/openhands_multiswe_ponyc_output.jsonl"
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            reports = [store.import_file(several), store.import_file(compacted, as_id="c")]
            imported = {s.session_id: store.head(s.session_id)[0] for r in reports for s in r.sessions}
            found = {sid: store.events.snapshot(sid) for sid in imported}
            for sid, version in imported.items():
                snapshot = found[sid]
                if snapshot is None:
                    assert version < 30, sid
                else:  # at the import's last event; its record is the head
                    assert snapshot.version == version - 1 >= 30, sid
            store.import_file(several)  # nothing new: nothing written
            assert {sid: store.events.snapshot(sid) for sid in imported} == found
        self._snapshots_agree_with_whole_folds(location, list(imported), monkeypatch)

    def test_an_import_that_appends_to_a_stored_session_snapshots_its_new_head(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The recording kept growing: a prefix was imported (with the agent's compaction, or
        # before it), then the whole file; the snapshot folds the stored session and what was added.
        monkeypatch.setattr(snapshots, "CLOSE_EVERY", 3)
        files = (
            ROOT / "fixtures/formats/claude-code/compact_boundary_2.1.14_entire.jsonl",
            ROOT / "fixtures/corpus/openhands_multiswe_ponyc_output.jsonl",
        )
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            for cut in (4, 7):
                for path in files:
                    name, whole = read_file(path)
                    parsed = renamed(whole, prefix=f"cut{cut}-")
                    prefix = [msgspec.structs.replace(p, messages=p.messages[:cut]) for p in parsed]
                    store_parsed(store.events, store.counter, path, name, prefix)
                    grown = store_parsed(store.events, store.counter, path, name, parsed)
                    for report in grown.sessions:
                        found = store.events.snapshot(report.session_id)
                        # At the import's last event; its record is the head.
                        assert found is not None and found.version == store.head(report.session_id)[0] - 1
            sessions = [s.session_id for s in store.sessions()]
        assert len(sessions) == 8
        self._snapshots_agree_with_whole_folds(location, sessions, monkeypatch)

    def _snapshots_agree_with_whole_folds(
        self, location: str, sessions: list[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`verify` passes (it checks each snapshot against a full fold), and opens from the
        snapshots give every session the state a fold of its whole log gives."""
        if self.backend.durable or self.backend is MEMORY:
            assert verify(location).ok
        with Store.open(location, tokenizer="chars/4") as store:
            lazy = {sid: _state(store.session(sid)) for sid in sessions}
        monkeypatch.setattr(snapshots, "decode", lambda payload: None)  # every open folds the whole log
        with Store.open(location, tokenizer="chars/4") as store:
            assert lazy == {sid: _state(store.session(sid)) for sid in sessions}

    def test_an_import_whose_snapshot_cannot_be_written_stands(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(snapshots, "CLOSE_EVERY", 30)
        with Store.open(location, tokenizer="chars/4") as store:
            assert isinstance(store.events, EventLog)
            commit = store.events.commit

            def moved_on(writes: Sequence[SessionWrite], **options: object) -> list[Committed]:
                if any(write.snapshot is not None for write in writes):
                    raise ConflictError("another writer moved the session on")
                return commit(writes, **options)  # type: ignore[arg-type]

            monkeypatch.setattr(store.events, "commit", moved_on)
            report = store.import_file(ROOT / "fixtures/corpus/openhands_multiswe_ponyc_output.jsonl")
            assert report.messages == 221
            assert all(store.events.snapshot(s.session_id) is None for s in report.sessions)
            assert [len(store.session(s.session_id)) for s in report.sessions] == [49, 70, 102]

    def test_a_snapshot_of_an_older_format_is_passed_over_by_an_open_and_by_verify(
        self, location: str
    ) -> None:
        with Store.open(location, tokenizer="chars/4") as store:
            t = _compacted(store)
            assert isinstance(store.events, EventLog)
            found = store.events.snapshot("s")
            assert found is not None
            older = json.loads(found.payload) | {"format": snapshots.FORMAT - 1, "step_starts": [7]}
            payload = json.dumps(older).encode()
            # Stored as the log stores one (with its record), so the chain proves it.
            (done,) = store.events.commit([SessionWrite("s", t.version, (), {}, snapshot=payload)])
            proven = store.events.snapshot("s")
            assert proven is not None and proven.payload == payload and done.version == t.version + 1
            before = _state(store.session("s"))
        with Store.open(location, tokenizer="chars/4") as store:
            assert _state(store.session("s")) == before
        if self.backend.durable or self.backend is MEMORY:
            assert verify(location).ok


class TestSqliteFileSnapshots(SnapshotBehaviour):
    backend = SQLITE_FILE


class TestSqliteMemorySnapshots(SnapshotBehaviour):
    backend = SQLITE_MEMORY


class TestMemorySnapshots(SnapshotBehaviour):
    backend = MEMORY


class TestPostgresSnapshots(SnapshotBehaviour):
    backend = POSTGRES


def _tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_a_damaged_snapshot_is_named_by_verify_and_passed_over_by_an_open(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        before = _state(_compacted(store))
    assert verify(path).ok
    _tamper(path, "UPDATE snapshots SET payload = replace(payload, '\"history\":', '\"history\": ')")
    report = verify(path)
    assert [p.code for p in report.problems] == ["snapshot_damaged"]
    assert "digest" in report.problems[0].detail and report.problems[0].session_id == "s"
    with Store.open(path, tokenizer="chars/4") as store:
        assert _state(store.session("s")) == before


def test_a_snapshot_resealed_with_other_content_is_named_by_verify(tmp_path: Path) -> None:
    """A snapshot edited and given a matching digest passes an open's check: only a fold of the log
    tells it, which `verify` does."""
    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        _compacted(store)
    conn = sqlite3.connect(path)
    version, head, payload = conn.execute(
        "SELECT version, hash, payload FROM snapshots ORDER BY version DESC LIMIT 1"
    ).fetchone()
    state = json.loads(payload)
    state["stored_tokens"] += 1
    edited = json.dumps(state, separators=(",", ":")).encode()

    conn.execute(
        "UPDATE snapshots SET payload = ?, digest = ? WHERE version = ?",
        (edited.decode(), snapshot_digest("s", version, head, edited), version),
    )
    conn.commit()
    conn.close()
    problems = verify(path).problems
    assert [p.code for p in problems] == ["snapshot_damaged"] and "fold of the log" in problems[0].detail


_FRESH = """
import json, sys
from transcript import Transcript
from transcript.store.log import EventLog
if sys.argv[2] == "whole":  # a full fold: no snapshot is found
    EventLog.snapshot = lambda self, session_id: None
t = Transcript.open(sys.argv[1], session_id="s", readonly=True)
view = t.visible_messages()
lazy = t._live.lazy
state = [view.canonical_json().decode(), view.tokens, view.source, len(t), t.version, t.stored_tokens]
print(json.dumps([lazy, state, list(t.pending_calls), t.title]))
"""


def _fresh(path: Path, how: str) -> list[object]:
    run = subprocess.run(
        [sys.executable, "-c", _FRESH, str(path), how], capture_output=True, text=True, cwd=ROOT, check=True
    )
    found: list[object] = json.loads(run.stdout)
    return found


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4),
    budget=st.integers(min_value=1_500, max_value=6_000),
    record=st.booleans(),
)
def test_an_open_from_a_snapshot_and_a_full_fold_give_the_same_view(
    tmp_path_factory: pytest.TempPathFactory, steps: list[int], budget: int, record: bool
) -> None:
    path = tmp_path_factory.mktemp("snap") / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        # The priced policy: the default one excerpts these outputs on arrival, and a forced full
        # round then may not make the view smaller (full_failed, no snapshot to open from).
        t = store.session("s", config=CompactConfig.priced())
        t.append(Message.user("make the parser accept ISO weeks"))
        _grow(t, 6, size=900)
        start = 6
        for count in steps:
            _grow(t, count, start=start, size=900)
            start += count
            t.compact(budget_tokens=budget)
            t.visible_messages(record=record)
        assert t.compact(budget_tokens=budget, force=True).outcome == "full_applied"
        _grow(t, 1, start=start)
    lazy, *opened = _fresh(path, "snapshot")
    whole, *folded = _fresh(path, "whole")
    assert lazy is True and whole is False
    assert opened == folded and len(str(opened)) > 100


_COLD = """
import json, sys
from transcript import Transcript
t = Transcript.open(sys.argv[1], session_id="s", readonly=True)
view = t.visible_messages()
print(json.dumps([t._live.lazy, "hashlib" in sys.modules, view.canonical_json().decode()]))
"""


def _cold(path: Path) -> list[object]:
    run = subprocess.run(
        [sys.executable, "-c", _COLD, str(path)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    found: list[object] = json.loads(run.stdout)
    return found


def test_a_cold_open_checks_its_snapshot_without_loading_hashlib(tmp_path: Path) -> None:
    """A snapshot's digest is checked with the interpreter's own sha256 while nothing has loaded
    hashlib (OpenSSL takes ~5 ms to load): a damaged snapshot is still told and passed over."""
    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        expected = _compacted(store).visible_messages().canonical_json()
    assert _cold(path) == [True, False, expected.decode()]
    _tamper(path, "UPDATE snapshots SET payload = replace(payload, '\"history\":', '\"history\": ')")
    assert _cold(path) == [False, False, expected.decode()]


@given(payload=st.binary(max_size=hashing.SMALL + 64), head=st.text(max_size=20))
def test_a_snapshot_digest_is_the_same_whether_or_not_hashlib_is_loaded(payload: bytes, head: str) -> None:
    loaded = snapshot_digest("s", 7, head, payload)
    saved = sys.modules.pop("hashlib")
    try:
        assert snapshot_digest("s", 7, head, payload) == loaded
    finally:
        sys.modules["hashlib"] = saved


def _rchar() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with Linux's /proc/self/io")
def test_an_open_never_reads_the_payload_of_the_snapshot_it_passes_over(tmp_path: Path) -> None:
    """The newest snapshot is found by its version without reading an older one's payload (in a
    table keyed on its payload, as 0008 made it, finding it read both)."""
    path = tmp_path / "t.db"
    with Store.open(path, tokenizer="chars/4") as store:
        expected = _compacted(store).visible_messages().canonical_json()
    conn = sqlite3.connect(path, isolation_level=None)
    ((newest,),) = conn.execute("SELECT min(version) FROM snapshots").fetchall()
    # An older snapshot of 8 MB (derived, so never guarded): its digest does not matter, it is never taken.
    conn.execute(
        "INSERT INTO snapshots VALUES ('s', ?, 'x', ?, 'x')", (newest - 1, '"' + "x" * (8 << 20) + '"')
    )
    conn.close()
    before = _rchar()
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        assert t.visible_messages().canonical_json() == expected
    assert _rchar() - before < 2 << 20
