"""The tables the `messages` view reads instead of the bodies' JSON (migration 0010): they answer as
the view did before them, triggers keep them current through every write (appends, rounds,
redactions, erasures), and `verify` names a table that no longer holds what the log says."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from transcript import Message, Store, StoreCorrupted, ToolCall, verify
from transcript.formats import parse
from transcript.session.simulate import simulate
from transcript.store import schema

pytestmark = pytest.mark.sqlite_only("reads the SQLite file's SQL views and derived tables")

RUN = CORPUS / "sweagent_marshmallow-1867_fc.traj"
COLUMNS = "session_id, seq, message_id, role, kind, created_at, preview, tokens, truncated, excluded"
# The `messages` view as 0006 made it: every value read from the bodies' and marks' JSON.
OLD_VIEW = schema.EXCLUSION_RANGES[3]


def _rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT {COLUMNS} FROM messages ORDER BY session_id, seq").fetchall()
    finally:
        conn.close()


def _derived(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {table: sorted(conn.execute(f"SELECT * FROM {table}")) for table in schema.DERIVED_TABLES}
    finally:
        conn.close()


def _as_before_0010(path: Path) -> None:
    """Put a file back as the release before 0010 left it: no derived tables or triggers, the old
    view, snapshots in 0008's table, no order guard, neither 0010, 0011 nor 0012 recorded."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for name in schema.DERIVING_SQL:
            conn.execute(f"DROP TRIGGER {name}")
        for table in schema.DERIVED_TABLES:
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP VIEW messages")
        conn.execute(OLD_VIEW)
        conn.execute("ALTER TABLE snapshots RENAME TO newer_snapshots")
        conn.execute(schema.SNAPSHOTS[0])
        conn.execute("INSERT INTO snapshots SELECT * FROM newer_snapshots")
        conn.execute("DROP TABLE newer_snapshots")
        for name in schema.SEQ_GUARDS:
            conn.execute(f"DROP TRIGGER {name.split()[2]}")
        conn.execute(
            f"DELETE FROM {schema.MIGRATIONS_TABLE} WHERE name IN (?, ?, ?)",
            (schema.DERIVED_MIGRATION, schema.SNAPSHOTS_BY_ROWID_MIGRATION, schema.SEQ_GUARD_MIGRATION),
        )
    finally:
        conn.close()


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two simulated runs at a tight budget (marks, summaries, exclusion ranges) and an import."""
    path = tmp_path_factory.mktemp("derived") / "t.db"
    (session,) = parse(RUN, "swe-agent")
    with Store.open(path) as store:
        store.import_file(CORPUS / "claude-code_ccviewer_5c0375b4.jsonl")
        simulate(store.session("sim/a"), session.messages, budget_tokens=3_000)
        simulate(store.session("sim/b"), session.messages[:60], budget_tokens=2_000)
    return path


def test_the_file_has_what_the_view_reads(compacted: Path) -> None:
    derived = _derived(compacted)
    assert all(derived.values())
    conn = sqlite3.connect(f"file:{compacted}?mode=ro", uri=True)
    kinds = {kind for (kind,) in conn.execute("SELECT DISTINCT kind FROM events")}
    conn.close()
    assert {"message_marked", "messages_excluded"} <= kinds


def test_the_view_answers_as_it_did_before_0010_and_after_migrating(compacted: Path, tmp_path: Path) -> None:
    now = _rows(compacted)
    old = tmp_path / "old.db"
    shutil.copy(compacted, old)
    _as_before_0010(old)
    assert _rows(old) == now
    assert any(row[8] for row in now) and any(row[9] for row in now)
    with Store.open(old, readonly=True) as store:  # a reader reads a file awaiting 0010 as it is
        assert store.sessions()
    assert verify(old).ok
    with Store.open(old) as store:  # a read-write open migrates it
        store.session("sim/a").visible_messages()
    assert _rows(old) == now and _derived(old) == _derived(compacted)
    assert verify(old).ok


def test_redaction_and_erasure_keep_the_tables_current(compacted: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    shutil.copy(compacted, path)
    with Store.open(path) as store:
        t = store.session("leaky")
        t.append(Message.user("deploy"))
        t.append(Message.assistant("env", [ToolCall(id="env", name="bash", input={"cmd": "env"})]))
        leak = t.append(Message.tool_result("env", "AWS_SECRET_ACCESS_KEY=" + "k" * 40))
        store.redact(leak.id, reason="leaked key")
        store.erase("sim/b", reason="asked to")
    assert verify(path).ok
    fresh = tmp_path / "fresh.db"
    shutil.copy(path, fresh)
    _as_before_0010(fresh)
    assert _rows(fresh) == _rows(path)
    assert not [row for row in _rows(path) if row[0] == "sim/b"]


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE body_facts SET role = 'system' WHERE id = "
        "(SELECT min(id) FROM body_facts WHERE role = 'user')",
        "UPDATE body_facts SET tokens = tokens + 1 WHERE id = (SELECT max(id) FROM body_facts)",
        "DELETE FROM mark_flags WHERE version = (SELECT max(version) FROM mark_flags)",
        "INSERT INTO mark_flags VALUES ('sim/a', 99999, 'sim/a/x', 1, 1)",
        "UPDATE excluded_ranges SET end_seq = end_seq + 5",
    ],
)
def test_verify_names_a_derived_table_edited_behind_its_back(
    compacted: Path, tmp_path: Path, edit: str
) -> None:
    path = tmp_path / "t.db"
    shutil.copy(compacted, path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute(edit).rowcount
    conn.close()
    codes = [p.code for p in verify(path).problems]
    assert codes == ["derived_stale"]


# Payloads no release writes but a stray writer could: the derived tables take them as the views
# read them (no write, migration or verify fails on them), and keep their JSON types.
ODD_EVENTS = (
    ("message_marked", '{"kind":"message_marked","message_id":5,"truncated":true}'),
    ("message_marked", '{"kind":"message_marked","message_id":"sim/b/x","truncated":"yes","excluded":2}'),
    ("messages_excluded", '{"kind":"messages_excluded","ranges":null}'),
    ("messages_excluded", '{"kind":"messages_excluded","ranges":5}'),
    ("messages_excluded", '{"kind":"messages_excluded","ranges":{"a":[0,2]}}'),
    ("messages_excluded", '{"kind":"messages_excluded","ranges":[[1,3],[7,"9"],[]]}'),
)


def _insert_odd(path: Path, events: tuple[tuple[str, str], ...]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        (top,) = conn.execute("SELECT max(version) FROM events WHERE session_id = 'sim/b'").fetchone()
        for offset, (kind, payload) in enumerate(events, start=1):
            conn.execute(
                "INSERT INTO events (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
                "VALUES ('sim/b', ?, ?, NULL, NULL, '2026-01-01T00:00:00Z', ?, 'x')",
                (top + offset, kind, payload),
            )
    finally:
        conn.close()


def test_odd_payloads_are_taken_as_the_old_view_read_them(compacted: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copy(compacted, old)
    _as_before_0010(old)
    _insert_odd(old, ODD_EVENTS)
    before = _rows(old)
    with Store.open(old) as store:  # migrates: the odd rows fail no insert
        store.session("sim/a").visible_messages()
    assert _rows(old) == before
    assert "derived_stale" not in {p.code for p in verify(old).problems}
    # A range that is no array of numbers (a string) passes verify too, which names the forged events.
    _insert_odd(old, (("messages_excluded", '{"kind":"messages_excluded","ranges":["x",[2]]}'),))
    codes = {p.code for p in verify(old).problems}
    assert "derived_stale" not in codes and codes


@pytest.mark.parametrize("table", [*schema.DERIVED_TABLES, "snapshots"])
def test_a_trigger_of_someone_elses_on_a_table_a_write_fills_refuses_writes(
    tmp_path: Path, table: str
) -> None:
    path = tmp_path / "t.db"
    with Store.open(path) as store:
        store.session("s").append(Message.user("hello"))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE TRIGGER sneaky AFTER INSERT ON {table} BEGIN SELECT 1; END")
    conn.close()
    with Store.open(path) as store, pytest.raises(StoreCorrupted, match="sneaky"):
        store.session("s").append(Message.user("again"))
    with Store.open(path, readonly=True) as store:
        assert len(store.session("s").messages().entries) == 1
