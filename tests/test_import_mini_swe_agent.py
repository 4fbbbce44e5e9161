"""Importing mini-swe-agent trajectories (bare arrays and 1.1 objects) and JSON documents of OpenAI chat
messages (what `json.dump(messages)` writes from a chat loop)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.observations import is_observation
from tests.conftest import PROJECT_ROOT
from tests.import_checks import assert_paired, refused
from transcript import Store
from transcript.formats import parse

FIXTURES = PROJECT_ROOT / "fixtures" / "formats"
TRAJECTORIES = sorted((FIXTURES / "mini-swe-agent").glob("*.traj.json"))
DJANGO = FIXTURES / "mini-swe-agent" / "django__django-11039.traj.json"
ISSUE = FIXTURES / "mini-swe-agent" / "github_issue.traj.json"
DUMPED = FIXTURES / "openai-json" / "weather_loop_built.json"


def _messages(path: Path) -> list[dict[str, Any]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return list(document["messages"] if isinstance(document, dict) else document)


def _counts(path: Path) -> tuple[int, int, int]:
    """(messages, tool calls, repairs) from the JSON: every message but `exit`, which is one only when it
    answers a call left pending; a tool message answering no call of the step before it is kept as
    text; a call left without a result gets a synthetic one."""
    messages, calls, repairs = 0, 0, 0
    pending: set[str] = set()
    for message in _messages(path):
        role = message["role"]
        if role == "assistant":
            repairs += len(pending)
            messages += 1 + len(pending)
            pending = {c["id"] for c in message.get("tool_calls") or []}
            calls += len(pending)
        elif role == "tool":
            repairs += message["tool_call_id"] not in pending
            pending.discard(message["tool_call_id"])
            messages += 1
        elif role == "exit":
            messages += bool(pending)
            pending = set(list(pending)[1:])
        else:
            repairs += len(pending)
            messages += 1 + len(pending)
            pending = set()
    return messages + len(pending), calls, repairs + len(pending)


@pytest.mark.parametrize("path", [*TRAJECTORIES, DUMPED], ids=lambda p: p.name)
def test_counts_equal_a_count_of_the_raw_file(path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path)
    assert report.format == ("openai-json" if path == DUMPED else "mini-swe-agent")
    (session,) = report.sessions
    assert (session.messages, session.tool_calls, len(session.repairs)) == _counts(path)
    assert_paired([m for m in store.session(session.session_id).stored_messages() if m.role != "user"])


def test_text_actions_and_their_outputs_are_observations() -> None:
    (session,) = parse(ISSUE, "mini-swe-agent")
    raw = _messages(ISSUE)
    for previous, message, record in zip(session.messages, session.messages[1:], raw[1:], strict=False):
        if message.role == "user" and previous.role == "assistant":
            assert is_observation(message, previous)
            assert (message.metadata or {})["observation"] in ("returncode", "feedback")
        if message.role == "assistant":
            command = record["content"].split("```mswea_bash_command\n", 1)[1].split("\n```", 1)[0]
            assert message.metadata == {"action": command}
    task = session.messages[1]
    assert task.role == "user" and not is_observation(task, session.messages[0])


def test_tool_calling_trajectory_metadata_and_exit() -> None:
    (session,) = parse(DJANGO, "mini-swe-agent")
    document = json.loads(DJANGO.read_text(encoding="utf-8"))
    info = document["info"]
    assert session.session_id == document["instance_id"]
    assert session.metadata["exit_status"] == info["exit_status"]
    assert session.metadata["model"] == info["config"]["model"]["model_name"]
    exit_record = document["messages"][-1]
    last = session.messages[-1]
    (result,) = last.tool_results
    assert result.content == exit_record["content"] and not result.is_error
    assert result.call_id == document["messages"][-2]["tool_calls"][0]["id"]
    first_step = session.messages[2]
    usage = document["messages"][2]["extra"]["response"]["usage"]
    assert (
        first_step.metadata is not None
        and first_step.metadata["usage"]["prompt_tokens"] == usage["prompt_tokens"]
    )


def test_a_dumped_chat_loop_keeps_its_calls_and_results() -> None:
    (session,) = parse(DUMPED, "openai-json")
    raw = _messages(DUMPED)
    assert [m.role for m in session.messages] == [r["role"] for r in raw]
    assert [c.input for c in session.messages[2].tool_calls] == [
        json.loads(c["function"]["arguments"]) for c in raw[2]["tool_calls"]
    ]


def test_a_bad_message_is_refused_naming_its_line(tmp_path: Path) -> None:
    messages = _messages(ISSUE)
    messages.insert(3, {"role": "robot", "content": "beep"})
    path = tmp_path / "bad.traj.json"
    path.write_text(json.dumps(messages, indent=2), encoding="utf-8")
    error = refused(Store.open(":memory:", tokenizer="chars/4"), path, "mini-swe-agent")
    assert "messages[3]" in error.reason and "unknown role" in error.reason
    opening = path.read_text(encoding="utf-8").splitlines().index('    "role": "robot",')  # 0-based
    assert error.line == opening  # the 1-based line of the `{` just before it
