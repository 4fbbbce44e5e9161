"""The PostgreSQL schema, as named migrations recorded in `_transcript_migrations`.

The same concepts as the SQLite file's schema: `bodies` (shared by the sessions that hold them),
`events` (each session's chained log; append rows carry the `seq -> message_id` history), `heads`
(each session's last version and hash, moved forward only) and `snapshots` (each session's fold at a
version, derived from the log). Triggers make the database itself refuse UPDATE, DELETE and TRUNCATE
of stored rows, a head that moves back and a snapshot edited in place. Migrations run in one
transaction under an advisory lock, so two workers opening a new store at once never migrate it
twice; a store that records a migration this release does not know is refused.
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg import sql

from transcript.model.errors import SchemaError, StoreUnavailable
from transcript.store import migrations

MIGRATION_SET: Final = "transcript-store-postgres"
MIGRATIONS_TABLE: Final = "_transcript_migrations"
LOG_TABLES: Final = ("bodies", "events", "heads", "snapshots")

_TABLES: Final = (
    # JSON is kept as text, byte for byte what the hashes cover (not jsonb, which rewrites it).
    """
    CREATE TABLE bodies (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        message_id text NOT NULL UNIQUE,
        hash text NOT NULL,
        tokenizer text NOT NULL,
        tokens text NOT NULL,
        body text NOT NULL,
        digest text NOT NULL
    )
    """,
    """
    CREATE TABLE events (
        session_id text NOT NULL,
        version bigint NOT NULL,
        kind text NOT NULL,
        seq bigint,
        message_id text,
        recorded_at text NOT NULL,
        payload text NOT NULL,
        hash text NOT NULL,
        PRIMARY KEY (session_id, version)
    )
    """,
    "CREATE INDEX events_not_appends ON events (session_id, version) WHERE kind <> 'message_appended'",
    "CREATE TABLE heads (session_id text PRIMARY KEY, version bigint NOT NULL, hash text NOT NULL)",
)

# The guards, by trigger name: what `verify` checks is there, enabled, and calling these functions.
REFUSE_FUNCTION: Final = """
    CREATE FUNCTION transcript_refuse_edit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'transcript-store: % is append-only (% refused)', TG_TABLE_NAME, TG_OP;
    END
    $$
"""
FORWARD_FUNCTION: Final = """
    CREATE FUNCTION transcript_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.version <= OLD.version OR NEW.session_id <> OLD.session_id THEN
            RAISE EXCEPTION 'transcript-store: a session head only moves forward';
        END IF;
        RETURN NEW;
    END
    $$
"""
GUARDS: Final = {
    "bodies_refuse_edit": ("bodies", "BEFORE UPDATE OR DELETE", "ROW", "transcript_refuse_edit"),
    "bodies_refuse_truncate": ("bodies", "BEFORE TRUNCATE", "STATEMENT", "transcript_refuse_edit"),
    "events_refuse_edit": ("events", "BEFORE UPDATE OR DELETE", "ROW", "transcript_refuse_edit"),
    "events_refuse_truncate": ("events", "BEFORE TRUNCATE", "STATEMENT", "transcript_refuse_edit"),
    "heads_refuse_delete": ("heads", "BEFORE DELETE", "ROW", "transcript_refuse_edit"),
    "heads_refuse_truncate": ("heads", "BEFORE TRUNCATE", "STATEMENT", "transcript_refuse_edit"),
    "heads_refuse_backwards": ("heads", "BEFORE UPDATE", "ROW", "transcript_head_forward"),
}
GUARD_FUNCTIONS: Final = ("transcript_refuse_edit", "transcript_head_forward", "transcript_in_order")
# 0002: snapshots of each session's fold, which an open loads instead of folding the whole log. They
# are derived (`verify` checks each against a fold of the log), so a newer one replaces the older
# (deleted, never edited: a row holds what was inserted or is gone) and redaction may drop them.
SNAPSHOTS: Final = """
    CREATE TABLE snapshots (
        session_id text NOT NULL,
        version bigint NOT NULL,
        hash text NOT NULL,
        payload text NOT NULL,
        digest text NOT NULL,
        PRIMARY KEY (session_id, version)
    )
