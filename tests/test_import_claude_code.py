"""Importing Claude Code session JSONL: the corpus files, the format's mapping, repairs, bad input."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tests.conftest import CORPUS
from tests.helpers import dump
from transcript import Store, verify
from transcript.formats.base import UNDATED, FormatError
from transcript.formats.claude_code import parse
from transcript.model import (
    INTERRUPTED_RESULT,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)
from transcript.session.importing import ImportReport, namespaced

FORMAT = "claude-code"
BIG = CORPUS / "claude-code_ccviewer_fe5e1c67.jsonl"
SMALL = CORPUS / "claude-code_ccviewer_5c0375b4.jsonl"

# Per session: (messages, tool calls, repairs), keyed by the Task call that started it ("main" for the
# main conversation). Hand-counted with jq, not with the importer: `jq -rs -f threads.jq FILE`, where
# threads.jq groups records into threads (a sidechain record joins its parentUuid's thread; a sidechain
# record without parent starts one) and counts, per thread,
#   messages = distinct assistant message.id + tool_result blocks
#              + user records whose content is a string or holds any block that is not a tool_result
#   calls    = tool_use blocks
# and names a sidechain thread by the Task call whose input.prompt equals its first record's content:
#   . as $all
#   | ([$all[] | select(.type=="assistant") | .message.content[]
#       | select(.type=="tool_use" and .name=="Task" and .input.prompt != null)
#       | {key: .input.prompt, value: .id}] | from_entries) as $tasks
#   | (reduce $all[] as $r ({}; if $r.isSidechain == true then .[$r.uuid] = (if $r.parentUuid == null
#       then $r.uuid else .[$r.parentUuid] end) elif $r.uuid then .[$r.uuid] = "main" else . end)) as $t
#   | [$all[] | select(.type != "summary") | . + {thread: $t[.uuid]}] | group_by(.thread)
#   | map({task: (if .[0].thread == "main" then "main" else $tasks[.[0].message.content] end),
#          messages: (([.[]|select(.type=="assistant")|.message.id]|unique|length)
#            + ([.[]|select(.type=="user")|.message.content|arrays|.[]|select(.type=="tool_result")]|length)
#            + ([.[]|select(.type=="user")|select((.message.content|type)=="string"
#                 or ([.message.content[]|select(.type!="tool_result")]|length>0))]|length)),
#          calls: ([.[]|select(.type=="assistant")|.message.content[]|select(.type=="tool_use")]|length)})
# Repairs are 0 everywhere: every tool_use id has a tool_result and every tool_result a tool_use
# (`jq -s '(tool_use ids | unique) - (tool_result ids | unique) | length'` and the reverse: 0 and 0).
# Totals agree with the README: 167 and 21 tool calls; 345 and 45 messages.
EXPECTED: dict[Path, dict[str, tuple[int, int, int]]] = {
    BIG: {
        "main": (23, 11, 0),
        "toolu_01LS6tcVd796SbQKmZqeVnWY": (18, 8, 0),
        "toolu_014i9ThHMNShCHocf9xMKasf": (68, 33, 0),
        "toolu_01EbxY94wRUAGyMLj5wh699C": (80, 39, 0),
        "toolu_017rjDpjVPeNFmAEXNTkoP55": (50, 24, 0),
        "toolu_01EPom7jESzNbU8coiKjzVGS": (106, 52, 0),
    },
    SMALL: {
        "main": (25, 13, 0),
        "toolu_014YF9TXhDRR7BnpasNJ7gjC": (6, 2, 0),
        "toolu_01LKfUwrsnof18CpWZQcJH44": (14, 6, 0),
    },
}
# `jq -s '[.[] | .message.content? | arrays | .[] | select(.type=="tool_use" and .name=="Task")] | length'`
# gives 5 and 3; one Task call of the small file has no `prompt` (its result is an InputValidationError),
# so 5 and 2 of them start a sidechain.
TASK_CALLS = {BIG: 5, SMALL: 3}
CORPUS_FILES = [BIG, SMALL]


def _import(path: Path, store: Store | None = None) -> tuple[Store, ImportReport]:
    store = store or Store.open(":memory:", tokenizer="chars/4")
    return store, store.import_file(path, format=FORMAT)


def _key(session: Any) -> str:
    return session.parent_call_id or "main"


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _threads(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records per thread: "main", or the root uuid of a sidechain (found by walking parentUuid up)."""
    parent: dict[str, str | None] = {r["uuid"]: r.get("parentUuid") for r in records if "uuid" in r}
    threads: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["type"] not in ("user", "assistant"):
            continue
        key = "main"
        if record.get("isSidechain"):
            key = record["uuid"]
            while (up := parent.get(key)) is not None:
                key = up
        threads.setdefault(key, []).append(record)
    return threads


