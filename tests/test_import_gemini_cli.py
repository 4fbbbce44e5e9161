"""Importing Gemini CLI chat recordings: the JSON object and the newer JSON lines, tool calls and their
results, notices kept out of views, rewritten records, malformed input refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT
from tests.import_checks import assert_paired, refused
from transcript import ReasoningPart, Store, ToolCall
from transcript.formats import parse

FIXTURES = PROJECT_ROOT / "fixtures" / "formats" / "gemini-cli"
FILES = sorted(p for p in FIXTURES.iterdir() if p.suffix in (".json", ".jsonl"))
BUILT = FIXTURES / "chat_tool_calls_built.json"
LINES = FIXTURES / "chat_2026-04_vibecodingtracker_head.jsonl"


def _messages(path: Path) -> list[dict[str, Any]]:
    """The chat's message records, the last write of each id in the place of its first."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return list(json.loads(text)["messages"])
    records: dict[str, dict[str, Any]] = {}
    for line in text.splitlines()[1:]:
        if line.strip() and "id" in (record := json.loads(line)):
            records[record["id"]] = record
    return list(records.values())


def _counts(path: Path) -> tuple[int, int, int]:
    """(messages, tool calls, notices): one message per record, plus one result per tool call."""
    records = _messages(path)
    calls = sum(len(r.get("toolCalls") or []) for r in records)
    notices = sum(1 for r in records if r["type"] in ("info", "error", "warning"))
    return len(records) + calls, calls, notices


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_counts_equal_a_count_of_the_raw_file(path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path)
    assert report.format == "gemini-cli"
    (session,) = report.sessions
    messages, calls, notices = _counts(path)
    assert (session.messages, session.tool_calls, session.hidden) == (messages, calls, notices)
    transcript = store.session(session.session_id)
    assert_paired(transcript.stored_messages())
    assert len(transcript.visible_messages()) == messages - notices


def test_tool_calls_and_results_and_thoughts() -> None:
    (session,) = parse(BUILT, "gemini-cli")
    step = next(m for m in session.messages if m.tool_calls)
    raw = next(r for r in _messages(BUILT) if r.get("toolCalls"))
    assert [(c.id, c.name, c.input) for c in step.tool_calls] == [
        (c["id"], c["name"], c["args"]) for c in raw["toolCalls"]
    ]
    assert isinstance(step.parts[0], ReasoningPart) and raw["thoughts"][0]["subject"] in step.parts[0].text
    index = session.messages.index(step)
    results = [m.tool_results[0] for m in session.messages[index + 1 : index + 3]]
    assert [(r.call_id, r.is_error) for r in results] == [
        (c["id"], c["status"] == "error") for c in raw["toolCalls"]
    ]
    assert results[1].content == raw["toolCalls"][1]["result"][0]["functionResponse"]["response"]["error"]
    assert step.metadata == {"model": raw["model"], "tokens": raw["tokens"]}


def test_notices_are_stored_as_meta_and_named() -> None:
    (session,) = parse(BUILT, "gemini-cli")
    notices = [r["id"] for r in _messages(BUILT) if r["type"] in ("info", "error")]
    assert sorted(session.hidden) == sorted(notices)
    assert [r.message_id for r in session.repairs if r.kind == "hidden_from_view"] == notices
    assert {m.kind for m in session.messages if m.id in notices} == {"meta"}


def test_a_rewritten_record_replaces_the_earlier_one_in_its_place(tmp_path: Path) -> None:
    lines = LINES.read_text(encoding="utf-8").splitlines()
    gemini = json.loads(next(line for line in lines if '"type":"gemini"' in line))
    response = {"functionResponse": {"id": "read-1", "name": "read_file", "response": {"output": "# calc"}}}
    call: dict[str, Any] = {"id": "read-1", "name": "read_file", "args": {"path": "README.md"}}
    call |= {"status": "success", "result": [response]}
    lines.append(json.dumps({**gemini, "toolCalls": [call]}))
    lines.append(json.dumps({"$set": {"lastUpdated": "2026-04-23T12:54:00.000Z"}}))
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (session,) = parse(path, "gemini-cli")
    ids = [m.id for m in session.messages]
    assert ids == [*ids[:3], f"{gemini['id']}/read-1"] and ids[2] == gemini["id"]
    assert session.messages[2].tool_calls[0].id == "read-1"
    assert session.metadata["lastUpdated"] == "2026-04-23T12:54:00.000Z"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"id": "x", "type": "robot", "content": "hi"}, "unknown message type"),
        ({"id": "x", "type": "user", "content": 5}, "'content'"),
        ({"type": "user", "content": "hi"}, "'id'"),
        ({"id": "x", "type": "gemini", "content": "", "toolCalls": [{"name": "ls"}]}, "toolCalls[0]"),
    ],
)
def test_a_malformed_message_is_refused(tmp_path: Path, message: dict[str, Any], reason: str) -> None:
    document = json.loads(BUILT.read_text(encoding="utf-8"))
    document["messages"].insert(2, message)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    store = Store.open(":memory:", tokenizer="chars/4")
    error = refused(store, path, "gemini-cli")
    assert "messages[2]" in error.reason and reason in error.reason
    assert error.line is not None


def test_tool_calls_keep_their_arguments() -> None:
    (session,) = parse(BUILT, "gemini-cli")
    assert all(
        isinstance(p, ToolCall) and isinstance(p.input, dict) for m in session.messages for p in m.tool_calls
    )
