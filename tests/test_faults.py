"""Faults give typed errors and leave the file as it was; tampering is refused or detected.

"As it was" is checked on content: the `iterdump()` of a separate read-only connection before and
after (it reads the WAL too, so committed-but-not-checkpointed pages count), never the `.db` bytes —
except for a file that is not a database, whose bytes are all there is. Faults are simulated as the
spec says (tests run as root): read-only with `mode=ro`, a full disk with `PRAGMA max_page_count`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import connection
from tests.test_crash import history as crash_history
from transcript import (
    Message,
    SchemaError,
    SessionNotFound,
    Store,
    StoreCorrupted,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    ToolCall,
    Transcript,
    verify,
)
from transcript.model.hashing import body_hash
from transcript.store.log import EventLog
from transcript.store.sqlite import SqliteRecorder

pytestmark = pytest.mark.sqlite_only("injects SQLite faults: locks, read-only files, full disks")

TOKENIZER = "chars/4"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def history() -> list[Message]:
    """A finished tool step (the crash tests' prepared history, before its last user request)."""
    return crash_history()[:-1]


IDS = [m.id for m in history()]


def dump(path: Path) -> list[str]:
    """The file's content as SQL, through a separate read-only connection (WAL included)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def raw(path: Path) -> sqlite3.Connection:
    """A plain `sqlite3` connection, as a stray shell would open it (default pragmas)."""
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A closed store file holding session s1 (a finished tool step) and session s2 (one message)."""
    path = tmp_path / "store.db"
    with Store.open(path, tokenizer=TOKENIZER) as store:
        t = store.session("s1")
        for message in history():
            t.append(message)
        store.session("s2").append(Message.user("another session", id="s2-u", created_at=T0))
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with Store.open(store_path, tokenizer=TOKENIZER) as opened:
        yield opened


def ids(t: Transcript) -> list[str]:
    return [m.id for m in t.stored_messages()]


def test_append_to_read_only_store_raises_store_read_only(store_path: Path) -> None:
    before = dump(store_path)
    with Store.open(store_path, readonly=True, tokenizer=TOKENIZER) as store:
        t = store.session("s1")
        with pytest.raises(StoreReadOnly):
            t.append(Message.user("one more"))
        assert ids(t) == IDS
        assert t.version == len(IDS)
        assert list(connection(store).iterdump()) == before
    assert dump(store_path) == before


def test_read_only_connection_itself_refuses_writes(store_path: Path) -> None:
    """`readonly=True` is enforced by SQLite (`mode=ro`), not only by the store's own check."""
    before = dump(store_path)
    with Store.open(store_path, readonly=True, tokenizer=TOKENIZER) as store:
        t = store.session("s1")
        assert isinstance(store.events, EventLog)
        recorder = store.events.recorder
        assert isinstance(recorder, SqliteRecorder)
        recorder.readonly = False  # get past the store's early refusals, down to the connection
        with pytest.raises(StoreReadOnly) as caught:
            t.append(Message.user("one more"))
        # Translated from SQLite's own refusal, not raised by the store's flag check.
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert "readonly database" in str(caught.value)
        assert not connection(store).in_transaction
        assert ids(t) == IDS
    assert dump(store_path) == before


def test_read_only_open_of_unknown_session_raises_session_not_found(store_path: Path) -> None:
    before = dump(store_path)
    with pytest.raises(SessionNotFound):
        Transcript.open(store_path, session_id="nope", readonly=True, tokenizer=TOKENIZER)
    assert dump(store_path) == before


def test_read_only_open_never_migrates(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()  # an empty file is an SQLite database with no tables: every migration is pending
    with pytest.raises(SchemaError, match="0001_initial"):
        Store.open(path, readonly=True, tokenizer=TOKENIZER)
    assert path.read_bytes() == b""
    # It really was pending: a read-write open migrates it.
    with Store.open(path, tokenizer=TOKENIZER) as store:
        assert store.sessions() == []
    assert verify(path).ok


def test_read_only_open_of_missing_file_raises_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(StoreUnavailable, match="no such file") as caught:
        Store.open(path, readonly=True, tokenizer=TOKENIZER)
    assert type(caught.value) is StoreUnavailable
    with pytest.raises(StoreUnavailable):
        verify(path)
    assert sorted(os.listdir(tmp_path)) == []


def test_full_database_raises_store_full_and_keeps_content(store: Store, store_path: Path) -> None:
    t = store.session("s1")
    before = dump(store_path)
    (pages,) = connection(store).execute("PRAGMA page_count").fetchone()
    connection(store).execute(f"PRAGMA max_page_count = {pages + 2}")
    big = "0123456789abcdef" * 65_536  # 1 MiB: ~256 pages more than the limit allows
    # A whole turn: the assistant message fits, its 1 MiB result does not.
    turn = [
        Message.assistant("", [ToolCall(id="c1", name="Bash", input={"command": "cat big.log"})], id="a1"),
        Message.tool_result("c1", big, name="Bash", id="r1"),
    ]
    statements: list[str] = []
    connection(store).set_trace_callback(statements.append)
    with pytest.raises(StoreFull):
        t.append_turn(turn)
    connection(store).set_trace_callback(None)
    # The disk filled mid-transaction: a statement writing a1 ran before the one that failed, on r1's
    # 1 MiB body; the rollback took a1 back too.
    issued = [sql for sql in statements if sql != "ROLLBACK"]
    assert any("'a1'" in sql for sql in issued[:-1])
    assert "'r1'" in issued[-1]
    assert not connection(store).in_transaction
    assert ids(t) == IDS
    assert t.pending_calls == ()
    assert dump(store_path) == before

    connection(store).execute("PRAGMA max_page_count = 1073741823")
    t.append(Message.user("small", id="u-small"))
    t.append_turn(turn)
    assert ids(t) == [*IDS, "u-small", "a1", "r1"]
    assert verify(store_path).ok


def test_lock_held_past_timeout_raises_store_locked(store_path: Path) -> None:
    with Store.open(store_path, timeout=0.2, tokenizer=TOKENIZER) as store:
        t = store.session("s1")
        before = dump(store_path)
        holder = raw(store_path)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreLocked):
                t.append(Message.user("blocked", id="u-blocked"))
            assert not connection(store).in_transaction
            assert ids(t) == IDS
            assert dump(store_path) == before
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        t.append(Message.user("blocked", id="u-blocked"))
        assert ids(t) == [*IDS, "u-blocked"]
    assert verify(store_path).ok


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
def test_newer_schema_is_refused(store_path: Path, readonly: bool) -> None:
    conn = raw(store_path)
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
        ("transcript-store", "0099_from_a_newer_release", "2030-01-01 00:00:00+00:00"),
    )
    conn.close()
    before = dump(store_path)
    with pytest.raises(SchemaError, match="0099_from_a_newer_release"):
        Store.open(store_path, readonly=readonly, tokenizer=TOKENIZER)
    with pytest.raises(SchemaError):
        Transcript.open(store_path, session_id="s1", readonly=readonly, tokenizer=TOKENIZER)
    assert dump(store_path) == before
    report = verify(store_path)
    assert [p.code for p in report.problems] == ["schema"]


