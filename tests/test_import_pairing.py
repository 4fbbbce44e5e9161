"""A harness notice between a call and its result does not break the pair.

Agents' harnesses write notices into the conversation at any moment: Codex a `developer` message
(permissions changed), a chat loop a `system` message, Claude Code an `isMeta` user record. One that
sits between a tool call and its result is no reply of the user's: the call keeps its real result,
the notice is stored right after the step's results, and the move is named (`notice_after_results`).
Before, the call got a synthetic "interrupted" error result and the real output was kept as stray user
text, so the view told the model a tool had failed when it had not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_import_openhands import action, observation, parse_run, system, user
from tests.test_import_swe_agent import assistant, parse_history, tool
from transcript import Store
from transcript.formats import ParsedSession, parse
from transcript.model import INTERRUPTED_RESULT, Message

CODEX = (
    Path(__file__).parent.parent
    / "fixtures"
    / "formats"
    / "codex"
    / "rollout_0.80.0_developer_between_call_and_output_built.jsonl"
)


def _shape(messages: list[Message]) -> list[str]:
    """Each message as `role` (and its calls or the call its result answers)."""
    out = []
    for message in messages:
        calls = [c.id for c in message.tool_calls] + [r.call_id for r in message.tool_results]
        out.append(message.role + (f" {','.join(calls)}" if calls else ""))
    return out


def _no_repair_but_the_move(session: ParsedSession, moved: int = 1) -> None:
    assert [r.kind for r in session.repairs] == ["notice_after_results"] * moved
    assert not any(INTERRUPTED_RESULT in m.text for m in session.messages)
    assert not any((m.metadata or {}).get("orphan_result") for m in session.messages)


def test_a_codex_developer_message_between_a_call_and_its_output_keeps_the_real_output() -> None:
    (session,) = parse(CODEX, "codex")
    assert _shape(session.messages) == [
        "system",
        "user",
        "user",
        "assistant call_d1",
        "tool call_d1",
        "system",
        "assistant call_d2",
        "tool call_d2",
        "assistant",
    ]
    _no_repair_but_the_move(session)
    output = session.messages[4]
    assert "assert 25 == 30" in output.text and not output.tool_results[0].is_error
    notice = session.messages[5]
    assert "Approval policy: never" in notice.text and notice.metadata == {"role": "developer"}
    (repair,) = session.repairs
    assert (repair.message_id, repair.line) == (notice.id, 9)
    assert "developer message" in repair.detail


def test_the_codex_rollout_imports_with_the_real_output_in_the_view(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        report = store.import_file(CODEX)
        (imported,) = report.sessions
        assert imported.appended == 9 and [r.kind for r in imported.repairs] == ["notice_after_results"]
        view = store.session(imported.session_id).visible_messages()
    results = [r for m in view.messages for r in m.tool_results]
    assert [r.call_id for r in results] == ["call_d1", "call_d2"] and not any(r.is_error for r in results)


def _openai(tmp_path: Path, records: list[dict[str, Any]]) -> ParsedSession:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    (session,) = parse(path, "openai-jsonl")
    return session


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


@pytest.mark.parametrize("role", ["system", "developer"])
def test_an_openai_notice_between_parallel_results_waits_for_both(tmp_path: Path, role: str) -> None:
    session = _openai(
        tmp_path,
        [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "sunny"},
            {"role": role, "content": "Tool budget: 3 calls left."},
            {"role": "tool", "tool_call_id": "b", "content": "rain"},
            {"role": "assistant", "content": "Paris is sunny, Rome rainy."},
        ],
    )
    assert _shape(session.messages) == ["user", "assistant a,b", "tool a", "tool b", "system", "assistant"]
    _no_repair_but_the_move(session)
    ids = [m.id for m in session.messages]
    assert len(set(ids)) == len(ids)  # positional ids stay unique when a notice moves


def test_a_notice_before_a_step_that_never_gets_its_results_follows_the_synthetic_ones(
    tmp_path: Path,
) -> None:
    session = _openai(
        tmp_path,
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
            {"role": "system", "content": "The user stopped the tool."},
            {"role": "user", "content": "never mind"},
        ],
    )
    assert _shape(session.messages) == ["user", "assistant a", "tool a", "system", "user"]
    assert [r.kind for r in session.repairs] == ["synthetic_result", "notice_after_results"]


def test_a_notice_with_no_call_pending_stays_where_it_is(tmp_path: Path) -> None:
    session = _openai(
        tmp_path,
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [_call("a")]},
            {"role": "tool", "tool_call_id": "a", "content": "sunny"},
            {"role": "system", "content": "Tool budget: 3 calls left."},
        ],
    )
    assert _shape(session.messages) == ["user", "assistant a", "tool a", "system"]
    assert session.repairs == []


def test_a_swe_agent_system_message_between_a_call_and_its_result(tmp_path: Path) -> None:
    session = parse_history(
        tmp_path,
        [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "fix the bug"},
            assistant("c1"),
            {"role": "system", "content": "Remaining budget: $1.20"},
            tool("c1"),
            assistant(content="done"),
        ],
    )
    assert _shape(session.messages) == ["system", "user", "assistant c1", "tool c1", "system", "assistant"]
    _no_repair_but_the_move(session)


def test_a_mini_swe_agent_system_message_between_a_call_and_its_result(tmp_path: Path) -> None:
    path = tmp_path / "run.traj.json"
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": "look", "tool_calls": [call]},
        {"role": "system", "content": "Step limit: 10 steps left."},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text(json.dumps({"info": {}, "messages": messages, "trajectory_format": "mini-swe-agent-1.1"}))
    (session,) = parse(path, "mini-swe-agent")
    assert _shape(session.messages) == ["system", "user", "assistant c1", "tool c1", "system", "assistant"]
    _no_repair_but_the_move(session)


def test_an_openhands_system_action_between_a_call_and_its_observation(tmp_path: Path) -> None:
    (session,) = parse_run(
        tmp_path, [system(0), user(1), action(2, "c1"), system(3), observation(4, 2, "c1")]
    )
    assert _shape(session.messages) == ["system", "user", "assistant c1", "tool c1", "system"]
    _no_repair_but_the_move(session)


def _claude(tmp_path: Path, records: list[dict[str, Any]]) -> ParsedSession:
    common = {
        "sessionId": "s1",
        "version": "2.1.29",
        "cwd": "/w",
        "userType": "external",
        "isSidechain": False,
    }
    path = tmp_path / "s1.jsonl"
    lines, parent = [], None
    for n, record in enumerate(records):
        line = (
            common | {"uuid": f"u{n}", "parentUuid": parent, "timestamp": f"2026-01-01T00:00:0{n}Z"} | record
        )
        lines.append(json.dumps(line))
        parent = f"u{n}"
    path.write_text("\n".join(lines) + "\n")
    (session,) = parse(path, "claude-code")
    return session


def test_a_claude_code_meta_message_between_a_call_and_its_result(tmp_path: Path) -> None:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}
    session = _claude(
        tmp_path,
        [
            {"type": "user", "message": {"role": "user", "content": "list the files"}},
            {"type": "assistant", "message": {"id": "msg_1", "role": "assistant", "content": [tool_use]}},
            {
                "type": "user",
                "isMeta": True,
                "message": {"role": "user", "content": "<system-reminder>hook ran</system-reminder>"},
            },
            {"type": "user", "message": {"role": "user", "content": [result]}},
            {
                "type": "assistant",
                "message": {"id": "msg_2", "role": "assistant", "content": "a.py is there"},
            },
        ],
    )
    assert _shape(session.messages) == ["user", "assistant toolu_1", "tool toolu_1", "user", "assistant"]
    assert session.messages[3].kind == "meta" and "hook ran" in session.messages[3].text
    _no_repair_but_the_move(session)
