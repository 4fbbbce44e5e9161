"""Provider wire formats: every render passes our ordering validators and the official SDK request types.

SDK validation: the SDKs' request types are TypedDicts (`CompletionCreateParamsNonStreaming`,
`MessageCreateParamsNonStreaming`), validated with pydantic's `TypeAdapter` in strict mode (no
coercion; a plain dict never validates as one of the SDK's response models). Two gaps are closed by
hand: fields typed `Iterable[...]` validate lazily (pydantic returns a `ValidatorIterator` that checks
items only when consumed), so the result is materialized recursively; and TypedDicts ignore unknown
keys, so the materialized result must equal the request — a key the types do not know (such as
`is_error` on an OpenAI tool message) is dropped and shows up as a difference. Both validators, ours
and the SDK check, are fed known-invalid requests they must reject.
"""

from __future__ import annotations

import base64
import copy
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import event, example, given, strategies as st
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter, ValidationError

from planner import CompactConfig
from projection.view import View
from projection.wire import (
    EMPTY_ERROR_TEXT,
    LEADING_USER_TEXT,
    RAW_INPUT_KEY,
    InvalidView,
    to_anthropic,
    to_openai,
    wire_call_ids,
)
from projection.wire.check import (
    ANTHROPIC_ID,
    BAD_CALL_ID,
    BLANK_TEXT,
    BLOCK_NOT_ALLOWED,
    CALL_WITHOUT_RESULT,
    DUPLICATE_CALL_ID,
    DUPLICATE_RESULT,
    EMPTY_CONTENT,
    EMPTY_ERROR_RESULT,
    EMPTY_REQUEST,
    FIRST_NOT_USER,
    INPUT_NOT_OBJECT,
    MALFORMED,
    NOT_ALTERNATING,
    RESULT_NOT_FIRST,
    RESULT_WITHOUT_CALL,
    TOOL_CONTENT_NOT_TEXT,
    UNKNOWN_ROLE,
    UNSIGNED_THINKING,
    check_anthropic_request,
    check_openai_request,
)
from tests.conftest import CORPUS
from tests.test_properties import json_values, payloads, reasoning_parts, short_text, tool_calls, user_parts
from transcript import (
    DocumentPart,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    Store,
    TextPart,
    ToolCall,
)
from transcript.model.errors import PendingToolCalls

_OPENAI_REQUEST: TypeAdapter[Any] = TypeAdapter(CompletionCreateParamsNonStreaming)
_ANTHROPIC_REQUEST: TypeAdapter[Any] = TypeAdapter(MessageCreateParamsNonStreaming)
_RESPONSES_REQUEST: TypeAdapter[Any] = TypeAdapter(ResponseCreateParamsNonStreaming)