"""
SNAPSHOT_GUARDS: Final = {
    "snapshots_refuse_update": ("snapshots", "BEFORE UPDATE", "ROW", "transcript_refuse_edit"),
}


# 0003: the log is numbered by the database too (as the SQLite file's `events_refuse_out_of_order`):
# an event takes its session's next version, an append its next seq, any other event none. The
# function reads the table of the schema its trigger fires in, whatever the caller's search path.
ORDER_FUNCTION: Final = """
    CREATE FUNCTION transcript_in_order() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        last_version bigint;
        next_seq bigint;
    BEGIN
        EXECUTE format('SELECT max(version) FROM %I.events WHERE session_id = $1', TG_TABLE_SCHEMA)
            INTO last_version USING NEW.session_id;
        IF NEW.kind = 'message_appended' THEN
            EXECUTE format('SELECT seq + 1 FROM %I.events WHERE session_id = $1 '
                           'AND kind = ''message_appended'' ORDER BY version DESC LIMIT 1', TG_TABLE_SCHEMA)
                INTO next_seq USING NEW.session_id;
            next_seq := coalesce(next_seq, 0);
        END IF;
        IF NEW.version IS DISTINCT FROM coalesce(last_version, 0) + 1
                OR NEW.seq IS DISTINCT FROM next_seq THEN
            RAISE EXCEPTION 'transcript-store: an event takes its session''s next version, and an append '
                'its next seq (out of order refused)' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END
    $$
"""
ORDER_GUARDS: Final = {
    "events_refuse_out_of_order": ("events", "BEFORE INSERT", "ROW", "transcript_in_order"),
}


def _guard_statements(guards: dict[str, tuple[str, str, str, str]]) -> list[str]:
    return [
        f"CREATE TRIGGER {name} {when} ON {table} FOR EACH {each} EXECUTE FUNCTION {function}()"
        for name, (table, when, each, function) in guards.items()
    ]


SNAPSHOTS_MIGRATION: Final = "0002_snapshots"
ORDER_MIGRATION: Final = "0003_seq_guard"
MIGRATIONS: Final = (
    ("0001_initial", (*_TABLES, REFUSE_FUNCTION, FORWARD_FUNCTION, *_guard_statements(GUARDS))),
    (SNAPSHOTS_MIGRATION, (SNAPSHOTS, *_guard_statements(SNAPSHOT_GUARDS))),
    (ORDER_MIGRATION, (ORDER_FUNCTION, *_guard_statements(ORDER_GUARDS))),
)
KNOWN: Final = tuple(name for name, _ in MIGRATIONS)
# Migrations a reader (a read-only open, `verify`) does without: a schema that awaits them is read as
# it is (one without snapshots has none to load) and its guards are those its migrations made.
READ_AS_IS: Final = frozenset((SNAPSHOTS_MIGRATION, ORDER_MIGRATION))


def readable_as_is(applied: tuple[str, ...]) -> bool:
    """Whether a schema recording these migrations is one this release reads without migrating it."""
    return migrations.readable_as_is(applied, KNOWN, READ_AS_IS)


def guards_of(applied: tuple[str, ...]) -> dict[str, tuple[str, str, str, str]]:
    """The guard triggers the migrations recorded create."""
    return {
        **GUARDS,
        **(SNAPSHOT_GUARDS if SNAPSHOTS_MIGRATION in applied else {}),
        **(ORDER_GUARDS if ORDER_MIGRATION in applied else {}),
    }


def _lock_key(schema: str) -> int:
    """The advisory lock two workers take before migrating the same schema (a stable 63-bit key)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{MIGRATION_SET}:{schema}".encode()).digest()[:8], "big") >> 1