def _independent_counts(path: Path) -> dict[str, tuple[int, int, int]]:
    records = _raw(path)
    prompts = {
        block["input"]["prompt"]: block["id"]
        for r in records
        if r["type"] == "assistant"
        for block in r["message"]["content"]
        if block["type"] == "tool_use" and "prompt" in block["input"]
    }
    counts = {}
    for key, thread in _threads(records).items():
        name = "main" if key == "main" else prompts[thread[0]["message"]["content"]]
        blocks = [(r["type"], b) for r in thread if isinstance(r["message"]["content"], list)
                  for b in r["message"]["content"]]  # fmt: skip
        calls = {b["id"] for kind, b in blocks if b["type"] == "tool_use"}
        results = [b["tool_use_id"] for kind, b in blocks if b["type"] == "tool_result"]
        users = [
            r for r in thread if r["type"] == "user" and (isinstance(r["message"]["content"], str)
            or any(b["type"] != "tool_result" for b in r["message"]["content"]))
        ]  # fmt: skip
        assistants = {r["message"]["id"] for r in thread if r["type"] == "assistant"}
        repairs = len(calls - set(results)) + sum(1 for result in results if result not in calls)
        tool_uses = sum(1 for _, b in blocks if b["type"] == "tool_use")
        counts[name] = (len(assistants) + len(results) + len(users), tool_uses, repairs)
    return counts


