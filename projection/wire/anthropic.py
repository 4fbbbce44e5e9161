"""The Anthropic Messages encoder: one for a view sent to the API, and for an exported history.

`to_anthropic` renders a view as a request body the API takes: checked, call ids remapped, blank text
dropped, consecutive messages of one role merged, unsigned reasoning left out, media the API takes or
placeholders. `encode_anthropic(..., archive=True)` writes a stored history so that importing it
again gives the same bodies: message boundaries kept (only consecutive tool results share a user
message), ids and every block as stored, a raw tool input as a string. Both run the same functions;
the places where they differ are marked by `archive`. Pure functions: the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from projection.cache import CacheHint
from projection.render import media_placeholder
from projection.wire import common
from transcript.model.errors import InvalidArgument, InvalidMessage, UnsupportedItem
from transcript.model.message import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCall,
    ToolResult,
)

# `tool_use.input` must be an object: other inputs are sent wrapped under this key, holding
# `ToolCall.arguments` (the raw text exactly as the model produced it, or the JSON of the value).
RAW_INPUT_KEY: Final = "_raw"
# The first message must be a user message; a view that starts otherwise gets this one.
LEADING_USER_TEXT: Final = "[conversation continues]"
# The API refuses an error `tool_result` with empty content.
EMPTY_ERROR_TEXT: Final = "[error result without output]"


def to_anthropic(
    view: common.HasMessages | Sequence[Message], *, cache: bool = False, cache_min_tokens: int = 1_024
) -> dict[str, Any]:
    """The view as an Anthropic Messages body: `system` (left out when empty) and `messages`.

    - The system messages before the first other message → `system`, as text blocks. A system
      message later in the view → user text blocks `<system>…</system>` in its place (moving it
      into `system` would reorder the prompt and break the cached prefix).
    - user, summary and meta messages → user blocks: images of `common.IMAGE_TYPES` and PDFs as base64
      blocks, a `text/plain` document as a text-source document, other media as placeholders.
    - assistant → its parts in order: signed reasoning as `thinking` blocks and redacted reasoning
      as `redacted_thinking`, kept whole; reasoning without a (non-empty) signature of Anthropic's is
      left out (the API takes a thinking block only with its signature; another provider's opaque
      data is never sent as one); text; `tool_use`, whose `input` is the stored object, or
      `{"_raw": arguments}` when it is not a JSON object (raw text included).
    - tool results → `tool_result` blocks (`content` a string or blocks, `is_error` when set) in
      the user message that follows the call; consecutive messages of one role are merged into one
      message, so results come first in their user message.
    - Blank text blocks are dropped (the API refuses empty and whitespace-only text); a message
      left with no block is dropped; a result left empty omits `content` (an error result says
      `EMPTY_ERROR_TEXT`). When the first message is not a user message, a user message with
      `LEADING_USER_TEXT` is put before it.

    `cache=True` (a `View` only: it needs the view's token counts) marks prompt-cache breakpoints,
    `cache_control: {"type": "ephemeral"}`, on at most three blocks (`cache_breakpoints`).
    """
    messages = common.sendable(view)
    if not cache:
        return encode_anthropic(messages, archive=False)
    tokens = getattr(view, "tokens", None)
    if not isinstance(tokens, int):
        raise InvalidArgument("to_anthropic(cache=True) takes a View: breakpoints need its token counts")
    if isinstance(cache_min_tokens, bool) or not isinstance(cache_min_tokens, int) or cache_min_tokens < 0:
        raise InvalidArgument(f"cache_min_tokens must be a whole number >= 0, not {cache_min_tokens!r}")
    ends: list[tuple[int, int] | None] = []
    body = encode_anthropic(messages, archive=False, ends=ends)
    hint = getattr(view, "cache", None)
    unchanged = (hint.messages, hint.tokens, hint.system_tokens) if isinstance(hint, CacheHint) else None
    cache_breakpoints(body, ends, tokens, unchanged, cache_min_tokens)
    return body


def encode_anthropic(
    messages: Sequence[Message], *, archive: bool, ends: list[tuple[int, int] | None] | None = None
) -> dict[str, Any]:
    """Messages as a Messages body: `system` (when there is one) and `messages`. `ends` receives, per
    message, where its last block went: `(-1, k)` for system block k, `(i, k)` for block k of wire
    message i, None for a message that rendered no block."""
    ids = common.stored_call_ids(messages) if archive else common.wire_call_ids(messages, anthropic=True)
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    where: list[tuple[int, int] | None] = []
    leading = True
    for message, wire_ids in zip(messages, ids, strict=True):
        if message.role == "system" and leading:
            system.extend(_blocks(message.parts, archive))
            where.append((-1, len(system) - 1) if system else None)
            continue
        leading = False
        role = "assistant" if message.role == "assistant" else "user"
        content: str | list[dict[str, Any]]
        if message.role == "system":
            content = [
                {"type": "text", "text": f"<system>{p.text}</system>"}
                for p in message.parts
                if isinstance(p, TextPart)
            ]
        elif message.role == "tool":
            content = [_result(r, wire_ids[r.call_id], archive) for r in message.tool_results]
        elif archive and len(message.parts) == 1 and isinstance(message.parts[0], TextPart):
            content = message.parts[0].text
        elif message.role == "assistant":
            content = _assistant(message, wire_ids, archive)
        else:
            content = _blocks(message.parts, archive)
        if not content and not archive:
            where.append(None)
            continue
        if turns and _merges(turns[-1], role, message.role == "tool", archive):
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content, "results": message.role == "tool"})
        where.append((len(turns) - 1, len(turns[-1]["content"]) - 1))
    shift = 0
    if not archive and (not turns or turns[0]["role"] != "user"):
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": LEADING_USER_TEXT}]})
        shift = 1
    if ends is not None:
        ends.extend(None if w is None else (w[0] + shift if w[0] >= 0 else -1, w[1]) for w in where)
    body: dict[str, Any] = {}
    if system:
        single = archive and len(system) == 1 and system[0]["type"] == "text"
        body["system"] = system[0]["text"] if single else system
    body["messages"] = [{"role": turn["role"], "content": turn["content"]} for turn in turns]
    return body


# Blocks that take `cache_control` (thinking and redacted thinking do not).
_CACHEABLE: Final = frozenset({"text", "image", "document", "tool_use", "tool_result"})
EPHEMERAL: Final = {"type": "ephemeral"}


def cache_breakpoints(
    body: dict[str, Any],
    ends: Sequence[tuple[int, int] | None],
    tokens: int,
    unchanged: tuple[int, int, int] | None,
    min_tokens: int,
) -> list[tuple[int, int]]:
    """Mark a request's prompt-cache breakpoints in place; returns them as `(message, block)` positions
    (`-1` for the system prompt), in request order.

    Three at most, leaving one of Anthropic's four for the host's tool definitions: the end of the
    system prompt; the end of the longest prefix unchanged since the previous served view
    (`unchanged`: messages, their tokens, the system messages' tokens); the end of the request. The
    middle one is where the previous request's last breakpoint was when the loop only appended, so
    its cache entry is hit exactly — however many blocks were added since, where the last breakpoint's
    own lookback reaches only 20 blocks back. None is placed on a prefix under `min_tokens` (the
    model's minimum cacheable length, by the store's count) or twice on one block; a breakpoint that
    falls on a thinking block moves to the block before it.
    """
    marks: list[tuple[int, int]] = []
    if isinstance(body.get("system"), list) and body["system"]:
        system = unchanged[2] if unchanged is not None else _system_tokens(body["system"])
        if system >= min_tokens:
            marks.append((-1, len(body["system"]) - 1))
    if unchanged is not None and 0 < unchanged[0] <= len(ends) and unchanged[1] >= min_tokens:
        end = _cacheable_before(body, ends[: unchanged[0]])
        if end is not None and end[0] >= 0:
            marks.append(end)
    if tokens >= min_tokens:
        last = _cacheable_before(body, ends)
        if last is not None and last[0] >= 0:
            marks.append(last)
    placed = sorted(set(marks))
    for message, block in placed:
        target = body["system"][block] if message < 0 else body["messages"][message]["content"][block]
        target["cache_control"] = dict(EPHEMERAL)
    return placed


def _system_tokens(blocks: list[dict[str, Any]]) -> int:
    """Without a served view's hint, the system prompt's size is estimated at four characters a token."""
    return sum(len(block.get("text", "")) for block in blocks) // 4


def _cacheable_before(body: dict[str, Any], ends: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The last block that takes `cache_control` at or before the last of `ends` that rendered a block."""
    end = next((e for e in reversed(ends) if e is not None), None)
    if end is None or end[0] < 0:
        return end
    messages = body["messages"]
    message, block = end
    while message >= 0:
        content = messages[message]["content"]
        for index in range(block, -1, -1):
            if content[index].get("type") in _CACHEABLE:
                return (message, index)
        message -= 1
        block = len(messages[message]["content"]) - 1 if message >= 0 else -1
    return None


def _merges(last: dict[str, Any], role: str, results: bool, archive: bool) -> bool:
    """Whether a message joins the one before: in a request, any two of one role (the API wants
    alternating roles); in an archive, only tool results following tool results."""
    if archive:
        return results and bool(last["results"])
    return bool(last["role"] == role)


def _blocks(parts: Sequence[Part], archive: bool) -> list[dict[str, Any]]:
    blocks = (_block(part, archive) for part in parts)
    return [block for block in blocks if block is not None]


def _block(part: Part, archive: bool) -> dict[str, Any] | None:
    """One text or media part as a block; None for blank text in a request."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if archive or part.text.strip() else None
    if isinstance(part, ImagePart) and (archive or part.media_type in common.IMAGE_TYPES):
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        return {"type": "image", "source": source}
    if isinstance(part, DocumentPart):
        text = common.plain_text(part, exact=archive)
        document: dict[str, Any] | None = None
        if text is not None:
            source = {"type": "text", "media_type": "text/plain", "data": text}
            document = {"type": "document", "source": source}
        elif archive or part.media_type == "application/pdf":
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
            document = {"type": "document", "source": source}
        if document is not None:
            if part.title is not None:
                document["title"] = part.title
            return document
    if isinstance(part, (ImagePart, DocumentPart)):
        return {"type": "text", "text": media_placeholder(part).text}
    raise TypeError(f"a {part.kind} part has no place in this message")


def _assistant(message: Message, ids: dict[str, str], archive: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            # Another provider's opaque data is never sent as a signature, not even to an archive.
            own = part.provider in (None, "anthropic")
            if archive or part.for_anthropic:
                thinking = {"type": "thinking", "thinking": part.text}
                if part.signature is not None and own:
                    thinking["signature"] = part.signature
                blocks.append(thinking)
        elif isinstance(part, RedactedReasoningPart):
            blocks.append({"type": "redacted_thinking", "data": part.data})
        elif isinstance(part, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": ids[part.id], "name": part.name, "input": _input(part, archive)}
            )
        elif isinstance(part, TextPart) and (archive or part.text.strip()):
            blocks.append({"type": "text", "text": part.text})
    return blocks


def _input(call: ToolCall, archive: bool) -> Any:
    """A call's input: the stored object; in a request, anything else wrapped under `RAW_INPUT_KEY`
    (an archive writes a raw input as its string, and any JSON value as it is)."""
    if archive:
        return call.raw_input if call.raw_input is not None else common.copied(call.input)
    if call.raw_input is None and isinstance(call.input, dict):
        return common.copied(call.input)
    return {RAW_INPUT_KEY: call.arguments}


def _result(result: ToolResult, wire_id: str, archive: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_id}
    content: str | list[dict[str, Any]] | None
    if isinstance(result.content, str):
        content = result.content if archive or result.content.strip() else None
    else:
        content = _blocks(result.content, archive) if archive else _blocks(result.content, archive) or None
    if content is None and result.is_error:
        content = EMPTY_ERROR_TEXT
    if content is not None:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


# Content blocks of a reply this store can keep and send back, with the fields it keeps; any other
# (server tools and their results, container uploads) is refused, naming it.
_KEPT: Final = {
    "text": frozenset({"type", "text", "citations"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
}


def from_anthropic(reply: Any, *, id: str | None = None, created_at: datetime | None = None) -> Message:
    """An Anthropic Messages reply (the SDK's `Message`, or its JSON as a dict) as one assistant message.

    Blocks keep their order: `thinking` → reasoning with its signature (provider `anthropic`),
    `redacted_thinking` → redacted reasoning, `text` → text, `tool_use` → a call whose input is the
    object as sent (key order kept). Metadata keeps `provider`, `model`, `response_id`, `stop_reason`
    and the reply's `usage` as reported (`transcript.usage_of` reads it). A block that cannot be kept
    and sent back — server-tool use and results, a text with citations — is `UnsupportedItem` naming
    it; a reply of another shape is `InvalidMessage` (`InvalidArgument` for what is not a reply).
    """
    data = common.plain(reply, "an Anthropic reply")
    if data.get("role", "assistant") != "assistant" or data.get("type", "message") != "message":
        raise InvalidMessage(
            f"not an Anthropic assistant reply: role {data.get('role')!r}, type {data.get('type')!r}"
        )
    content = data.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidMessage(
            f"an Anthropic reply's 'content' must be a list of blocks, not {type(content).__name__}"
        )
    parts = [_reply_block(block, f"content[{index}]") for index, block in enumerate(content)]
    model = common.text_field(data, "model", "an Anthropic reply", optional=True)
    metadata = {
        "provider": "anthropic",
        "model": model,
        "response_id": common.text_field(data, "id", "an Anthropic reply", optional=True),
        "stop_reason": common.text_field(data, "stop_reason", "an Anthropic reply", optional=True),
        "usage": common.plain(data["usage"], "usage") if data.get("usage") is not None else None,
    }
    return common.reply(parts, metadata, id=id, created_at=created_at)


def _reply_block(block: Any, where: str) -> Part:
    block = common.plain(block, where)
    kind = common.kept_kind(block, _KEPT, where, "Anthropic")
    if kind == "text":
        if block.get("citations"):
            raise UnsupportedItem(
                f"{where}: a text block with citations cannot be kept and sent back by this store; "
                "nothing was stored",
                f"{where} (text with citations)",
            )
        return TextPart(text=common.text_field(block, "text", where))
    if kind == "thinking":
        signature = common.text_field(block, "signature", where, optional=True)
        return ReasoningPart(
            text=common.text_field(block, "thinking", where),
            signature=signature,
            provider="anthropic" if signature else None,
        )
    if kind == "redacted_thinking":
        return RedactedReasoningPart(data=common.text_field(block, "data", where))
    value = block.get("input")
    if not isinstance(value, dict):
        raise InvalidMessage(
            f"{where}: a tool_use block's 'input' must be an object, not {type(value).__name__}"
        )
    return ToolCall(
        id=common.text_field(block, "id", where),
        name=common.text_field(block, "name", where),
        input=common.copied(value),
    )
