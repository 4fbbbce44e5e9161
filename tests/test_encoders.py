"""One encoder per provider: a view sent to the API and an export of the same history agree part by part.

Every fixture (the recorded corpus and the hand-written samples) is imported; each session's history
is its view (nothing compacted) and is encoded both ways. The archive keeps what a request must
change or drop (stored call ids, reasoning, `is_error`, blank text, message boundaries, media the API
does not take), so those documented differences are mapped away first; everything else must be equal,
part by part. Also: neither export module keeps an encoder of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from projection.wire import IMAGE_TYPES, LEADING_USER_TEXT, RAW_INPUT_KEY, wire_call_ids
from projection.wire.anthropic import encode_anthropic, to_anthropic
from projection.wire.openai import encode_openai, to_openai
from tests.conftest import CORPUS, PROJECT_ROOT
from transcript import Message, Store
from transcript.formats import anthropic_messages, openai_chat

FIXTURES = [
    *sorted(p for p in CORPUS.glob("*") if p.name != "README.md"),
    PROJECT_ROOT / "fixtures" / "openai_chat_sample.jsonl",
    PROJECT_ROOT / "fixtures" / "openai_conversations_sample.jsonl",
    PROJECT_ROOT / "fixtures" / "anthropic_messages_sample.json",
]


def _histories(path: Path) -> Iterator[tuple[str, list[Message]]]:
    store = Store.open(":memory:", tokenizer="chars/4")
    report = store.import_file(path)
    for session in report.sessions:
        yield session.session_id, store.session(session.session_id, create=False).stored_messages()


def _wire_to_stored(messages: list[Message], anthropic: bool) -> dict[str, str]:
    return {
        wire: stored for ids in wire_call_ids(messages, anthropic=anthropic) for stored, wire in ids.items()
    }


def _openai_sent_as_archive(record: dict[str, Any], back: dict[str, str]) -> dict[str, Any]:
    """A request record with its wire call ids mapped back to the stored ones."""
    out = dict(record)
    if "tool_call_id" in out:
        out["tool_call_id"] = back[out["tool_call_id"]]
    if "tool_calls" in out:
        out["tool_calls"] = [{**c, "id": back[c["id"]]} for c in out["tool_calls"]]
    return out


def _openai_archive_as_sent(record: dict[str, Any]) -> dict[str, Any]:
    """An archive record without what a request leaves out or spells otherwise."""
    out = {k: v for k, v in record.items() if k not in ("reasoning_content", "is_error", "name")}
    if out["role"] == "developer":
        out["role"] = "system"
    if out["role"] == "assistant" and out["content"] is None and "tool_calls" not in out:
        out["content"] = ""
    if isinstance(out.get("content"), list):
        out["content"] = [_openai_part_as_sent(p, tool=out["role"] == "tool") for p in out["content"]]
    if out["role"] == "tool" and out["content"] == []:
        out["content"] = ""
    return out


def _openai_part_as_sent(part: dict[str, Any], *, tool: bool) -> dict[str, Any]:
    if part["type"] == "image_url" and (tool or _media_type(part["image_url"]["url"]) not in IMAGE_TYPES):
        return {"type": "text", "text": "<placeholder>"}
    if part["type"] == "file":
        if tool or _media_type(part["file"]["file_data"]) != "application/pdf":
            return {"type": "text", "text": "<placeholder>"}
        return {"type": "file", "file": {"filename": "document.pdf", **part["file"]}}
    return part


def _placeholders(part: dict[str, Any]) -> dict[str, Any]:
    text = part.get("text")
    if isinstance(text, str) and text.startswith(("[image omitted:", "[document omitted:")):
        return {"type": "text", "text": "<placeholder>"}
    return part


def _media_type(url: str) -> str:
    return url.removeprefix("data:").split(";", 1)[0]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_openai_view_and_export_agree_part_by_part(path: Path) -> None:
    for session_id, messages in _histories(path):
        sent = to_openai(messages)
        archived = encode_openai(messages, archive=True)
        assert len(sent) == len(archived), session_id
        back = _wire_to_stored(messages, anthropic=False)
        for request, archive in zip(sent, archived, strict=True):
            request = _openai_sent_as_archive(request, back)
            if isinstance(request.get("content"), list):
                request["content"] = [_placeholders(p) for p in request["content"]]
            assert request == _openai_archive_as_sent(archive), session_id


def _blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block of a body, in order, with the role of its message (a string content is one block)."""
    system = body.get("system", [])
    out = [("system", b) for b in ([{"type": "text", "text": system}] if isinstance(system, str) else system)]
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out.extend((message["role"], block) for block in blocks)
    return out


def _anthropic_archive_as_sent(block: dict[str, Any]) -> dict[str, Any] | None:
    """An archive block as a request sends it; None for what a request leaves out."""
    kind = block["type"]
    if kind == "text" and not block["text"].strip():
        return None
    if kind == "thinking" and not block.get("signature"):
        return None
    if kind == "tool_use" and not isinstance(block["input"], dict):
        raw = block["input"]
        return {**block, "input": {RAW_INPUT_KEY: raw if isinstance(raw, str) else _json(raw)}}
    if kind == "tool_result":
        out = {k: v for k, v in block.items() if k != "content"}
        content = block["content"]
        if isinstance(content, list):
            content = [b for b in map(_anthropic_archive_as_sent, content) if b is not None] or None
        elif not content.strip():
            content = None
        if content is None and block.get("is_error"):
            content = "[error result without output]"
        return {**out, "content": content} if content is not None else out
    if kind in ("image", "document"):
        source = block["source"]
        if kind == "image" and source["media_type"] not in IMAGE_TYPES:
            return {"type": "text", "text": "<placeholder>"}
        if kind == "document" and source["type"] == "base64" and source["media_type"] != "application/pdf":
            return {"type": "text", "text": "<placeholder>"}
    return block


def _json(value: Any) -> str:
    import msgspec

    return msgspec.json.encode(value).decode()


def _anthropic_sent_as_archive(block: dict[str, Any], back: dict[str, str]) -> dict[str, Any]:
    if block["type"] == "tool_use":
        return {**block, "id": back[block["id"]]}
    if block["type"] == "tool_result":
        out = {**block, "tool_use_id": back[block["tool_use_id"]]}
        if isinstance(out.get("content"), list):
            out["content"] = [_placeholders(b) for b in out["content"]]
        return out
    return _placeholders(block)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_anthropic_view_and_export_agree_part_by_part(path: Path) -> None:
    for session_id, messages in _histories(path):
        back = _wire_to_stored(messages, anthropic=True)
        sent = [
            (role, _anthropic_sent_as_archive(block, back))
            for role, block in _blocks(to_anthropic(messages))
            if block != {"type": "text", "text": LEADING_USER_TEXT}
        ]
        archived = [
            (role, as_sent)
            for role, block in _blocks(encode_anthropic(messages, archive=True))
            if (as_sent := _anthropic_archive_as_sent(block)) is not None
        ]
        assert sent == archived, session_id


def test_the_exporters_reuse_the_view_encoders() -> None:
    assert "encode_openai(" in inspect.getsource(openai_chat.export)
    assert "encode_anthropic(" in inspect.getsource(anthropic_messages.export)
    for module in (openai_chat, anthropic_messages):
        names = {name for name, _ in inspect.getmembers(module, inspect.isfunction) if name.startswith("_")}
        assert not {n for n in names if n.startswith(("_export", "_block", "_result_block", "_url"))}, names
