"""What is PostgreSQL's own in the PostgreSQL recorder: the server's guards, its forms of locked,
read-only and full, migrations under an advisory lock, passwords kept out of sight, and a connection
lost while a commit was sent. (The contract suites run on it too: tests/backends.py.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from tests.pgserver import Cluster
from tests.test_recorder_contract import appends
from transcript import (
    ConflictError,
    DuplicateMessage,
    InvalidArgument,
    Message,
    SchemaError,
    Store,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
    Transcript,
    verify,
)
from transcript.store import pgconnect, pgschema
from transcript.store.backends import open_recorder
from transcript.store.log import EventLog
from transcript.store.postgres import PostgresRecorder
from transcript.store.recorder import RecorderWrite


@pytest.fixture
def location(postgres_cluster: Cluster) -> Iterator[str]:
    location = postgres_cluster.url()
    yield location
    postgres_cluster.drop_schema(location)


def _raw(cluster: Cluster) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(f"host={cluster.root} user=postgres dbname=transcript", autocommit=True)


def _schema(location: str) -> str:
    return location.rsplit("schema=", 1)[1]


def test_the_server_refuses_edits_of_stored_rows(location: str, postgres_cluster: Cluster) -> None:
    with Store.open(location) as store:
        store.session("s").append(Message.user("keep me", id="u1"))
    with _raw(postgres_cluster) as conn:
        conn.execute(f"SET search_path TO {_schema(location)}")
        for statement in (
            "UPDATE bodies SET body = '{}'",
            "DELETE FROM events",
            "TRUNCATE bodies CASCADE",
            "DELETE FROM heads",
            "UPDATE heads SET version = 0",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="transcript-store"):
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1,)
    assert verify(location).ok


def test_a_dropped_guard_is_named_by_verify(location: str, postgres_cluster: Cluster) -> None:
    with Store.open(location) as store:
        store.session("s").append(Message.user("one", id="u1"))
    with _raw(postgres_cluster) as conn:
        conn.execute(f"DROP TRIGGER events_refuse_edit ON {_schema(location)}.events")
        conn.execute(f"ALTER TABLE {_schema(location)}.bodies DISABLE TRIGGER bodies_refuse_edit")
    codes = sorted(problem.code for problem in verify(location).problems)
    assert codes == ["guard_changed", "guard_missing"]


def test_a_foreign_trigger_on_the_log_refuses_writes(location: str, postgres_cluster: Cluster) -> None:
    Store.open(location).close()
    with _raw(postgres_cluster) as conn:
        conn.execute(
            f"CREATE TRIGGER sneaky BEFORE INSERT ON {_schema(location)}.events "
            f"FOR EACH ROW EXECUTE FUNCTION {_schema(location)}.transcript_head_forward()"
        )
    with Store.open(location) as store, pytest.raises(StoreUnavailable, match="sneaky"):
        store.session("s").append(Message.user("one", id="u1"))
    assert "schema_foreign" in {problem.code for problem in verify(location).problems}


def test_a_read_only_open_is_refused_by_the_server_too(location: str) -> None:
    with Store.open(location) as store:
        store.session("s").append(Message.user("one", id="u1"))
    reader = open_recorder(location, readonly=True)
    assert isinstance(reader, PostgresRecorder)
    reader.readonly = False  # past this code's own check: the server still says no
    bodies, events = appends(Message.user("two", id="u2"))
    with pytest.raises(StoreReadOnly):
        reader.insert([RecorderWrite("other", (0, ""), bodies, events)])
    reader.close()
    with Store.open(location, readonly=True) as store:
        assert [s.session_id for s in store.sessions()] == ["s"]


def test_a_read_only_open_of_no_store_creates_nothing(location: str, postgres_cluster: Cluster) -> None:
    with pytest.raises(StoreUnavailable, match="never creates"):
        Store.open(location, readonly=True)
    with _raw(postgres_cluster) as conn:
        assert not pgschema.schema_exists(conn, _schema(location))


def test_a_held_lock_is_store_locked_after_the_timeout(location: str, postgres_cluster: Cluster) -> None:
    with Store.open(location) as store:
        store.session("s").append(Message.user("one", id="u1"))
    with _raw(postgres_cluster) as conn, conn.transaction():
        conn.execute(f"LOCK TABLE {_schema(location)}.heads IN EXCLUSIVE MODE")
        with Store.open(location, timeout=0.2) as store, pytest.raises(StoreLocked):
            store.session("s").append(Message.user("two", id="u2"))
    with Store.open(location) as store:
        assert store.session("s").version == 1


def test_a_full_disk_is_store_full_with_nothing_written(location: str, postgres_cluster: Cluster) -> None:
    """The server's own disk_full error (raised here by a trigger, as a full tablespace raises it)."""
    from transcript import StoreFull

    with Store.open(location) as store:
        store.session("s").append(Message.user("one", id="u1"))
        with _raw(postgres_cluster) as conn:
            conn.execute(
                f"CREATE FUNCTION {_schema(location)}.fill() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$"
            )
            conn.execute(
                f"CREATE TRIGGER fill BEFORE INSERT ON {_schema(location)}.bodies "
                f"FOR EACH ROW EXECUTE FUNCTION {_schema(location)}.fill()"
            )
        transcript = store.session("s")
        with pytest.raises(StoreFull):
            transcript.append(Message.user("two", id="u2"))
        assert store.head("s")[0] == 1 and transcript.version == 1


