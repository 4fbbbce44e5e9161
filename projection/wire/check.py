"""Validators of wire requests: our ordering rules checked on the OpenAI and Anthropic wire forms.

Each returns the problems it finds (empty when the request is valid) and never raises on a malformed
request: anything that is not the expected shape is itself a problem. They check what the SDK request
types cannot (pairing of calls and results, unique ids, alternation, blank text); the types themselves
are checked in the tests with the official SDKs.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

ANTHROPIC_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")

# Codes of `WireProblem`.
EMPTY_REQUEST: Final = "EMPTY_REQUEST"
MALFORMED: Final = "MALFORMED"
UNKNOWN_ROLE: Final = "UNKNOWN_ROLE"
EMPTY_CONTENT: Final = "EMPTY_CONTENT"
BLANK_TEXT: Final = "BLANK_TEXT"
DUPLICATE_CALL_ID: Final = "DUPLICATE_CALL_ID"
BAD_CALL_ID: Final = "BAD_CALL_ID"
RESULT_WITHOUT_CALL: Final = "RESULT_WITHOUT_CALL"
DUPLICATE_RESULT: Final = "DUPLICATE_RESULT"
CALL_WITHOUT_RESULT: Final = "CALL_WITHOUT_RESULT"
RESULT_NOT_FIRST: Final = "RESULT_NOT_FIRST"
FIRST_NOT_USER: Final = "FIRST_NOT_USER"
NOT_ALTERNATING: Final = "NOT_ALTERNATING"
BLOCK_NOT_ALLOWED: Final = "BLOCK_NOT_ALLOWED"
INPUT_NOT_OBJECT: Final = "INPUT_NOT_OBJECT"
UNSIGNED_THINKING: Final = "UNSIGNED_THINKING"
EMPTY_ERROR_RESULT: Final = "EMPTY_ERROR_RESULT"
TOOL_CONTENT_NOT_TEXT: Final = "TOOL_CONTENT_NOT_TEXT"


class WireProblem(msgspec.Struct, frozen=True, kw_only=True):
    """One way a wire request breaks the provider's rules; `path` points into the request."""

    code: str
    path: str
    detail: str


def check_openai_request(messages: Any) -> tuple[WireProblem, ...]:
    """The ways a Chat Completions `messages` list breaks our rules (empty when it is valid).

    Every tool message answers a call of the nearest assistant message before it, with only tool
    messages between; every call is answered exactly once, before any other message and before the
    end; call ids are unique in the request; an assistant message has content or calls; a tool
    message's content is text.
    """
    problems: list[WireProblem] = []
    if not isinstance(messages, list) or not messages:
        return (WireProblem(code=EMPTY_REQUEST, path="messages", detail="a non-empty list is required"),)
    seen: set[str] = set()
    open_calls: dict[str, str] = {}
    answered: set[str] = set()
    for index, message in enumerate(messages):
        path = f"messages[{index}]"
        if not isinstance(message, dict):
            problems.append(WireProblem(code=MALFORMED, path=path, detail="a message must be an object"))
            continue
        role = message.get("role")
        if role == "tool":
            _check_openai_result(message, path, open_calls, answered, problems)
            continue
        problems.extend(_unanswered(open_calls, f"before {path}"))
        open_calls, answered = {}, set()
        if role not in ("system", "developer", "user", "assistant"):
            problems.append(WireProblem(code=UNKNOWN_ROLE, path=path, detail=f"role {role!r}"))
        elif role != "assistant" and message.get("content") is None:
            problems.append(WireProblem(code=EMPTY_CONTENT, path=path, detail="content is required"))
        elif role == "assistant":
            open_calls = _check_openai_calls(message, path, seen, problems)
    problems.extend(_unanswered(open_calls, "at the end of the request"))
    return tuple(problems)


def _check_openai_calls(
    message: dict[str, Any], path: str, seen: set[str], problems: list[WireProblem]
) -> dict[str, str]:
    calls = message.get("tool_calls")
    if calls is None:
        if message.get("content") is None:
            problems.append(WireProblem(code=EMPTY_CONTENT, path=path, detail="no content and no tool calls"))
        return {}
    if not isinstance(calls, list) or not calls:
        problems.append(WireProblem(code=MALFORMED, path=f"{path}.tool_calls", detail="a non-empty list"))
        return {}
    opened: dict[str, str] = {}
    for index, call in enumerate(calls):
        where = f"{path}.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call_id, str)
            or not call_id
            or call.get("type") != "function"
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            problems.append(
                WireProblem(code=MALFORMED, path=where, detail="id, type, function name/arguments")
            )
            continue
        if call_id in seen:
            problems.append(WireProblem(code=DUPLICATE_CALL_ID, path=where, detail=f"id {call_id!r} reused"))
        seen.add(call_id)
        opened[call_id] = where
    return opened


def _check_openai_result(
    message: dict[str, Any],
    path: str,
    open_calls: dict[str, str],
    answered: set[str],
    problems: list[WireProblem],
) -> None:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        problems.append(WireProblem(code=MALFORMED, path=path, detail="tool_call_id must be a string"))
    elif call_id in open_calls:
        del open_calls[call_id]
        answered.add(call_id)
    elif call_id in answered:
        problems.append(
            WireProblem(code=DUPLICATE_RESULT, path=path, detail=f"second result for {call_id!r}")
        )
    else:
        problems.append(
            WireProblem(code=RESULT_WITHOUT_CALL, path=path, detail=f"no call {call_id!r} in this step")
        )
    content = message.get("content")
    text_parts = isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    )
    if not isinstance(content, str) and not text_parts:
        problems.append(WireProblem(code=TOOL_CONTENT_NOT_TEXT, path=path, detail="text or text parts only"))


