"""The database schema, as named migrations recorded by `sqlite_utils.Migrations`.

Bodies and events are append-only: triggers make the database itself refuse UPDATE, DELETE and
REPLACE on them, so no code path (ours or a stray `sqlite3` shell) can rewrite what was stored. A
session's history (`seq -> message_id`) is carried by its append events, in their `seq` and
`message_id` columns, and shown by the `history` view; one fewer table to write per turn. Each body
carries its record digest; each session's head (version and hash of its last event) is kept in
`heads`, which only moves forward, so `verify` can tell a log whose tail or whole was deleted. A file
that records a migration this release does not know was written by a newer release and is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from transcript.model.errors import SchemaError
from transcript.model.hashing import record_digest
from transcript.store import migrations

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


HEAD_GUARDS: Final = (
    "CREATE TRIGGER heads_refuse_delete BEFORE DELETE ON heads "
    "BEGIN SELECT RAISE(ABORT, 'transcript-store: a session head is never deleted'); END",
    "CREATE TRIGGER heads_refuse_backwards BEFORE UPDATE ON heads "
    "WHEN NEW.version <= OLD.version OR NEW.session_id <> OLD.session_id "
    "BEGIN SELECT RAISE(ABORT, 'transcript-store: a session head only moves forward'); END",
    "CREATE TRIGGER heads_refuse_replace BEFORE INSERT ON heads "
    "WHEN EXISTS (SELECT 1 FROM heads WHERE session_id = NEW.session_id) "
    "BEGIN SELECT RAISE(ABORT, 'transcript-store: a session head is moved, never replaced'); END",
)
# 0009: the one audited exception to append-only. A body is rewritten only to a tombstone (its parts
# listed in `redacted`, never fewer than before) that a `message_redacted` event names by its new
# hash and digest; an event's payload only where a later redaction event of its session names its
# version (its kind, time and chained hash unchanged); a session's events are deleted only under
# a later `session_erased` event of it, and a body only once no event appends it. Each `WHEN` is
# wrapped in coalesce: an expression that comes out NULL (JSON that is not there) refuses.
_REFUSE: Final = "BEGIN SELECT RAISE(ABORT, 'transcript-store: {table} is append-only ({what} refused)'); END"
REDACTION_GUARDS: Final = (
    "CREATE TRIGGER bodies_refuse_update BEFORE UPDATE ON bodies WHEN NOT coalesce(("
    "NEW.id = OLD.id AND NEW.message_id = OLD.message_id AND NEW.tokenizer = OLD.tokenizer "
    "AND NEW.body <> OLD.body AND NEW.digest <> OLD.digest AND json_valid(NEW.body) "
    "AND json_array_length(NEW.body, '$.redacted') > 0 "
    "AND json_array_length(NEW.body, '$.redacted') >= coalesce(json_array_length(OLD.body, '$.redacted'), 0) "
    "AND EXISTS (SELECT 1 FROM events AS r, json_each(r.payload, '$.bodies') AS b "
    "WHERE r.kind = 'message_redacted' AND json_extract(b.value, '$.message_id') = NEW.message_id "
    "AND json_extract(b.value, '$.hash') = NEW.hash AND json_extract(b.value, '$.record') = NEW.digest)"
    "), 0) " + _REFUSE.format(table="bodies", what="UPDATE"),
    "CREATE TRIGGER bodies_refuse_delete BEFORE DELETE ON bodies WHEN NOT coalesce(("
    "NOT EXISTS (SELECT 1 FROM events WHERE message_id = OLD.message_id) "
    "AND EXISTS (SELECT 1 FROM events WHERE kind = 'session_erased')"
    "), 0) " + _REFUSE.format(table="bodies", what="DELETE"),
    "CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events WHEN NOT coalesce(("
    "NEW.session_id = OLD.session_id AND NEW.version = OLD.version AND NEW.kind = OLD.kind "
    "AND NEW.seq IS OLD.seq AND NEW.message_id IS OLD.message_id AND NEW.recorded_at = OLD.recorded_at "
    "AND NEW.hash = OLD.hash AND OLD.kind NOT IN ('message_appended', 'message_redacted', 'session_erased') "
    "AND NEW.payload <> OLD.payload AND json_valid(NEW.payload) AND instr(NEW.payload, '[redacted') > 0 "
    "AND EXISTS (SELECT 1 FROM events AS r, json_each(r.payload, '$.events') AS v "
    "WHERE r.session_id = OLD.session_id AND r.kind = 'message_redacted' AND r.version > OLD.version "
    "AND json_extract(v.value, '$[0]') = OLD.version)"
    "), 0) " + _REFUSE.format(table="events", what="UPDATE"),
    "CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events WHEN NOT coalesce(("
    "OLD.kind <> 'session_erased' AND EXISTS (SELECT 1 FROM events AS x "
    "WHERE x.session_id = OLD.session_id AND x.kind = 'session_erased' AND x.version > OLD.version "
    "AND json_extract(x.payload, '$.version') >= OLD.version)"
    "), 0) " + _REFUSE.format(table="events", what="DELETE"),
)
# 0012: the log is numbered by the database too. An event takes its session's next version, and an
# append its session's next seq (one past the last append's, found by reading the session's newest
# events back by key); any other event has none. (A row that names a stored key is the replace
# guard's to refuse.) So no writer, however stale its count, can commit
# a gap or a repeat, and a row put in by hand out of order is refused.
SEQ_GUARDS: Final = (
    "CREATE TRIGGER events_refuse_out_of_order BEFORE INSERT ON events WHEN NOT EXISTS (SELECT 1 FROM "
    "events WHERE session_id = NEW.session_id AND version = NEW.version) AND ("
    "NEW.version IS NOT coalesce((SELECT max(version) FROM events WHERE session_id = NEW.session_id), 0) + 1 "
    "OR NEW.seq IS NOT (CASE WHEN NEW.kind = 'message_appended' THEN coalesce((SELECT seq + 1 "
    "FROM events WHERE session_id = NEW.session_id AND kind = 'message_appended' "
    "ORDER BY version DESC LIMIT 1), 0) END)) "
    "BEGIN SELECT RAISE(ABORT, 'transcript-store: an event takes its session''s next version, and an "
    "append its next seq (out of order refused)'); END",
)
# Every guard trigger this release creates, by name, with its exact SQL (what `verify` compares).
GUARD_SQL: Final = {
    statement.split()[2]: statement
    for statement in (
        *(g for t in APPEND_ONLY_TABLES for g in _guard_statements(t)),
        *HEAD_GUARDS,
        *REDACTION_GUARDS,
        *SEQ_GUARDS,
    )
}
GUARDS: Final = tuple(GUARD_SQL)

Migration = Callable[[sqlite3.Connection], None]


def _statements(statements: list[str]) -> Migration:
    def run(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return run


def _record_digests_and_heads(conn: sqlite3.Connection) -> None:
    """0002: each body's record digest, and the heads table, filled from what is stored."""
    conn.create_function("record_digest", 3, _digest_of_row, deterministic=True)
    conn.execute("ALTER TABLE bodies ADD COLUMN digest TEXT NOT NULL DEFAULT ''")
    conn.execute("DROP TRIGGER bodies_refuse_update")
    conn.execute("UPDATE bodies SET digest = record_digest(body, tokens, tokenizer)")
    conn.execute(GUARD_SQL["bodies_refuse_update"])
    conn.execute(
        "CREATE TABLE heads (session_id TEXT PRIMARY KEY, version INTEGER NOT NULL, hash TEXT NOT NULL) "
        "WITHOUT ROWID"
    )
    conn.execute(
        "INSERT INTO heads (session_id, version, hash) "
        "SELECT e.session_id, e.version, e.hash FROM events AS e "
        "WHERE e.version = (SELECT max(version) FROM events WHERE session_id = e.session_id)"
    )
    for statement in HEAD_GUARDS:
        conn.execute(statement)


