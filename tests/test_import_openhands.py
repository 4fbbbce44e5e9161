"""OpenHands import: the corpus files, repairs on crafted runs, malformed records refused by line.

The pinned numbers were counted from the raw files with jq (commands beside them), never taken from
the importer's output; a second, plain count over the raw JSON re-checks them against the files.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from tests.conftest import CORPUS
from tests.helpers import dump
from tests.import_checks import assert_paired, refused, surrogate_line
from transcript import FormatError, Store, verify
from transcript.formats import parse
from transcript.formats.pairing import SESSION_END_RESULT
from transcript.model import INTERRUPTED_RESULT

MULTI = CORPUS / "openhands_multiswe_ponyc_output.jsonl"
GUI = CORPUS / "openhands_basic_gui_mode.json"
HAS_DETECT = importlib.util.find_spec("transcript.formats.detect") is not None

# Per session: (session id, messages, tool calls, repairs). Counted with
#   jq -c '[.instance_id, (.history|length), ([.history[]|select(.observation=="null" or
#     .observation=="agent_state_changed" or .action=="change_agent_state" or .action=="recall")]|length),
#     ([.history[]|select(.action and .tool_call_metadata)]|length)]' openhands_multiswe_ponyc_output.jsonl
#   -> ["ponylang__ponyc-4595",49,1,23] ["ponylang__ponyc-4593",70,1,33] ["ponylang__ponyc-4588",103,1,49]
# (the same filters without `.history` on the GUI file -> [18,8,4]). Messages = events - skipped events
# (state changes, null observations, recall actions) + one synthetic result per unanswered call; tool
# calls = actions with tool_call_metadata (each model response made exactly one call:
# `total_calls_in_response` is 1 throughout). Unanswered calls (each one `synthetic_result` repair), by
#   jq -c '[([.history[]|select(.action and .tool_call_metadata)|.tool_call_metadata.tool_call_id]
#     - [.history[]|select(.observation)|.tool_call_metadata.tool_call_id // empty]),
#     ([.history[]|select(.action and .tool_call_metadata)|.id] - [.history[]|select(.observation)|.cause])]'
#   -> [["toolu_23"],[49]] [["toolu_33"],[70]] [[],[]] (and [[],[]] on the GUI file):
# runs 1 and 2 end on an unanswered `finish` call (event 49, event 70), so 48 + 1 and 69 + 1 messages,
# 1 repair each. Listing
#   jq -r '.history[] | "\(.id) \(.action // .observation) \(.tool_call_metadata.tool_call_id) \(.cause)"'
# shows every other tool action's observation right after it; the two `error` observations (run 2 id 29,
# run 3 id 55) carry no call id and come after an answered call, so no other repair.
EXPECTED: dict[Path, list[tuple[str, int, int, int]]] = {
    MULTI: [
        ("ponylang__ponyc-4595", 49, 23, 1),
        ("ponylang__ponyc-4593", 70, 33, 1),
        ("ponylang__ponyc-4588", 102, 49, 0),
    ],
    GUI: [("openhands_basic_gui_mode", 10, 4, 0)],
}
SKIPPED = {("observation", "null"), ("observation", "agent_state_changed")}
SKIPPED |= {("action", "change_agent_state"), ("action", "recall")}


def raw_runs(path: Path) -> list[list[dict[str, Any]]]:
    """The event lists of a corpus file, read with the standard library."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    return [json.loads(line)["history"] for line in text.splitlines() if line.strip()]


def raw_counts(events: list[dict[str, Any]]) -> tuple[int, int, int]:
    """Messages, tool calls and unanswered calls as counted straight from the events.

    A call is unanswered when no observation names its call id or its action as `cause`; each gets
    one synthetic result, so messages = kept events + unanswered calls.
    """
    kept = [e for e in events if ("action", e.get("action")) not in SKIPPED]
    kept = [e for e in kept if ("observation", e.get("observation")) not in SKIPPED]
    calls = [e for e in kept if "action" in e and e.get("tool_call_metadata")]
    observations = [e for e in kept if "observation" in e]
    answered = {(e.get("tool_call_metadata") or {}).get("tool_call_id") for e in observations}
    causes = {e.get("cause") for e in observations}
    unanswered = [
        c for c in calls if c["tool_call_metadata"]["tool_call_id"] not in answered and c["id"] not in causes
    ]
    return len(kept) + len(unanswered), len(calls), len(unanswered)


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_corpus_counts(path: Path) -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        report = store.import_file(path, format="openhands")
    got = [(s.session_id, s.messages, s.tool_calls, len(s.repairs)) for s in report.sessions]
    assert got == EXPECTED[path]
    for events, (_, messages, calls, repairs) in zip(raw_runs(path), EXPECTED[path], strict=True):
        assert raw_counts(events) == (messages, calls, repairs)