def _assert_paired(messages: list[Message]) -> None:
    """Each assistant message's calls are answered right after it, one tool message each, in call order."""
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message.role != "tool", f"tool message {message.id!r} answers no step"
        calls = [call.id for call in message.tool_calls]
        answers = messages[index + 1 : index + 1 + len(calls)]
        assert [m.tool_results[0].call_id for m in answers if m.role == "tool"] == calls
        index += 1 + len(calls)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_file_imports_with_pinned_counts(path: Path) -> None:
    _, report = _import(path)
    counts = {_key(s): (s.messages, s.tool_calls, len(s.repairs)) for s in report.sessions}
    assert counts == EXPECTED[path]
    assert len(report.sessions) == len(EXPECTED[path])


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_pinned_counts_agree_with_a_count_in_python(path: Path) -> None:
    assert _independent_counts(path) == EXPECTED[path]


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_every_sidechain_links_to_the_task_call_that_started_it(path: Path) -> None:
    records = _raw(path)
    task_calls = {
        block["id"]: block["input"]
        for r in records
        if r["type"] == "assistant"
        for block in r["message"]["content"]
        if block["type"] == "tool_use" and block["name"] == "Task"
    }
    assert len(task_calls) == TASK_CALLS[path]
    _, report = _import(path)
    main, *children = report.sessions
    assert main.parent_session_id is None and main.session_id == records[-1]["sessionId"]
    sessions = {s.session_id: s for s in parse(path)}
    for child in children:
        assert child.parent_session_id == main.session_id
        assert child.parent_call_id in task_calls
        assert child.session_id == f"{main.session_id}/{child.parent_call_id}"
        assert child.title == task_calls[child.parent_call_id]["description"]
        first = sessions[child.session_id].messages[0]
        assert first.role == "user" and first.text == task_calls[child.parent_call_id]["prompt"]
        assert not child.warnings
    with_prompt = {call_id for call_id, given in task_calls.items() if "prompt" in given}
    assert {child.parent_call_id for child in children} == with_prompt


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_file_store_verifies_and_every_message_is_visible(path: Path, db_path: Path) -> None:
    store = Store.open(db_path, tokenizer="chars/4")
    _, report = _import(path, store)
    for session in report.sessions:
        transcript = store.session(session.session_id, create=False)
        stored = transcript.stored_messages()
        assert len(stored) == session.messages
        assert [m.id for m in transcript.visible_messages().messages] == [m.id for m in stored]
        _assert_paired(stored)
    store.close()
    assert verify(db_path).ok


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_reimport_is_a_no_op(path: Path, db_path: Path) -> None:
    store = Store.open(db_path, tokenizer="chars/4")
    _, first = _import(path, store)
    before = dump(store)
    _, second = _import(path, store)
    assert [s.session_id for s in second.sessions] == [s.session_id for s in first.sessions]
    assert all(s.appended == 0 for s in second.sessions)
    assert dump(store) == before
    store.close()


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_auto_detection_picks_claude_code(path: Path) -> None:
    pytest.importorskip("transcript.formats.detect")
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path, format="auto")
    assert report.format == FORMAT
    assert {_key(s): (s.messages, s.tool_calls, len(s.repairs)) for s in report.sessions} == EXPECTED[path]


def test_corpus_mapping_details() -> None:
    main = parse(BIG)[0]
    assert main.title == "Empty Repo Setup: CLAUDE.md Foundation Created"
    assert main.metadata["summaries"][0]["leaf_uuid"] == "549b3502-6e30-4fa5-869f-c998df26c3f0"
    assert [m.kind for m in main.messages[:2]] == ["message", "meta"]  # the slash command, then its text
    errors = sum(1 for s in parse(BIG) for m in s.messages for r in m.tool_results if r.is_error)
    assert errors == 23  # jq: tool_result blocks with is_error == true
    # Line 13-15: three Task calls in one API message, answered in the order 15, 13, 14 (lines 37, 124,
    # 223); imported as one assistant message and results in call order.
    step = next(m for m in main.messages if len(m.tool_calls) == 3)
    assert step.metadata is not None and step.metadata["records"] == 4
    # the last record's (final) usage: `sed -n 15p FILE | jq .message.usage.output_tokens` gives 598
    assert step.metadata["usage"]["output_tokens"] == 598