# 0003 rebuilds the two append-only tables with JSON text columns (same bytes, now readable as text by
# any SQLite tool) and adds the views a person can query without the library.
_TEXT_TABLES: Final = (
    """
    CREATE TABLE bodies_text (
        id INTEGER PRIMARY KEY,
        message_id TEXT NOT NULL UNIQUE,
        hash TEXT NOT NULL,
        tokenizer TEXT NOT NULL,
        tokens TEXT NOT NULL,
        body TEXT NOT NULL,
        digest TEXT NOT NULL DEFAULT ''
    )
    """,
    "INSERT INTO bodies_text (id, message_id, hash, tokenizer, tokens, body, digest) "
    "SELECT id, message_id, hash, tokenizer, CAST(tokens AS TEXT), CAST(body AS TEXT), digest FROM bodies",
    "DROP TABLE bodies",
    "ALTER TABLE bodies_text RENAME TO bodies",
    "DROP VIEW history",
    """
    CREATE TABLE events_text (
        session_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        seq INTEGER,
        message_id TEXT,
        recorded_at TEXT NOT NULL,
        payload TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (session_id, version)
    ) WITHOUT ROWID
    """,
    "INSERT INTO events_text (session_id, version, kind, seq, message_id, recorded_at, payload, hash) "
    "SELECT session_id, version, kind, seq, message_id, recorded_at, CAST(payload AS TEXT), hash FROM events",
    "DROP TABLE events",
    "ALTER TABLE events_text RENAME TO events",
    _INITIAL[2],
    _INITIAL[3],
)
# The first user message's opening: a session's title when none was given (`Transcript.title` reads
# it the same way: the message's first part, when it is text, without the whitespace around it).
_FIRST_REQUEST: Final = """(
        SELECT substr(trim(json_extract(b.body, '$.parts[0].text'), char(32, 9, 10, 13)), 1, 80)
        FROM events AS a JOIN bodies AS b ON b.message_id = a.message_id
        WHERE a.session_id = h.session_id AND a.kind = 'message_appended'
          AND json_extract(b.body, '$.role') = 'user' AND json_extract(b.body, '$.kind') IS NULL
          AND json_extract(b.body, '$.parts[0].text') IS NOT NULL
        ORDER BY a.version LIMIT 1
    )"""
