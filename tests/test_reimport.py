"""A file imported by an earlier release imports again with nothing new and no error.

This release maps some records otherwise than the releases before it (Codex's encrypted reasoning is
kept in its reasoning part instead of metadata, a valid JSON argument string is kept as written): only
new imports get the new form. Stored bodies keep their bytes, so importing the same files again into a
store the old release wrote appends nothing, fails nowhere, and leaves every view as it was.
"""

from __future__ import annotations

import runpy
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CORPUS, PROJECT_ROOT
from transcript import Store, verify

STORES = PROJECT_ROOT / "fixtures" / "stores"
# The files the fixture store was built from, as its build script names them.
sources: Callable[[], list[Path]] = runpy.run_path(str(STORES / "make_imports_4ca77bf.py"))["sources"]


def _views(store: Store) -> dict[str, bytes]:
    return {
        info.session_id: store.session(info.session_id, create=False).visible_messages().canonical_json()
        for info in store.sessions()
    }


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("imports-4ca77bf.db", sources()),
        ("release-0.1.0.db", [CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"]),
    ],
)
def test_files_an_earlier_release_imported_import_again_with_nothing_new(
    name: str, files: list[Path], tmp_path: Path
) -> None:
    path = tmp_path / name
    shutil.copyfile(STORES / name, path)
    Store.open(path).close()  # migrates (and attests) the earlier release's file
    assert verify(path).ok  # its marks predate the rule that a record explains each: they pass
    store = Store.open(path)
    before = _views(store)
    appended = {}
    for file in files:
        for session in store.import_file(file).sessions:
            appended[session.session_id] = session.appended
    assert appended and set(appended.values()) == {0}
    assert _views(store) == before
    store.close()
    assert verify(path).ok  # and the import added nothing verify would name


def test_the_old_store_holds_the_old_forms(tmp_path: Path) -> None:
    """The fixture is what this test needs: bodies in the forms this release no longer writes."""
    shutil.copyfile(STORES / "imports-4ca77bf.db", tmp_path / "old.db")
    store = Store.open(tmp_path / "old.db")  # a copy: opening it read-write migrates it
    messages = [
        m for info in store.sessions() for m in store.session(info.session_id, create=False).stored_messages()
    ]
    assert any("encrypted_reasoning" in (m.metadata or {}) for m in messages)
    assert not any(getattr(c, "raw_arguments", None) for m in messages for c in m.tool_calls)
    fresh = Store.open(":memory:")
    fresh_messages = [
        m
        for path in sources()
        for s in fresh.import_file(path).sessions
        for m in fresh.session(s.session_id, create=False).stored_messages()
    ]
    assert any(c.raw_arguments for m in fresh_messages for c in m.tool_calls)
    assert not any("encrypted_reasoning" in (m.metadata or {}) for m in fresh_messages)


def test_a_mark_forged_after_the_migration_is_still_named(tmp_path: Path) -> None:
    from tests.test_seed_features import _forge
    from transcript.model.events import MessageMarked

    path = tmp_path / "old.db"
    shutil.copyfile(STORES / "imports-4ca77bf.db", path)
    with Store.open(path) as store:  # migrates and attests: from here on every mark needs its record
        session = store.sessions()[0].session_id
        victim = store.session(session).stored_messages()[0].id
        _forge(store, session, MessageMarked(message_id=victim, excluded=True))
    (problem,) = verify(path).problems
    assert (problem.code, problem.session_id, problem.message_id) == ("mark_unexplained", session, victim)
