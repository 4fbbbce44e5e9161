"""The backends the contract suites run on, and what a test needs to know of each.

Every contract class (`RecorderContract`, `EventLogContract`, `StoreContract`) is subclassed once per
backend here: a SQLite file, a private SQLite `:memory:` database, the in-process recorder
(`memory://`), and a schema of a throwaway PostgreSQL cluster (`postgresql://`, the session-scoped
`postgres_cluster` fixture). Tests open stores through `Backend.location` and the public factories
(`open_backend`, `Store.open`), never through a backend's class. Damage that only an editor outside
the library could make (a row's bytes changed, a body deleted) is made per backend by `tamper_*`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pytest

from transcript.store import schema
from transcript.store.log import EventLog
from transcript.store.memory import MemoryRecorder
from transcript.store.recorder import BodyRow, EventRow, SnapshotRow
from transcript.store.sqlite import SqliteRecorder

if TYPE_CHECKING:
    from tests.pgserver import Cluster


@dataclass(frozen=True)
class Backend:
    """One backend: its name (the contract classes' test ids carry it) and how to reach a store."""

    name: str
    shared: bool  # a second open of the same location sees the same store
    durable: bool  # the store outlives the process (a fresh interpreter can reopen it)

    def location(self, tmp_path: Path, cluster: Cluster | None = None) -> str:
        """A location for a new, empty store of this backend."""
        if cluster is not None:
            return cluster.url()
        if self.name == "sqlite-file":
            return str(tmp_path / f"store-{uuid.uuid4().hex[:8]}.db")
        if self.name == "sqlite-memory":
            return ":memory:"
        return f"memory://test-{uuid.uuid4().hex}"


SQLITE_FILE = Backend("sqlite-file", shared=True, durable=True)
SQLITE_MEMORY = Backend("sqlite-memory", shared=False, durable=False)
MEMORY = Backend("memory", shared=True, durable=False)
POSTGRES = Backend("postgres", shared=True, durable=True)
BACKENDS = (SQLITE_FILE, SQLITE_MEMORY, MEMORY, POSTGRES)


class OnBackend:
    """A contract class's base: which backend its subclass runs on, and a fresh location per test."""

    backend: ClassVar[Backend]

    @pytest.fixture
    def location(self, tmp_path: Path, request: pytest.FixtureRequest) -> object:
        cluster = request.getfixturevalue("postgres_cluster") if self.backend is POSTGRES else None
        location = self.backend.location(tmp_path, cluster)
        yield location
        if location.startswith("memory://"):
            MemoryRecorder.discard(location)
        if cluster is not None:
            cluster.drop_schema(location)


def tamper_event(log: EventLog, session_id: str, version: int, payload: bytes) -> None:
    """Replace one stored event's payload (its hash left as it was), as an editor outside would."""
    recorder = log.recorder
    if isinstance(recorder, SqliteRecorder):
        _unguarded(
            recorder,
            "UPDATE events SET payload = ? WHERE session_id = ? AND version = ?",
            (payload.decode("utf-8", "surrogateescape"), session_id, version),
        )
        return
    if _postgres_edit(
        recorder,
        "UPDATE events SET payload = %s WHERE session_id = %s AND version = %s",
        (payload.decode("utf-8", "replace"), session_id, version),
    ):
        return
    assert isinstance(recorder, MemoryRecorder)
    rows = recorder._rows.events[session_id]
    index = next(i for i, row in enumerate(rows) if row.version == version)
    rows[index] = rows[index]._replace(payload=payload.decode("utf-8", "surrogateescape"))


def tamper_body(log: EventLog, message_id: str, body: bytes | None) -> None:
    """Replace one stored body's record (None: delete the row), as an editor outside would."""
    recorder = log.recorder
    if isinstance(recorder, SqliteRecorder):
        if body is None:
            _unguarded(recorder, "DELETE FROM bodies WHERE message_id = ?", (message_id,))
        else:
            _unguarded(
                recorder, "UPDATE bodies SET body = ? WHERE message_id = ?", (body.decode(), message_id)
            )
        return
    if _postgres_edit(
        recorder,
        "DELETE FROM bodies WHERE message_id = %s"
        if body is None
        else "UPDATE bodies SET body = %s WHERE message_id = %s",
        (message_id,) if body is None else (body.decode(), message_id),
    ):
        return
    assert isinstance(recorder, MemoryRecorder)
    if body is None:
        del recorder._rows.bodies[message_id]
    else:
        stored: BodyRow = recorder._rows.bodies[message_id]
        recorder._rows.bodies[message_id] = stored._replace(body=body.decode())


def tamper_snapshot(log: EventLog, session_id: str, version: int, row: SnapshotRow) -> None:
    """Replace the stored snapshot at `version` by `row` (any column: version, hash, payload, digest),
    as an editor outside would."""
    recorder = log.recorder
    payload = row.payload.decode() if isinstance(row.payload, bytes) else str(row.payload)
    params = (row.version, row.hash, payload, row.digest, session_id, version)
    if isinstance(recorder, SqliteRecorder):
        _unguarded(
            recorder,
            "UPDATE snapshots SET version = ?, hash = ?, payload = ?, digest = ? "
            "WHERE session_id = ? AND version = ?",
            params,
        )
        return
    if _postgres_edit(
        recorder,
        "UPDATE snapshots SET version = %s, hash = %s, payload = %s, digest = %s "
        "WHERE session_id = %s AND version = %s",
        params,
    ):
        return
    assert isinstance(recorder, MemoryRecorder)
    rows = recorder._rows.snapshots[session_id]
    index = next(i for i, kept in enumerate(rows) if kept.version == version)
    rows[index] = row._replace(payload=payload)
    rows.sort(key=lambda kept: kept.version)


def reseal_event(log: EventLog, session_id: str, version: int, payload: bytes, digest: str) -> None:
    """Replace one stored event's payload and its stored hash, as an editor outside would."""
    recorder = log.recorder
    params = (payload.decode(), digest, session_id, version)
    if isinstance(recorder, SqliteRecorder):
        _unguarded(
            recorder, "UPDATE events SET payload = ?, hash = ? WHERE session_id = ? AND version = ?", params
        )
        return
    if _postgres_edit(
        recorder, "UPDATE events SET payload = %s, hash = %s WHERE session_id = %s AND version = %s", params
    ):
        return
    assert isinstance(recorder, MemoryRecorder)
    rows = recorder._rows.events[session_id]
    index = next(i for i, kept in enumerate(rows) if kept.version == version)
    rows[index] = rows[index]._replace(payload=payload.decode(), hash=digest)


def stored_event(log: EventLog, session_id: str, version: int) -> EventRow:
    """One event row as the recorder returns it."""
    (row,) = log.recorder.events(session_id, after=version - 1, until=version)
    return row


def _unguarded(recorder: SqliteRecorder, statement: str, params: tuple[object, ...]) -> None:
    """Run one edit with the guard triggers dropped, then put them back."""
    conn = recorder.connection
    conn.execute("BEGIN IMMEDIATE")
    for name in schema.GUARDS:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(statement, params)
    for sql in schema.GUARD_SQL.values():
        conn.execute(sql)
    conn.execute("COMMIT")


def _postgres_edit(recorder: object, statement: str, params: tuple[object, ...]) -> bool:
    """Run one edit on a PostgreSQL store as its superuser would, past the guards (triggers do not
    fire for a session in replica mode); False when the recorder is not PostgreSQL's."""
    from transcript.store.postgres import PostgresRecorder

    if not isinstance(recorder, PostgresRecorder):
        return False
    conn = recorder._connection()
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(statement, params)
    return True


SHARED_BACKENDS = (SQLITE_FILE, MEMORY, POSTGRES)


@pytest.fixture(params=SHARED_BACKENDS, ids=lambda backend: backend.name)
def shared_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new, empty store on each backend a second open shares (a SQLite file, the in-process
    backend, PostgreSQL), removed after the test: for tests that reopen what they wrote."""
    backend = request.param
    cluster = request.getfixturevalue("postgres_cluster") if backend is POSTGRES else None
    where = backend.location(tmp_path, cluster)
    yield where
    if where.startswith("memory://"):
        MemoryRecorder.discard(where)
    if cluster is not None:
        cluster.drop_schema(where)