# The `messages` view's time and preview columns, as every release's view has them.
_TIME_AND_PREVIEW: Final = """json_extract(b.body, '$.created_at') AS created_at,
        substr(coalesce(
            json_extract(b.body, '$.parts[0].text'),
            json_extract(b.body, '$.parts[0].content'),
            json_extract(b.body, '$.parts[0].name'),
            ''
        ), 1, 120) AS preview,"""
VIEWS: Final = (
    f"""
    CREATE VIEW sessions AS
    SELECT
        h.session_id AS session_id,
        coalesce((
            SELECT json_extract(t.payload, '$.title') FROM events AS t
            WHERE t.session_id = h.session_id AND t.kind IN ('session_started', 'title_set')
              AND json_extract(t.payload, '$.title') IS NOT NULL
            ORDER BY t.version DESC LIMIT 1
        ), {_FIRST_REQUEST}) AS title,
        (
            SELECT json_extract(s.payload, '$.parent_session_id') FROM events AS s
            WHERE s.session_id = h.session_id AND s.kind IN ('session_started', 'forked_from')
            ORDER BY s.version LIMIT 1
        ) AS parent_session_id,
        (SELECT min(recorded_at) FROM events AS e WHERE e.session_id = h.session_id) AS first_at,
        (SELECT max(recorded_at) FROM events AS e WHERE e.session_id = h.session_id) AS last_at,
        (
            SELECT count(*) FROM events AS e
            WHERE e.session_id = h.session_id AND e.kind = 'message_appended'
        ) AS messages,
        (
            SELECT coalesce(sum(j.value), 0)
            FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id, json_each(b.tokens) AS j
            WHERE e.session_id = h.session_id AND e.kind = 'message_appended'
        ) AS stored_tokens,
        h.version AS head_version,
        h.hash AS head_hash
    FROM heads AS h
    """,
    f"""
    CREATE VIEW messages AS
    SELECT
        e.session_id AS session_id,
        e.seq AS seq,
        e.message_id AS message_id,
        json_extract(b.body, '$.role') AS role,
        coalesce(json_extract(b.body, '$.kind'), 'message') AS kind,
        {_TIME_AND_PREVIEW}
        (SELECT coalesce(sum(value), 0) FROM json_each(b.tokens)) AS tokens,
        EXISTS (
            SELECT 1 FROM events AS m
            WHERE m.session_id = e.session_id AND m.kind = 'message_marked'
              AND json_extract(m.payload, '$.message_id') = e.message_id
              AND json_extract(m.payload, '$.truncated')
        ) AS truncated,
        EXISTS (
            SELECT 1 FROM events AS m
            WHERE m.session_id = e.session_id AND m.kind = 'message_marked'
              AND json_extract(m.payload, '$.message_id') = e.message_id
              AND json_extract(m.payload, '$.excluded')
        ) AS excluded
    FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id
    WHERE e.kind = 'message_appended'
    """,
    """
    CREATE VIEW compactions AS
    SELECT
        c.session_id AS session_id,
        c.version AS version,
        c.recorded_at AS recorded_at,
        json_extract(c.payload, '$.result.round_id') AS round_id,
        json_extract(c.payload, '$.result.outcome') AS outcome,
        json_extract(c.payload, '$.result.strategy') AS strategy,
        coalesce(json_extract(c.payload, '$.result.manual'), 0) AS manual,
        coalesce(json_extract(c.payload, '$.result.tokens_before'), 0) AS tokens_before,
        coalesce(json_extract(c.payload, '$.result.tokens_after'), 0) AS tokens_after,
        coalesce(json_extract(c.payload, '$.result.compacted_count'), 0) AS compacted,
        coalesce(json_extract(c.payload, '$.result.delta_count'), 0) AS summarized,
        coalesce(json_extract(c.payload, '$.result.fallback_used'), 0) AS fallback_used,
        json_extract(c.payload, '$.result.reason') AS reason,
        nullif(json_extract(c.payload, '$.result.path'), '') AS path,
        coalesce(json_extract(c.payload, '$.result.invalidated_tokens'), 0) AS invalidated_tokens,
        coalesce(json_extract(c.payload, '$.result.expected_calls'), 0) AS expected_calls,
        json_extract(c.payload, '$.result.payback_calls') AS payback_calls,
        coalesce(json_extract(c.payload, '$.result.summary_input_tokens'), 0) AS summary_input_tokens,
        coalesce(json_extract(c.payload, '$.result.summary_output_tokens'), 0) AS summary_output_tokens,
        nullif(json_extract(c.payload, '$.result.summarizer_error'), '') AS summarizer_error,
        nullif(json_extract(c.payload, '$.result.parse_error'), '') AS parse_error
    FROM events AS c
    WHERE c.kind = 'compaction_recorded'
      AND NOT EXISTS (
        SELECT 1 FROM events AS later
        WHERE later.session_id = c.session_id AND later.kind = 'compaction_recorded'
          AND later.version > c.version
          AND json_extract(later.payload, '$.result.round_id') = json_extract(c.payload, '$.result.round_id')
      )
    """,
)


