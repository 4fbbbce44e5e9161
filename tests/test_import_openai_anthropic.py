"""OpenAI chat JSONL and Anthropic Messages JSON: import, repairs, refusals, export round trips."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, strategies as st

from tests.helpers import dump
from tests.import_checks import assert_paired
from transcript import FormatError, Store, verify
from transcript.formats import anthropic_messages, openai_chat, parse
from transcript.formats.base import UNDATED
from transcript.model import (
    INTERRUPTED_RESULT,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    ResultContent,
    TextPart,
    ToolCall,
    ToolResult,
)
from transcript.model.hashing import body_hash

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OPENAI = FIXTURES / "openai_chat_sample.jsonl"
CONVERSATIONS = FIXTURES / "openai_conversations_sample.jsonl"
ANTHROPIC = FIXTURES / "anthropic_messages_sample.json"

# Hand-counted from the fixtures (which were written by hand for these tests):
# session id -> (messages, tool calls, repairs).
# - openai_chat_sample.jsonl: 11 non-empty lines, one message each; tool_calls on lines 3 (2, parallel),
#   6 (1, invalid-JSON arguments) and 8 (1); every call answered -> no repair.
# - openai_conversations_sample.jsonl: line 1 holds 5 messages, 1 call; line 2 holds 5 messages and a
#   parallel pair of calls of which only call_b1 is answered before the user speaks again -> one
#   synthetic result, 6 messages; line 3 holds 2 messages, no call.
# - anthropic_messages_sample.json: system (1) + messages[0] user (1) + [1] assistant with 2 tool_use (1)
#   + [2] two tool_result and one text block (3) + [3] assistant with 1 tool_use (1) + [4] one
#   tool_result (1) + [5] assistant (1) + [6] user (1) = 10 messages, 3 calls, no repair.
EXPECTED: dict[Path, tuple[str, dict[str, tuple[int, int, int]]]] = {
    OPENAI: ("openai-jsonl", {"openai_chat_sample": (11, 4, 0)}),
    CONVERSATIONS: (
        "openai-jsonl",
        {
            "openai_conversations_sample:1": (5, 1, 0),
            "openai_conversations_sample:2": (6, 2, 1),
            "openai_conversations_sample:3": (2, 0, 0),
        },
    ),
    ANTHROPIC: ("anthropic-json", {"anthropic_messages_sample": (10, 3, 0)}),
}


def _raw_counts(path: Path) -> list[tuple[int, int]]:
    """(messages, calls) per session straight from the raw JSON, before any repair (not the importer)."""
    if path.suffix == ".json":
        body = json.loads(path.read_text())
        messages = 1 if "system" in body else 0
        calls = 0
        for message in body["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else [{"type": "text"}]
            kinds = [b["type"] for b in blocks]
            calls += kinds.count("tool_use")
            if message["role"] == "assistant":
                messages += 1
                continue
            runs = sum(
                1
                for i, k in enumerate(kinds)
                if k != "tool_result" and (i == 0 or kinds[i - 1] == "tool_result")
            )
            messages += kinds.count("tool_result") + runs
        return [(messages, calls)]
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if "messages" in records[0]:
        return [
            (len(r["messages"]), sum(len(m.get("tool_calls") or []) for m in r["messages"])) for r in records
        ]
    return [(len(records), sum(len(r.get("tool_calls") or []) for r in records))]


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_hand_counts_agree_with_a_raw_count(path: Path) -> None:
    _, sessions = EXPECTED[path]
    assert _raw_counts(path) == [(m - r, c) for m, c, r in sessions.values()]


@pytest.mark.parametrize("format", ["named", "auto"])
@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_fixture_imports_with_pinned_counts(path: Path, format: str) -> None:
    name, sessions = EXPECTED[path]
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path, format=name if format == "named" else "auto")
    assert report.format == name
    got = {s.session_id: (s.messages, s.tool_calls, len(s.repairs)) for s in report.sessions}
    assert got == sessions
    assert all(s.appended == s.messages for s in report.sessions)


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_file_store_verifies_and_serves_every_message(path: Path, tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.db", tokenizer="chars/4") as store:
        report = store.import_file(path)
        for session in report.sessions:
            t = store.session(session.session_id, create=False)
            stored = t.stored_messages()
            assert [m.id for m in t.visible_messages().messages] == [m.id for m in stored]
            assert_paired(stored)
            assert all(m.created_at.tzinfo is not None for m in stored)
    assert verify(tmp_path / "t.db").ok


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name)
def test_reimport_is_a_no_op(path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    first = store.import_file(path)
    before = dump(store)
    second = store.import_file(path)
    assert [s.session_id for s in second.sessions] == [s.session_id for s in first.sessions]
    assert all(s.appended == 0 for s in second.sessions)
    assert dump(store) == before


def test_ids_are_deterministic_and_records_without_a_time_are_undated() -> None:
    first, second = parse(OPENAI, "openai-jsonl"), parse(OPENAI, "openai-jsonl")
    assert [m.id for m in first[0].messages] == [m.id for m in second[0].messages]
    assert first[0].messages[3].id == "openai_chat_sample/3"
    assert {m.created_at for m in first[0].messages} == {UNDATED}


def test_openai_fixture_keeps_media_raw_arguments_and_names() -> None:
    messages = parse(OPENAI, "openai-jsonl")[0].messages
    assert messages[1].metadata == {"line": 2, "name": "jürgen"}
    image = messages[1].parts[1]
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    (raw,) = messages[5].tool_calls
    assert raw.input is None and raw.raw_input == '{"pattern": "def parse", "path": "src/'
    assert [c.input for c in messages[2].tool_calls] == [
        {"path": "tests/test_parser.py"},
        {"args": ["-k", "fullwidth"], "verbose": True},
    ]
    assert [p.name for m in messages for p in m.tool_results][:2] == ["read_file", "run_tests"]


def test_anthropic_fixture_keeps_thinking_signature_redacted_and_results_in_order() -> None:
    messages = parse(ANTHROPIC, "anthropic-json")[0].messages
    roles = "system user assistant tool tool user assistant tool assistant user".split()
    assert [m.role for m in messages] == roles
    thinking = messages[2].parts[0]
    assert (
        isinstance(thinking, ReasoningPart) and thinking.signature and thinking.signature.startswith("EqQB")
    )
    assert isinstance(messages[6].parts[0], RedactedReasoningPart)
    document = messages[1].parts[2]
    assert isinstance(document, DocumentPart) and document.title == "ci-policy.pdf"
    results = [m.tool_results[0] for m in (messages[3], messages[4])]
    assert [r.name for r in results] == ["Read", "Bash"] and [r.is_error for r in results] == [False, True]
    assert messages[5].text == "Also: the badge URL in the README may be stale."


def _write(tmp_path: Path, name: str, lines: Sequence[Any]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def _call(call_id: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "sh", "arguments": arguments}}


def test_an_orphan_result_is_kept_as_user_text(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "orphan.jsonl",
        [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c9", "content": "late"}],
    )
    (session,) = parse(path, "openai-jsonl")
    assert [r.kind for r in session.repairs] == ["orphan_result_as_text"]
    assert session.repairs[0].line == 2 and session.repairs[0].call_id == "c9"
    assert session.messages[1].role == "user" and "late" in session.messages[1].text
    Store.open(":memory:", tokenizer="chars/4").import_file(path, format="openai-jsonl")


def test_unanswered_calls_get_an_interrupted_result_after_their_step_also_at_the_end(tmp_path: Path) -> None:
    lines = [
        {"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "user", "content": "stop"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c3")]},
    ]
    (session,) = parse(_write(tmp_path, "cut.jsonl", lines), "openai-jsonl")
    # each repair names the line of the step whose call went unanswered
    assert [(r.kind, r.call_id, r.line) for r in session.repairs] == [
        ("synthetic_result", "c1", 1),
        ("synthetic_result", "c3", 4),
    ]
    assert [m.role for m in session.messages] == ["assistant", "tool", "tool", "user", "assistant", "tool"]
    # mid-session the synthetic result takes the next position; at the end an id no later line can take
    assert [m.id for m in session.messages] == [
        "cut/0",
        "cut/1",
        "cut/2",
        "cut/3",
        "cut/4",
        "cut/4/interrupted-0",
    ]
    for message, call_id in ((session.messages[2], "c1"), (session.messages[5], "c3")):
        (synthetic,) = message.tool_results
        assert (synthetic.call_id, synthetic.name, synthetic.is_error) == (call_id, "sh", True)
        assert synthetic.content == INTERRUPTED_RESULT and message.metadata == {"synthetic": True}
    assert [r.message_id for r in session.repairs] == ["cut/2", "cut/4/interrupted-0"]


def test_anthropic_text_before_results_is_repaired_and_named(tmp_path: Path) -> None:
    body = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
            ],
        },
    ]
    path = tmp_path / "early.json"
    path.write_text(json.dumps(body))
    (session,) = parse(path, "anthropic-json")
    assert [r.kind for r in session.repairs] == ["synthetic_result", "orphan_result_as_text"]
    assert_paired(session.messages)


def test_developer_is_system_and_exported_back_as_developer() -> None:
    first = parse(CONVERSATIONS, "openai-jsonl")[0]
    assert first.messages[0].role == "system"
    assert json.loads(openai_chat.export(first.messages).splitlines()[0])["role"] == "developer"


def test_timestamps_and_reasoning_content_are_read(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "content": "q", "timestamp": "2025-01-02T03:04:05"},
        {"role": "assistant", "content": "a", "reasoning_content": "think", "created_at": 1735787045},
    ]
    messages = parse(_write(tmp_path, "t.jsonl", lines), "openai-jsonl")[0].messages
    assert messages[0].created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert messages[1].created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert messages[1].parts == (ReasoningPart(text="think"), TextPart(text="a"))


def test_anthropic_bare_list_string_input_and_text_document(tmp_path: Path) -> None:
    body = [
        {
            "role": "user",
            "content": [
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hé"}}
            ],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": "{oops"}]},
    ]
    path = tmp_path / "list.json"
    path.write_text(json.dumps(body))
    messages = parse(path, "anthropic-json")[0].messages
    assert messages[0].parts == (
        DocumentPart(media_type="text/plain", data=base64.b64encode("hé".encode()).decode()),
    )
    assert messages[1].tool_calls == (ToolCall(id="t1", name="f", input=None, raw_input="{oops"),)
    exported = anthropic_messages.export(messages)["messages"]
    assert exported[0]["content"][0]["source"] == {"type": "text", "media_type": "text/plain", "data": "hé"}


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            "data: URL",
        ),
        (
            {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:a;base64,"}}]},
            "not allowed",
        ),
        ({"role": "function", "name": "f", "content": "x"}, "unknown role"),
        ({"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}, "legacy"),
        ({"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c1")]}, "used twice"),
    ],
)
def test_openai_records_that_are_refused(tmp_path: Path, record: dict[str, Any], reason: str) -> None:
    path = _write(tmp_path, "bad.jsonl", [{"role": "user", "content": "ok"}, record])
    with pytest.raises(FormatError, match=reason) as info:
        parse(path, "openai-jsonl")
    assert info.value.line == 2


def test_mixed_message_and_conversation_lines_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "mixed.jsonl", [{"role": "user", "content": "a"}, {"messages": []}])
    with pytest.raises(FormatError, match="conversation line") as info:
        parse(path, "openai-jsonl")
    assert info.value.line == 2


def test_a_bad_message_in_a_conversation_line_names_the_line_and_the_message(tmp_path: Path) -> None:
    good = {"messages": [{"role": "user", "content": "a"}]}
    bad = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": 3}]}
    with pytest.raises(FormatError, match=r"messages\[1\]: 'tool_calls' must be a list") as info:
        parse(_write(tmp_path, "c.jsonl", [good, bad]), "openai-jsonl")
    assert info.value.line == 2


def test_anthropic_truncated_or_surrogate_document_names_the_line(tmp_path: Path) -> None:
    text = ANTHROPIC.read_text()
    path = tmp_path / "bad.json"
    path.write_text(text.replace("Thanks! 🙏", "Thanks! \\udc00"))
    line = text.splitlines().index(next(x for x in text.splitlines() if "Thanks! 🙏" in x)) + 1
    with pytest.raises(FormatError, match="surrogate") as info:
        parse(path, "anthropic-json")
    assert info.value.line == line
    path.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match="not a JSON document"):
        parse(path, "anthropic-json")


OPENAI_LINES = [json.loads(line) for line in OPENAI.read_text().splitlines()]
SURROGATE = "@@SURROGATE@@"


def _openai_mutations() -> dict[str, Callable[[dict[str, Any]], Any]]:
    def missing_id(record: dict[str, Any]) -> dict[str, Any]:
        if record["role"] == "tool":
            del record["tool_call_id"]
        elif record.get("tool_calls"):
            del record["tool_calls"][0]["id"]
        else:
            del record["role"]
        return record

    def bad_arguments(record: dict[str, Any]) -> dict[str, Any]:
        if record.get("tool_calls"):
            record["tool_calls"][-1]["function"]["arguments"] = {"not": "a string"}
        else:
            record["content"] = {"not": "content"}
        return record

    return {
        "not_an_object": lambda record: [record],
        "role_wrong_type": lambda record: {**record, "role": 5},
        "content_wrong_type": lambda record: {**record, "content": 5},
        "unknown_role": lambda record: {**record, "role": "narrator"},
        "lone_surrogate": lambda record: {**record, "content": SURROGATE},
        "missing_id": missing_id,
        "bad_arguments": bad_arguments,
    }


MUTATIONS = _openai_mutations()


@given(
    index=st.integers(0, len(OPENAI_LINES) - 1),
    mutation=st.sampled_from([*MUTATIONS, "truncated"]),
    cut=st.floats(0.05, 0.95),
)
def test_malformed_openai_records_are_refused_with_the_line_and_the_store_is_unchanged(
    index: int, mutation: str, cut: float
) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in OPENAI_LINES]
    if mutation == "truncated":
        lines[index] = lines[index][: max(1, int(len(lines[index]) * cut))]
    else:
        record = json.loads(lines[index])
        lines[index] = json.dumps(MUTATIONS[mutation](record)).replace(f'"{SURROGATE}"', '"a\\ud800b"')
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(OPENAI, format="openai-jsonl")
    store.import_file(CONVERSATIONS, format="openai-jsonl")
    before = dump(store)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / OPENAI.name
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(FormatError) as info:
            store.import_file(path, format="openai-jsonl")
    assert info.value.line == index + 1
    assert dump(store) == before


ANTHROPIC_BODY = json.loads(ANTHROPIC.read_text())
ANTHROPIC_MUTATIONS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "not_an_object": lambda message: "hello",
    "unknown_role": lambda message: {**message, "role": "system"},
    "role_wrong_type": lambda message: {**message, "role": ["user"]},
    "content_wrong_type": lambda message: {**message, "content": 5},
    "empty_content": lambda message: {**message, "content": []},
    "unknown_block": lambda message: {**message, "content": [{"type": "server_tool_use", "id": "s"}]},
    "block_wrong_type": lambda message: {**message, "content": [{"type": "text", "text": 5}]},
    "missing_result_id": lambda message: {**message, "content": [{"type": "tool_result", "content": "x"}]},
    "missing_call_id": lambda message: {
        **message,
        "content": [{"type": "tool_use", "name": "f", "input": {}}],
    },
    "url_image": lambda message: {
        **message,
        "content": [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}],
    },
}


@given(
    index=st.integers(0, len(ANTHROPIC_BODY["messages"]) - 1),
    mutation=st.sampled_from(list(ANTHROPIC_MUTATIONS)),
)
def test_malformed_anthropic_messages_are_refused_naming_the_record_and_the_store_is_unchanged(
    index: int, mutation: str
) -> None:
    body = json.loads(json.dumps(ANTHROPIC_BODY))
    body["messages"][index] = ANTHROPIC_MUTATIONS[mutation](body["messages"][index])
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(ANTHROPIC, format="anthropic-json")
    before = dump(store)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ANTHROPIC.name
        path.write_text(json.dumps(body, indent=2))
        with pytest.raises(FormatError, match=rf"messages\[{index}\]"):
            store.import_file(path, format="anthropic-json")
    assert dump(store) == before


@given(cut=st.integers(1, len(ANTHROPIC.read_bytes().rstrip()) - 1))
def test_a_truncated_anthropic_document_is_refused_and_the_store_is_unchanged(cut: int) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(OPENAI, format="openai-jsonl")
    before = dump(store)
    data = ANTHROPIC.read_bytes()[:cut]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ANTHROPIC.name
        path.write_bytes(data)
        with pytest.raises(FormatError, match="not a JSON document") as info:
            store.import_file(path, format="anthropic-json")
    assert info.value.line is None or 1 <= info.value.line <= data.count(b"\n") + 1
    assert dump(store) == before


def _bodies(messages: Sequence[Message]) -> list[tuple[str, str, tuple[Part, ...], str]]:
    return [(m.role, m.kind, m.parts, body_hash(m)) for m in messages]


def _reimport_openai(messages: Sequence[Message], tmp: Path) -> list[Message]:
    path = tmp / "exported.jsonl"
    path.write_text(openai_chat.export(messages), encoding="utf-8")
    (session,) = parse(path, "openai-jsonl")
    assert session.repairs == []
    return session.messages


def _reimport_anthropic(messages: Sequence[Message], tmp: Path) -> list[Message]:
    path = tmp / "exported.json"
    path.write_bytes(msgspec.json.encode(anthropic_messages.export(messages)))
    (session,) = parse(path, "anthropic-json")
    assert session.repairs == []
    return session.messages


@pytest.mark.parametrize("path", [OPENAI, CONVERSATIONS], ids=lambda p: p.name)
def test_openai_round_trip_of_the_fixtures(path: Path, tmp_path: Path) -> None:
    for session in parse(path, "openai-jsonl"):
        again = _reimport_openai(session.messages, tmp_path)
        assert _bodies(again) == _bodies(session.messages)
        assert openai_chat.export(again) == openai_chat.export(session.messages)


def test_anthropic_round_trip_of_the_fixture(tmp_path: Path) -> None:
    (session,) = parse(ANTHROPIC, "anthropic-json")
    again = _reimport_anthropic(session.messages, tmp_path)
    assert _bodies(again) == _bodies(session.messages)
    assert anthropic_messages.export(again) == anthropic_messages.export(session.messages)


def test_export_reads_the_stored_history(tmp_path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(ANTHROPIC)
    stored = store.session("anthropic_messages_sample", create=False).stored_messages()
    body = anthropic_messages.export(stored)
    assert body["system"].startswith("You are an agent")
    merged = body["messages"][2]["content"]
    assert [b["type"] for b in merged] == ["tool_result", "tool_result"]
    assert _bodies(_reimport_anthropic(stored, tmp_path)) == _bodies(stored)


TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)


def _json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)


# Two levels of nesting, built explicitly. `st.recursive` reads its `extend` function's source when the
# test first runs, to check that it recurses; when that line no longer holds the function (the file was
# edited after import), it raises a HypothesisDeprecationWarning, an error under filterwarnings=error.
JSON_VALUES = JSON_SCALARS | _json_containers(JSON_SCALARS | _json_containers(JSON_SCALARS))
B64 = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode())
IMAGES = st.builds(ImagePart, media_type=st.sampled_from(["image/png", "image/jpeg"]), data=B64)
DOCUMENTS = st.builds(
    DocumentPart,
    media_type=st.sampled_from(["application/pdf", "text/plain"]),
    data=st.one_of(B64, TEXT.map(lambda t: base64.b64encode(t.encode()).decode())),
    title=st.none() | TEXT,
)
TEXTS = st.builds(TextPart, text=TEXT)
MEDIA: st.SearchStrategy[ResultContent] = st.one_of(TEXTS, IMAGES, DOCUMENTS)


def _not_json(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return True
    return False


def _call_id(call: ToolCall) -> str:
    return call.id


def _openai_calls() -> st.SearchStrategy[ToolCall]:
    parsed = st.builds(ToolCall, id=NAMES, name=NAMES, input=st.dictionaries(TEXT, JSON_VALUES, max_size=3))
    raw = st.builds(ToolCall, id=NAMES, name=NAMES, input=st.none(), raw_input=TEXT.filter(_not_json))
    return parsed | raw


def _anthropic_calls() -> st.SearchStrategy[ToolCall]:
    parsed = st.builds(ToolCall, id=NAMES, name=NAMES, input=st.dictionaries(TEXT, JSON_VALUES, max_size=3))
    return parsed | st.builds(ToolCall, id=NAMES, name=NAMES, input=st.none(), raw_input=TEXT)


@st.composite
def _histories(draw: st.DrawFn, provider: str) -> list[Message]:
    """A well-formed history whose every body the provider's format can carry."""
    now = datetime(2025, 1, 1, tzinfo=UTC)
    parts: list[list[Part]] = []
    roles: list[str] = []
    if draw(st.booleans()):
        roles.append("system")
        parts.append(draw(st.lists(TEXTS, min_size=1, max_size=2 if provider == "anthropic" else 1)))
    for _ in range(draw(st.integers(1, 3))):
        roles.append("user")
        parts.append(draw(st.lists(MEDIA, min_size=1, max_size=3)))
        for _ in range(draw(st.integers(0, 2))):
            step = draw(_openai_step() if provider == "openai" else _anthropic_step())
            roles.append("assistant")
            parts.append(step)
            for call in (p for p in step if isinstance(p, ToolCall)):
                content = draw(TEXT | st.lists(MEDIA, min_size=1, max_size=2).map(tuple))
                result = ToolResult(
                    call_id=call.id, content=content, name=call.name, is_error=draw(st.booleans())
                )
                roles.append("tool")
                parts.append([result])
    return [
        Message(id=f"h/{i}", role=role, parts=tuple(p), created_at=now)  # type: ignore[arg-type]
        for i, (role, p) in enumerate(zip(roles, parts, strict=True))
    ]


