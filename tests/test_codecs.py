"""Provider codecs, both directions: a reply goes in (`from_*`), is stored, and comes back out (`to_*`).

Replies are built from the SDKs' own response types (`anthropic.types.Message`,
`openai.types.chat.ChatCompletion`, `openai.types.responses.Response`), appended with their tool
results, read back by a fresh process and rendered again: the assistant turn must equal what the
provider returned, block for block and item for item, every argument string byte for byte.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anthropic.types
import msgspec
import openai.types.chat
import openai.types.responses
import pytest
from hypothesis import given, strategies as st

from projection.view import View
from tests.conftest import PROJECT_ROOT, PYTHON
from tests.test_properties import json_values
from tests.test_wire import anthropic_sdk_problem, openai_sdk_problem, responses_sdk_problem
from transcript import (
    InvalidArgument,
    InvalidMessage,
    Message,
    ReasoningPart,
    Store,
    ToolCall,
    Transcript,
    UnsupportedItem,
    from_anthropic,
    from_openai,
    from_responses,
    usage_of,
)

# Argument strings as models write them: spaces after separators, non-ASCII, keys out of order.
ARGUMENTS = [
    '{"path": "src/ünïcode dir/a b.py", "old": "x  =  1", "new": "x = 2"}',
    '{"z": 1, "a": [1, 2.50, {"k": "\\u00e9"}], "m": null}',
]
INPUTS = [json.loads(a) for a in ARGUMENTS]


def anthropic_reply() -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {
            "id": "msg_01XyZ",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "Two edits are needed.", "signature": "EqQBCkYIBxgCKkB=="},
                {"type": "text", "text": "I'll edit both files."},
                {"type": "tool_use", "id": "toolu_01A", "name": "Edit", "input": INPUTS[0]},
                {"type": "tool_use", "id": "toolu_01B", "name": "Run", "input": INPUTS[1]},
            ],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": 12,
                "cache_read_input_tokens": 18_000,
                "cache_creation_input_tokens": 700,
                "output_tokens": 90,
            },
        }
    )


def openai_reply() -> openai.types.chat.ChatCompletion:
    calls = [
        {"id": f"call_{k}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for k, (name, arguments) in enumerate(zip(["Edit", "Run"], ARGUMENTS, strict=True))
    ]
    return openai.types.chat.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": "Editing both.", "tool_calls": calls},
                }
            ],
            "usage": {
                "prompt_tokens": 2_000,
                "completion_tokens": 40,
                "total_tokens": 2_040,
                "prompt_tokens_details": {"cached_tokens": 1_536},
            },
        }
    )


def responses_reply() -> openai.types.responses.Response:
    calls = [
        {
            "type": "function_call",
            "id": f"fc_{k}",
            "call_id": f"call_{k}",
            "name": name,
            "arguments": arguments,
        }
        for k, (name, arguments) in enumerate(zip(["Edit", "Run"], ARGUMENTS, strict=True))
    ]
    return openai.types.responses.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_760_000_000,
            "model": "gpt-5",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [
                        {"type": "summary_text", "text": "**Planning**\n\nTwo edits."},
                        {"type": "summary_text", "text": "Then run."},
                    ],
                    "encrypted_content": "gAAAAABoENCRYPTED==",
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Editing both.", "annotations": []}],
                },
                *calls,
            ],
            "usage": {
                "input_tokens": 3_000,
                "input_tokens_details": {"cached_tokens": 2_048, "cache_write_tokens": 0},
                "output_tokens": 300,
                "output_tokens_details": {"reasoning_tokens": 256},
                "total_tokens": 3_300,
            },
        }
    )


def _dump(value: Any) -> Any:
    """An SDK object as plain JSON, without the fields left null."""
    return value.model_dump(mode="json", exclude_none=True)


def _results(message: Message) -> list[Message]:
    return [Message.tool_result(c.id, f"done: {c.name}", name=c.name) for c in message.tool_calls]


def _fresh_render(path: Path, session_id: str, method: str) -> Any:
    """What a fresh process renders for the session (`method` of its view), as JSON."""
    script = (
        "import json, sys\n"
        "from transcript import Transcript\n"
        f"t = Transcript.open({str(path)!r}, session_id={session_id!r}, readonly=True)\n"
        f"sys.stdout.write(json.dumps(t.visible_messages().{method}()))\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", script], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True
    )
    return json.loads(done.stdout)


def _store_turn(path: Path, reply: Message) -> None:
    with Transcript.open(path, session_id="s") as t:
        t.append(Message.system("You edit files."))
        t.append(Message.user("make both edits"))
        t.append_turn([reply, *_results(reply)])


def test_an_anthropic_reply_comes_back_block_for_block(tmp_path: Path) -> None:
    reply = anthropic_reply()
    message = from_anthropic(reply)
    assert [p.kind for p in message.parts] == ["reasoning", "text", "tool_call", "tool_call"]
    _store_turn(tmp_path / "a.db", message)
    body = _fresh_render(tmp_path / "a.db", "s", "to_anthropic")
    assert anthropic_sdk_problem(body) is None
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [_dump(block) for block in reply.content]
    inputs = [block["input"] for block in assistant["content"] if block["type"] == "tool_use"]
    assert [json.dumps(i, ensure_ascii=False) for i in inputs] == [
        json.dumps(i, ensure_ascii=False) for i in INPUTS
    ]  # key order kept
    assert message.metadata is not None and message.metadata["response_id"] == "msg_01XyZ"


def test_an_openai_chat_reply_comes_back_with_its_argument_strings_byte_for_byte(tmp_path: Path) -> None:
    reply = openai_reply()
    message = from_openai(reply)
    assert [c.arguments for c in message.tool_calls] == ARGUMENTS
    _store_turn(tmp_path / "o.db", message)
    messages = _fresh_render(tmp_path / "o.db", "s", "to_openai")
    assert openai_sdk_problem(messages) is None
    sent = messages[2]
    expected = _dump(reply.choices[0].message)
    expected.pop("annotations", None)  # an empty list the reply carries and a request leaves out
    assert sent == expected
    assert [c["function"]["arguments"] for c in sent["tool_calls"]] == ARGUMENTS


def test_a_responses_reply_comes_back_item_for_item_with_both_ids(tmp_path: Path) -> None:
    reply = responses_reply()
    message = from_responses(reply)
    assert [(p.kind, getattr(p, "item_id", None)) for p in message.parts] == [
        ("reasoning", "rs_1"),
        ("reasoning", "rs_1"),
        ("text", "msg_1"),
        ("tool_call", "fc_0"),
        ("tool_call", "fc_1"),
    ]
    _store_turn(tmp_path / "r.db", message)
    items = _fresh_render(tmp_path / "r.db", "s", "to_responses")
    assert responses_sdk_problem(items) is None
    turn = items[2 : 2 + len(reply.output)]
    expected = [_dump(item) for item in reply.output]
    for item in expected:  # a function call's status is output-only; a request need not repeat it
        if item["type"] == "function_call":
            item.pop("status", None)
    assert turn == expected
    outputs = items[2 + len(reply.output) :]
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("function_call_output", "call_0"),
        ("function_call_output", "call_1"),
    ]


def test_each_encoder_sends_only_its_own_providers_opaque_reasoning() -> None:
    mixed = Message.assistant(
        "done",
        reasoning=[
            *(p for p in from_anthropic(anthropic_reply()).parts[:1] if isinstance(p, ReasoningPart)),
            *(p for p in from_responses(responses_reply()).parts if isinstance(p, ReasoningPart)),
        ],
    )
    view = View.of([Message.user("go"), mixed], source="canonical", tokens=0)
    anthropic_text = json.dumps(view.to_anthropic())
    assert "EqQBCkYIBxgCKkB==" in anthropic_text and "gAAAAABoENCRYPTED==" not in anthropic_text
    responses_text = json.dumps(view.to_responses())
    assert "gAAAAABoENCRYPTED==" in responses_text and "EqQBCkYIBxgCKkB==" not in responses_text
    assert "ENCRYPTED" not in json.dumps(view.to_openai()) and "EqQB" not in json.dumps(view.to_openai())


def test_a_codex_rollouts_encrypted_reasoning_never_reaches_anthropic() -> None:
    rollout = PROJECT_ROOT / "fixtures" / "formats" / "codex" / "rollout_0.80.0_built.jsonl"
    encrypted = [
        json.loads(line)["payload"].get("encrypted_content")
        for line in rollout.read_text(encoding="utf-8").splitlines()
        if '"type":"reasoning"' in line
    ]
    secrets = [e for e in encrypted if e]
    assert secrets
    store = Store.open(":memory:")
    (report,) = store.import_file(rollout).sessions
    view = store.session(report.session_id, create=False).visible_messages()
    stored = json.dumps([msgspec.to_builtins(m) for m in view.messages])
    assert all(secret in stored for secret in secrets)  # kept in the body...
    for rendered in (view.to_anthropic(), view.to_openai(), view.to_responses()):
        text = json.dumps(rendered)
        assert not any(secret in text for secret in secrets)  # ...and sent nowhere: Codex keeps no item id


def test_usage_comes_along_with_each_reply() -> None:
    claude = usage_of(from_anthropic(anthropic_reply()))
    assert claude is not None and (claude.input_tokens, claude.cache_read_tokens) == (12, 18_000)
    assert claude.prompt_tokens == 18_712 and claude.model == "claude-sonnet-4-5"
    chat = usage_of(openai_reply())
    assert chat is not None and (chat.input_tokens, chat.cache_read_tokens, chat.prompt_tokens) == (
        464,
        1536,
        2000,
    )
    responses = usage_of(from_responses(responses_reply()))
    assert responses is not None and (responses.prompt_tokens, responses.reasoning_tokens) == (3_000, 256)


def _anthropic_with(block: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = _dump(anthropic_reply())
    data["content"].insert(1, block)
    return data


@pytest.mark.parametrize(
    ("decode", "reply", "item"),
    [
        (
            from_anthropic,
            _anthropic_with({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
            "content[1] (server_tool_use)",
        ),
        (
            from_anthropic,
            _anthropic_with({"type": "text", "text": "cited", "citations": [{"type": "char_location"}]}),
            "content[1] (text with citations)",
        ),
        (
            from_responses,
            [{"type": "web_search_call", "id": "ws_1", "status": "completed"}],
            "output[0] (web_search_call)",
        ),
        (
            from_openai,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "custom", "custom": {}}],
            },
            "tool_calls[0] (custom)",
        ),
        (
            from_responses,
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "namespace": "x"}],
            "output[0].namespace",
        ),
    ],
)
def test_what_cannot_be_sent_back_is_refused_naming_it(decode: Any, reply: Any, item: str) -> None:
    with pytest.raises(UnsupportedItem) as caught:
        decode(reply)
    assert caught.value.item == item
    assert item.split(" ")[0].split(".")[0] in str(caught.value)


@pytest.mark.parametrize(
    ("decode", "reply", "error"),
    [
        (from_anthropic, 42, InvalidArgument),
        (from_anthropic, {"role": "user", "content": []}, InvalidMessage),
        (from_anthropic, {"content": 5}, InvalidMessage),
        (
            from_anthropic,
            {"content": [{"type": "tool_use", "id": "t", "name": "n", "input": "x"}]},
            InvalidMessage,
        ),
        (from_anthropic, {"content": [{"type": "text", "text": 7}]}, InvalidMessage),
        (from_openai, {"choices": []}, InvalidArgument),
        (
            from_openai,
            {"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}]},
            InvalidArgument,
        ),
        (
            from_openai,
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 1}}]},
            InvalidMessage,
        ),
        (from_responses, "output", InvalidArgument),
        (from_responses, {"object": "list", "data": []}, InvalidMessage),
        (from_responses, [{"type": "reasoning", "summary": []}], InvalidMessage),
        (
            from_responses,
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}] * 2,
            InvalidMessage,
        ),
    ],
)
def test_a_reply_of_another_shape_is_a_typed_error(decode: Any, reply: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode(reply)


def test_several_choices_are_read_one_at_a_time() -> None:
    data = _dump(openai_reply())
    data["choices"].append(
        {**data["choices"][0], "index": 1, "message": {"role": "assistant", "content": "other"}}
    )
    assert from_openai(data, choice=1).text == "other"
    with pytest.raises(InvalidArgument):
        from_openai(data, choice=2)


def test_a_refused_reply_stores_nothing(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s") as t:
        t.append(Message.user("go"))
        before = t.version
        with pytest.raises(UnsupportedItem):
            t.append(from_responses([{"type": "computer_call", "id": "cu_1"}]))
        assert t.version == before and len(t) == 1


@given(value=json_values, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_any_argument_string_round_trips_byte_for_byte(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    arguments = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    call = {"type": "function_call", "call_id": "c1", "id": "fc_1", "name": "f", "arguments": arguments}
    message = from_responses([call])
    store = Store.open(":memory:")
    t = store.session("s")
    t.append_turn([Message.user("go"), message, Message.tool_result("c1", "ok")])
    view = store.session("s").visible_messages()  # a second reader: what the store kept
    assert view.to_responses()[1]["arguments"] == arguments
    assert view.to_openai()[1]["tool_calls"][0]["function"]["arguments"] == arguments
    (stored,) = view.messages[1].tool_calls
    assert stored.input == value or (isinstance(stored, ToolCall) and stored.raw_input == arguments)
    store.close()


# (A Cline task's ui_messages.json is read beside its history, never imported on its own.)
FORMAT_FILES = sorted(
    p
    for p in (PROJECT_ROOT / "fixtures" / "formats").rglob("*")
    if p.is_file() and ".meta" not in p.name and p.name != "ui_messages.json"
)


@pytest.mark.parametrize("path", FORMAT_FILES, ids=[p.name[:40] for p in FORMAT_FILES])
def test_every_format_fixture_renders_to_requests_every_sdk_takes(path: Path) -> None:
    from tests.test_wire import assert_sendable

    store = Store.open(":memory:", tokenizer="chars/4")
    for session in store.import_file(path).sessions:
        assert_sendable(store.session(session.session_id, create=False).visible_messages())
    store.close()