# 0006: a full step's exclusions may be one `messages_excluded` event naming seq ranges; the marks
# of a message are found through an index on the id they name, not by reading every mark.
# (A payload damaged since it was stored is no JSON: the index and the views pass over it, never fail.
# The views compare it with `+message_id`: a value without the column's affinity, so the index is used.)
_MARKED_ID: Final = "CASE WHEN json_valid({p}) THEN json_extract({p}, '$.message_id') END"
EXCLUSION_RANGES: Final = (
    f"CREATE INDEX events_marks ON events (session_id, {_MARKED_ID.format(p='payload')}) "
    "WHERE kind = 'message_marked'",
    "CREATE INDEX events_exclusions ON events (session_id, version) WHERE kind = 'messages_excluded'",
    "DROP VIEW messages",
    f"""
    CREATE VIEW messages AS
    SELECT
        e.session_id AS session_id,
        e.seq AS seq,
        e.message_id AS message_id,
        json_extract(b.body, '$.role') AS role,
        coalesce(json_extract(b.body, '$.kind'), 'message') AS kind,
        {_TIME_AND_PREVIEW}
        (SELECT coalesce(sum(value), 0) FROM json_each(b.tokens)) AS tokens,
        EXISTS (
            SELECT 1 FROM events AS m INDEXED BY events_marks
            WHERE m.session_id = e.session_id AND m.kind = 'message_marked'
              AND {_MARKED_ID.format(p="m.payload")} = +e.message_id
              AND json_extract(m.payload, '$.truncated')
        ) AS truncated,
        EXISTS (
            SELECT 1 FROM events AS m INDEXED BY events_marks
            WHERE m.session_id = e.session_id AND m.kind = 'message_marked'
              AND {_MARKED_ID.format(p="m.payload")} = +e.message_id
              AND json_extract(m.payload, '$.excluded')
        ) OR EXISTS (
            SELECT 1 FROM events AS x INDEXED BY events_exclusions,
                json_each(CASE WHEN json_valid(x.payload) THEN x.payload ELSE '{{}}' END, '$.ranges') AS r
            WHERE x.session_id = e.session_id AND x.kind = 'messages_excluded'
              AND e.seq >= json_extract(r.value, '$[0]') AND e.seq < json_extract(r.value, '$[1]')
        ) AS excluded
    FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id
    WHERE e.kind = 'message_appended'
    """,
)


# 0007: the `sessions` view with what a person picks a session by: the format its import read (the
# `source` its `session_started` recorded, `<format>:<file name>`), and the first and last times of
# its own messages (their `created_at`, as the recording gave them: not when they were imported),
# normalised to UTC with millisecond precision; a session without messages falls back on its events.
_MESSAGE_TIME: Final = """(
        SELECT strftime('%Y-%m-%dT%H:%M:%fZ', {agg}(julianday(coalesce(json_extract(b.body, '$.created_at'),
            e.recorded_at))))
        FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id
        WHERE e.session_id = h.session_id AND e.kind = 'message_appended'
    )"""
_EVENT_TIME: Final = """(
        SELECT strftime('%Y-%m-%dT%H:%M:%fZ', {agg}(julianday(e.recorded_at))) FROM events AS e
        WHERE e.session_id = h.session_id
    )"""
_SOURCE: Final = """(
        SELECT json_extract(s.payload, '$.source') FROM events AS s
        WHERE s.session_id = h.session_id AND s.kind = 'session_started'
        ORDER BY s.version LIMIT 1
    )"""
SESSIONS_SELECT: Final = f"""
    SELECT
        h.session_id AS session_id,
        coalesce((
            SELECT json_extract(t.payload, '$.title') FROM events AS t
            WHERE t.session_id = h.session_id AND t.kind IN ('session_started', 'title_set')
              AND json_extract(t.payload, '$.title') IS NOT NULL
            ORDER BY t.version DESC LIMIT 1
        ), {_FIRST_REQUEST}) AS title,
        {_SOURCE} AS source,
        CASE WHEN instr({_SOURCE}, ':') > 0 THEN substr({_SOURCE}, 1, instr({_SOURCE}, ':') - 1)
            ELSE {_SOURCE} END AS source_format,
        (
            SELECT json_extract(s.payload, '$.parent_session_id') FROM events AS s
            WHERE s.session_id = h.session_id AND s.kind IN ('session_started', 'forked_from')
            ORDER BY s.version LIMIT 1
        ) AS parent_session_id,
        coalesce({_MESSAGE_TIME.format(agg="min")}, {_EVENT_TIME.format(agg="min")}) AS first_at,
        coalesce({_MESSAGE_TIME.format(agg="max")}, {_EVENT_TIME.format(agg="max")}) AS last_at,
        (
            SELECT count(*) FROM events AS e
            WHERE e.session_id = h.session_id AND e.kind = 'message_appended'
        ) AS messages,
        (
            SELECT coalesce(sum(j.value), 0)
            FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id, json_each(b.tokens) AS j
            WHERE e.session_id = h.session_id AND e.kind = 'message_appended'
        ) AS stored_tokens,
        h.version AS head_version,
        h.hash AS head_hash
    FROM heads AS h
    """
