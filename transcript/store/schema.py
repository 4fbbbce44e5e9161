"""The database schema, as named migrations recorded by `sqlite_utils.Migrations`.

Bodies and events are append-only: triggers make the database itself refuse UPDATE, DELETE and
REPLACE on them, so no code path (ours or a stray `sqlite3` shell) can rewrite what was stored. A
session's history (`seq -> message_id`) is carried by its append events, in their `seq` and
`message_id` columns, and shown by the `history` view; one fewer table to write per turn. A file that
records a migration this release does not know was written by a newer release and is refused.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

from transcript.model.errors import SchemaError

if TYPE_CHECKING:
    from sqlite_utils import Database

MIGRATION_SET: Final = "transcript-store"
MIGRATIONS_TABLE: Final = "_sqlite_migrations"
APPEND_ONLY_TABLES: Final = ("bodies", "events")

_INITIAL: Final = (
    """
    CREATE TABLE bodies (
        id INTEGER PRIMARY KEY,
        message_id TEXT NOT NULL UNIQUE,
        hash TEXT NOT NULL,
        tokenizer TEXT NOT NULL,
        tokens BLOB NOT NULL,
        body BLOB NOT NULL
    )
    """,
    """
    CREATE TABLE events (
        session_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        seq INTEGER,
        message_id TEXT,
        recorded_at TEXT NOT NULL,
        payload BLOB NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (session_id, version)
    ) WITHOUT ROWID
    """,
    """
    CREATE VIEW history AS
    SELECT session_id, seq, message_id, version FROM events WHERE kind = 'message_appended'
    """,
    # Everything but appends: what a cold open folds into flags without reading every append event.
    "CREATE INDEX events_not_appends ON events (session_id, version) WHERE kind <> 'message_appended'",
)


# How a row of each append-only table is identified: an insert that names an existing key is refused,
# because INSERT OR REPLACE deletes the old row without firing DELETE triggers on a connection that
# has not turned `recursive_triggers` on (a stray `sqlite3` shell, say).
_KEYS: Final = {
    "bodies": "message_id = NEW.message_id OR id = NEW.id",
    "events": "session_id = NEW.session_id AND version = NEW.version",
}
GUARDS: Final = tuple(
    f"{table}_refuse_{verb}" for table in APPEND_ONLY_TABLES for verb in ("update", "delete", "replace")
)


def _guard_statements(table: str) -> list[str]:
    refuse = "SELECT RAISE(ABORT, 'transcript-store: {table} is append-only ({what} refused)');"
    guards = [
        f"CREATE TRIGGER {table}_refuse_{verb.lower()} BEFORE {verb} ON {table} "
        f"BEGIN {refuse.format(table=table, what=verb)} END"
        for verb in ("UPDATE", "DELETE")
    ]
    guards.append(
        f"CREATE TRIGGER {table}_refuse_replace BEFORE INSERT ON {table} "
        f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {_KEYS[table]}) "
        f"BEGIN {refuse.format(table=table, what='replacing an existing row')} END"
    )
    return guards


def _build_migrations() -> list[tuple[str, list[str]]]:
    initial = list(_INITIAL)
    for table in APPEND_ONLY_TABLES:
        initial.extend(_guard_statements(table))
    return [("0001_initial", initial)]


MIGRATIONS: Final = _build_migrations()
KNOWN: Final = tuple(name for name, _ in MIGRATIONS)


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of this set's migrations recorded in the file, in the order they were applied."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if not exists:
        return []
    rows = conn.execute(
        f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid", (MIGRATION_SET,)
    )
    return [name for (name,) in rows]


def check(conn: sqlite3.Connection, *, can_migrate: bool) -> list[str]:
    """The pending migrations, after refusing files this release must not touch."""
    done = applied(conn)
    unknown = [name for name in done if name not in KNOWN]
    if unknown:
        raise SchemaError(
            f"this file was written by a newer transcript-store (unknown migration {unknown[0]!r}); "
            "upgrade transcript-store to open it"
        )
    pending = [name for name in KNOWN if name not in done]
    if pending and not done:
        foreign = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' LIMIT 1"
        ).fetchone()
        if foreign is not None:
            raise SchemaError(
                f"this database is not a transcript store (it has table {foreign[0]!r} and no "
                "transcript-store migrations)"
            )
    if pending and not can_migrate:
        raise SchemaError(
            f"this file needs migration {pending[0]!r}; open it once read-write to migrate it "
            "(a read-only open never migrates)"
        )
    return pending


def migrate(conn: sqlite3.Connection) -> None:
    """Apply pending migrations under the write lock (several processes may open a new file at once)."""
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for name, statements in MIGRATIONS:
        migrations(name=name)(_runner(statements))
    conn.execute("BEGIN IMMEDIATE")
    try:
        if check(conn, can_migrate=True):
            migrations.apply(Database(conn, execute_plugins=False))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class _Runner:
    def __init__(self, statements: list[str]) -> None:
        self.statements = statements
        self.__name__ = "migration"

    def __call__(self, db: Database, /) -> None:
        for statement in self.statements:
            db.conn.execute(statement)


def _runner(statements: list[str]) -> _Runner:
    return _Runner(statements)