def test_a_schema_of_a_newer_release_is_refused(location: str, postgres_cluster: Cluster) -> None:
    Store.open(location).close()
    with _raw(postgres_cluster) as conn:
        conn.execute(
            f"INSERT INTO {_schema(location)}._transcript_migrations (migration_set, name) VALUES (%s, %s)",
            (pgschema.MIGRATION_SET, "9999_from_the_future"),
        )
    with pytest.raises(SchemaError, match="newer"):
        Store.open(location)


def test_a_schema_holding_other_tables_is_refused(location: str, postgres_cluster: Cluster) -> None:
    with _raw(postgres_cluster) as conn:
        conn.execute(f"CREATE SCHEMA {_schema(location)}")
        conn.execute(f"CREATE TABLE {_schema(location)}.orders (id int)")
    with pytest.raises(SchemaError, match="not a transcript store"):
        Store.open(location)


def test_workers_opening_a_new_store_at_once_migrate_it_once(
    location: str, postgres_cluster: Cluster
) -> None:
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            Store.open(location).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with _raw(postgres_cluster) as conn:
        assert pgschema.applied(conn, _schema(location)) == list(pgschema.KNOWN)


def test_two_workers_one_session_the_loser_gets_a_conflict(location: str) -> None:
    first = Transcript.open(location, session_id="s")
    second = Transcript.open(location, session_id="s")
    first.append(Message.user("from the first", id="a"))
    with pytest.raises(ConflictError):
        second.append(Message.user("from the second", id="b"))
    second.append(Message.user("from the second", id="b"))  # it has caught up
    assert [m.id for m in first.visible_messages().messages] == ["a", "b"]
    first.close()
    second.close()


def test_a_password_never_shows(postgres_cluster: Cluster) -> None:
    url = f"postgresql://postgres:s3cr3t-pw@localhost:1/transcript?host={postgres_cluster.root}/nowhere"
    with pytest.raises(StoreUnavailable) as caught:
        Store.open(url, timeout=0.5)
    assert "s3cr3t-pw" not in str(caught.value) and "***" in str(caught.value)
    assert caught.value.__cause__ is None or "s3cr3t-pw" not in str(caught.value.__cause__)
    assert "s3cr3t-pw" not in pgconnect.redact(url + "&password=s3cr3t-pw")
    with pytest.raises(InvalidArgument) as bad:
        Store.open("postgresql://u:s3cr3t-pw@h/db?schema=no-dashes")
    assert "s3cr3t-pw" not in str(bad.value)


def test_a_store_repr_and_path_hide_the_password(location: str) -> None:
    url = location.replace("postgresql:///", "postgresql://postgres:pw-in-url@/")
    with Store.open(url) as store:
        assert "pw-in-url" not in repr(store) and "pw-in-url" not in store.path
        assert isinstance(store.events, EventLog) and "pw-in-url" not in repr(store.events.recorder)