@pytest.mark.skipif(not HAS_DETECT, reason="format detection is not there yet")
@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_auto_detects_openhands(path: Path) -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        report = store.import_file(path, format="auto")
    assert report.format == "openhands"
    assert [s.session_id for s in report.sessions] == [e[0] for e in EXPECTED[path]]


def test_file_store_verifies_and_views_hold_every_message(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Store.open(db, tokenizer="chars/4") as store:
        for path in EXPECTED:
            store.import_file(path, format="openhands")
        for info in store.sessions():
            session = store.session(info.session_id, create=False)
            stored = session.stored_messages()
            assert [m.id for m in session.visible_messages().messages] == [m.id for m in stored]
            assert_paired(stored)
    assert verify(db).ok


def test_reimport_is_a_no_op() -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        first = store.import_file(MULTI, format="openhands")
        before = dump(store)
        again = store.import_file(MULTI, format="openhands")
        assert [s.session_id for s in again.sessions] == [s.session_id for s in first.sessions]
        assert all(s.appended == 0 for s in again.sessions)
        assert dump(store) == before


def test_skipped_events_are_counted_not_silent() -> None:
    (session,) = parse(GUI, "openhands")
    # jq -c '[.[] | (.action // .observation)] | group_by(.) | map([.[0], length])' on the GUI file
    assert session.metadata["skipped"] == {
        "agent_state_changed observation": 4,
        "change_agent_state action": 1,
        "null observation": 3,
    }
    assert "skipped 4 agent_state_changed observation events (no conversation content)" in session.warnings
    assert "timestamps carry no time zone; read as UTC" in session.warnings
    assert all(m.created_at.tzinfo is not None for m in session.messages)


def test_tool_call_keeps_the_models_own_text_and_call() -> None:
    (session,) = parse(GUI, "openhands")
    roles = [m.role for m in session.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    first = session.messages[1]
    assert first.id == "openhands_basic_gui_mode/7"
    assert first.text.startswith("I'll help you create a Vue.js application")
    (call,) = first.tool_calls
    assert (call.id, call.name, call.input) == (
        "toolu_01W9Z8jBctr8X2frZV9p1RYs",
        "execute_bash",
        {"command": "mkdir -p /workspace/todo-app"},
    )
    (result,) = session.messages[2].tool_results
    assert (result.call_id, result.name, result.is_error) == (call.id, "execute_bash", False)
    assert session.messages[-1].text.startswith("I've created a complete Vue.js todo application")


def test_runs_become_sessions_with_system_recall_and_a_finish_that_ends_them() -> None:
    sessions = parse(MULTI, "openhands")
    first = sessions[0]
    assert first.metadata["instance_id"] == "ponylang__ponyc-4595"
    assert first.metadata["tools"][:2] == ["execute_bash", "think"]
    kinds = [(m.role, m.kind) for m in first.messages[:3]]
    assert kinds == [
        ("system", "message"),
        ("user", "message"),
        ("user", "meta"),
    ]  # recall: workspace context
    # the run ends on a `finish` call (event 49), which OpenHands never answers by design: a plain result
    # (not an error) closes it, named
    finish, closing = first.messages[-2:]
    assert (finish.id, finish.tool_calls[0].name) == ("ponylang__ponyc-4595/49", "finish")
    (result,) = closing.tool_results
    assert (result.call_id, result.content, result.is_error) == ("toolu_23", SESSION_END_RESULT, False)
    assert [(r.kind, r.call_id, r.message_id) for r in first.repairs] == [
        ("session_end_result", "toolu_23", "ponylang__ponyc-4595/49/interrupted-0")
    ]
    no_error_results = [r for s in sessions for m in s.messages for r in m.tool_results if r.name == "finish"]
    assert no_error_results and not any(r.is_error for r in no_error_results)
    # the `error` observation without a call id (run 2, event 29) is shown to the model as user text
    error = next(m for m in sessions[1].messages if m.id == "ponylang__ponyc-4593/29")
    assert (error.role, error.metadata) == ("user", {"observation": "error"})
    assert "Agent reached maximum iteration" in sessions[2].metadata["error"]


# crafted runs: each repair the importer makes

T = "2025-01-01T00:00:00"


def action(event_id: int, call_id: str | None, response: str | None = None, **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"id": event_id, "timestamp": T, "source": "agent", "action": "run"}
    event["args"] = {"command": "ls", "thought": "look"}
    if call_id is not None:
        calls = extra.pop("calls", [call_id])
        tool_calls = [
            {
                "id": c,
                "type": "function",
                "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'},
            }
            for c in calls
        ]
        message = {"role": "assistant", "content": "look", "tool_calls": tool_calls}
        event["tool_call_metadata"] = {
            "function_name": "execute_bash",
            "tool_call_id": call_id,
            "model_response": {"id": response or f"resp-{event_id}", "choices": [{"message": message}]},
        }
    return event | extra


def observation(
    event_id: int, cause: int | None, call_id: str | None, content: str = "a.py"
) -> dict[str, Any]:
    event: dict[str, Any] = {"id": event_id, "timestamp": T, "source": "agent", "observation": "run"}
    event |= {"content": content, "extras": {}}
    if cause is not None:
        event["cause"] = cause
    if call_id is not None:
        event["tool_call_metadata"] = {"function_name": "execute_bash", "tool_call_id": call_id}
    return event


def user(event_id: int, text: str = "go on") -> dict[str, Any]:
    return {"id": event_id, "timestamp": T, "source": "user", "action": "message", "args": {"content": text}}


def system(event_id: int) -> dict[str, Any]:
    args = {
        "content": "You are an agent.",
        "tools": [{"type": "function", "function": {"name": "execute_bash"}}],
    }
    return {"id": event_id, "timestamp": T, "source": "agent", "action": "system", "args": args}


def parse_run(tmp: Path, events: list[dict[str, Any]], instance: str = "inst-1") -> list[Any]:
    path = tmp / "run.jsonl"
    path.write_text(json.dumps({"instance_id": instance, "history": events}) + "\n", encoding="utf-8")
    return parse(path, "openhands")


def test_unanswered_call_before_the_next_message_gets_an_interrupted_result(tmp_path: Path) -> None:
    (session,) = parse_run(tmp_path, [system(0), user(1), action(2, "c1"), user(3), observation(4, 2, "c1")])
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "user", "user"]
    synthetic = session.messages[3]
    assert synthetic.id == "inst-1/2/interrupted-0"
    (result,) = synthetic.tool_results
    assert (result.call_id, result.is_error, result.text) == ("c1", True, INTERRUPTED_RESULT)
    kinds = [(r.kind, r.call_id, r.line) for r in session.repairs]
    # the late observation answers nothing any more: kept as user text, named
    assert kinds == [("synthetic_result", "c1", 1), ("orphan_result_as_text", "c1", 1)]
    assert session.messages[-1].text.endswith("a.py")
    assert_paired(session.messages)


def test_parallel_calls_of_one_model_response_join_one_message(tmp_path: Path) -> None:
    events = [
        user(0),
        action(1, "c1", response="r", calls=["c1", "c2"]),
        observation(2, 1, "c1", "one"),
        action(3, "c2", response="r", calls=["c1", "c2"]),
        observation(4, 3, "c2", "two"),
    ]
    (session,) = parse_run(tmp_path, events)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in session.messages[1].tool_calls] == ["c1", "c2"]
    assert [m.text for m in session.messages[2:]] == ["one", "two"]
    assert [(r.kind, r.message_id) for r in session.repairs] == [("merged_split_message", "inst-1/1")]
    assert_paired(session.messages)


