"""Importing a session file while its agent still writes it (issue 41): the lines written whole are
imported, the half-written last line waits for the next import (said on stderr), and the grown file's
next import adds the rest — the same history as importing the finished file at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tests.test_cli import run
from transcript import Store, verify
from transcript.formats import FormatError, parse
from transcript.formats.growing import noting_partial_lines, whole_lines
from transcript.model.errors import InvalidArgument

CLAUDE = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"
FORMATS = CLAUDE.parents[1] / "formats"


def _cut_mid_line(source: Path, target: Path, line: int) -> tuple[bytes, int]:
    """The first `line - 1` lines of `source` and half of line `line` (no newline), written to
    `target`; returns the whole file's bytes and how many of them were written."""
    data = source.read_bytes()
    lines = data.split(b"\n")
    assert len(lines[line - 1]) > 10
    start = sum(len(text) + 1 for text in lines[: line - 1])
    cut = start + len(lines[line - 1]) // 2
    target.write_bytes(data[:cut])
    return data, cut


def _views(store: Store) -> dict[str, bytes]:
    """Each session's model view (a synthetic result a real one superseded is kept, out of the view)."""
    return {
        info.session_id: store.session(info.session_id, create=False).visible_messages().canonical_json()
        for info in store.sessions()
    }


@pytest.mark.parametrize("line", [5, 23])
def test_a_claude_code_file_cut_in_a_line_imports_its_whole_lines_then_the_rest(
    tmp_path: Path, line: int
) -> None:
    growing = tmp_path / CLAUDE.name
    whole, _ = _cut_mid_line(CLAUDE, growing, line)
    db = tmp_path / "t.db"
    with Store.open(db) as store:
        first = store.import_file(growing)
        assert [p.line for p in first.partial_lines] == [line]
        assert first.partial_lines[0].path == str(growing)
        assert first.messages > 0
        growing.write_bytes(whole)  # the agent wrote on
        second = store.import_file(growing)
        assert second.partial_lines == ()
        assert sum(s.appended for s in second.sessions) > 0
        grown = _views(store)
    assert verify(db).ok
    with Store.open(tmp_path / "at-once.db") as store:
        store.import_file(CLAUDE)
        at_once = _views(store)
    assert grown == at_once


def test_the_cli_says_on_stderr_which_line_waits(tmp_path: Path) -> None:
    growing = tmp_path / "session.jsonl"
    _cut_mid_line(CLAUDE, growing, 23)
    result = run(["import", growing, "--db", tmp_path / "t.db"])
    assert "line 23 is incomplete" in result.stderr
    assert "line 23" not in result.stdout


def test_whole_lines_keeps_a_last_record_without_its_newline_and_every_document() -> None:
    records = b'{"a": 1}\n{"b": 2}'
    assert whole_lines("x", records) == records  # a whole record: the newline is only missing
    assert whole_lines("x", b'{"a": 1}\n{"b": ') == b'{"a": 1}\n'
    document = b'[\n  {"a": 1},\n  {"b": 2}\n]'
    assert whole_lines("x", document) == document
    cut_document = b'[\n  {"a": 1},\n  {"b": '
    assert whole_lines("x", cut_document) == cut_document  # refused by its importer, never cut
    with noting_partial_lines() as noted:
        whole_lines("x", b'{"a": 1}\n\n{"b": ')
    assert [(p.line, p.bytes) for p in noted.values()] == [(3, len(b'{"b": '))]


def test_a_cut_json_document_is_still_refused(tmp_path: Path) -> None:
    traj = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
    cut = tmp_path / "run.traj"
    cut.write_bytes(traj.read_bytes()[: traj.stat().st_size // 2])
    with pytest.raises(FormatError):
        parse(cut, "swe-agent")


def test_a_file_of_one_half_written_line_imports_nothing(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_bytes(CLAUDE.read_bytes().split(b"\n")[0][:40])
    with Store.open(tmp_path / "t.db") as store:
        with pytest.raises((FormatError, InvalidArgument)):
            store.import_file(one, "claude-code")
        assert store.sessions() == []