def _unanswered(open_calls: dict[str, str], when: str) -> list[WireProblem]:
    return [
        WireProblem(code=CALL_WITHOUT_RESULT, path=where, detail=f"call {call_id!r} unanswered {when}")
        for call_id, where in open_calls.items()
    ]


def check_anthropic_request(body: Any) -> tuple[WireProblem, ...]:
    """The ways an Anthropic Messages body breaks our rules (empty when it is valid).

    `messages` is non-empty, starts with a user message and alternates user and assistant; text
    blocks are not blank; `tool_use` (assistant only) has a unique id matching `ANTHROPIC_ID` and an
    object `input`; `thinking` carries its signature; the user message after an assistant message
    with calls starts with one `tool_result` per call and nothing else answers a call; an error
    result has content.
    """
    if not isinstance(body, dict):
        return (WireProblem(code=MALFORMED, path="body", detail="the body must be an object"),)
    problems: list[WireProblem] = []
    if "system" in body:
        system = body["system"]
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        if not isinstance(blocks, list):
            problems.append(WireProblem(code=MALFORMED, path="system", detail="a string or text blocks"))
        else:
            for index, block in enumerate(blocks):
                _check_text(block, f"system[{index}]", problems)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return (*problems, WireProblem(code=EMPTY_REQUEST, path="messages", detail="a non-empty list"))
    seen: set[str] = set()
    open_calls: dict[str, str] = {}
    previous: object = None
    for index, message in enumerate(messages):
        path = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            problems.append(WireProblem(code=UNKNOWN_ROLE, path=path, detail=f"role {role!r}"))
            continue
        if index == 0 and role != "user":
            problems.append(
                WireProblem(code=FIRST_NOT_USER, path=path, detail="the first message is not user")
            )
        if role == previous:
            problems.append(
                WireProblem(code=NOT_ALTERNATING, path=path, detail=f"two {role} messages in a row")
            )
        previous = role
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(WireProblem(code=EMPTY_CONTENT, path=path, detail="content must be non-empty"))
            blocks = []
        if role == "user":
            _check_user_blocks(blocks, path, open_calls, problems)
            open_calls = {}
        else:
            problems.extend(_unanswered(open_calls, f"before {path}"))
            open_calls = _check_assistant_blocks(blocks, path, seen, problems)
    problems.extend(_unanswered(open_calls, "at the end of the request"))
    return tuple(problems)


def _check_text(block: Any, path: str, problems: list[WireProblem]) -> None:
    if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
        problems.append(WireProblem(code=MALFORMED, path=path, detail="expected a text block"))
    elif not block["text"].strip():
        problems.append(WireProblem(code=BLANK_TEXT, path=path, detail="text blocks must not be blank"))


def _check_user_blocks(
    blocks: list[Any], path: str, open_calls: dict[str, str], problems: list[WireProblem]
) -> None:
    answered: set[str] = set()
    other_seen = False
    for index, block in enumerate(blocks):
        where = f"{path}.content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != "tool_result":
            other_seen = True
            if kind in ("tool_use", "thinking", "redacted_thinking"):
                problems.append(
                    WireProblem(code=BLOCK_NOT_ALLOWED, path=where, detail=f"{kind} in a user message")
                )
            elif kind == "text":
                _check_text(block, where, problems)
            continue
        if other_seen:
            problems.append(
                WireProblem(code=RESULT_NOT_FIRST, path=where, detail="tool_result after other blocks")
            )
        call_id = block.get("tool_use_id")
        if isinstance(call_id, str) and call_id in open_calls:
            del open_calls[call_id]
            answered.add(call_id)
        elif isinstance(call_id, str) and call_id in answered:
            problems.append(
                WireProblem(code=DUPLICATE_RESULT, path=where, detail=f"second result for {call_id!r}")
            )
        else:
            problems.append(
                WireProblem(code=RESULT_WITHOUT_CALL, path=where, detail=f"no call {call_id!r} just before")
            )
        content = block.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if block.get("is_error") and not items:
            problems.append(
                WireProblem(code=EMPTY_ERROR_RESULT, path=where, detail="an error result needs content")
            )
        for item_index, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and item.get("type") == "text":
                _check_text(item, f"{where}.content[{item_index}]", problems)
    problems.extend(_unanswered(open_calls, f"in {path}"))


def _check_assistant_blocks(
    blocks: list[Any], path: str, seen: set[str], problems: list[WireProblem]
) -> dict[str, str]:
    opened: dict[str, str] = {}
    for index, block in enumerate(blocks):
        where = f"{path}.content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            problems.append(
                WireProblem(code=BLOCK_NOT_ALLOWED, path=where, detail="tool_result from the assistant")
            )
        elif kind == "text":
            _check_text(block, where, problems)
        elif kind == "thinking" and not (isinstance(block.get("signature"), str) and block["signature"]):
            problems.append(
                WireProblem(code=UNSIGNED_THINKING, path=where, detail="thinking needs its signature")
            )
        elif kind == "tool_use":
            call_id = block.get("id")
            if not isinstance(call_id, str) or not ANTHROPIC_ID.fullmatch(call_id):
                problems.append(WireProblem(code=BAD_CALL_ID, path=where, detail=f"id {call_id!r}"))
            elif call_id in seen:
                problems.append(
                    WireProblem(code=DUPLICATE_CALL_ID, path=where, detail=f"id {call_id!r} reused")
                )
            else:
                seen.add(call_id)
                opened[call_id] = where
            if not isinstance(block.get("input"), dict):
                problems.append(
                    WireProblem(code=INPUT_NOT_OBJECT, path=where, detail="input must be an object")
                )
    return opened
