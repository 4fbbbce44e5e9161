"""SWE-agent import: both corpus styles, reused call ids, repairs, malformed entries refused by line.

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
from transcript import FormatError, ReasoningPart, Store, ToolCall, verify
from transcript.formats import parse
from transcript.model import INTERRUPTED_RESULT

FC = CORPUS / "sweagent_marshmallow-1867_fc.traj"
OLD = CORPUS / "sweagent_pydicom-1458_gpt4.traj"
HAS_DETECT = importlib.util.find_spec("transcript.formats.detect") is not None

# One session per file: (session id, messages, tool calls, repairs). Counted with
#   jq -c '[(.history|length), ([.history[].tool_calls // [] | length] | add),
#     ([.history[] | select(.role=="tool")] | length), ([.history[] | select(.is_demo==true)] | length)]'
#   -> marshmallow [28,13,13,0], pydicom [26,0,0,1]
# Messages = history entries (none is dropped; the demo entry is kept) + one synthetic result per call
# left unanswered (none here); tool calls = `tool_calls` items. Repairs 0:
#   jq -r '.history[] | "\(.role) \([.tool_calls[]?.id] + (.tool_call_ids // []) | join(","))"'
# shows each assistant entry with one call followed by the tool entry with that id (ids repeat across
# steps, never inside one message; the last entry answers the last call), and the pydicom file has no
# call ids at all.
EXPECTED: dict[Path, tuple[str, int, int, int]] = {
    FC: ("sweagent_marshmallow-1867_fc", 28, 13, 0),
    OLD: ("sweagent_pydicom-1458_gpt4", 26, 0, 0),
}


def raw_counts(path: Path) -> tuple[int, int, int]:
    """Messages, tool calls and unanswered calls as counted straight from the file's `history`.

    A call is unanswered when no `tool` entry names it before the next other entry (or the end);
    each gets one synthetic result, so messages = entries + unanswered calls.
    """
    history = json.loads(path.read_text(encoding="utf-8"))["history"]
    unanswered, waiting = 0, list[str]()
    for entry in [*history, {"role": "end"}]:
        if entry["role"] == "tool" and entry["tool_call_ids"][0] in waiting:
            waiting.remove(entry["tool_call_ids"][0])
        elif entry["role"] != "tool":
            unanswered += len(waiting)
            waiting = [call["id"] for call in entry.get("tool_calls") or []]
    calls = sum(len(entry.get("tool_calls") or []) for entry in history)
    return len(history) + unanswered, calls, unanswered


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_corpus_counts(path: Path) -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        report = store.import_file(path, format="swe-agent")
    (session,) = report.sessions
    assert (session.session_id, session.messages, session.tool_calls, len(session.repairs)) == EXPECTED[path]
    assert raw_counts(path) == EXPECTED[path][1:]


@pytest.mark.skipif(not HAS_DETECT, reason="format detection is not there yet")
@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_auto_detects_swe_agent(path: Path) -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        report = store.import_file(path, format="auto")
    assert report.format == "swe-agent"


def test_file_store_verifies_and_views_hold_every_message(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Store.open(db, tokenizer="chars/4") as store:
        for path in EXPECTED:
            store.import_file(path, format="swe-agent")
        for info in store.sessions():
            session = store.session(info.session_id, create=False)
            stored = session.stored_messages()
            assert [m.id for m in session.visible_messages().messages] == [m.id for m in stored]
            assert_paired(stored)
    assert verify(db).ok


def test_reimport_is_a_no_op() -> None:
    with Store.open(":memory:", tokenizer="chars/4") as store:
        store.import_file(FC, format="swe-agent")
        before = dump(store)
        (again,) = store.import_file(FC, format="swe-agent").sessions
        assert again.appended == 0
        assert dump(store) == before


def test_reused_call_id_pairs_with_the_closest_preceding_call() -> None:
    (session,) = parse(FC, "swe-agent")
    messages = {m.id: m for m in session.messages}
    reused = "call_5iDdbOYybq7L19vqXmR0DPaU"
    # history indexes 12/14/22/24 call it, and 13/15/23/25 answer it (jq listing above)
    for call_at in (12, 14, 22, 24):
        (call,) = messages[f"{session.session_id}/{call_at}"].tool_calls
        (result,) = messages[f"{session.session_id}/{call_at + 1}"].tool_results
        assert call.id == result.call_id == reused
    assert len(messages) == len(session.messages)  # message ids unique although call ids repeat
    assert messages[f"{session.session_id}/13"].text.startswith("344")
    assert messages[f"{session.session_id}/23"].text.startswith("345")


def test_function_calling_entries_keep_role_text_and_call() -> None:
    (session,) = parse(FC, "swe-agent")
    raw = json.loads(FC.read_text(encoding="utf-8"))["history"]
    assert [m.role for m in session.messages] == [entry["role"] for entry in raw]
    step = session.messages[2]
    assert step.text == raw[2]["content"]
    (call,) = step.tool_calls
    assert (call.name, call.input) == ("bash", {"command": "ls -F"})
    assert step.metadata == {"message_type": "action"}  # thought == content, action renders the call
    assert session.metadata == {"exit_status": "submitted"}  # jq .info.exit_status


def test_older_style_keeps_observations_as_user_messages_and_marks_the_demo() -> None:
    (session,) = parse(OLD, "swe-agent")
    raw = json.loads(OLD.read_text(encoding="utf-8"))["history"]
    assert [m.role for m in session.messages] == [entry["role"] for entry in raw]
    assert [m.text for m in session.messages] == [entry["content"] for entry in raw]
    demo = session.messages[1]
    assert demo.metadata == {"demo": True}
    assert session.metadata == {"exit_status": "submitted", "demo_messages": 1}
    assert all(m.created_at.tzinfo is not None for m in session.messages)


# crafted trajectories: each repair the importer makes


def call(call_id: str, command: str = "ls") -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def assistant(*call_ids: str, content: str = "look") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [call(c) for c in call_ids]}


def tool(call_id: str, content: str = "a.py") -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_ids": [call_id]}


def parse_history(tmp: Path, history: list[Any]) -> Any:
    path = tmp / "inst.traj"
    path.write_text(json.dumps({"trajectory": [], "history": history}), encoding="utf-8")
    (session,) = parse(path, "swe-agent")
    return session


def test_call_id_used_twice_in_one_message_is_renamed(tmp_path: Path) -> None:
    history = [{"role": "user", "content": "go"}, assistant("c1", "c1"), tool("c1", "one"), tool("c1", "two")]
    session = parse_history(tmp_path, history)
    assert [c.id for c in session.messages[1].tool_calls] == ["c1", "c1#2"]
    assert [m.tool_results[0].call_id for m in session.messages[2:]] == ["c1", "c1#2"]
    assert [(r.kind, r.call_id, r.message_id) for r in session.repairs] == [
        ("call_id_renamed", "c1", "inst/1")
    ]
    assert_paired(session.messages)


def test_unanswered_call_and_orphan_result_are_repaired_and_named(tmp_path: Path) -> None:
    history = [assistant("c1"), {"role": "user", "content": "format error"}, tool("c9")]
    session = parse_history(tmp_path, history)
    assert [m.role for m in session.messages] == ["assistant", "tool", "user", "user"]
    (synthetic,) = session.messages[1].tool_results
    assert (synthetic.call_id, synthetic.is_error, synthetic.text) == ("c1", True, INTERRUPTED_RESULT)
    assert session.messages[3].metadata == {"orphan_result": "c9"}
    assert session.messages[3].text.endswith("a.py")
    lines = [(r.kind, r.line) for r in session.repairs]
    # the document is one line; the synthetic repair names the assistant entry's line
    assert lines == [("synthetic_result", 1), ("orphan_result_as_text", 1)]
    assert_paired(session.messages)


def test_trailing_unanswered_call_gets_an_interrupted_result_too(tmp_path: Path) -> None:
    session = parse_history(tmp_path, [{"role": "user", "content": "go"}, assistant("c1")])
    assert [m.id for m in session.messages] == ["inst/0", "inst/1", "inst/1/interrupted-0"]
    (synthetic,) = session.messages[2].tool_results
    assert (synthetic.call_id, synthetic.content, synthetic.is_error) == ("c1", INTERRUPTED_RESULT, True)
    assert [(r.kind, r.call_id, r.message_id) for r in session.repairs] == [
        ("synthetic_result", "c1", "inst/1/interrupted-0")
    ]
    assert session.warnings == []
    assert_paired(session.messages)


def test_thinking_blocks_and_non_json_arguments_are_kept(tmp_path: Path) -> None:
    step = assistant("c1")
    step["tool_calls"][0]["function"]["arguments"] = "ls -F {"
    step["thinking_blocks"] = [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]
    session = parse_history(tmp_path, [step, tool("c1")])
    reasoning, _, tool_call = session.messages[0].parts
    assert isinstance(reasoning, ReasoningPart) and isinstance(tool_call, ToolCall)
    assert (reasoning.text, reasoning.signature) == ("hmm", "sig")
    assert (tool_call.input, tool_call.raw_input) == (None, "ls -F {")


# malformed entries: refused with the line, nothing stored

BASE: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "fix it", "is_demo": True},
    assistant("c1"),
    tool("c1"),
    assistant("c1"),
    tool("c1"),
    {"role": "assistant", "content": "done"},
]
ANY_ENTRY = st.one_of(
    st.tuples(st.just("role"), st.sampled_from([7, "robot", None, "developer"])),
    st.tuples(st.just("content"), st.sampled_from([7, {"a": 1}, [{"type": "video"}], [7], True])),
    st.tuples(st.just("entry"), st.sampled_from([7, "x", None, ["role", "user"]])),
    st.tuples(st.just("surrogate"), st.none()),
)
CALL_ENTRY = st.tuples(
    st.just("tool_calls"), st.sampled_from(["x", [7], [{"function": {"name": "bash", "arguments": "{}"}}]])
)
TOOL_ENTRY = st.tuples(st.just("tool_call_ids"), st.sampled_from(["c1", [], [7], [""], None]))


@st.composite
def mutations(draw: st.DrawFn) -> tuple[int, tuple[str, Any]]:
    index = draw(st.integers(0, len(BASE) - 1))
    options = [ANY_ENTRY]
    if BASE[index]["role"] == "assistant":
        options.append(CALL_ENTRY)
    if BASE[index]["role"] == "tool":
        options.append(TOOL_ENTRY)
    return index, draw(st.one_of(options))


def mutate(index: int, mutation: tuple[str, Any]) -> list[Any]:
    history: list[Any] = copy.deepcopy(BASE)
    key, value = mutation
    if key == "entry":
        history[index] = value
    elif key == "surrogate":
        history[index]["content"] = "half \ud800 a pair"
    elif value is None:
        history[index].pop(key, None)
    else:
        history[index][key] = value
    return history


def document(history: list[Any]) -> dict[str, Any]:
    # `trajectory` first, so finding a line means skipping a key that holds other entries
    return {"trajectory": [{"messages": [{"role": "user"}]}], "history": history, "info": {}}


def marked_line(history: list[Any], index: int) -> int:
    """The line where entry `index` starts in the indented document, found with a marker."""
    marked = [*history[:index], "@@MARK@@", *history[index + 1 :]]
    text = json.dumps(document(marked), indent=2)
    return text[: text.index('"@@MARK@@"')].count("\n") + 1


def seeded_store(tmp: Path) -> Store:
    store = Store.open(":memory:", tokenizer="chars/4")
    good = tmp / "kept.traj"
    good.write_text(json.dumps(document(BASE)), encoding="utf-8")
    store.import_file(good, format="swe-agent")
    return store


@given(case=mutations())
def test_malformed_entry_is_refused_with_its_line(case: tuple[int, tuple[str, Any]]) -> None:
    index, mutation = case
    history = mutate(index, mutation)
    text = json.dumps(document(history), indent=2)
    expected = surrogate_line(text) if mutation[0] == "surrogate" else marked_line(history, index)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.traj"
        path.write_text(text, encoding="utf-8")
        with seeded_store(Path(tmp)) as store:
            error = refused(store, path, "swe-agent")
    assert error.line == expected
    if mutation[0] != "surrogate":
        assert f"history[{index}]" in error.reason


@given(cut=st.floats(0.02, 0.98))
def test_truncated_trajectory_is_refused_with_a_line(cut: float) -> None:
    text = json.dumps(document(BASE), indent=2)
    text = text[: int(len(text) * cut)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cut.traj"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(FormatError) as caught:
            parse(path, "swe-agent")
    assert caught.value.line is not None
    assert 1 <= caught.value.line <= text.count("\n") + 1


def test_missing_history_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.traj"
    path.write_text(json.dumps({"trajectory": []}), encoding="utf-8")
    with pytest.raises(FormatError, match="'history' list"):
        parse(path, "swe-agent")