def _materialized(value: Any) -> Any:
    """The validated value with every lazy `ValidatorIterator` consumed (which validates its items)."""
    if isinstance(value, dict):
        return {key: _materialized(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [_materialized(item) for item in value]
    return value


def _sdk_problem(adapter: TypeAdapter[Any], request: dict[str, Any]) -> str | None:
    """Why the SDK's request type refuses `request`, or None when it accepts it exactly."""
    try:
        validated = _materialized(adapter.validate_python(request, strict=True))
    except ValidationError as exc:
        return f"{exc.error_count()} validation errors, first: {exc.errors()[0]['loc']}"
    if validated != request:
        return "the request has fields the SDK types do not know (dropped on validation)"
    return None


def openai_sdk_problem(messages: list[dict[str, Any]]) -> str | None:
    return _sdk_problem(_OPENAI_REQUEST, {"model": "gpt-4o", "messages": messages})


def anthropic_sdk_problem(body: dict[str, Any]) -> str | None:
    return _sdk_problem(_ANTHROPIC_REQUEST, {"model": "claude-sonnet-4-5", "max_tokens": 1024, **body})


def responses_sdk_problem(items: list[dict[str, Any]]) -> str | None:
    return _sdk_problem(_RESPONSES_REQUEST, {"model": "gpt-5", "input": items})


def responses_pairing_problem(items: list[dict[str, Any]]) -> str | None:
    """Why a Responses `input` breaks the pairing rule (each output answers one earlier call, each call
    is answered once, call ids are unique), or None."""
    open_calls: set[str] = set()
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item.get("type") == "function_call":
            if item["call_id"] in seen:
                return f"input[{index}]: call id {item['call_id']!r} reused"
            seen.add(item["call_id"])
            open_calls.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item["call_id"] not in open_calls:
                return f"input[{index}]: output for {item['call_id']!r}, which is not open"
            open_calls.discard(item["call_id"])
    return f"calls {sorted(open_calls)} unanswered" if open_calls else None


def assert_sendable(view: View) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Render every wire form, check them with our validators and the SDK types, and return the chat
    messages and the Anthropic body."""
    before = view.canonical_json()
    items = view.to_responses()
    assert responses_sdk_problem(items) is None
    assert responses_pairing_problem(items) is None
    assert view.to_responses() == items
    _check_opaque_reasoning(view, items)
    messages, body = view.to_openai(), view.to_anthropic()
    _check_cache_breakpoints(view, body)
    assert check_openai_request(messages) == ()
    assert openai_sdk_problem(messages) is None
    assert check_anthropic_request(body) == ()
    assert anthropic_sdk_problem(body) is None
    assert view.to_openai() == messages and view.to_anthropic() == body
    assert view.canonical_json() == before
    return messages, body


def _check_opaque_reasoning(view: View, items: list[dict[str, Any]]) -> None:
    """Each encoder sends only its own provider's opaque reasoning: thinking signatures come from
    Anthropic's parts (or legacy ones), encrypted content from OpenAI's."""
    parts = [p for m in view.messages for p in m.parts if isinstance(p, ReasoningPart) and p.signature]
    anthropic_own = {p.signature for p in parts if p.provider in (None, "anthropic")}
    openai_own = {p.signature for p in parts if p.provider == "openai" and p.item_id is not None}
    body = view.to_anthropic()
    sent = {
        b["signature"]
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "thinking"
    }
    assert sent <= anthropic_own
    assert {
        i["encrypted_content"] for i in items if i.get("type") == "reasoning" and "encrypted_content" in i
    } <= openai_own


def _check_cache_breakpoints(view: View, body: dict[str, Any]) -> None:
    """Breakpoints change nothing but `cache_control`: at most three, never on thinking, at least one
    where the view rendered a block that takes one, and the body validates with them."""
    cached = view.to_anthropic(cache=True, cache_min_tokens=0)
    assert anthropic_sdk_problem(cached) is None
    found = [b for b in cached.get("system", []) if "cache_control" in b]
    found += [
        b for m in cached["messages"] for b in m["content"] if isinstance(b, dict) and "cache_control" in b
    ]
    # A view of only unsent reasoning renders nothing of its own: the request is the added
    # continuation, and there is no prefix to cache.
    cacheable = [b for b in body.get("system", []) if b.get("type") == "text"] + [
        b
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict)
        and b.get("type") != "thinking"
        and b.get("type") != "redacted_thinking"
        and b != {"type": "text", "text": LEADING_USER_TEXT}
    ]
    assert (1 if cacheable else 0) <= len(found) <= 3
    assert all(b["type"] not in ("thinking", "redacted_thinking") for b in found)
    for block in found:
        del block["cache_control"]
    assert cached == body


def view_of(*messages: Message) -> View:
    return View.of(messages, source="canonical", tokens=0)


def call(call_id: str, name: str = "Bash", **input: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, input=input or {"command": "ls"})


def step(*calls: ToolCall, text: str = "", reasoning: Sequence[Any] = ()) -> list[Message]:
    results = [Message.tool_result(c.id, f"result of {c.id}", name=c.name) for c in calls]
    return [Message.assistant(text, calls, reasoning=reasoning), *results]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


PNG = ImagePart(media_type="image/png", data=b64(b"\x89PNG...."))
TIFF = ImagePart(media_type="image/tiff", data=b64(b"II*\x00"))
PDF = DocumentPart(media_type="application/pdf", data=b64(b"%PDF-1.4"), title="spec.pdf")
NOTES = DocumentPart(media_type="text/plain", data=b64("notes: 中文".encode()), title="notes")
CSV = DocumentPart(media_type="text/csv", data=b64(b"a,b\n1,2\n"))


def test_openai_maps_roles_parts_and_calls() -> None:
    raw = ToolCall(id="c2", name="Edit", raw_input="{'path': 'a.py'")
    view = view_of(
        Message.system("be brief"),
        Message.user([TextPart(text="look"), PNG, TIFF, PDF, NOTES, CSV]),
        Message.assistant(
            "checking",
            [call("c1"), raw],
            reasoning=[ReasoningPart(text="hmm", signature="sig"), RedactedReasoningPart(data="xx")],
        ),
        Message.tool_result("c1", "ok"),
        Message.tool_result("c2", [TextPart(text="edited"), PNG], is_error=True),
        Message.assistant("done"),
    )
    messages, _ = assert_sendable(view)
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG.data}"}},
        {"type": "text", "text": "[image omitted: image/tiff]"},
        {
            "type": "file",
            "file": {"filename": "spec.pdf", "file_data": f"data:application/pdf;base64,{PDF.data}"},
        },
        {"type": "text", "text": "notes: 中文"},
        {"type": "text", "text": "[document omitted: text/csv]"},
    ]
    assert messages[2] == {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": '{"command":"ls"}'}},
            {"id": "c2", "type": "function", "function": {"name": "Edit", "arguments": "{'path': 'a.py'"}},
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert messages[4] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": [
            {"type": "text", "text": "edited"},
            {"type": "text", "text": "[image omitted: image/png]"},
        ],
    }
    assert messages[5] == {"role": "assistant", "content": "done"}


def test_openai_assistant_content_is_null_with_calls_only_and_empty_with_nothing_to_say() -> None:
    only_reasoning = Message.assistant("", reasoning=[ReasoningPart(text="thinking", signature="s")])
    messages, _ = assert_sendable(view_of(Message.user("go"), *step(call("c1")), only_reasoning))
    assert messages[1]["content"] is None
    assert messages[3] == {"role": "assistant", "content": ""}


def test_summary_and_meta_messages_are_user_messages() -> None:
    summary = msgspec.structs.replace(Message.user("checkpoint: ..."), kind="summary", anchor="m1")
    meta = msgspec.structs.replace(Message.user("<command>/compact</command>"), kind="meta")
    messages, body = assert_sendable(view_of(summary, meta, Message.assistant("ok")))
    assert [m["role"] for m in messages] == ["user", "user", "assistant"]
    assert body["messages"][0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "checkpoint: ..."},
            {"type": "text", "text": "<command>/compact</command>"},
        ],
    }


def test_anthropic_keeps_signed_reasoning_whole_and_leaves_unsigned_out() -> None:
    signed = ReasoningPart(text="  exact \x00 text  ", signature="EqQBCkYIBxgCKkB")
    view = view_of(
        Message.user("go"),
        *step(
            call("c1"),
            text="on it",
            reasoning=[ReasoningPart(text="unsigned"), signed, RedactedReasoningPart(data="opaque==")],
        ),
    )
    _, body = assert_sendable(view)
    assert body["messages"][1]["content"][:3] == [
        {"type": "thinking", "thinking": "  exact \x00 text  ", "signature": "EqQBCkYIBxgCKkB"},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "on it"},
    ]


def test_anthropic_merges_results_into_one_user_message_results_first() -> None:
    view = view_of(
        Message.system("sys one"),
        Message.system("sys two"),
        Message.user("go"),
        *step(call("a"), call("b")),
        Message.user("also this"),
        Message.assistant("fine"),
    )
    _, body = assert_sendable(view)
    assert body["system"] == [{"type": "text", "text": "sys one"}, {"type": "text", "text": "sys two"}]
    merged = body["messages"][2]
    assert merged["role"] == "user"
    assert [block["type"] for block in merged["content"]] == ["tool_result", "tool_result", "text"]
    assert merged["content"][0] == {"type": "tool_result", "tool_use_id": "a", "content": "result of a"}


def test_anthropic_wraps_inputs_that_are_not_objects() -> None:
    raw = ToolCall(id="r", name="Bash", raw_input='{"command": "ls"')
    listed = ToolCall(id="l", name="Bash", input=[1, 2])
    null = ToolCall.from_arguments(id="n", name="Bash", arguments="null")
    _, body = assert_sendable(view_of(Message.user("go"), *step(raw, listed, null)))
    inputs = [block["input"] for block in body["messages"][1]["content"]]
    assert inputs == [{RAW_INPUT_KEY: '{"command": "ls"'}, {RAW_INPUT_KEY: "[1,2]"}, {RAW_INPUT_KEY: "null"}]


def test_anthropic_moves_later_system_messages_into_user_text_in_place() -> None:
    view = view_of(
        Message.system("first"), Message.user("go"), Message.assistant("a"), Message.system("late")
    )
    _, body = assert_sendable(view)
    assert body["system"] == [{"type": "text", "text": "first"}]
    assert body["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "<system>late</system>"}],
    }


def test_anthropic_view_starting_with_assistant_gets_a_leading_user_message() -> None:
    _, body = assert_sendable(
        view_of(Message.system("s"), Message.assistant("hello"), Message.assistant("again"))
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": LEADING_USER_TEXT}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "again"}],
        },
    ]


def test_anthropic_drops_blank_text_and_says_when_an_error_result_is_empty() -> None:
    view = view_of(
        Message.user("go"),
        Message.user(" \n"),
        Message.assistant("", [call("a"), call("b"), call("c")]),
        Message.tool_result("a", ""),
        Message.tool_result("b", "  ", is_error=True),
        Message.tool_result("c", [TextPart(text=""), PNG]),
    )
    _, body = assert_sendable(view)
    assert body["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a"},
        {"type": "tool_result", "tool_use_id": "b", "content": EMPTY_ERROR_TEXT, "is_error": True},
        {
            "type": "tool_result",
            "tool_use_id": "c",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}}
            ],
        },
    ]


def test_anthropic_documents_native_where_possible_else_placeholders() -> None:
    _, body = assert_sendable(view_of(Message.user([PDF, NOTES, CSV, TIFF])))
    assert body["messages"][0]["content"] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF.data},
            "title": "spec.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "notes: 中文"},
            "title": "notes",
        },
        {"type": "text", "text": "[document omitted: text/csv]"},
        {"type": "text", "text": "[image omitted: image/tiff]"},
    ]


def _reused_ids_view() -> View:
    return view_of(
        Message.user("go"),
        *step(call("abc")),
        *step(call("abc"), call("x.y")),
        *step(call("abc-2"), call("x_y")),
        *step(call("abc")),
    )


def test_reused_call_ids_get_unique_wire_ids_paired_with_their_own_step() -> None:
    messages, body = assert_sendable(_reused_ids_view())
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert calls == ["abc", "abc-2", "x.y", "abc-2-2", "x_y", "abc-3"]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert results == [
        ("abc", "result of abc"),
        ("abc-2", "result of abc"),
        ("x.y", "result of x.y"),
        ("abc-2-2", "result of abc-2"),
        ("x_y", "result of x_y"),
        ("abc-3", "result of abc"),
    ]
    uses = [b["id"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert uses == ["abc", "abc-2", "x_y", "abc-2-2", "x_y-2", "abc-3"]


def test_wire_ids_of_a_prefix_never_change_when_the_view_grows() -> None:
    messages = list(_reused_ids_view().messages)
    full = wire_call_ids(messages, anthropic=True)
    for end in range(1, len(messages) + 1):
        assert wire_call_ids(messages[:end], anthropic=True) == full[:end]


def test_ids_outside_the_anthropic_pattern_are_mapped() -> None:
    odd = ["工具", "call 1", "call:1", "toolu_01A-b"]
    _, body = assert_sendable(view_of(Message.user("go"), *step(*(call(i) for i in odd))))
    uses = [b["id"] for b in body["messages"][1]["content"]]
    assert all(ANTHROPIC_ID.fullmatch(i) for i in uses)
    assert uses == ["__", "call_1", "call_1-2", "toolu_01A-b"]


@pytest.mark.parametrize("render", [to_openai, to_anthropic])
def test_pending_calls_are_refused_naming_them(render: Callable[[View], object]) -> None:
    view = view_of(Message.user("go"), *step(call("a")), Message.assistant("", [call("b"), call("c")]))
    with pytest.raises(PendingToolCalls) as caught:
        render(view)
    assert caught.value.call_ids == ("b", "c")


@pytest.mark.parametrize("render", [to_openai, to_anthropic])
def test_views_breaking_the_ordering_rules_are_refused(render: Callable[[View], object]) -> None:
    orphan = view_of(Message.user("go"), Message.tool_result("nope", "x"))
    with pytest.raises(InvalidView) as caught:
        render(orphan)
    assert [p.code for p in caught.value.problems] == ["RESULT_WITHOUT_CALL"]
    unanswered = view_of(Message.user("go"), Message.assistant("", [call("a")]), Message.user("more"))
    with pytest.raises(InvalidView):
        render(unanswered)
    with pytest.raises(InvalidView):
        render(view_of())


def test_output_is_fresh_so_editing_it_never_edits_the_view() -> None:
    view = view_of(Message.user("go"), *step(call("a", nested={"k": [1, 2]})))
    body = view.to_anthropic()
    body["messages"][1]["content"][0]["input"]["nested"]["k"].append(3)
    assert view.to_anthropic() != body
    assert view.messages[1].tool_calls[0].input == {"nested": {"k": [1, 2]}}


_OPENAI_VALID: list[dict[str, Any]] = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{"}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "1"},
    {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "2"}]},
    {"role": "assistant", "content": "done"},
]


def _openai(edit: Callable[[list[dict[str, Any]]], object]) -> list[dict[str, Any]]:
    messages = copy.deepcopy(_OPENAI_VALID)
    edit(messages)
    return messages


OPENAI_INVALID = {
    "empty": ([], EMPTY_REQUEST),
    "result first": ([{"role": "tool", "tool_call_id": "a", "content": "x"}], RESULT_WITHOUT_CALL),
    "result after a user message": (
        _openai(lambda m: m.insert(3, {"role": "user", "content": "hi"})),
        CALL_WITHOUT_RESULT,
    ),
    "result missing": (_openai(lambda m: m.pop(4)), CALL_WITHOUT_RESULT),
    "pending at the end": (copy.deepcopy(_OPENAI_VALID[:3]), CALL_WITHOUT_RESULT),
    "second result": (_openai(lambda m: m.insert(5, dict(m[3]))), DUPLICATE_RESULT),
    "id reused": (_openai(lambda m: m.extend(copy.deepcopy(m[2:4]))), DUPLICATE_CALL_ID),
    "assistant says nothing": (_openai(lambda m: m[5].update(content=None)), EMPTY_CONTENT),
    "image in a tool result": (
        _openai(lambda m: m[3].update(content=[{"type": "image_url", "image_url": {"url": "x"}}])),
        TOOL_CONTENT_NOT_TEXT,
    ),
    "unknown role": (_openai(lambda m: m[1].update(role="human")), UNKNOWN_ROLE),
    "arguments not a string": (
        _openai(lambda m: m[2]["tool_calls"][0]["function"].update(arguments={})),
        MALFORMED,
    ),
}


@pytest.mark.parametrize(("messages", "code"), OPENAI_INVALID.values(), ids=OPENAI_INVALID.keys())
def test_openai_validator_rejects(messages: list[dict[str, Any]], code: str) -> None:
    assert check_openai_request(_OPENAI_VALID) == ()
    assert code in {p.code for p in check_openai_request(messages)}


OPENAI_SDK_INVALID = {
    "is_error is not a field": _openai(lambda m: m[3].update(is_error=True)),
    "arguments not a string": _openai(lambda m: m[2]["tool_calls"][0]["function"].update(arguments={})),
    "text not a string": _openai(lambda m: m[1].update(content=[{"type": "text", "text": 1}])),
    "no tool_call_id": _openai(lambda m: m[3].pop("tool_call_id")),
    "image in a tool result": _openai(
        lambda m: m[3].update(
            content=[{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]
        )
    ),
    "anthropic-style block": _openai(lambda m: m[1].update(content=[{"type": "image", "source": {}}])),
}


@pytest.mark.parametrize("messages", OPENAI_SDK_INVALID.values(), ids=OPENAI_SDK_INVALID.keys())
def test_openai_sdk_types_reject(messages: list[dict[str, Any]]) -> None:
    assert openai_sdk_problem(_OPENAI_VALID) is None
    assert openai_sdk_problem(messages) is not None


_ANTHROPIC_VALID: dict[str, Any] = {
    "system": [{"type": "text", "text": "s"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig"},
                {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                {"type": "tool_use", "id": "b", "name": "f", "input": {RAW_INPUT_KEY: "{"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "b", "content": "x", "is_error": True},
                {"type": "text", "text": "and"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ],
}


def _anthropic(edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    body = copy.deepcopy(_ANTHROPIC_VALID)
    edit(body)
    return body


def _message(index: int) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    return lambda body: body["messages"][index]["content"]


def _fix_ids(body: dict[str, Any], new_id: str) -> None:
    _message(1)(body)[1]["id"] = new_id
    _message(2)(body)[0]["tool_use_id"] = new_id


ANTHROPIC_INVALID = {
    "no messages": (_anthropic(lambda b: b.update(messages=[])), EMPTY_REQUEST),
    "starts with assistant": (_anthropic(lambda b: b["messages"].pop(0)), FIRST_NOT_USER),
    "two users in a row": (
        _anthropic(lambda b: b["messages"].insert(0, {"role": "user", "content": "hi"})),
        NOT_ALTERNATING,
    ),
    "blank text": (_anthropic(lambda b: _message(3)(b)[0].update(text=" \n")), BLANK_TEXT),
    "blank system": (_anthropic(lambda b: b.update(system="")), BLANK_TEXT),
    "empty content": (_anthropic(lambda b: b["messages"][3].update(content=[])), EMPTY_CONTENT),
    "id outside the pattern": (_anthropic(lambda b: _fix_ids(b, "a.1")), BAD_CALL_ID),
    "id reused": (_anthropic(lambda b: _fix_ids(b, "b")), DUPLICATE_CALL_ID),
    "input a string": (_anthropic(lambda b: _message(1)(b)[2].update(input="{")), INPUT_NOT_OBJECT),
    "unsigned thinking": (_anthropic(lambda b: _message(1)(b)[0].pop("signature")), UNSIGNED_THINKING),
    "result after text": (_anthropic(lambda b: _message(2)(b).reverse()), RESULT_NOT_FIRST),
    "result without call": (
        _anthropic(lambda b: _message(0)(b).insert(0, {"type": "tool_result", "tool_use_id": "z"})),
        RESULT_WITHOUT_CALL,
    ),
    "second result": (
        _anthropic(lambda b: _message(2)(b).insert(1, dict(_message(2)(b)[0]))),
        DUPLICATE_RESULT,
    ),
    "result missing": (_anthropic(lambda b: _message(2)(b).pop(1)), CALL_WITHOUT_RESULT),
    "pending at the end": (_anthropic(lambda b: b.update(messages=b["messages"][:2])), CALL_WITHOUT_RESULT),
    "empty error result": (_anthropic(lambda b: _message(2)(b)[1].pop("content")), EMPTY_ERROR_RESULT),
    "tool_use from the user": (
        _anthropic(lambda b: _message(0)(b).append(dict(_message(1)(b)[1]))),
        BLOCK_NOT_ALLOWED,
    ),
    "system role in messages": (_anthropic(lambda b: b["messages"][3].update(role="system")), UNKNOWN_ROLE),
}


@pytest.mark.parametrize(("body", "code"), ANTHROPIC_INVALID.values(), ids=ANTHROPIC_INVALID.keys())
def test_anthropic_validator_rejects(body: dict[str, Any], code: str) -> None:
    assert check_anthropic_request(_ANTHROPIC_VALID) == ()
    assert code in {p.code for p in check_anthropic_request(body)}


ANTHROPIC_SDK_INVALID = {
    "unsigned thinking": _anthropic(lambda b: _message(1)(b)[0].pop("signature")),
    "input a string": _anthropic(lambda b: _message(1)(b)[2].update(input="{")),
    "input a list": _anthropic(lambda b: _message(1)(b)[2].update(input=[1])),
    "bmp image": _anthropic(
        lambda b: _message(0)(b).append(
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA"}}
        )
    ),
    "csv as a base64 document": _anthropic(
        lambda b: _message(0)(b).append(
            {"type": "document", "source": {"type": "base64", "media_type": "text/csv", "data": "AA"}}
        )
    ),
    "tool role": _anthropic(lambda b: b["messages"][2].update(role="tool")),
    "unknown field": _anthropic(lambda b: _message(2)(b)[0].update(name="f")),
    "openai-style image": _anthropic(
        lambda b: _message(0)(b).append({"type": "image_url", "image_url": {"url": "x"}})
    ),
}


@pytest.mark.parametrize("body", ANTHROPIC_SDK_INVALID.values(), ids=ANTHROPIC_SDK_INVALID.keys())
def test_anthropic_sdk_types_reject(body: dict[str, Any]) -> None:
    assert anthropic_sdk_problem(_ANTHROPIC_VALID) is None
    assert anthropic_sdk_problem(body) is not None


@given(json_values, st.integers(0, 3))
def test_validators_never_raise_on_malformed_requests(value: Any, depth: int) -> None:
    for _ in range(depth):
        value = {"role": "assistant", "content": [value], "tool_calls": [value], "messages": [value]}
    assert isinstance(check_openai_request(value), tuple)
    assert isinstance(check_openai_request([value]), tuple)
    assert isinstance(check_anthropic_request(value), tuple)
    assert isinstance(check_anthropic_request({"system": [value], "messages": [value]}), tuple)


CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.name != "README.md")


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.stem[:32] for p in CORPUS_FILES])
def test_every_corpus_session_renders_to_valid_requests(path: Path) -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(path)
    sessions = [info.session_id for info in store.sessions()]
    assert sessions
    for session_id in sessions:
        view = store.session(session_id).visible_messages()
        messages, _ = assert_sendable(view)
        calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
        assert len(calls) == len(set(calls)) == sum(len(m.tool_calls) for m in view.messages)
    store.close()


def test_the_swe_agent_run_that_reuses_call_ids_gets_unique_ones() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(CORPUS / "sweagent_marshmallow-1867_fc.traj")
    (info,) = store.sessions()
    view = store.session(info.session_id).visible_messages()
    stored = [c.id for m in view.messages for c in m.tool_calls]
    assert len(set(stored)) < len(stored)
    messages, _ = assert_sendable(view)
    sent = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    assert len(set(sent)) == len(sent) == len(stored)
    store.close()


# A small pool so ids repeat across steps, collide with the `-2` suffixes and break Anthropic's pattern.
CALL_IDS = ["abc", "abc-2", "call_1", "toolu_01A", "x.y", "x_y", "工具"]

odd_media = st.builds(lambda data: ImagePart(media_type="image/tiff", data=data), payloads)
result_items = st.one_of(
    st.builds(lambda text: TextPart(text=text), short_text),
    user_parts,
    odd_media,
)
result_contents = st.one_of(short_text, st.lists(result_items, max_size=3))


@st.composite
def turns(draw: st.DrawFn) -> tuple[list[list[Message]], bool]:
    """Turns to append (each one `append_turn`), and whether the last step is left pending."""
    out: list[list[Message]] = []
    if draw(st.booleans()):
        out.append([Message.system(draw(short_text))])
    if draw(st.booleans()):
        out.append([Message.user(draw(st.lists(st.one_of(user_parts, odd_media), min_size=1, max_size=3)))])
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["step", "step", "step", "user", "system", "assistant"]))
        if kind == "user":
            out.append([Message.user(draw(short_text))])
        elif kind == "system":
            out.append([Message.system(draw(short_text))])
        else:
            ids = draw(
                st.lists(st.sampled_from(CALL_IDS), unique=True, max_size=0 if kind == "assistant" else 3)
            )
            calls = [draw(tool_calls(call_id)) for call_id in ids]
            reasoning = draw(st.lists(reasoning_parts, max_size=2))
            text = draw(st.one_of(st.just(""), short_text))
            if not (calls or reasoning or text):
                text = "ok"
            results = [
                Message.tool_result(c.id, draw(result_contents), name=c.name, is_error=draw(st.booleans()))
                for c in draw(st.permutations(calls))
            ]
            out.append([Message.assistant(text, calls, reasoning=reasoning), *results])
    pending = draw(st.booleans())
    if pending:
        calls = [
            draw(tool_calls(call_id))
            for call_id in draw(st.lists(st.sampled_from(CALL_IDS), min_size=1, unique=True))
        ]
        out.append([Message.assistant("", calls)])
    return out, pending


# Small numbers, so that compaction of a short generated session really truncates and excludes.
TIGHT = CompactConfig(
    micro_compact_stale_steps=1,
    micro_field_threshold_chars=40,
    micro_field_keep_head_chars=10,
    micro_field_keep_tail_chars=5,
    keep_recent_tokens=20,
)


@given(turns(), st.sampled_from(["none", "round", "full"]), st.randoms(use_true_random=False))
@example(
    drawn=([[Message.assistant("", reasoning=[ReasoningPart(text="")])]], False),
    compaction="none",
    rng=random.Random(0),
)
@example(
    drawn=(
        [
            [Message.user("go")],
            [
                Message.assistant(
                    "",
                    reasoning=[
                        ReasoningPart(text="", provider="openai", item_id="rs_1"),
                        ReasoningPart(text="", signature="2A==", provider="anthropic", item_id="rs_1"),
                    ],
                )
            ],
        ],
        False,
    ),
    compaction="none",
    rng=random.Random(0),
)
def test_generated_sessions_render_to_valid_requests(
    drawn: tuple[list[list[Message]], bool], compaction: str, rng: random.Random
) -> None:
    turn_list, pending = drawn
    store = Store.open(":memory:", tokenizer="chars/4")
    transcript = store.session("s")
    for turn in turn_list:
        transcript.append_turn(turn)
    if compaction != "none":
        budget = max(1, transcript.visible_messages().tokens // 3)
        result = transcript.compact(
            budget_tokens=budget, config=TIGHT, manual=True, force=compaction == "full"
        )
        event(f"compaction: {result.outcome}")
    view = transcript.visible_messages()
    if pending:
        for render in (to_openai, to_anthropic):
            with pytest.raises(PendingToolCalls) as caught:
                render(view)
            assert set(caught.value.call_ids) == set(transcript.pending_calls)
        transcript.repair_interrupted()
        view = transcript.visible_messages()
    messages, body = assert_sendable(view)
    stored = [c.id for m in view.messages for c in m.tool_calls]
    sent = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    assert len(sent) == len(set(sent)) == len(stored)
    if len(set(stored)) < len(stored):
        event("a call id is reused across steps")
    if body["messages"][0]["content"] == [{"type": "text", "text": LEADING_USER_TEXT}]:
        event("anthropic: leading user message added")
    _check_prefix(list(view.messages), messages, body, rng)
    store.close()


def _check_prefix(
    stored: list[Message], messages: list[dict[str, Any]], body: dict[str, Any], rng: random.Random
) -> None:
    """A prefix of the view that ends between steps renders as the same prefix of the full render."""
    cuts = [end for end in range(1, len(stored) + 1) if end == len(stored) or stored[end].role != "tool"]
    end = rng.choice(cuts)
    prefix = view_of(*stored[:end])
    part = prefix.to_openai()
    assert part == messages[: len(part)]
    if not any(m.role != "system" for m in stored[:end]):
        return
    head = prefix.to_anthropic()
    assert head.get("system") == body.get("system")
    assert head["messages"][:-1] == body["messages"][: len(head["messages"]) - 1]
