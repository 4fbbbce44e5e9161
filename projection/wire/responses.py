"""The OpenAI Responses API: a view as `input` items, and a reply's `output` items as one message.

What the OpenAI Agents SDK and Codex speak: input items `message`, `function_call` (its `call_id`
and its own item `id`), `function_call_output`, `reasoning` (`id`, summary, `encrypted_content`).
Parts keep the id of the output item they came from (`item_id`), so `from_responses` then
`to_responses` gives back the reply item for item: parts of one item are consecutive and share it.
Only reasoning of OpenAI's with its item id is sent (another provider's signature never is); pure
functions, the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from projection.render import media_placeholder
from projection.wire import common
from transcript.model.errors import InvalidMessage, UnsupportedItem
from transcript.model.message import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

# Output items a reply may hold that this store keeps and sends back; hosted-tool items (web search,
# file search, computer use, code interpreter, MCP, image generation, custom tools) are refused.
_ITEMS: Final = {
    "reasoning": frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}),
    "message": frozenset({"type", "id", "role", "status", "content", "phase"}),
    "function_call": frozenset({"type", "id", "call_id", "name", "arguments", "status"}),
}
_CONTENT: Final = {
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
}


def to_responses(view: common.HasMessages | Sequence[Message]) -> list[dict[str, Any]]:
    """The view as Responses API `input` items.

    - system messages → `system` (or `developer`, the role a record came with) messages in place;
      user, summary and meta messages → `user` messages: one text as a string, else `input_text`,
      `input_image` (images of `common.IMAGE_TYPES`), `input_file` (a PDF) parts; a `text/plain`
      document as its text, any other media as policy 1's placeholder.
    - assistant → one item per output item, in order: reasoning parts of OpenAI's with their item id →
      a `reasoning` item (their summary texts, `encrypted_content`); text of a message item → a
      `message` item with its id (`output_text` parts, the `phase` it came with), text without one → an
      assistant message (blank text left out); each call → a `function_call` (`call_id`, `arguments`
      exactly as stored, its own `id` when known). Other reasoning (Anthropic's, unsigned, or without
      its item id, as Codex rollouts record it) and redacted reasoning are not sent.
    - tool results → `function_call_output` items: a string as it is, a list as `input_text` /
      `input_image` / `input_file` parts. `is_error` has no field here: the output says what happened.
    """
    messages = common.sendable(view)
    items: list[dict[str, Any]] = []
    for message, wire_ids in zip(messages, common.wire_call_ids(messages), strict=True):
        items.extend(_items(message, wire_ids))
    return items


def message_items(message: Message) -> list[dict[str, Any]]:
    """One message as `to_responses` renders it, its call ids as stored: for a caller that assembles
    the input itself (the Agents SDK adapter) and keeps the pairing of calls and results."""
    ids = {r.call_id: r.call_id for r in message.tool_results} | {c.id: c.id for c in message.tool_calls}
    return _items(message, ids)


def _items(message: Message, wire_ids: dict[str, str]) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [_result(r, wire_ids[r.call_id]) for r in message.tool_results]
    if message.role == "assistant":
        return _assistant(message, wire_ids)
    developer = message.role == "system" and (message.metadata or {}).get("role") == "developer"
    role = "developer" if developer else "system" if message.role == "system" else "user"
    return [{"role": role, "content": _content(message.parts)}]


def _content(parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [_input_part(part) for part in parts]


def _input_part(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart) and part.media_type in common.IMAGE_TYPES:
        return {
            "type": "input_image",
            "detail": "auto",
            "image_url": common.data_url(part.media_type, part.data),
        }
    if isinstance(part, DocumentPart):
        if part.media_type == "application/pdf":
            return {
                "type": "input_file",
                "filename": part.title or "document.pdf",
                "file_data": common.data_url(part.media_type, part.data),
            }
        text = common.plain_text(part)
        if text is not None:
            return {"type": "input_text", "text": text}
    if isinstance(part, (ImagePart, DocumentPart)):
        return {"type": "input_text", "text": media_placeholder(part).text}
    raise TypeError(f"a {part.kind} part has no place in this message")


def _groups(parts: Sequence[Part]) -> Iterator[list[Part]]:
    """The parts of one assistant message, grouped by the output item they came from: consecutive
    parts of one kind that share an item id (a part without one is an item of its own) and, for
    reasoning, its provider (another provider's part under the same id is never this item's)."""
    group: list[Part] = []
    key: tuple[type, str, str | None] | None = None
    for part in parts:
        item_id = getattr(part, "item_id", None)
        provider = getattr(part, "provider", None)
        part_key = (type(part), item_id, provider) if isinstance(item_id, str) else None
        if group and part_key is not None and part_key == key:
            group.append(part)
            continue
        if group:
            yield group
        group, key = [part], part_key
    if group:
        yield group


def _assistant(message: Message, ids: dict[str, str]) -> list[dict[str, Any]]:
    phases = (message.metadata or {}).get("phases")
    phases = phases if isinstance(phases, dict) else {}
    items: list[dict[str, Any]] = []
    for group in _groups(message.parts):
        first = group[0]
        if isinstance(first, ReasoningPart) and first.for_responses:
            items.append(_reasoning([p for p in group if isinstance(p, ReasoningPart)]))
        elif isinstance(first, ToolCall):
            call: dict[str, Any] = {"type": "function_call", "call_id": ids[first.id], "name": first.name}
            call["arguments"] = first.arguments
            if first.item_id is not None:
                call["id"] = first.item_id
            items.append(call)
        elif isinstance(first, TextPart) and first.item_id is not None:
            texts = [p.text for p in group if isinstance(p, TextPart)]
            item: dict[str, Any] = {
                "type": "message",
                "id": first.item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []} for text in texts],
            }
            if isinstance(phases.get(first.item_id), str):
                item["phase"] = phases[first.item_id]
            items.append(item)
        elif isinstance(first, TextPart) and first.text.strip():
            items.append({"role": "assistant", "content": first.text})
    return items


def _reasoning(parts: list[ReasoningPart]) -> dict[str, Any]:
    """One reasoning item from its parts: one summary text each (a lone empty part: no summary)."""
    blank = len(parts) == 1 and not parts[0].text
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": parts[0].item_id,
        "summary": [] if blank else [{"type": "summary_text", "text": p.text} for p in parts],
    }
    encrypted = next((p.signature for p in parts if p.signature), None)
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def _result(result: ToolResult, wire_id: str) -> dict[str, Any]:
    output: str | list[dict[str, Any]]
    if isinstance(result.content, str):
        output = result.content
    else:
        output = [_input_part(item) for item in result.content]
    return {"type": "function_call_output", "call_id": wire_id, "output": output}


def from_responses(output: Any, *, id: str | None = None, created_at: datetime | None = None) -> Message:
    """A Responses API reply as one assistant message: the SDK's `Response` (or its JSON), or its `output`
    items (SDK objects or dicts).

    Items keep their order and their ids: `reasoning` → one reasoning part per summary text (provider
    `openai`, the item id, the first carrying `encrypted_content`), an assistant `message` → its
    `output_text` (and `refusal`) parts as text with the item id (a `phase` in metadata `phases`),
    `function_call` → a call with its `call_id`, its own `id` and its `arguments` string kept exactly.
    Metadata keeps `provider` (`openai`), `api` (`responses`), `model`, `response_id`, `status` and the
    response's `usage`. Hosted-tool items, annotations and reasoning text content are `UnsupportedItem`
    naming the item; anything of another shape is `InvalidMessage`.
    """
    response: dict[str, Any] = {}
    if isinstance(output, (list, tuple)):
        items = list(output)
    else:
        response = common.plain(output, "a Responses reply")
        if response.get("object", "response") != "response" or "output" not in response:
            raise InvalidMessage("not a Responses reply: a Response object or a list of its output items")
        items = common.list_field(response, "output", "a Responses reply")
    parts: list[Part] = []
    phases: dict[str, str] = {}
    for index, raw in enumerate(items):
        where = f"output[{index}]"
        item = common.plain(raw, where)
        kind = common.kept_kind(item, _ITEMS, where, "Responses")
        if kind == "reasoning":
            parts.extend(_reply_reasoning(item, where))
        elif kind == "function_call":
            parts.append(
                ToolCall.from_arguments(
                    id=common.text_field(item, "call_id", where),
                    name=common.text_field(item, "name", where),
                    arguments=common.text_field(item, "arguments", where),
                    item_id=common.text_field(item, "id", where, optional=True),
                )
            )
        else:
            parts.extend(_reply_message(item, where, phases))
    metadata = {
        "provider": "openai",
        "api": "responses",
        "model": common.text_field(response, "model", "a Responses reply", optional=True),
        "response_id": common.text_field(response, "id", "a Responses reply", optional=True),
        "status": common.text_field(response, "status", "a Responses reply", optional=True),
        "phases": phases or None,
        "usage": common.plain(response["usage"], "usage") if response.get("usage") is not None else None,
    }
    return common.reply(parts, metadata, id=id, created_at=created_at)


def _reply_reasoning(item: dict[str, Any], where: str) -> list[ReasoningPart]:
    if item.get("content"):
        raise UnsupportedItem(
            f"{where}: reasoning text content cannot be kept and sent back by this store",
            f"{where} (reasoning)",
        )
    item_id = common.text_field(item, "id", where)
    encrypted = common.text_field(item, "encrypted_content", where, optional=True)
    texts = []
    for k, summary in enumerate(common.list_field(item, "summary", where)):
        summary = common.plain(summary, f"{where}.summary[{k}]")
        texts.append(common.text_field(summary, "text", f"{where}.summary[{k}]"))
    return [
        ReasoningPart(text=text, signature=encrypted if k == 0 else None, provider="openai", item_id=item_id)
        for k, text in enumerate(texts or [""])
    ]


def _reply_message(item: dict[str, Any], where: str, phases: dict[str, str]) -> list[TextPart]:
    if item.get("role", "assistant") != "assistant":
        raise InvalidMessage(f"{where}: an output message of role {item.get('role')!r}")
    item_id = common.text_field(item, "id", where, optional=True)
    phase = common.text_field(item, "phase", where, optional=True)
    if phase is not None and item_id is not None:
        phases[item_id] = phase
    texts = []
    for k, content in enumerate(common.list_field(item, "content", where)):
        at = f"{where}.content[{k}]"
        content = common.plain(content, at)
        kind = common.kept_kind(content, _CONTENT, at, "Responses message")
        if kind == "output_text" and content.get("annotations"):
            raise UnsupportedItem(
                f"{at}: text with annotations cannot be kept and sent back by this store",
                f"{at} (annotations)",
            )
        key = "text" if kind == "output_text" else "refusal"
        texts.append(TextPart(text=common.text_field(content, key, at), item_id=item_id))
    return texts
