"""Cline and Roo Code task histories (issue 41): results written back as `[tool for 'x'] Result:` user
text answer their calls (none marked failed that the file shows succeeded), images kept, times from
`ts` or `ui_messages.json`, and the same file read as plain Anthropic messages refused for its repairs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT
from tests.import_checks import assert_paired
from transcript import Store
from transcript.formats import detect_format, parse
from transcript.formats.base import UNDATED
from transcript.formats.cline import RESULT_HEADER, written_back
from transcript.model import ImagePart, ReasoningPart
from transcript.model.errors import TooManyRepairs

FIXTURES = PROJECT_ROOT / "fixtures" / "formats" / "cline"
CLINE = FIXTURES / "1769000000000_built" / "api_conversation_history.json"
ROO = FIXTURES / "roo_native_built" / "api_conversation_history.json"
FAILED = ("The tool execution failed", "The user denied this operation")


def _raw(path: Path) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = json.loads(path.read_text())
    return value


def _result_texts(path: Path) -> list[str]:
    """Every result the file writes back, as its text after the header (or the next block's)."""
    texts: list[str] = []
    for message in _raw(path):
        blocks = message["content"] if isinstance(message["content"], list) else []
        for i, block in enumerate(blocks):
            header = RESULT_HEADER.match(block.get("text", "")) if block.get("type") == "text" else None
            if header is not None:
                body = block["text"][header.end() :].strip() or blocks[i + 1]["text"].strip()
                texts.append(body)
    return texts


def test_results_written_back_as_text_answer_their_calls() -> None:
    assert detect_format(CLINE) == "cline"
    (session,) = parse(CLINE, "cline")
    assert session.session_id == "1769000000000_built"
    calls = [c for m in session.messages for c in m.tool_calls]
    written = _result_texts(CLINE)
    real = [
        (m, r) for m in session.messages for r in m.tool_results if not (m.metadata or {}).get("synthetic")
    ]
    assert len(real) == len(written) == len(calls) - 1  # the last call (attempt_completion) ends the file
    for (_, result), text in zip(real, written, strict=True):
        body = result.content if isinstance(result.content, str) else result.content[0].text  # type: ignore[union-attr]
        assert body.strip() == text
        assert result.is_error == text.startswith(FAILED)  # only what the file shows failed
    assert [r.kind for r in session.repairs] == ["synthetic_result"]
    assert session.repairs[0].call_id == calls[-1].id
    assert_paired(session.messages)
    # No result header is left as user text, and the rest of each user message is.
    users = [p.text for m in session.messages if m.role == "user" for p in m.parts if hasattr(p, "text")]
    assert not any(RESULT_HEADER.match(text) for text in users)
    assert sum("<environment_details>" in text for text in users) == len(_raw(CLINE)) // 2
    assert any("<feedback>" in text for text in users)


def test_a_screenshot_after_a_result_is_kept_with_it() -> None:
    (session,) = parse(CLINE, "cline")
    images = [
        part
        for m in session.messages
        for r in m.tool_results
        if not isinstance(r.content, str)
        for part in r.content
        if isinstance(part, ImagePart)
    ]
    raw = [
        b for m in _raw(CLINE) if isinstance(m["content"], list) for b in m["content"] if b["type"] == "image"
    ]
    assert [i.data for i in images] == [b["source"]["data"] for b in raw] and images


def test_times_come_from_ts_and_else_from_ui_messages(tmp_path: Path) -> None:
    (session,) = parse(CLINE, "cline")
    ui = json.loads((CLINE.parent / "ui_messages.json").read_text())
    assert session.messages[0].created_at.timestamp() * 1000 == pytest.approx(ui[0]["ts"])
    last = _raw(CLINE)[-1]["ts"]
    assert session.messages[-2].created_at.timestamp() * 1000 == pytest.approx(last)
    alone = tmp_path / "task" / "api_conversation_history.json"
    alone.parent.mkdir()
    shutil.copy(CLINE, alone)  # without ui_messages.json, the task message records no time
    assert parse(alone, "cline")[0].messages[0].created_at == UNDATED


def test_roo_code_native_tool_results_and_reasoning_are_read_as_they_are() -> None:
    assert detect_format(ROO) == "cline"
    (session,) = parse(ROO, "cline")
    raw = _raw(ROO)
    written = [
        b for m in raw if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_result"
    ]
    results = [r for m in session.messages for r in m.tool_results if not (m.metadata or {}).get("synthetic")]
    assert [r.call_id for r in results] == [b["tool_use_id"] for b in written]
    # Roo sets no is_error: a failure says so in its text (the access denied, the failed write)
    assert [r.call_id for r in results if r.is_error] == ["r2", "r3"]
    assert_paired(session.messages)
    reasoning = [p.text for m in session.messages for p in m.parts if isinstance(p, ReasoningPart)]
    blocks = [
        b["text"]
        for m in raw
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "reasoning"
    ]
    assert reasoning == blocks and blocks
    assert all(p.signature is None for m in session.messages for p in m.parts if isinstance(p, ReasoningPart))


def test_read_as_anthropic_messages_the_history_is_refused_for_its_repairs(tmp_path: Path) -> None:
    # Ten calls answered the Cline way, in a file not named as Cline names it: detected by content.
    path = tmp_path / "history.json"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "<task>go</task>"}]}
    ]
    for n in range(10):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"path": f"f{n}"}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "text", "text": f"[read_file for 'f{n}'] Result:\ncontent {n}"}
        messages.append({"role": "user", "content": [result]})
    path.write_text(json.dumps(messages))
    assert detect_format(path) == "cline"
    with Store.open(tmp_path / "t.db") as store:
        report = store.import_file(path)
        assert report.format == "cline" and not report.repairs
        with pytest.raises(TooManyRepairs):
            store.import_file(path, "anthropic-json", prefix="as-anthropic/")
        assert [s.session_id for s in store.sessions()] == ["history"]


