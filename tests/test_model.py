"""The message model: constructors, validation, canonical encoding and the mark fold."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import msgspec
import pytest

from tests.helpers import fold_marks
from transcript import InvalidMessage, Message, ToolCall
from transcript.model import (
    NO_FLAGS,
    DirectiveEntry,
    ImagePart,
    MessageFlags,
    MessageMarked,
    ProjectionDirective,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolResult,
    apply_mark,
    new_message_id,
)
from transcript.model.codec import decode_message, normalize_message
from transcript.model.hashing import body_hash

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_constructors_build_the_expected_parts() -> None:
    call = ToolCall(id="c1", name="Bash", input={"command": "pytest"})
    assistant = Message.assistant("running tests", tool_calls=[call])
    assert assistant.role == "assistant"
    assert [p.kind for p in assistant.parts] == ["text", "tool_call"]
    assert assistant.tool_calls == (call,)

    result = Message.tool_result("c1", "ok", name="Bash", is_error=True)
    assert result.role == "tool"
    assert result.tool_results == (ToolResult(call_id="c1", content="ok", name="Bash", is_error=True),)

    assert Message.system("be brief").text == "be brief"
    assert Message.user("hi").parts == (TextPart(text="hi"),)


def test_assistant_without_text_has_only_its_calls() -> None:
    message = Message.assistant("", tool_calls=[ToolCall(id="c1", name="Read", input={})])
    assert [p.kind for p in message.parts] == ["tool_call"]


def test_ids_are_uuid7_and_time_ordered() -> None:
    ids = [new_message_id() for _ in range(2000)]
    assert all(UUID7.match(i) for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_tool_call_from_arguments_keeps_invalid_json_raw() -> None:
    parsed = ToolCall.from_arguments(id="c1", name="edit", arguments='{"path": "a.py"}')
    assert parsed.input == {"path": "a.py"} and parsed.raw_input is None
    raw = ToolCall.from_arguments(id="c2", name="edit", arguments='{"path": "a.py"')
    assert raw.input is None and raw.raw_input == '{"path": "a.py"'
    assert raw.arguments == '{"path": "a.py"'


def test_tag_strings_are_stable_on_the_wire() -> None:
    message = Message(
        id="m1",
        role="assistant",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        parts=(
            ReasoningPart(text="think", signature="sig"),
            RedactedReasoningPart(data="opaque"),
            ToolCall(id="c1", name="x", input={"a": 1}),
        ),
    )
    encoded = msgspec.json.decode(msgspec.json.encode(message))
    assert [p["kind"] for p in encoded["parts"]] == ["reasoning", "redacted_reasoning", "tool_call"]
    assert "kind" not in encoded  # the default message kind is omitted, so old bodies keep their bytes


def test_constructors_refuse_parts_the_role_cannot_carry() -> None:
    with pytest.raises(InvalidMessage, match="not allowed in a user message"):
        Message.user([ToolResult(call_id="c", content="x")])  # type: ignore[list-item]


def _message(**overrides: object) -> Message:
    fields: dict[str, object] = {
        "id": "m1",
        "role": "user",
        "parts": (TextPart(text="hi"),),
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    fields.update(overrides)
    return Message(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"role": "robot"}, "unknown role"),
        ({"parts": ()}, "at least one part"),
        ({"id": ""}, "id must be"),
        ({"created_at": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"role": "system", "parts": (ImagePart(media_type="image/png", data="AA=="),)}, "not allowed"),
        ({"role": "assistant", "kind": "summary"}, "summary message must have role 'user'"),
        ({"anchor": "m0"}, "only a summary"),
        ({"parts": (TextPart(text="a\ud800b"),)}, "lone surrogate"),
        ({"parts": ("just a string",)}, "Expected"),
        (
            {"role": "assistant", "parts": (ToolCall(id="c", name="x", input={"v": float("nan")}),)},
            "no JSON form",
        ),
        ({"role": "assistant", "parts": (ToolCall(id="c", name="x", input={1: "a"}),)}, "not a string"),
        ({"role": "assistant", "parts": (ToolCall(id="c", name="x", input=object()),)}, "not a JSON value"),
        (
            {"role": "assistant", "parts": (ToolCall(id="c", name="x"), ToolCall(id="c", name="y"))},
            "used twice",
        ),
        ({"metadata": {"usage": float("inf")}}, "no JSON form"),
    ],
)
def test_invalid_messages_are_refused(overrides: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidMessage, match=reason):
        normalize_message(_message(**overrides))


def test_normalization_round_trips_through_the_canonical_bytes() -> None:
    message = _message(
        role="assistant",
        parts=(ToolCall(id="c", name="x", input={"list": (1, 2), "text": "\x00 ü 漢字 🎉"}),),
        metadata={"usage": {"input_tokens": 3}},
    )
    normal, data = normalize_message(message)
    assert decode_message(data) == normal
    assert normal.parts[0].input == {"list": [1, 2], "text": "\x00 ü 漢字 🎉"}  # type: ignore[union-attr]
    assert msgspec.json.encode(normal) == data


def test_body_hash_ignores_time_and_metadata_but_not_content() -> None:
    base = _message()
    later = _message(created_at=datetime(2030, 1, 1, tzinfo=UTC), metadata={"x": 1})
    other = _message(parts=(TextPart(text="hi!"),))
    assert body_hash(base) == body_hash(later)
    assert body_hash(base) != body_hash(other)
    assert body_hash(base) != body_hash(_message(role="system"))


def test_fold_only_moves_forward_and_keeps_the_first_directive() -> None:
    directive = ProjectionDirective(
        policy_version=1,
        entries=(
            DirectiveEntry(message_id="a", target="part", part_index=0, action="keep_head_tail", keep_head=3),
        ),
    )
    other = ProjectionDirective(policy_version=1, entries=())
    flags = fold_marks(
        [
            MessageMarked(message_id="a", truncated=True, projection=directive),
            MessageMarked(message_id="b", excluded=True),
            MessageMarked(message_id="a", projection=other),
            MessageMarked(message_id="a"),
        ]
    )
    assert flags["a"] == MessageFlags(truncated=True, projection=directive)
    assert flags["b"] == MessageFlags(excluded=True)


def test_fold_of_a_prefix_then_the_rest_equals_the_fold_of_all() -> None:
    marks = [MessageMarked(message_id=str(i % 3), truncated=i % 2 == 0, excluded=i == 5) for i in range(8)]
    whole = fold_marks(marks)
    prefix = fold_marks(marks[:4])
    for mark in marks[4:]:
        prefix[mark.message_id] = apply_mark(prefix.get(mark.message_id, NO_FLAGS), mark)
    assert prefix == whole