SESSIONS_VIEW: Final = f"CREATE VIEW sessions AS{SESSIONS_SELECT}"

# Full-text search, opt-in: built by the first search, then kept current as bodies are written. The
# text of a body is its parts' text: text and reasoning, tool results, and tool calls (name, input).
_BODY_TEXT: Final = """(
    SELECT group_concat(coalesce(
        json_extract(p.value, '$.text'),
        json_extract(p.value, '$.content'),
        json_extract(p.value, '$.name') || ' ' ||
            coalesce(json_extract(p.value, '$.raw_input'), json_extract(p.value, '$.input'), '')
    ), char(10))
    FROM json_each({body}, '$.parts') AS p
)"""
SEARCH_TABLE: Final = "message_text"
SEARCH_COLUMN: Final = "text"


def body_text(body: str) -> str:
    """The SQL expression of the text search indexes for a body column."""
    return _BODY_TEXT.format(body=body)


SEARCH: Final = (
    "CREATE VIRTUAL TABLE message_text USING fts5(text)",
    "INSERT INTO message_text (rowid, text) SELECT id, " + _BODY_TEXT.format(body="body") + " FROM bodies",
    "CREATE TRIGGER bodies_index_text AFTER INSERT ON bodies BEGIN "
    "INSERT INTO message_text (rowid, text) VALUES (NEW.id, " + _BODY_TEXT.format(body="NEW.body") + "); END",
    "CREATE INDEX events_message_id ON events (message_id) WHERE message_id IS NOT NULL",
)

SEARCH_TRIGGER: Final = SEARCH[2].split()[2]


def _json_text_and_views(conn: sqlite3.Connection) -> None:
    """0003: bodies, counts and payloads as JSON text (their bytes, and so every hash, unchanged); the
    `sessions`, `messages` and `compactions` views."""
    for statement in _TEXT_TABLES:
        conn.execute(statement)
    for table in APPEND_ONLY_TABLES:
        for statement in _guard_statements(table):
            conn.execute(statement)
    for statement in VIEWS:
        conn.execute(statement)


def _sessions_view_fork_parent(conn: sqlite3.Connection) -> None:
    """0004: the `sessions` view names a fork's parent (from its `forked_from` event, the first of its
    log; an imported sub-agent's from its `session_started`). Nothing stored changes."""
    conn.execute("DROP VIEW sessions")
    conn.execute(VIEWS[0])


def stored_bytes(value: object) -> bytes:
    """A stored value's bytes, whatever its SQL type (JSON text is the UTF-8 the hashes cover)."""
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


def _digest_of_row(body: object, tokens: object, tokenizer: object) -> str:
    """`record_digest` over a row's stored values (whatever their SQL type, so a damaged row still
    gets a digest, which `verify` then finds wrong)."""
    return record_digest(stored_bytes(body), stored_bytes(tokens), str(tokenizer))


ATTESTATION: Final = "0005_record_digests_in_the_chain"
EXCLUSION_RANGES_MIGRATION: Final = "0006_exclusion_ranges"
# Migrations that change nothing a reader needs: a reader (a read-only open, `verify`) reads a file
# that awaits them as it is (one without snapshots has none to load), and compares its schema with
# the one the migrations it records create.
SESSIONS_OWN_TIMES: Final = "0007_sessions_view_own_times"
SNAPSHOTS_MIGRATION: Final = "0008_snapshots"
REDACTION: Final = "0009_redaction_guards"
DERIVED_MIGRATION: Final = "0010_derived_message_facts"
SNAPSHOTS_BY_ROWID_MIGRATION: Final = "0011_snapshots_by_rowid"
SEQ_GUARD_MIGRATION: Final = "0012_seq_guard"
READ_AS_IS: Final = frozenset(
    (
        ATTESTATION,
        EXCLUSION_RANGES_MIGRATION,
        SESSIONS_OWN_TIMES,
        SNAPSHOTS_MIGRATION,
        REDACTION,
        DERIVED_MIGRATION,
        SNAPSHOTS_BY_ROWID_MIGRATION,
        SEQ_GUARD_MIGRATION,
    )
)