def test_a_connection_lost_during_commit_is_resolved_by_reading_the_head(
    location: str, postgres_cluster: Cluster
) -> None:
    """The server ends the writer's connection at COMMIT (a deferred trigger kills its backend): the
    write was not stored, and the error says so after reading the head on a new connection."""
    with Store.open(location) as store:
        transcript = store.session("s")
        transcript.append(Message.user("one", id="u1"))
        with _raw(postgres_cluster) as conn:
            schema = _schema(location)
            conn.execute(
                f"CREATE FUNCTION {schema}.cut() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$"
            )
            conn.execute(
                f"CREATE CONSTRAINT TRIGGER cut AFTER INSERT ON {schema}.events "
                f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.cut()"
            )
        with pytest.raises(StoreUnavailable, match="it was not stored"):
            transcript.append(Message.user("two", id="u2"))
        with _raw(postgres_cluster) as conn:
            conn.execute(f"DROP TRIGGER cut ON {schema}.events")
        assert store.head("s")[0] == 1  # the same store, on its new connection
        transcript.append(Message.user("two", id="u2"))
        assert [m.id for m in transcript.visible_messages().messages] == ["u1", "u2"]


def _snapshotted(location: str) -> list[object]:
    """A session with a full round (so a snapshot), its view."""
    from tests.test_snapshots import _compacted

    with Store.open(location, tokenizer="chars/4") as store:
        return list(_compacted(store).visible_messages().messages)


def test_the_server_refuses_a_snapshot_edited_in_place(location: str, postgres_cluster: Cluster) -> None:
    view = _snapshotted(location)
    with _raw(postgres_cluster) as conn:
        conn.execute(f"SET search_path TO {_schema(location)}")
        with pytest.raises(psycopg.errors.RaiseException, match="transcript-store: snapshots"):
            conn.execute("UPDATE snapshots SET payload = '{}'")
        # Past the guard, as a superuser could: the open passes over it and verify names it.
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE snapshots SET payload = replace(payload, '\"history\":', '\"history\": ')")
    assert [problem.code for problem in verify(location).problems] == ["snapshot_damaged"]
    with Store.open(location, tokenizer="chars/4") as store:
        assert list(store.session("s").visible_messages().messages) == view
    with _raw(postgres_cluster) as conn:
        conn.execute(f"DROP TRIGGER snapshots_refuse_update ON {_schema(location)}.snapshots")
    assert "guard_missing" in {problem.code for problem in verify(location).problems}


def test_a_schema_from_before_snapshots_is_read_as_is_and_migrated_by_a_writer(
    location: str, postgres_cluster: Cluster
) -> None:
    view = _snapshotted(location)
    schema_name = _schema(location)
    with _raw(postgres_cluster) as conn:  # the schema as the release before snapshots left it
        conn.execute(f"DROP TABLE {schema_name}.snapshots")
        conn.execute(f"DROP TRIGGER events_refuse_out_of_order ON {schema_name}.events")
        conn.execute(f"DROP FUNCTION {schema_name}.transcript_in_order()")
        conn.execute(
            f"DELETE FROM {schema_name}._transcript_migrations "
            "WHERE name IN ('0002_snapshots', '0003_seq_guard')"
        )
    with Store.open(location, readonly=True, tokenizer="chars/4") as store:
        assert list(store.session("s").visible_messages().messages) == view
    assert verify(location).ok
    with _raw(postgres_cluster) as conn:
        assert pgschema.applied(conn, schema_name) == ["0001_initial"]
    with Store.open(location, tokenizer="chars/4") as store:
        t = store.session("s")
        assert list(t.visible_messages().messages) == view
        assert t.compact(budget_tokens=3_000, force=True).outcome == "full_applied"
        assert isinstance(store.events, EventLog) and store.events.snapshot("s") is not None
    with _raw(postgres_cluster) as conn:
        assert pgschema.applied(conn, schema_name) == list(pgschema.KNOWN)
    assert verify(location).ok


def test_a_body_already_stored_costs_the_server_no_error(location: str, postgres_cluster: Cluster) -> None:
    # An append takes its bodies to be new; one already stored (shared with another session, or
    # a re-append after a lazy open) is told by the insert that stores nothing, not by a failed
    # statement that the server would log as an error each time.
    log = postgres_cluster.root / "log"
    start = log.stat().st_size
    shared = Message.user("said in both sessions", id="shared")
    with Store.open(location, tokenizer="chars/4") as store:
        store.session("one", create=True).append(shared)
        two = store.session("two", create=True)
        assert two.append(shared) == shared  # stored once, appended to both
        assert [m.id for m in two.stored_messages()] == ["shared"]
        with pytest.raises(DuplicateMessage):
            two.append(Message.user("other words", id="shared"))
        assert len(two) == 1
    with log.open("rb") as text:
        text.seek(start)
        written = text.read().decode("utf-8", "replace")
    assert "bodies_message_id_key" not in written and "duplicate key" not in written