@st.composite
def _openai_step(draw: st.DrawFn) -> list[Part]:
    reasoning: list[Part] = [ReasoningPart(text=draw(NAMES))] if draw(st.booleans()) else []
    texts: list[Part] = list(draw(st.lists(TEXTS, max_size=2)))
    calls = draw(st.lists(_openai_calls(), max_size=3, unique_by=_call_id))
    return [*reasoning, *texts, *calls] or [TextPart(text="")]


@st.composite
def _anthropic_step(draw: st.DrawFn) -> list[Part]:
    kinds = st.one_of(
        TEXTS,
        st.builds(ReasoningPart, text=TEXT, signature=st.none() | NAMES),
        st.builds(RedactedReasoningPart, data=B64),
    )
    parts: list[Part] = list(draw(st.lists(kinds, max_size=3)))
    calls = draw(st.lists(_anthropic_calls(), max_size=3, unique_by=_call_id))
    return [*parts, *calls] or [TextPart(text="")]


@given(_histories("openai"))
def test_openai_export_then_import_gives_the_same_bodies(history: list[Message]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        again = _reimport_openai(history, Path(tmp))
        assert _bodies(again) == _bodies(history)
        assert _bodies(_reimport_openai(again, Path(tmp))) == _bodies(history)


@given(_histories("anthropic"))
def test_anthropic_export_then_import_gives_the_same_bodies(history: list[Message]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        again = _reimport_anthropic(history, Path(tmp))
        assert _bodies(again) == _bodies(history)
        assert _bodies(_reimport_anthropic(again, Path(tmp))) == _bodies(history)