def _rec(kind: str, uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if "api" in extra:
        message.update(id=extra.pop("api"), type="message", model="claude-test")
    if "usage" in extra:
        message["usage"] = extra.pop("usage")
    record = {"type": kind, "uuid": uuid, "sessionId": "sess", "timestamp": "2025-01-02T03:04:05.000Z"}
    return {**record, "message": message, **extra}


def user(uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return _rec("user", uuid, content, **extra)


def assistant(uuid: str, api: str | None, *blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return _rec("assistant", uuid, list(blocks), **({"api": api} if api else {}), **extra)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "Bash", **given: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": given or {"command": "ls"}}


def result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def chain(*records: dict[str, Any]) -> list[dict[str, Any]]:
    """Thread the records one after another (parentUuid = the previous record's uuid)."""
    previous = None
    for record in records:
        record.setdefault("parentUuid", previous)
        previous = record["uuid"]
    return list(records)


def write(directory: Path, records: list[dict[str, Any]], name: str = "session.jsonl") -> Path:
    path = directory / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def ids(*local: str, session: str = "sess") -> list[str]:
    """The ids an import stores for these ids of the file: in the session's namespace."""
    return [namespaced(session, message_id) for message_id in local]


def stored(path: Path) -> tuple[ImportReport, list[list[Message]]]:
    """Import into a fresh store (so the order rules are checked) and read every session back."""
    store, report = _import(path)
    return report, [store.session(s.session_id).stored_messages() for s in report.sessions]


def test_split_records_merge_and_parallel_results_come_in_call_order(tmp_path: Path) -> None:
    usage = {"input_tokens": 3, "output_tokens": 9}
    records = chain(
        user("u1", "list files"),
        assistant("a1", "m1", text("looking")),
        assistant("a2", "m1", call("c1")),
        assistant("a3", "m1", call("c2"), usage=usage),
        user("u2", [result("c2", "two")]),
        user("u3", [result("c1", "one")]),
        assistant("a4", "m2", text("done")),
    )
    report, [messages] = stored(write(tmp_path, records))
    assert [m.id for m in messages] == ids("u1", "a1", "u3", "u2", "a4")
    step = messages[1]
    assert [type(p) for p in step.parts] == [TextPart, ToolCall, ToolCall]
    assert step.metadata == {"api_message_id": "m1", "model": "claude-test", "usage": usage, "records": 3}
    assert [m.text for m in messages[2:4]] == ["one", "two"]
    assert report.repairs == ()


def test_text_after_results_in_one_user_line_becomes_a_following_user_message(tmp_path: Path) -> None:
    records = chain(
        assistant("a1", "m1", call("c1"), call("c2")),
        user("u1", [result("c2"), result("c1"), text("now stop")]),
    )
    _, [messages] = stored(write(tmp_path, records))
    assert [(m.id, m.role) for m in messages] == [
        (ids("a1")[0], "assistant"),
        (ids("u1/1")[0], "tool"),
        (ids("u1")[0], "tool"),
        (ids("u1/2")[0], "user"),
    ]
    assert messages[-1].text == "now stop" and messages[-1].kind == "message"


def test_meta_lines_summary_and_provenance(tmp_path: Path) -> None:
    records = [
        {"type": "summary", "summary": "Old title", "leafUuid": "x"},
        {"type": "summary", "summary": "Newer title", "leafUuid": "y"},
        *chain(
            user("u1", "<command-name>/go</command-name>", cwd="/w", version="1.0.0", gitBranch="main"),
            user("u2", [text("expanded command text")], isMeta=True),
            assistant("a1", "m1", text("ok")),
        ),
    ]
    report, [messages] = stored(write(tmp_path, records))
    assert [m.kind for m in messages] == ["message", "meta", "message"]
    assert messages[1].role == "user"
    (session,) = parse(tmp_path / "session.jsonl")
    assert session.title == report.sessions[0].title == "Newer title"
    assert session.metadata == {
        "cwd": "/w",
        "version": "1.0.0",
        "git_branch": "main",
        "summaries": [
            {"summary": "Old title", "leaf_uuid": "x"},
            {"summary": "Newer title", "leaf_uuid": "y"},
        ],
    }
    assert all(m.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC) for m in messages)


def test_images_and_thinking_are_kept(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="}}
    records = chain(
        user("u1", [text("what is this?"), image]),
        assistant(
            "a1",
            "m1",
            {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
            {"type": "redacted_thinking", "data": "opaque"},
            call("c1", "Read"),
        ),
        user("u2", [result("c1", [text("a screenshot"), image])]),
    )
    _, [messages] = stored(write(tmp_path, records))
    png = ImagePart(media_type="image/png", data="iVBORw0=")
    assert messages[0].parts == (TextPart(text="what is this?"), png)
    assert messages[1].parts[:2] == (
        ReasoningPart(text="hmm", signature="sig=="),
        RedactedReasoningPart(data="opaque"),
    )
    assert messages[2].parts == (
        ToolResult(call_id="c1", content=(TextPart(text="a screenshot"), png), name="Read"),
    )


def test_error_results_keep_is_error_and_missing_content_is_empty(tmp_path: Path) -> None:
    records = chain(
        assistant("a1", "m1", call("c1"), call("c2")),
        user("u1", [{"type": "tool_result", "tool_use_id": "c1", "is_error": True}]),
        user("u2", [result("c2", "fine", is_error=False)]),
    )
    _, [messages] = stored(write(tmp_path, records))
    assert [(r.content, r.is_error) for m in messages[1:] for r in m.tool_results] == [
        ("", True),
        ("fine", False),
    ]


def test_unanswered_calls_get_a_named_synthetic_result_after_their_step(tmp_path: Path) -> None:
    records = chain(
        user("u1", "go"),
        assistant("a1", "m1", call("c1"), call("c2")),
        user("u2", [result("c2")]),
        user("u3", "[Request interrupted by user]"),
        assistant("a2", "m2", call("c3")),
    )
    report, [messages] = stored(write(tmp_path, records))
    assert [m.id for m in messages] == ids(
        "u1", "a1", "a1/interrupted/0", "u2", "u3", "a2", "a2/interrupted/0"
    )
    synthetic = messages[2].tool_results[0]
    assert (synthetic.call_id, synthetic.content, synthetic.is_error) == ("c1", INTERRUPTED_RESULT, True)
    assert [(r.kind, r.call_id, r.line) for r in report.repairs] == [
        ("synthetic_result", "c1", 2),
        ("synthetic_result", "c3", 5),
    ]


def test_orphan_results_are_kept_as_meta_text_after_the_step(tmp_path: Path) -> None:
    records = chain(
        user("u1", "go"),
        assistant("a1", "m1", text("no calls here")),
        user("u2", [result("ghost", "lost output")]),
        assistant("a2", "m2", call("c1")),
        user("u3", [result("ghost2", "other"), result("c1", "real")]),
        user("u4", [result("c1", "again")]),
    )
    report, [messages] = stored(write(tmp_path, records))
    assert [(m.id, m.role, m.kind) for m in messages] == [
        (ids("u1")[0], "user", "message"),
        (ids("a1")[0], "assistant", "message"),
        (ids("u2")[0], "user", "meta"),
        (ids("a2")[0], "assistant", "message"),
        (ids("u3/1")[0], "tool", "message"),
        (ids("u3")[0], "user", "meta"),
        (ids("u4")[0], "user", "meta"),
    ]
    assert "ghost" in messages[2].text and messages[2].text.endswith("lost output")
    assert messages[6].text.endswith("again")
    assert [(r.kind, r.call_id, r.line) for r in report.repairs] == [
        ("orphan_result_as_text", "ghost", 3),
        ("orphan_result_as_text", "ghost2", 5),
        ("orphan_result_as_text", "c1", 6),
    ]


def test_sidechains_link_by_prompt_also_for_agent_and_warn_when_unlinked(tmp_path: Path) -> None:
    records = [
        *chain(
            user("u1", "go"),
            assistant("a1", "m1", call("t1", "Agent", prompt="do the thing", description="thing")),
        ),
        *chain(
            user("s1", "do the thing", isSidechain=True),
            assistant("s2", "n1", text("did it"), isSidechain=True),
        ),
        *chain(
            user("x1", "nobody asked for this", isSidechain=True),
            assistant("x2", "n2", text("hm"), isSidechain=True),
        ),
        user("u2", [result("t1", [text("did it")])], parentUuid="a1"),
    ]
    report, stored_sessions = stored(write(tmp_path, records))
    main, linked, unlinked = report.sessions
    assert main.session_id == "sess" and main.parent_session_id is None
    assert (linked.session_id, linked.parent_session_id, linked.parent_call_id) == ("sess/t1", "sess", "t1")
    assert linked.title == "thing" and not linked.warnings
    assert unlinked.session_id == "sess/sidechain/x1"
    assert unlinked.parent_session_id is None and unlinked.parent_call_id is None
    assert "no Task/Agent call" in unlinked.warnings[0]
    assert [len(m) for m in stored_sessions] == [3, 2, 2]


def test_missing_timestamps_are_undated_never_the_file_time(tmp_path: Path) -> None:
    records = chain(user("u1", "hi"), assistant("a1", "m1", text("hello")))
    for record in records:
        del record["timestamp"]
    path = write(tmp_path, records)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    (session,) = parse(path)
    assert {m.created_at for m in session.messages} == {UNDATED}


def test_branches_and_bookkeeping_records_are_named_in_warnings(tmp_path: Path) -> None:
    records = [
        *chain(user("u1", "hi"), assistant("a1", "m1", text("hello"))),
        {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
        user("u2", "edited question", parentUuid="u1"),
    ]
    report, [messages] = stored(write(tmp_path, records))
    assert len(messages) == 3
    warnings = report.sessions[0].warnings
    assert any("branches" in w and "line 4" in w for w in warnings)
    assert any("skipped 1 'file-history-snapshot'" in w for w in warnings)


def test_a_reused_uuid_and_an_empty_file_are_refused(tmp_path: Path) -> None:
    records = chain(user("u1", "hi"), assistant("u1", "m1", text("hello")))
    with pytest.raises(FormatError) as caught:
        parse(write(tmp_path, records))
    assert caught.value.line == 2
    with pytest.raises(FormatError) as caught:
        parse(write(tmp_path, [], name="empty.jsonl"))
    assert caught.value.line is None


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, int]:
    """A session of steps with calls split over records, results in any order, some missing, orphans.

    Returns the records, the number of messages expected and the number of repairs expected.
    """
    records = [user("u0", "start")]
    messages, repairs = 1, 0
    for step in range(draw(st.integers(1, 4))):
        calls = [f"c{step}-{n}" for n in range(draw(st.integers(0, 3)))]
        blocks = [text(f"step {step}")] + [call(c) for c in calls]
        records += [assistant(f"a{step}-{n}", f"m{step}", block) for n, block in enumerate(blocks)]
        answered = draw(st.permutations(calls)).copy()
        del answered[: draw(st.integers(0, len(answered)))]
        orphans = [f"ghost{step}-{n}" for n in range(draw(st.integers(0, 2)))]
        pending = draw(st.permutations(answered + orphans))
        if draw(st.booleans()):
            records += [user(f"r{step}-{n}", [result(c)]) for n, c in enumerate(pending)]
        elif pending:
            records.append(user(f"r{step}", [result(c) for c in pending]))
        messages += 1 + len(calls) + len(orphans)
        repairs += len(calls) - len(answered) + len(orphans)
        if draw(st.booleans()):
            records.append(user(f"t{step}", "carry on"))
            messages += 1
    return chain(*records), messages, repairs


@given(sessions())
def test_any_interleaving_imports_in_order_with_each_repair_named(case: Any) -> None:
    records, messages, repairs = case
    with tempfile.TemporaryDirectory() as tmp:
        report, [stored_messages] = stored(write(Path(tmp), records))
    assert report.sessions[0].messages == len(stored_messages) == messages
    assert len(report.repairs) == repairs
    _assert_paired([m for m in stored_messages if m.kind != "meta"])


def _base(prefix: str) -> list[dict[str, Any]]:
    """A small valid session; `prefix` keeps ids apart from another copy in the same store."""
    records = chain(
        user(f"{prefix}u1", "please look"),
        assistant(f"{prefix}a1", f"{prefix}m1", text("looking"), call(f"{prefix}c1")),
        user(f"{prefix}u2", [result(f"{prefix}c1", [text("files")]), text("thanks")]),
        assistant(f"{prefix}a2", f"{prefix}m2", text("done")),
    )
    for record in records:
        record["sessionId"] = f"{prefix}sess"
    return records


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths of every field whose value msgspec checks (tool inputs and free-form usage left out)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if key in ("input", "usage") or (*path, key) == ("message", "type"):
            continue  # free-form, or not read by the importer
        yield (*path, key)
        yield from _paths(item, (*path, key))


def _set(record: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _delete(record: dict[str, Any], path: tuple[Any, ...]) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]


WRONG_VALUES = st.one_of(
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), min_size=1, max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
)
REQUIRED = ("uuid", "sessionId", "type", "message", "role", "content", "id", "name", "tool_use_id", "text")
KNOWN_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
    "mode",
    "permission-mode",
    "atis-latch",
    "last-prompt",
    "ai-title",
    "custom-title",
    "cost-state",
}
BAD_KINDS = ["wrong_type", "missing", "truncated", "unknown_role", "unknown_type", "surrogate", "not_object"]


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[list[bytes], int, str]:
    """The base session with one line broken: the lines, the (1-based) broken line, how it was broken."""
    records = _base("")
    index = draw(st.integers(0, len(records) - 1))
    record = copy.deepcopy(records[index])
    kind = draw(st.sampled_from(BAD_KINDS))
    raw: bytes | None = None
    if kind == "wrong_type":
        # values with a type no field of the format accepts (never a string, bool or null)
        _set(record, draw(st.sampled_from(list(_paths(record)))), draw(WRONG_VALUES))
    elif kind == "missing":
        # a tool_result's `content` may be left out (it is then empty): every other of these is required
        required = [
            p for p in _paths(record) if p[-1] in REQUIRED and not (p[-1] == "content" and len(p) > 2)
        ]
        _delete(record, draw(st.sampled_from(required)))
    elif kind == "unknown_role":
        role = record["message"]["role"]
        record["message"]["role"] = draw(st.text(max_size=10).filter(lambda r: r != role))
    elif kind == "unknown_type":
        record["type"] = draw(st.text(max_size=20).filter(lambda t: t not in KNOWN_TYPES))
    elif kind == "surrogate":
        texts = [p for p in _paths(record) if p[-1] == "text" or p == ("message", "content")]
        texts = [p for p in texts if isinstance(_get(record, p), str)]
        where = draw(st.sampled_from(texts))
        value = _get(record, where)
        at = draw(st.integers(0, len(value)))
        _set(record, where, value[:at] + chr(draw(st.integers(0xD800, 0xDFFF))) + value[at:])
    elif kind == "not_object":
        raw = draw(st.sampled_from([b"[1, 2]", b'"text"', b"42", b"null", b"\xff\xfe"]))
    line = json.dumps(record).encode()
    if kind == "truncated":
        raw = line[: draw(st.integers(1, len(line) - 1))]
    lines = [json.dumps(r).encode() for r in records]
    lines[index] = raw if raw is not None else line
    return lines, index + 1, kind


def _get(record: dict[str, Any], path: tuple[Any, ...]) -> Any:
    target: Any = record
    for key in path:
        target = target[key]
    return target


@given(corrupted())
def test_a_malformed_record_is_refused_naming_its_line_and_the_store_is_unchanged(case: Any) -> None:
    lines, broken, kind = case
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "t.db", tokenizer="chars/4")
        store.import_file(write(Path(tmp), _base("held-"), name="held.jsonl"), format=FORMAT)
        before = dump(store)
        path = Path(tmp) / "bad.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        with pytest.raises(FormatError) as caught:
            store.import_file(path, format=FORMAT)
        assert caught.value.line == broken
        assert f"line {broken}" in str(caught.value)
        if kind == "surrogate":
            assert "surrogate" in caught.value.reason
        assert dump(store) == before
        store.close()


def test_the_base_of_the_malformed_cases_is_valid(tmp_path: Path) -> None:
    report, [messages] = stored(write(tmp_path, _base("")))
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert report.repairs == ()
