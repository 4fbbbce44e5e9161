"""Importing Codex CLI rollouts: real files and one built from the format's documentation, the mapping,
a live rollout that grew, and malformed records refused by line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT
from tests.helpers import dump
from tests.import_checks import assert_paired, refused
from transcript import ReasoningPart, RedactedReasoningPart, Store, ToolCall
from transcript.formats import FormatError, detect_format, parse
from transcript.formats.codex import OLDER_LAYOUT

FIXTURES = PROJECT_ROOT / "fixtures" / "formats" / "codex"
# (the older layout, without the `{timestamp, type, payload}` wrapper, has tests of its own below)
FILES = sorted(p for p in FIXTURES.glob("*.jsonl") if "older_layout" not in p.name)
BUILT = FIXTURES / "rollout_0.80.0_built.jsonl"
HEAD = FIXTURES / "rollout_0.39.0_vibecodingtracker_head.jsonl"
ASSISTANT_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call")


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _counts(path: Path) -> tuple[int, int]:
    """(messages, tool calls) counted from the JSON: each user/developer message and each output is one
    message; the items of one model response (reasoning, assistant text and calls, up to the next user
    message or output) are one assistant message, unless they hold nothing (an empty reasoning item);
    each call left without an output gets a synthetic result."""
    items: list[dict[str, Any]] = []
    for record in _raw(path):
        if record["type"] == "response_item":
            items.append(record["payload"])
        elif record["type"] == "compacted":  # its summary, and what its replacement history adds
            said = {_text(i) for i in items if i["type"] == "message"} | {record["payload"].get("message")}
            replacement = record["payload"].get("replacement_history") or []
            items += [i for i in replacement if i["type"] == "message" and _text(i) not in said]
            items.append({"type": "message", "role": "user"})
    items = [i for i in items if i["type"] == "message" or i["type"] in ASSISTANT_ITEMS or "output" in i]
    messages, calls, outputs = 0, [], set()
    group: list[dict[str, Any]] = []
    for item in [*items, {"type": "end"}]:
        ours = item["type"] in ASSISTANT_ITEMS or (item["type"] == "message" and item["role"] == "assistant")
        starts_new = item["type"] == "reasoning" and any(
            g["type"] != "reasoning" or _has_reasoning(g) for g in group
        )
        if group and (not ours or starts_new):
            messages += any(g["type"] != "reasoning" or _has_reasoning(g) for g in group)
            group = []
        if ours:
            group.append(item)
            if "call_id" in item:
                calls.append(item["call_id"])
        elif item["type"] == "message":
            messages += 1
        elif "call_id" in item:
            messages += 1
            outputs.add(item["call_id"])
    return messages + len(set(calls) - outputs), len(calls)


def _text(item: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in item.get("content") or [])


def _has_reasoning(item: dict[str, Any]) -> bool:
    return bool(item.get("summary") or item.get("content") or item.get("encrypted_content"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_counts_equal_a_count_of_the_raw_file(path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path)
    assert report.format == "codex"
    (session,) = report.sessions
    assert (session.messages, session.tool_calls) == _counts(path)
    assert session.session_id == _raw(path)[0]["payload"]["id"]
    stored = store.session(session.session_id).stored_messages()
    assert len(stored) == session.messages
    assert_paired(stored)


def test_the_mapping_of_a_rollout() -> None:
    (session,) = parse(BUILT, "codex")
    roles = [
        (m.role, m.kind, (m.metadata or {}).get("observation"), (m.metadata or {}).get("role"))
        for m in session.messages[:3]
    ]
    assert roles == [
        ("system", "message", None, "developer"),
        ("user", "message", "environment_context", None),
        ("user", "message", None, None),
    ]
    first, second = [m for m in session.messages if m.tool_calls]
    assert [type(p) for p in first.parts] == [ReasoningPart, ToolCall]
    assert [type(p) for p in second.parts] == [ReasoningPart, ToolCall]
    encrypted = [
        r["payload"]["encrypted_content"] for r in _raw(BUILT) if r["payload"].get("type") == "reasoning"
    ]
    kept = [
        p.signature
        for m in session.messages
        for p in m.parts
        if isinstance(p, ReasoningPart) and p.signature is not None
    ]
    assert kept == encrypted
    assert all(
        p.provider == "openai" for m in session.messages for p in m.parts if isinstance(p, ReasoningPart)
    )
    assert not any("encrypted_reasoning" in (m.metadata or {}) for m in session.messages)
    assert not any(isinstance(p, RedactedReasoningPart) for m in session.messages for p in m.parts)
    shell = first.tool_calls[0]
    assert shell.input["command"][:2] == ["bash", "-lc"]
    patch = second.tool_calls[0]
    assert (patch.name, patch.input) == ("apply_patch", None)
    assert (patch.raw_input or "").startswith("*** Begin Patch")
    models = {(m.metadata or {}).get("model") for m in session.messages if m.role == "assistant"}
    assert models == {"gpt-5-codex"}
    assert any("'response_item ghost_snapshot'" in w for w in session.warnings)
    assert any("'event_msg agent_message'" in w for w in session.warnings)  # duplicates, not imported twice
    texts = [m.text for m in session.messages if m.role == "assistant" and m.text]
    assert len(texts) == len(set(texts)) == 1


def test_agents_md_instructions_are_meta_and_not_a_turn() -> None:
    (session,) = parse(FIXTURES / "rollout_0.77.0_simonw.jsonl", "codex")
    assert session.messages[0].kind == "meta" and session.messages[0].text.startswith("# AGENTS.md")
    assert [m.kind for m in session.messages[1:]] == ["message", "message"]


def test_a_grown_rollout_supersedes_its_synthetic_result(tmp_path: Path) -> None:
    path = tmp_path / HEAD.name
    shutil.copyfile(HEAD, path)
    store = Store.open(":memory:", tokenizer="chars/4")
    (first,) = store.import_file(path).sessions
    (repair,) = first.repairs
    last_call = next(r for r in reversed(_raw(HEAD)) if r["payload"].get("type") == "function_call")
    output = {"type": "function_call_output", "call_id": last_call["payload"]["call_id"], "output": "3.10"}
    reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
    more = [
        {"timestamp": "2025-09-19T09:05:00.000Z", "type": "response_item", "payload": output},
        {"timestamp": "2025-09-19T09:05:01.000Z", "type": "response_item", "payload": reply},
    ]
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in more)
    (second,) = store.import_file(path).sessions
    assert (second.appended, second.superseded) == (2, (repair.message_id,))
    view = store.session(first.session_id).visible_messages()
    assert [m.text for m in view.messages[-2:]] == ["3.10", "Done."]
    assert repair.message_id not in {m.id for m in view.messages}


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"type": "mystery", "payload": {}}, "unknown record type"),
        ({"type": "response_item", "payload": []}, "'payload' must be an object"),
        (
            {
                "type": "response_item",
                "payload": {"type": "function_call", "name": "shell", "arguments": "{}"},
            },
            "call_id",
        ),
        ({"type": "response_item", "payload": {"type": "message", "role": "robot", "content": []}}, "role"),
        (
            {
                "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [{"type": "x"}]},
            },
            "type",
        ),
        (
            {
                "type": "response_item",
                "timestamp": 5,
                "payload": {"type": "message", "role": "user", "content": []},
            },
            "timestamp",
        ),
    ],
)
def test_a_malformed_record_is_refused_naming_its_line(
    tmp_path: Path, record: dict[str, Any], reason: str
) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(BUILT)
    lines = BUILT.read_text(encoding="utf-8").splitlines()
    lines.insert(3, json.dumps(record))
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = dump(store)
    error = refused(store, path, "codex")
    assert error.line == 4 and reason in error.reason
    assert dump(store) == before


OLDER = FIXTURES / "rollout_2025-08_older_layout_built.jsonl"


def test_an_older_rollout_imports_with_its_calls_paired(tmp_path: Path) -> None:
    """The layout before `session_meta` (issue 41): a header line, bare response items and
    `{"record_type": "state"}` lines, detected as codex and read with every call answered."""
    assert detect_format(OLDER) == "codex"
    (session,) = parse(OLDER, "codex")
    header = json.loads(OLDER.read_text().splitlines()[0])
    assert session.session_id == header["id"]
    assert session.metadata["layout"] == OLDER_LAYOUT
    assert session.metadata["git"] == header["git"]
    calls = [c for m in session.messages for c in m.tool_calls]
    results = [r for m in session.messages for r in m.tool_results]
    items = [json.loads(line) for line in OLDER.read_text().splitlines()]
    assert len(calls) == sum(1 for i in items if i.get("type") == "function_call") > 0
    assert sorted(r.call_id for r in results) == sorted(c.id for c in calls)
    assert not session.repairs and not any(r.is_error for r in results)
    assert_paired(session.messages)
    states = sum(1 for i in items if "record_type" in i)
    assert f"skipped {states} 'record_type state' record(s)" in " ".join(session.warnings)
    # Bare items record no time: they take the header's, never the file's.
    assert {m.created_at.isoformat() for m in session.messages} == {"2025-08-21T14:02:37.118000+00:00"}
    with Store.open(tmp_path / "t.db") as store:
        assert store.import_file(OLDER).sessions[0].appended == len(session.messages)


def test_an_unknown_record_in_an_older_rollout_names_the_layouts(tmp_path: Path) -> None:
    lines = OLDER.read_text().splitlines()
    lines.insert(3, json.dumps({"kind": "something else"}))
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as caught:
        parse(path, "codex")
    assert caught.value.line == 4 and "older layout" in caught.value.reason