def foreign_database(path: Path) -> None:
    conn = raw(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada'), ('grace')")
    conn.close()


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
def test_foreign_database_is_refused(tmp_path: Path, readonly: bool) -> None:
    path = tmp_path / "app.db"
    foreign_database(path)
    before = dump(path)
    with pytest.raises(SchemaError, match="not a transcript store"):
        Store.open(path, readonly=readonly, tokenizer=TOKENIZER)
    assert dump(path) == before
    assert not [t for t in before if "_sqlite_migrations" in t]


def test_refused_foreign_database_keeps_its_journal_mode(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    foreign_database(path)
    header = path.read_bytes()[:100]
    with pytest.raises(SchemaError):
        Store.open(path, tokenizer=TOKENIZER)
    conn = raw(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        conn.close()
    # Bytes 18-19 of the header are the file format versions: 1 = rollback journal, 2 = WAL.
    assert path.read_bytes()[:100] == header


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
def test_file_that_is_not_a_database_raises_store_corrupted(tmp_path: Path, readonly: bool) -> None:
    path = tmp_path / "random.db"
    content = os.urandom(16_384)
    path.write_bytes(content)
    with pytest.raises(StoreCorrupted):
        Store.open(path, readonly=readonly, tokenizer=TOKENIZER)
    with pytest.raises(StoreCorrupted):
        verify(path)
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["random.db"]


def test_damaged_pages_raise_store_corrupted(store_path: Path) -> None:
    """A real store whose pages after the first (the schema page) were overwritten."""
    data = bytearray(store_path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    assert len(data) >= 3 * page_size
    data[page_size:] = b"\xa5" * (len(data) - page_size)
    store_path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupted):
        Transcript.open(store_path, session_id="s1", readonly=True, tokenizer=TOKENIZER).close()
    with pytest.raises(StoreCorrupted):
        verify(store_path)
    assert store_path.read_bytes() == bytes(data)


CHANGES = {
    ("bodies", "UPDATE"): "UPDATE bodies SET hash = 'x' WHERE message_id = 'u1'",
    ("bodies", "DELETE"): "DELETE FROM bodies WHERE message_id = 'u1'",
    (
        "events",
        "UPDATE history columns of",
    ): "UPDATE events SET message_id = 'a0' WHERE session_id = 's1' AND seq = 1",
    ("events", "UPDATE"): "UPDATE events SET payload = x'7b7d' WHERE session_id = 's1' AND version = 2",
    ("events", "DELETE"): "DELETE FROM events WHERE session_id = 's1' AND version = 5",
}


@pytest.mark.parametrize(("table", "verb"), sorted(CHANGES), ids=[f"{t}-{v}" for t, v in sorted(CHANGES)])
def test_raw_update_and_delete_are_refused(store_path: Path, table: str, verb: str) -> None:
    before = dump(store_path)
    conn = raw(store_path)
    refused = verb.split()[0]
    try:
        with pytest.raises(sqlite3.IntegrityError, match=f"{table} is append-only \\({refused} refused\\)"):
            conn.execute(CHANGES[table, verb])
    finally:
        conn.close()
    assert dump(store_path) == before
    assert verify(store_path).ok


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE history SET message_id = 'a0' WHERE session_id = 's1' AND seq = 1",
        "DELETE FROM history WHERE session_id = 's1'",
        "INSERT INTO history (session_id, seq, message_id) VALUES ('s1', 9, 'a0')",
    ],
)
def test_the_history_view_cannot_be_written(store_path: Path, sql: str) -> None:
    before = dump(store_path)
    conn = raw(store_path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="view"):
            conn.execute(sql)
    finally:
        conn.close()
    assert dump(store_path) == before


def test_upsert_that_updates_a_body_is_refused(store_path: Path) -> None:
    before = dump(store_path)
    conn = raw(store_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="bodies is append-only"):
            conn.execute(
                "INSERT INTO bodies (message_id, hash, tokenizer, tokens, body) "
                "VALUES ('u1', 'h', 't', '[]', '{}') "
                "ON CONFLICT (message_id) DO UPDATE SET body = excluded.body"
            )
    finally:
        conn.close()
    assert dump(store_path) == before


def replace_statement(table: str) -> tuple[str, tuple[object, ...]]:
    """An INSERT OR REPLACE that would overwrite an existing row of `table` with other content."""
    forged = Message.user("forged content", id="u1", created_at=T0)
    if table == "bodies":
        return (
            "INSERT OR REPLACE INTO bodies (message_id, hash, tokenizer, tokens, body) "
            "VALUES (?, ?, ?, ?, ?)",
            ("u1", body_hash(forged), TOKENIZER, b"[4]", b'{"forged":true}'),
        )
    return (
        "INSERT OR REPLACE INTO events (session_id, version, kind, recorded_at, payload, hash) "
        "SELECT session_id, version, kind, recorded_at, x'7b7d', hash FROM events "
        "WHERE session_id = 's1' AND version = 2",
        (),
    )


@pytest.mark.parametrize("table", ["bodies", "events"])
def test_insert_or_replace_through_the_stores_connection_is_refused(
    store: Store, store_path: Path, table: str
) -> None:
    before = dump(store_path)
    sql, params = replace_statement(table)
    with pytest.raises(sqlite3.IntegrityError, match=f"{table} is append-only"):
        connection(store).execute(sql, params)
    assert dump(store_path) == before


@pytest.mark.parametrize("table", ["bodies", "events"])
def test_insert_or_replace_through_a_plain_connection_is_refused(store_path: Path, table: str) -> None:
    before = dump(store_path)
    sql, params = replace_statement(table)
    conn = raw(store_path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match=f"{table} is append-only"):
            conn.execute(sql, params)
    finally:
        conn.close()
    assert dump(store_path) == before


def tamper(path: Path, table: str, sql: str, params: tuple[object, ...] = ()) -> None:
    """Drop `table`'s UPDATE guard, run `sql`, and put the guard back exactly as it was."""
    conn = raw(path)
    try:
        trigger = f"{table}_refuse_update"
        ((guard_sql,),) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchall()
        conn.execute("BEGIN")
        conn.execute(f"DROP TRIGGER {trigger}")
        assert conn.execute(sql, params).rowcount == 1
        conn.execute(guard_sql)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_verify_passes_an_untouched_store(store_path: Path) -> None:
    report = verify(store_path)
    assert report.ok
    assert (report.bodies, report.sessions, report.events) == (len(IDS) + 1, 2, len(IDS) + 1)


def test_verify_names_an_edited_body(store_path: Path) -> None:
    conn = raw(store_path)
    ((body,),) = conn.execute("SELECT body FROM bodies WHERE message_id = 'u1'").fetchall()
    conn.close()
    assert '"run the tests"' in body
    tamper(
        store_path,
        "bodies",
        "UPDATE bodies SET body = ? WHERE message_id = 'u1'",
        (body.replace('"run the tests"', '"delete the tests"'),),
    )

    report = verify(store_path)
    assert not report.ok
    assert [(p.code, p.message_id) for p in report.problems] == [("body_record", "u1"), ("body_hash", "u1")]
    # The store still reads it (it is valid JSON), which is why verify must re-hash.
    with Transcript.open(store_path, session_id="s1", readonly=True, tokenizer=TOKENIZER) as t:
        assert t.stored_messages()[1].text == "delete the tests"


def test_verify_names_an_edited_history_row(store_path: Path) -> None:
    # The history row of seq 1 is the append event's `seq` / `message_id` columns.
    tamper(store_path, "events", "UPDATE events SET message_id = 'a0' WHERE session_id = 's1' AND seq = 1")

    report = verify(store_path)
    assert not report.ok
    assert [(p.code, p.session_id, p.seq, p.message_id) for p in report.problems] == [
        ("history_mismatch", "s1", 1, "u1")
    ]
    assert report.problems[0].version == 2  # the append event of seq 1
    assert "'a0'" in report.problems[0].detail


@pytest.mark.parametrize("column", ["payload", "recorded_at"])
def test_verify_names_an_edited_event(store_path: Path, column: str) -> None:
    conn = raw(store_path)
    ((payload, recorded_at),) = conn.execute(
        "SELECT payload, recorded_at FROM events WHERE session_id = 's1' AND version = 3"
    ).fetchall()
    conn.close()
    if column == "payload":
        # Point the append of seq 2 at the hash of other content, as a forger covering a body edit would.
        forged = body_hash(Message.user("forged", id="a0", created_at=T0))
        new_value: object = payload.replace(payload.split('"body_hash":"')[1][:64], forged)
        assert new_value != payload
    else:
        new_value = "2020-01-01T00:00:00.000000+00:00"
        assert new_value != recorded_at
    tamper(
        store_path,
        "events",
        f"UPDATE events SET {column} = ? WHERE session_id = 's1' AND version = 3",
        (new_value,),
    )

    report = verify(store_path)
    assert not report.ok
    assert report.first is not None
    assert (report.first.code, report.first.session_id, report.first.version) == ("event_hash", "s1", 3)
    # Only the edited event is named: later events still chain from its stored hash.
    assert {(p.session_id, p.version) for p in report.problems} == {("s1", 3)}
    if column == "payload":
        assert [(p.code, p.seq, p.message_id) for p in report.problems[1:]] == [("body_changed", 2, "a0")]


def test_verify_names_a_dropped_guard(store_path: Path) -> None:
    conn = raw(store_path)
    conn.execute("DROP TRIGGER events_refuse_delete")
    conn.close()
    report = verify(store_path)
    assert [(p.code, p.detail) for p in report.problems] == [
        ("guard_missing", "trigger events_refuse_delete was dropped")
    ]