def schema_exists(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def applied(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
    """Names of this set's migrations recorded in the schema, in the order they were applied."""
    found = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (schema, MIGRATIONS_TABLE)
    ).fetchone()
    if found is None:
        return []
    rows = conn.execute(
        sql.SQL("SELECT name FROM {}.{} WHERE migration_set = %s ORDER BY id").format(
            sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
        ),
        (MIGRATION_SET,),
    ).fetchall()
    return [str(name) for (name,) in rows]


def check(conn: psycopg.Connection[tuple[object, ...]], schema: str, *, can_migrate: bool) -> list[str]:
    """The pending migrations, after refusing schemas this release must not touch."""
    done = applied(conn, schema)
    pending = migrations.pending(done, KNOWN, table=MIGRATIONS_TABLE, store=f"schema {schema!r}")
    if pending and not done:
        foreign = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename LIMIT 1", (schema,)
        ).fetchone()
        if foreign is not None:
            raise SchemaError(
                f"schema {schema!r} is not a transcript store (it has table {foreign[0]!r} and no "
                "transcript-store migrations); name another with ?schema=NAME"
            )
        if not can_migrate:
            raise StoreUnavailable(
                f"there is no transcript store in schema {schema!r} (a read-only open never creates one)"
            )
    if pending and not can_migrate and not set(pending) <= READ_AS_IS:
        raise SchemaError(
            f"schema {schema!r} needs migration {pending[0]!r}; open it once read-write to migrate it "
            "(a read-only open never migrates)"
        )
    return pending


def migrate(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """Create the schema if need be and apply pending migrations in one transaction, under the
    advisory lock (the check is made again once it is held: another worker may have migrated)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema),))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        pending = check(conn, schema, can_migrate=True)
        if not pending:
            return
        if not applied(conn, schema):
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.{} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                    "migration_set text NOT NULL, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now(), UNIQUE (migration_set, name))"
                ).format(sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE))
            )
        record = sql.SQL("INSERT INTO {}.{} (migration_set, name) VALUES (%s, %s)").format(
            sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
        )
        for name, statements in MIGRATIONS:
            if name in pending:
                for statement in statements:
                    conn.execute(statement)
                conn.execute(record, (MIGRATION_SET, name))


def guard_problems(
    conn: psycopg.Connection[tuple[object, ...]],
    schema: str,
    guards: dict[str, tuple[str, str, str, str]] | None = None,
) -> list[tuple[str, str]]:
    """(code, detail) for each guard trigger that is missing, disabled or changed (of `guards`, by
    default every one this release creates), for each guard function whose body was changed, and for
    each trigger on the log's tables this release did not create (it could change or drop a write)."""
    guards = {**GUARDS, **SNAPSHOT_GUARDS, **ORDER_GUARDS} if guards is None else guards
    rows = conn.execute(
        "SELECT t.tgname, c.relname, t.tgenabled, p.proname FROM pg_trigger AS t "
        "JOIN pg_class AS c ON c.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "JOIN pg_proc AS p ON p.oid = t.tgfoid WHERE n.nspname = %s AND NOT t.tgisinternal",
        (schema,),
    ).fetchall()
    found = {str(name): (str(table), str(enabled), str(function)) for name, table, enabled, function in rows}
    problems = []
    for name, (table, _, _, function) in guards.items():
        present = found.get(name)
        if present is None:
            problems.append(("guard_missing", f"trigger {name} was dropped"))
        elif present[1] == "D":
            problems.append(("guard_changed", f"trigger {name} is disabled"))
        elif present[0] != table or present[2] != function:
            problems.append(("guard_changed", f"trigger {name} does not do what it must"))
    for name in sorted(found.keys() - guards.keys()):
        if found[name][0] in LOG_TABLES:
            problems.append(("schema_foreign", f"trigger {name} was not created by transcript-store"))
    sources: dict[object, object] = dict(
        conn.execute(
            "SELECT p.proname, p.prosrc FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s AND p.proname = ANY(%s)",
            (schema, list(GUARD_FUNCTIONS)),
        ).fetchall()  # type: ignore[arg-type]
    )
    used = {function for _, _, _, function in guards.values()}
    for function, created in (
        ("transcript_refuse_edit", REFUSE_FUNCTION),
        ("transcript_head_forward", FORWARD_FUNCTION),
        ("transcript_in_order", ORDER_FUNCTION),
    ):
        if function not in used:
            continue
        body = created.split("$$")[1]
        if sources.get(function) != body:
            problems.append(("guard_changed", f"function {function} does not do what it must"))
    return problems


def foreign_triggers(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
    """Triggers on the log's tables that this release did not create: no write is made while one is
    there (it could change or drop the rows)."""
    return [detail for code, detail in guard_problems(conn, schema) if code == "schema_foreign"]
