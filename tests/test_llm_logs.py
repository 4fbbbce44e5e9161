"""`llm`'s logs.db as an import (format `llm-logs`), and `to_llm` / `from_llm` with `llm`'s own classes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("llm")

from llm.parts import AttachmentPart, Message as LlmMessage, TextPart as LlmText

from tests.conftest import PROJECT_ROOT
from tests.llm_chat import make_logs
from transcript import Store, Transcript
from transcript.formats import FormatError, detect_format, parse
from transcript.integrations.llm import from_llm, to_llm
from transcript.model.errors import InvalidMessage, UnsupportedItem

FIXTURE = PROJECT_ROOT / "fixtures" / "formats" / "llm-logs" / "logs.db"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_conversation_made_with_llm_imports_and_llm_prompts_from_its_view(tmp_path: Path) -> None:
    (tmp_path / "llm").mkdir()
    logs = tmp_path / "llm" / "logs.db"
    made = make_logs(logs)
    digest = _digest(logs)
    assert detect_format(logs) == "llm-logs"

    store = Store.open(tmp_path / "transcript.db")
    report = store.import_file(logs)
    assert report.messages == 9
    assert [p.name for p in (tmp_path / "llm").iterdir()] == ["logs.db"]  # no -wal, no -shm beside it
    assert _digest(logs) == digest
    (session,) = [s.session_id for s in store.sessions()]
    store.close()

    with Transcript.open(tmp_path / "transcript.db", session_id=session) as t:
        stored = t.stored_messages()
        # every message the model was sent, in order, as llm logged them
        assert [m.to_dict() for m in to_llm(stored[:-1])] == [m.to_dict() for m in made.seen[-1]]
        assert len(t.billing().calls) == 4  # each turn's tokens, on the message it ended with
        t.compact(budget_tokens=150)
        view = t.visible_messages(record=True)
        assert view.tokens < t.stored_tokens  # the tool result was shortened

    response = made.prompt("one more question", messages=to_llm(view))
    assert response.text() == f"I was sent {len(view.messages) + 1} messages."
    sent = made.seen[-1]
    assert [m.to_dict() for m in sent[:-1]] == [m.to_dict() for m in to_llm(view)]
    assert sent[-1].to_dict() == {"role": "user", "parts": [{"type": "text", "text": "one more question"}]}
    assert [m.role for m in sent] == [m.role for m in view.messages] + ["user"]


def test_the_fixture_imports_with_its_thread_and_usage() -> None:
    (session,) = parse(FIXTURE, "llm-logs")
    assert session.session_id.startswith("llm-") and session.title == "please read app.py"
    assert [m.role for m in session.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert session.messages[2].tool_calls[0].id == "call_1"
    assert session.messages[3].tool_results[0].call_id == "call_1"
    assert {u.model for u in session.usage.values()} == {"fake-coder"}
    assert not session.repairs


def test_views_and_llm_messages_convert_both_ways() -> None:
    (session,) = parse(FIXTURE, "llm-logs")
    assert [m.parts for m in from_llm(to_llm(session.messages))] == [m.parts for m in session.messages]
    as_dicts = [m.to_dict() for m in to_llm(session.messages)]
    assert [m.parts for m in from_llm(as_dicts)] == [m.parts for m in session.messages]


def test_an_llm_part_with_no_form_here_is_refused_naming_it() -> None:
    picture = LlmMessage(role="user", parts=[LlmText(text="look"), AttachmentPart()])
    with pytest.raises(UnsupportedItem, match=r"messages\[1\]: part 1"):
        from_llm([LlmMessage(role="user", parts=[LlmText(text="hi")]), picture])
    with pytest.raises(UnsupportedItem, match="without the id of its call"):
        from_llm([{"role": "tool", "parts": [{"type": "tool_result", "name": "x", "output": "y"}]}])
    with pytest.raises(InvalidMessage, match=r"messages\[0\] is not an llm message"):
        from_llm(["hello"])


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "logs.db"
    target.write_bytes(FIXTURE.read_bytes())
    return target


def _edit(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql)
    db.close()


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        (
            "update parts set type = 'attachment' where position = 0 and type = 'text' and text like 'what%'",
            r"message 5 .*part 0: a part of type 'attachment'",
        ),
        (
            "update parts set payload = '"
            + json.dumps({"name": "read_file", "output": "x"})
            + "' where type = 'tool_result'",
            "without the id of its call",
        ),
        ("update parts set payload = 'not json' where type = 'tool_call'", "not JSON"),
        ("delete from messages where role = 'system'", "is missing"),
    ],
)
def test_a_damaged_logs_db_is_a_format_error_and_nothing_is_stored(
    tmp_path: Path, sql: str, match: str
) -> None:
    logs = _copy(tmp_path)
    _edit(logs, "pragma foreign_keys = off")
    with sqlite3.connect(logs) as db:
        db.execute("pragma foreign_keys = off")
        db.execute(sql)
    db.close()
    store = Store.open(tmp_path / "transcript.db")
    with pytest.raises(FormatError, match=match):
        store.import_file(logs)
    assert store.sessions() == []
    store.close()


def test_what_is_not_an_llm_logs_db_is_named(tmp_path: Path) -> None:
    text = tmp_path / "notes.json"
    text.write_text(json.dumps({"messages": []}))
    with pytest.raises(FormatError, match="not an SQLite file"):
        parse(text, "llm-logs")
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.execute("create table responses (id text, prompt text, response text)")
    db.close()
    with pytest.raises(FormatError, match=r"before 0\.36"):
        parse(old, "llm-logs")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("create table things (id text)")
    db.close()
    with pytest.raises(FormatError, match="no threads, messages and parts"):
        parse(other, "llm-logs")
    assert detect_format(other) == "llm-logs"  # any SQLite file is tried as one, and named as not one
