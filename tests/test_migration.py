"""A file written by the previous release (0.1.0) migrates, and keeps every hash and every view.

`fixtures/stores/release-0.1.0.db` was written by release 0.1.0, and
`release-0.1.0.views.json` holds what that release rendered for each of its sessions (head version
and hash, the sha256 of the view's canonical JSON, its tokens and source). Opening a copy read-write
applies this release's migrations; afterwards `verify` passes and nothing it hashed has changed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT
from transcript import SchemaError, Store, verify
from transcript.model.events import RecordsAttested
from transcript.model.hashing import record_digest
from transcript.store import schema

pytestmark = pytest.mark.sqlite_only("migrates SQLite files written by earlier releases")

STORES = PROJECT_ROOT / "fixtures" / "stores"
OLD = STORES / "release-0.1.0.db"
RENDERED = json.loads((STORES / "release-0.1.0.views.json").read_text())


def _rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    """Rows with every text value as its UTF-8 bytes: the old release stored BLOBs, this one JSON
    text, and the bytes are what every hash covers."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(query).fetchall()
    finally:
        conn.close()
    return [tuple(v.encode() if isinstance(v, str) else v for v in row) for row in rows]


@pytest.fixture
def old_copy(tmp_path: Path) -> Path:
    target = tmp_path / "old.db"
    shutil.copy(OLD, target)
    return target


def test_a_read_only_open_of_the_old_file_refuses_to_migrate(old_copy: Path) -> None:
    with pytest.raises(SchemaError, match="0002"):
        Store.open(old_copy, readonly=True)


def test_the_old_file_migrates_keeping_every_hash_and_every_view(old_copy: Path) -> None:
    bodies = _rows(old_copy, "SELECT message_id, hash, tokenizer, tokens, body FROM bodies ORDER BY id")
    events = _rows(old_copy, "SELECT session_id, version, hash FROM events ORDER BY session_id, version")
    with Store.open(old_copy) as store:
        assert [s.session_id for s in store.sessions()] == sorted(RENDERED)
        for info in store.sessions():
            old = RENDERED[info.session_id]
            t = store.session(info.session_id)
            view = t.visible_messages()
            # The migration attested the old bodies' records: one event on top of the old head.
            (attested,) = [r.event for r in t.events.read_log(info.session_id)[0][old["version"] :]]
            assert isinstance(attested, RecordsAttested) and info.version == old["version"] + 1
            assert {m for m, _ in attested.records} == {e.message.id for e in t.messages().entries}
            assert hashlib.sha256(view.canonical_json()).hexdigest() == old["view_sha256"]
            assert (view.tokens, view.source, len(view)) == (
                old["view_tokens"],
                old["view_source"],
                old["messages"],
            )
    migrated = _rows(old_copy, "SELECT message_id, hash, tokenizer, tokens, body FROM bodies ORDER BY id")
    assert migrated == bodies
    kept = _rows(
        old_copy,
        "SELECT session_id, version, hash FROM events WHERE kind <> 'records_attested' "
        "ORDER BY session_id, version",
    )
    assert kept == events
    digests = _rows(old_copy, "SELECT digest FROM bodies")
    assert digests and all(len(d) == 64 for (d,) in digests)
    types = _rows(old_copy, "SELECT DISTINCT typeof(body), typeof(tokens) FROM bodies")
    assert types == [(b"text", b"text")]
    assert _rows(old_copy, "SELECT DISTINCT typeof(payload) FROM events") == [(b"text",)]
    report = verify(old_copy)
    assert report.ok, report.problems
    assert report.schema == schema.KNOWN and report.unattested == ()
    # A head kept before the attestation is an ancestor with only the attestation after it.
    assert verify(old_copy, expect_heads={sid: old["head_hash"] for sid, old in RENDERED.items()}).ok


def test_an_attested_file_names_an_edit_its_old_digest_column_hides(old_copy: Path) -> None:
    Store.open(old_copy).close()  # migrates and attests
    ((message_id, body, tokens, tokenizer),) = _rows(
        old_copy, "SELECT message_id, body, tokens, tokenizer FROM bodies ORDER BY id LIMIT 1"
    )
    message = json.loads(body)
    message["metadata"] = {"planted": True}
    edited = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    conn = sqlite3.connect(old_copy)
    for name in schema.GUARDS:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(  # resealed: the row agrees with its own digest again
        "UPDATE bodies SET body = ?, digest = ? WHERE message_id = ?",
        (edited.decode(), record_digest(edited, tokens, tokenizer.decode()), message_id.decode()),
    )
    for sql in schema.GUARD_SQL.values():
        conn.execute(sql)
    conn.commit()
    conn.close()
    assert "body_record" in {p.code for p in verify(old_copy).problems}


def test_a_file_never_attested_verifies_read_only_and_says_so(
    old_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Migrated by the release before this one (every migration but the attestation), then left.
    with monkeypatch.context() as before:
        upto = schema.KNOWN.index(schema.ATTESTATION)
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:upto])
        before.setattr(schema, "KNOWN", schema.KNOWN[:upto])
        Store.open(old_copy).close()
    report = verify(old_copy)
    assert report.ok and sorted(report.unattested) == sorted(RENDERED)
    with Store.open(old_copy, readonly=True) as store:  # read-only, as before: nothing to migrate for it
        assert [s.session_id for s in store.sessions()] == sorted(RENDERED)
    Store.open(old_copy).close()  # the first read-write open attests
    assert verify(old_copy).unattested == ()


def test_a_migrated_file_keeps_working(old_copy: Path) -> None:
    with Store.open(old_copy) as store:
        t = store.session("sim/pydicom")
        before = t.visible_messages().canonical_json()
        t.compact(budget_tokens=2_000, manual=True)
        assert t.visible_messages().canonical_json() != before
        fork = store.fork("sim/marshmallow", new_session_id="after-migration")
        assert (
            fork.visible_messages().canonical_json()
            == store.session("sim/marshmallow").visible_messages().canonical_json()
        )
    assert verify(old_copy).ok