def test_a_result_with_no_pending_call_stays_user_text() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a'] Result:\nA"}]}
    assert written_back(message, []) == (message, 0)
    turned, count = written_back(message, [("toolu_1", "read_file")])
    assert count == 1 and turned["content"][0]["tool_use_id"] == "toolu_1"


def test_a_result_answers_the_pending_call_of_its_tool_first() -> None:
    blocks = [{"type": "text", "text": f"[{name} for 'x'] Result:\n{name}"} for name in ("b", "a")]
    turned, _ = written_back({"role": "user", "content": blocks}, [("1", "a"), ("2", "b")])
    assert [(r["tool_use_id"], r["content"]) for r in turned["content"]] == [("2", "b"), ("1", "a")]


def test_a_native_result_that_says_its_tool_failed_is_marked_failed(tmp_path: Path) -> None:
    # Roo Code 3.5x writes native results without `is_error`: the failure is in the text, as in a real
    # 3.53.0 history (an access denied by .rooignore, a write that failed); a command that ran and
    # exited non-zero is the tool working, not failing.
    def call(call_id: str, name: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": {"path": "x"}}

    def result(call_id: str, text: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": call_id, "content": text}

    history = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<user_message>fix it</user_message>"}],
            "ts": 1,
        },
        {"role": "assistant", "content": [call("a", "read_file"), call("b", "write_to_file")], "ts": 2},
        {
            "role": "user",
            "content": [
                result("a", 'File: .env\nError: {"status":"error","type":"access_denied"}'),
                result("b", '{"status":"error","message":"The tool execution failed"}'),
            ],
            "ts": 3,
        },
        {"role": "assistant", "content": [call("c", "execute_command"), call("d", "read_file")], "ts": 4},
        {
            "role": "user",
            "content": [
                result(
                    "c", "Command execution was not successful.\nExit code: 2\nOutput:\nerror: no such file"
                ),
                result("d", "File: src/a.py\n 1 | Error: is a word in this file"),
            ],
            "ts": 5,
        },
    ]
    task = tmp_path / "1778058138487"
    task.mkdir()
    (task / "api_conversation_history.json").write_text(json.dumps(history))
    (session,) = parse(task / "api_conversation_history.json", "cline")
    failed = {
        result.call_id: result.is_error for message in session.messages for result in message.tool_results
    }
    assert failed == {"a": True, "b": True, "c": False, "d": False}