def _sessions_view_own_times(conn: sqlite3.Connection) -> None:
    """0007: the `sessions` view adds each session's source, source format, parent, stored tokens and
    the first and last times of its own messages (`SESSIONS_VIEW`). Nothing stored changes; a reader
    of a file that awaits it lists sessions with the view's query (`SESSIONS_SELECT`)."""
    conn.execute("DROP VIEW sessions")
    conn.execute(SESSIONS_VIEW)


# 0008: snapshots of each session's fold, which an open loads instead of folding the whole log. They
# are derived (rebuildable from the log, which `verify` checks them against), so no guard keeps them:
# a newer one replaces the older, and redaction may rewrite them.
_SNAPSHOT_COLUMNS: Final = """
        session_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        hash TEXT NOT NULL,
        payload TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (session_id, version)
    """
SNAPSHOTS: Final = (f"\n    CREATE TABLE snapshots ({_SNAPSHOT_COLUMNS}) WITHOUT ROWID\n    ",)


def _redaction_guards(conn: sqlite3.Connection) -> None:
    """0009: the guards that let a redaction or an erasure recorded in the log through (nothing
    stored changes)."""
    for statement in REDACTION_GUARDS:
        conn.execute(f"DROP TRIGGER {statement.split()[2]}")
        conn.execute(statement)


# 0010: what the `messages` view reports of a message, kept in small tables as bodies and marks are
# written, so its role, kind, tokens and flags are read without parsing a body's or a mark's JSON
# (the README's count by role at 20k messages went from ~220 ms to ~29 ms; `created_at` and
# `preview` are still read from the body): each body's role, kind and token total (`body_facts`, by
# the body's row id), each mark's message and flags (`mark_flags`, by its event) and each exclusion
# event's seq ranges (`excluded_ranges`, by its event and the range's place). They are derived:
# triggers keep them current through inserts, redactions and erasures, the migration fills them
# from what is stored, and `verify` compares them with the bodies and events they come from. A
# value that is no JSON (damaged since it was stored) gives NULLs there, so no write ever fails on
# it.
_JSON_AT: Final = "CASE WHEN json_valid({v}) THEN json_extract({v}, '{path}') END"
_TOKEN_TOTAL: Final = (
    "CASE WHEN json_valid({v}) THEN (SELECT coalesce(sum(value), 0) FROM json_each({v})) ELSE 0 END"
)


def _facts_of(row: str) -> str:
    """The `body_facts` values of a bodies row (`row`: NEW, OLD or a table alias)."""
    body, tokens = f"{row}.body", f"{row}.tokens"
    return (
        f"{row}.id, {_JSON_AT.format(v=body, path='$.role')}, {_JSON_AT.format(v=body, path='$.kind')}, "
        f"{_TOKEN_TOTAL.format(v=tokens)}"
    )


def _flags_of(row: str) -> str:
    """The `mark_flags` row of a `message_marked` event (`row`: NEW or a table alias)."""
    payload = f"{row}.payload"
    return (
        f"SELECT {row}.session_id, {row}.version, {_JSON_AT.format(v=payload, path='$.message_id')}, "
        f"{_JSON_AT.format(v=payload, path='$.truncated')}, {_JSON_AT.format(v=payload, path='$.excluded')}"
    )


def _ranges_of(row: str) -> str:
    """The `excluded_ranges` rows of a `messages_excluded` event (`row`: NEW or a table alias)."""
    return (
        f"SELECT {row}.session_id, {row}.version, coalesce(r.key, 0), "
        "CASE WHEN r.type = 'array' THEN json_extract(r.value, '$[0]') END, "
        "CASE WHEN r.type = 'array' THEN json_extract(r.value, '$[1]') END "
        f"FROM json_each(CASE WHEN json_valid({row}.payload) THEN {row}.payload ELSE '{{}}' END, "
        "'$.ranges') AS r"
    )


def _derive_from(row: str) -> str:
    """The statements that record what an events row (`row`: NEW) adds to the derived tables."""
    return (
        f"INSERT INTO mark_flags {_flags_of(row)} WHERE {row}.kind = 'message_marked'; "
        f"INSERT INTO excluded_ranges {_ranges_of(row)} WHERE {row}.kind = 'messages_excluded';"
    )


def _forget(row: str) -> str:
    """The statements that drop what an events row (`row`: OLD) added to the derived tables."""
    where = f"session_id = {row}.session_id AND version = {row}.version"
    return f"DELETE FROM mark_flags WHERE {where}; DELETE FROM excluded_ranges WHERE {where};"