def test_cause_links_a_result_when_the_observation_has_no_call_id(tmp_path: Path) -> None:
    (session,) = parse_run(tmp_path, [user(0), action(1, "c1"), observation(2, 1, None)])
    assert session.messages[-1].tool_results[0].call_id == "c1"
    assert session.repairs == []


def test_duplicate_instance_ids_get_distinct_sessions(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    run = json.dumps({"instance_id": "same", "history": [user(0)]})
    path.write_text(f"{run}\n{run}\n", encoding="utf-8")
    assert [s.session_id for s in parse(path, "openhands")] == ["same", "same@line2"]


# malformed records: refused with the line, nothing stored

BASE: list[dict[str, Any]] = [
    system(0),
    user(1),
    action(2, "call_1"),
    observation(3, 2, "call_1"),
    user(4, "thanks"),
]
WRONG = st.sampled_from(["x", 1.5, None, [1], True, {"a": 1}])
MUTATIONS = st.one_of(
    st.tuples(st.just("set"), st.just("id"), WRONG),
    st.tuples(st.just("set"), st.just("source"), st.sampled_from([7, "robot", None])),
    st.tuples(st.just("set"), st.just("timestamp"), st.sampled_from([7, "yesterday", [T]])),
    st.tuples(st.just("set"), st.just("message"), st.sampled_from([7, ["x"], {"a": 1}])),
    st.tuples(st.just("set"), st.just("tool_call_metadata"), st.sampled_from(["x", 7, [1]])),
    st.tuples(st.just("delete"), st.just("id"), st.none()),
    st.tuples(st.just("surrogate"), st.just("message"), st.none()),
)


def mutate(events: list[dict[str, Any]], index: int, mutation: tuple[str, str, Any]) -> list[dict[str, Any]]:
    events = copy.deepcopy(events)
    how, key, value = mutation
    if how == "set":
        events[index][key] = value
    elif how == "delete":
        del events[index][key]
    else:
        events[index][key] = "half \ud800 a pair"
    return events


def seeded_store(tmp: Path) -> Store:
    store = Store.open(":memory:", tokenizer="chars/4")
    good = tmp / "good.jsonl"
    good.write_text(json.dumps({"instance_id": "kept", "history": BASE}) + "\n", encoding="utf-8")
    store.import_file(good, format="openhands")
    return store


@given(
    before=st.integers(0, 3),
    index=st.integers(0, len(BASE) - 1),
    mutation=MUTATIONS,
    truncate=st.none() | st.floats(0.01, 0.99),
)
def test_malformed_run_line_is_refused_with_its_line(
    before: int, index: int, mutation: tuple[str, str, Any], truncate: float | None
) -> None:
    lines = [json.dumps({"instance_id": f"ok-{k}", "history": BASE}) for k in range(before)]
    bad = json.dumps({"instance_id": "bad", "history": mutate(BASE, index, mutation)})
    if truncate is not None:
        bad = bad[: max(1, int(len(bad) * truncate))]
    lines += [bad, json.dumps({"instance_id": "after", "history": BASE})]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with seeded_store(Path(tmp)) as store:
            stored = dump(store)
            with pytest.raises(FormatError) as caught:
                store.import_file(path, format="openhands")
            assert dump(store) == stored
    assert caught.value.line == before + 1
    assert str(path) in str(caught.value)


def marked_line(events: list[Any], index: int) -> int:
    """The line where event `index` starts in `json.dumps(events, indent=2)`, found with a marker."""
    marked = [*events[:index], "@@MARK@@", *events[index + 1 :]]
    text = json.dumps(marked, indent=2)
    return text[: text.index('"@@MARK@@"')].count("\n") + 1


@given(index=st.integers(0, len(BASE) - 1), mutation=MUTATIONS)
def test_malformed_event_of_an_array_is_refused_with_its_line(
    index: int, mutation: tuple[str, str, Any]
) -> None:
    events = mutate(BASE, index, mutation)
    text = json.dumps(events, indent=2)
    expected = surrogate_line(text) if mutation[0] == "surrogate" else marked_line(events, index)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trajectory.json"
        path.write_text(text, encoding="utf-8")
        with seeded_store(Path(tmp)) as store:
            error = refused(store, path, "openhands")
    assert error.line == expected
    if mutation[0] != "surrogate":
        assert f"history[{index}]" in error.reason


@given(cut=st.floats(0.05, 0.95))
def test_truncated_array_is_refused_with_a_line(cut: float) -> None:
    text = json.dumps(BASE, indent=2)
    text = text[: int(len(text) * cut)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trajectory.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(FormatError) as caught:
            parse(path, "openhands")
    assert caught.value.line is not None
    assert 1 <= caught.value.line <= text.count("\n") + 1


# the older serialization (resolver output): no id, source or cause

RESOLVER = CORPUS.parent / "formats" / "openhands" / "resolver_output_flat_history.jsonl"


def test_resolver_output_imports_every_history_item_as_text_actions_and_observations() -> None:
    run = json.loads(RESOLVER.read_text(encoding="utf-8").splitlines()[0])
    history = run["history"]
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(RESOLVER)
    assert report.format == "openhands"
    (session,) = report.sessions
    issue = run["issue"]
    assert session.session_id == f"{issue['owner']}/{issue['repo']}#{issue['number']}"
    assert session.title == issue["title"]
    assert (session.messages, session.tool_calls, session.repairs) == (len(history), 0, ())
    messages = store.session(session.session_id).stored_messages()
    for item, message in zip(history, messages, strict=True):
        if "observation" in item:
            assert message.role == "user" and message.metadata is not None
            assert message.metadata["observation"] == item["observation"] and message.text == item["content"]
        elif item is history[0]:
            assert (message.role, message.text) == ("user", item["content"])
        else:
            assert message.role == "assistant" and message.metadata == {"action": item["action"]} | (
                {"outputs": item["outputs"]} if item.get("outputs") else {}
            )
            assert message.text.startswith(item["thought"])
            for key, tag in (("command", "execute_bash"), ("code", "execute_ipython")):
                if key in item:
                    assert f"<{tag}>\n{item[key]}\n</{tag}>" in message.text
    assert history[-1]["action"] == "finish" and not any(r.is_error for m in messages for r in m.tool_results)
