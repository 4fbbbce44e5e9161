"""Imported message ids live in their session's namespace, so no file can squat another's ids.

Bodies are shared by id across the whole store, and the same id with other content is refused
(`DuplicateMessage`). An importer's ids come from the file — Claude Code's record uuids, for one — so
a file that reused a real recording's ids with other content used to make that recording impossible
to import anywhere in the store. An import now stores `<session>/<local id>` with `%` and `/` escaped
in the session id: two sessions can never store one id. A session imported by an earlier release keeps
the ids it has, so importing its file again still adds nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from tests.conftest import PROJECT_ROOT
from transcript import Store, verify
from transcript.session import importing
from transcript.session.importing import namespaced

CORPUS = PROJECT_ROOT / "fixtures" / "corpus"
STORES = PROJECT_ROOT / "fixtures" / "stores"
RECORDING = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"


def _squatter(tmp_path: Path) -> Path:
    """A Claude Code file of another session that reuses the recording's uuids with other content."""
    out = []
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "sessionId" in record:
            record["sessionId"] = "squatter"
        message = record.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            message["content"] = "something else entirely"
        out.append(json.dumps(record))
    path = tmp_path / "squatter.jsonl"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def test_a_file_reusing_a_recordings_ids_cannot_keep_it_out(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        squatted = store.import_file(_squatter(tmp_path))
        report = store.import_file(RECORDING)  # before: DuplicateMessage, nothing imported
        assert report.sessions[0].appended == report.sessions[0].messages > 0
        assert {s.session_id for s in squatted.sessions}.isdisjoint(s.session_id for s in report.sessions)
        again = store.import_file(RECORDING)
        assert [s.appended for s in again.sessions] == [0] * len(again.sessions)
    assert verify(tmp_path / "t.db").ok


def test_stored_ids_are_in_their_sessions_namespace(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        report = store.import_file(RECORDING)
        for session in report.sessions:
            ids = [m.id for m in store.session(session.session_id).stored_messages()]
            namespace = session.session_id.replace("%", "%25").replace("/", "%2F") + "/"
            assert ids and all(i.startswith(namespace) for i in ids)
    assert any("/" in s.session_id for s in report.sessions)  # sub-agents: their namespace is escaped


def test_ids_of_formats_that_namespace_them_already_are_unchanged(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        (session,) = store.import_file(CORPUS / "sweagent_marshmallow-1867_fc.traj").sessions
        ids = [m.id for m in store.session(session.session_id).stored_messages()]
    assert ids[:3] == [f"{session.session_id}/{n}" for n in range(3)]


def test_a_file_imported_by_release_0_1_0_imports_again_with_nothing_new(tmp_path: Path) -> None:
    target = tmp_path / "old.db"
    for suffix in ("", "-wal", "-shm"):
        source = STORES / f"release-0.1.0.db{suffix}"
        if source.exists():
            shutil.copy(source, tmp_path / f"old.db{suffix}")
    with Store.open(target) as store:
        before = {s.session_id: s.head_hash for s in store.sessions()}
        report = store.import_file(RECORDING)
        assert report.sessions and [s.appended for s in report.sessions] == [0] * len(report.sessions)
        assert {s.session_id: s.head_hash for s in store.sessions()} == before
    assert verify(target).ok


_IDS = st.text(alphabet="ab/%", max_size=6)


@given(_IDS.filter(bool), _IDS, _IDS.filter(bool), _IDS)
def test_two_sessions_never_store_one_id(first: str, one: str, second: str, other: str) -> None:
    if namespaced(first, one) == namespaced(second, other):
        assert first == second
        assert _local(first, one) == _local(second, other)


def _local(session_id: str, message_id: str) -> str:
    return message_id.removeprefix(f"{session_id}/")


@pytest.mark.parametrize(
    "recording",
    [
        RECORDING,
        PROJECT_ROOT / "fixtures" / "formats" / "codex" / "rollout_0.39.0_vibecodingtracker_head.jsonl",
    ],
    ids=["claude-code", "codex-ending-on-an-unanswered-call"],
)
def test_a_file_stored_with_the_files_own_ids_imports_again_with_nothing_new(
    tmp_path: Path, recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a store written before namespaces (today's main) holds it: every id as the file has it."""
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        with monkeypatch.context() as before:
            before.setattr(importing, "in_namespace", lambda session: session)
            first = store.import_file(recording)
        stored = {
            s.session_id: [m.id for m in store.session(s.session_id).stored_messages()]
            for s in first.sessions
        }
        again = store.import_file(recording)
        assert [s.appended for s in again.sessions] == [0] * len(again.sessions)
        assert all(s.superseded == () for s in again.sessions)
        assert {s: [m.id for m in store.session(s).stored_messages()] for s in stored} == stored