_MARK_KINDS: Final = "('message_marked', 'messages_excluded')"
DERIVED_TABLES: Final = ("body_facts", "mark_flags", "excluded_ranges")
DERIVED: Final = (
    # (The copied values keep their JSON types: no column but the keys has an affinity to convert them.)
    "CREATE TABLE body_facts (id INTEGER PRIMARY KEY, role, kind, tokens NOT NULL)",
    """
    CREATE TABLE mark_flags (
        session_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        message_id,
        truncated,
        excluded,
        PRIMARY KEY (session_id, version)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX mark_flags_by_message ON mark_flags (session_id, message_id, truncated, excluded)",
    """
    CREATE TABLE excluded_ranges (
        session_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        part NOT NULL,
        start_seq,
        end_seq,
        PRIMARY KEY (session_id, version, part)
    ) WITHOUT ROWID
    """,
    "CREATE INDEX excluded_ranges_by_seq ON excluded_ranges (session_id, start_seq, end_seq)",
    f"INSERT INTO body_facts SELECT {_facts_of('b')} FROM bodies AS b",
    f"INSERT INTO mark_flags {_flags_of('m')} FROM events AS m WHERE m.kind = 'message_marked'",
    f"INSERT INTO excluded_ranges {_ranges_of('x')}, events AS x WHERE x.kind = 'messages_excluded'",
)
DERIVING_TRIGGERS: Final = (
    f"CREATE TRIGGER bodies_derive_insert AFTER INSERT ON bodies "
    f"BEGIN INSERT INTO body_facts VALUES ({_facts_of('NEW')}); END",
    f"CREATE TRIGGER bodies_derive_update AFTER UPDATE ON bodies "
    "BEGIN DELETE FROM body_facts WHERE id = OLD.id; "
    f"INSERT INTO body_facts VALUES ({_facts_of('NEW')}); END",
    "CREATE TRIGGER bodies_derive_delete AFTER DELETE ON bodies "
    "BEGIN DELETE FROM body_facts WHERE id = OLD.id; END",
    f"CREATE TRIGGER events_derive_insert AFTER INSERT ON events WHEN NEW.kind IN {_MARK_KINDS} "
    f"BEGIN {_derive_from('NEW')} END",
    f"CREATE TRIGGER events_derive_update AFTER UPDATE ON events WHEN OLD.kind IN {_MARK_KINDS} "
    f"OR NEW.kind IN {_MARK_KINDS} BEGIN {_forget('OLD')} {_derive_from('NEW')} END",
    f"CREATE TRIGGER events_derive_delete AFTER DELETE ON events WHEN OLD.kind IN {_MARK_KINDS} "
    f"BEGIN {_forget('OLD')} END",
)
DERIVING_SQL: Final = {statement.split()[2]: statement for statement in DERIVING_TRIGGERS}
# What the derived tables must hold, computed afresh from the bodies and events (`verify`).
DERIVED_EXPECTED: Final = {
    "body_facts": f"SELECT {_facts_of('b')} FROM bodies AS b",
    "mark_flags": f"{_flags_of('m')} FROM events AS m WHERE m.kind = 'message_marked'",
    "excluded_ranges": f"{_ranges_of('x')}, events AS x WHERE x.kind = 'messages_excluded'",
}
MESSAGES_VIEW: Final = f"""
    CREATE VIEW messages AS
    SELECT
        e.session_id AS session_id,
        e.seq AS seq,
        e.message_id AS message_id,
        f.role AS role,
        coalesce(f.kind, 'message') AS kind,
        {_TIME_AND_PREVIEW}
        coalesce(f.tokens, 0) AS tokens,
        EXISTS (
            SELECT 1 FROM mark_flags AS m
            WHERE m.session_id = e.session_id AND m.message_id = +e.message_id AND m.truncated
        ) AS truncated,
        EXISTS (
            SELECT 1 FROM mark_flags AS m
            WHERE m.session_id = e.session_id AND m.message_id = +e.message_id AND m.excluded
        ) OR EXISTS (
            SELECT 1 FROM excluded_ranges AS r
            WHERE r.session_id = e.session_id AND e.seq >= r.start_seq AND e.seq < r.end_seq
        ) AS excluded
    FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id LEFT JOIN body_facts AS f ON f.id = b.id
    WHERE e.kind = 'message_appended'
    """


def _derived_message_facts(conn: sqlite3.Connection) -> None:
    """0010: the derived tables, filled from what is stored, their triggers, and the `messages` view
    that reads them (its columns and meaning unchanged)."""
    for statement in (*DERIVED, *DERIVING_TRIGGERS, "DROP VIEW messages", MESSAGES_VIEW):
        conn.execute(statement)


# 0011: snapshots in a table with rowids. In a WITHOUT ROWID table the payload is part of the key,
# so finding the newest snapshot's version read the older one's whole payload too (246 KB for a
# 10k-message session whose view is 62 KB); now the versions are read from the key's index and only
# the payload taken is read.
SNAPSHOTS_BY_ROWID: Final = (
    f"CREATE TABLE snapshots_by_rowid ({_SNAPSHOT_COLUMNS})",
    "INSERT INTO snapshots_by_rowid (session_id, version, hash, payload, digest) "
    "SELECT session_id, version, hash, payload, digest FROM snapshots",
    "DROP TABLE snapshots",
    "ALTER TABLE snapshots_by_rowid RENAME TO snapshots",
)


def _build_migrations() -> list[tuple[str, Migration]]:
    initial = list(_INITIAL)
    for table in APPEND_ONLY_TABLES:
        initial.extend(_guard_statements(table))
    return [
        ("0001_initial", _statements(initial)),
        ("0002_record_digests_and_heads", _record_digests_and_heads),
        ("0003_json_text_and_views", _json_text_and_views),
        ("0004_sessions_view_fork_parent", _sessions_view_fork_parent),
        # Appends carry their body's record digest from here on; the event log attests the bodies
        # appended before (`EventLog.attest`) right after this migration: no table changes.
        (ATTESTATION, _statements([])),
        (EXCLUSION_RANGES_MIGRATION, _statements(list(EXCLUSION_RANGES))),
        (SESSIONS_OWN_TIMES, _sessions_view_own_times),
        (SNAPSHOTS_MIGRATION, _statements(list(SNAPSHOTS))),
        (REDACTION, _redaction_guards),
        (DERIVED_MIGRATION, _derived_message_facts),
        (SNAPSHOTS_BY_ROWID_MIGRATION, _statements(list(SNAPSHOTS_BY_ROWID))),
        (SEQ_GUARD_MIGRATION, _statements(list(SEQ_GUARDS))),
    ]


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
    pending = migrations.pending(done, KNOWN, table=MIGRATIONS_TABLE, store="this file")
    if pending and not done:
        foreign = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' LIMIT 1"
        ).fetchone()
        if foreign is not None:
            raise SchemaError(
                f"this database is not a transcript store (it has table {foreign[0]!r} and no "
                "transcript-store migrations)"
            )
    if pending and not can_migrate and not set(pending) <= READ_AS_IS:
        # (Those change no table: a reader of a file that awaits them reads it as it is.)
        raise SchemaError(
            f"this file needs migration {pending[0]!r}; open it once read-write to migrate it "
            "(a read-only open never migrates)"
        )
    return pending


def readable_as_is(applied: tuple[str, ...]) -> bool:
    """Whether a file recording these migrations is one this release reads: all of them, or all but
    some that change no table (`READ_AS_IS`), in their order."""
    return migrations.readable_as_is(applied, KNOWN, READ_AS_IS)


def migrate(conn: sqlite3.Connection, *, only: tuple[str, ...] | None = None) -> None:
    """Apply pending migrations under the write lock (several processes may open a new file at once);
    `only`: just these (what a file that records them holds, for comparing schemas).

    A file with nothing pending (every open but a file's first after an upgrade) is checked and left
    as it is without loading `sqlite_utils` (and click, dateutil, pluggy with it: ~5,600 objects that
    every later garbage collection of the process would walk)."""
    if only is None and not check(conn, can_migrate=True):
        return
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for name, migration in MIGRATIONS:
        if only is None or name in only:
            migrations(name=name)(_Runner(migration))
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
    """A migration as `sqlite_utils.Migrations` calls it: with a `Database` over our connection."""

    def __init__(self, migration: Migration) -> None:
        self.migration = migration
        self.__name__ = "migration"

    def __call__(self, db: Database, /) -> None:
        self.migration(db.conn)


# What SQLite itself adds to a schema, and the migrations table whose SQL sqlite-utils writes (it may
# differ between sqlite-utils releases): present or not, never compared.
_UNCOMPARED: Final = ("sqlite_", MIGRATIONS_TABLE, f"idx_{MIGRATIONS_TABLE}")
LOG_TABLES: Final = ("bodies", "events", "heads")
_RELEASE: dict[tuple[bool, tuple[str, ...] | None], dict[tuple[str, str], str]] = {}


def release_objects(*, search: bool, applied: tuple[str, ...] | None = None) -> dict[tuple[str, str], str]:
    """Every table, index, trigger and view this release's migrations create (and search, when it
    is on), by (type, name), with its SQL as SQLite keeps it: built once, in memory, by running them
    (with `applied`, only those a file records: one that awaits a migration changing no table)."""
    key = (search, applied)
    if key not in _RELEASE:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            migrate(conn, only=applied)
            if search:
                for statement in SEARCH:
                    conn.execute(statement)
            _RELEASE[key] = objects(conn)
        finally:
            conn.close()
    return _RELEASE[key]


def objects(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """The schema's objects by (type, name) with their SQL, but those SQLite and sqlite-utils own."""
    return {
        (kind, name): sql or ""
        for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master")
        if not str(name).startswith(_UNCOMPARED)
    }


def foreign_triggers(conn: sqlite3.Connection) -> list[str]:
    """Triggers on the tables a write reaches (the log's, the derived ones its triggers fill, the
    snapshots) that this release did not create (or whose SQL it did not write): a write could be
    changed, dropped or joined by another by them, so none is made while one is there."""
    known = {**GUARD_SQL, **DERIVING_SQL, SEARCH_TRIGGER: SEARCH[2]}
    tables = ", ".join(f"'{name}'" for name in (*LOG_TABLES, *DERIVED_TABLES, "snapshots"))
    rows = conn.execute(
        f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({tables})"
    )
    return [name for name, sql in rows if known.get(name) != sql]
