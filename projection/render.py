"""Rendering messages from their bodies and persisted directives: pure functions, inputs never mutated.

Renderers are registered per policy version. A directive of any released version renders exactly as
it did when it was written — its numbers are frozen in it and its renderer is never changed, only
added to — so upgrading never silently changes a stored view. Policy 1 shortens tool results (and
their media items); policy 2 renders those exactly as policy 1 does and also shortens the text parts
of a message (observations: tool or environment output carried by a user message), with the same
marker. Policy 3 renders those two as policy 2 does and adds two ways of shortening a text: an
excerpt (its head and tail and the lines the directive names, each line at most
`EXCERPT_LINE_CHARS`) and a supersede (a pointer, the directive's note, instead of a text a later
message makes stale). A new directive uses the lowest policy its entries need (`policy_for`). Token
counts of a rendered message come from stored counts and the counts frozen in its directive;
nothing is tokenized here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

import msgspec

from projection.caps import ProviderCaps
from transcript.model import (
    EXCERPT,
    PLACEHOLDER,
    SUPERSEDE,
    TRUNCATE,
    DirectiveEntry,
    DocumentPart,
    Entry,
    ImagePart,
    Message,
    Part,
    ProjectionDirective,
    ReasoningPart,
    ResultContent,
    TextPart,
    ToolResult,
    media_tokens,
)

PROJECTION_POLICY_VERSION: Final = 1
# The policy a directive needs when it shortens text parts (observations), not only tool results.
TEXT_POLICY_VERSION: Final = 2
# The policy a directive needs when it excerpts a text or supersedes it.
EXCERPT_POLICY_VERSION: Final = 3
# How much of each kept line an excerpt shows (policy 3; frozen with it).
EXCERPT_LINE_CHARS: Final = 240

PartRenderer: TypeAlias = Callable[[Part, DirectiveEntry], Part]


class RenderError(Exception):
    """A directive cannot be applied to its message (the read path then falls back to canonical)."""


def truncate_text(text: str, keep_head: int, keep_tail: int) -> str:
    """Policy 1's truncation: head, one marker, tail — in code points, only when that is shorter."""
    omitted = len(text) - keep_head - keep_tail
    if omitted <= 0:
        return text
    tail = text[len(text) - keep_tail :] if keep_tail else ""
    rendered = f"{text[:keep_head]}\n... [{omitted} chars omitted] ...\n{tail}"
    return rendered if len(rendered) < len(text) else text


def media_placeholder(item: ImagePart | DocumentPart) -> TextPart:
    """Policy 1's stand-in for a media item whose payload is left out of the view."""
    if isinstance(item, ImagePart):
        return TextPart(text=f"[image omitted: {item.media_type}]")
    return TextPart(text=f"[document omitted: {item.title or item.media_type}]")


def _apply_v1(part: Part, entry: DirectiveEntry) -> Part:
    if not isinstance(part, ToolResult):
        raise RenderError(f"policy 1 shortens tool results only, not a {part.kind} part")
    if entry.item_index is None:
        if entry.action != TRUNCATE or not isinstance(part.content, str):
            raise RenderError(f"policy 1 cannot {entry.action} a whole tool result of this shape")
        return msgspec.structs.replace(
            part, content=truncate_text(part.content, entry.keep_head, entry.keep_tail)
        )
    if isinstance(part.content, str) or not 0 <= entry.item_index < len(part.content):
        raise RenderError(f"tool result has no content item {entry.item_index}")
    items = list(part.content)
    item = items[entry.item_index]
    replacement: ResultContent
    if entry.action == TRUNCATE and isinstance(item, TextPart):
        replacement = TextPart(text=truncate_text(item.text, entry.keep_head, entry.keep_tail))
    elif entry.action == PLACEHOLDER and isinstance(item, (ImagePart, DocumentPart)):
        replacement = media_placeholder(item)
    else:
        raise RenderError(f"policy 1 cannot {entry.action} a {item.kind} item")
    items[entry.item_index] = replacement
    return msgspec.structs.replace(part, content=tuple(items))


def _apply_v2(part: Part, entry: DirectiveEntry) -> Part:
    if isinstance(part, TextPart) and entry.item_index is None:
        if entry.action != TRUNCATE:
            raise RenderError(f"policy 2 cannot {entry.action} a text part")
        return TextPart(text=truncate_text(part.text, entry.keep_head, entry.keep_tail))
    return _apply_v1(part, entry)


def excerpt_text(text: str, keep_head: int, keep_tail: int, lines: Sequence[int], index: str = "") -> str:
    """Policy 3's excerpt: the head, a marker (naming what the omitted part mentions, `index`), the
    named lines (each clipped), the tail — only when that is shorter than the text."""
    all_lines = text.split("\n")
    kept = [all_lines[i][:EXCERPT_LINE_CHARS] for i in lines if 0 <= i < len(all_lines)]
    head = text[:keep_head]
    tail = text[len(text) - keep_tail :] if keep_tail and len(text) > keep_head + keep_tail else ""
    omitted = len(text) - len(head) - len(tail) - sum(len(line) for line in kept)
    if omitted <= 0:
        return text
    mentions = f"; it mentions {index}" if index else ""
    if kept:
        middle = f"... [{omitted} chars omitted{mentions}; kept: {len(kept)} lines] ...\n" + "\n".join(kept)
        rendered = f"{head}\n{middle}\n... [end of the kept lines] ...\n{tail}"
    else:
        rendered = f"{head}\n... [{omitted} chars omitted{mentions}] ...\n{tail}"
    return rendered if len(rendered) < len(text) else text


def superseded_text(text: str, note: str) -> str:
    """Policy 3's supersede: the pointer in brackets, when that is shorter than the text."""
    rendered = f"[{note}]"
    return rendered if len(rendered) < len(text) else text


def _shortened(text: str, entry: DirectiveEntry) -> str:
    if entry.action == EXCERPT:
        return excerpt_text(text, entry.keep_head, entry.keep_tail, entry.lines, entry.note)
    return superseded_text(text, entry.note)


def _apply_v3(part: Part, entry: DirectiveEntry) -> Part:
    if entry.action not in (EXCERPT, SUPERSEDE):
        return _apply_v2(part, entry)
    if isinstance(part, TextPart) and entry.item_index is None:
        return TextPart(text=_shortened(part.text, entry))
    if not isinstance(part, ToolResult):
        raise RenderError(f"policy 3 cannot {entry.action} a {part.kind} part")
    if entry.item_index is None:
        if not isinstance(part.content, str):
            raise RenderError(f"policy 3 cannot {entry.action} a tool result of several items whole")
        return msgspec.structs.replace(part, content=_shortened(part.content, entry))
    if isinstance(part.content, str) or not 0 <= entry.item_index < len(part.content):
        raise RenderError(f"tool result has no content item {entry.item_index}")
    items = list(part.content)
    item = items[entry.item_index]
    if not isinstance(item, TextPart):
        raise RenderError(f"policy 3 cannot {entry.action} a {item.kind} item")
    items[entry.item_index] = TextPart(text=_shortened(item.text, entry))
    return msgspec.structs.replace(part, content=tuple(items))


_RENDERERS: dict[int, PartRenderer] = {
    1: _apply_v1,
    TEXT_POLICY_VERSION: _apply_v2,
    EXCERPT_POLICY_VERSION: _apply_v3,
}


def policy_for(message: Message, entries: Sequence[DirectiveEntry]) -> int:
    """The policy version a new directive of these entries needs: 3 when one excerpts or supersedes,
    else 2 when one targets a text part, else 1."""
    if any(entry.action in (EXCERPT, SUPERSEDE) for entry in entries):
        return EXCERPT_POLICY_VERSION
    for entry in entries:
        index = entry.part_index
        if (
            index is not None
            and 0 <= index < len(message.parts)
            and isinstance(message.parts[index], TextPart)
        ):
            return TEXT_POLICY_VERSION
    return PROJECTION_POLICY_VERSION


def register_renderer(version: int, renderer: PartRenderer) -> None:
    """Register the renderer of a new policy version. A released version's renderer never changes."""
    if version in _RENDERERS and _RENDERERS[version] is not renderer:
        raise ValueError(f"policy version {version} already has a renderer; versions are never re-registered")
    _RENDERERS[version] = renderer


def known_versions() -> frozenset[int]:
    """The policy versions this code can render."""
    return frozenset(_RENDERERS)


def apply_directive(
    message: Message, directive: ProjectionDirective, caps: ProviderCaps
) -> tuple[Message, list[DirectiveEntry]]:
    """The message as its directive renders it, and the entries that applied.

    Signed reasoning is never shortened when the provider requires it whole; a redacted part renders
    as its tombstone, whatever a directive written before the redaction says. Raises `RenderError`
    when the directive does not fit the message.
    """
    renderer = _RENDERERS.get(directive.policy_version)
    if renderer is None:
        raise RenderError(f"no renderer for policy version {directive.policy_version}")
    parts = list(message.parts)
    applied = []
    for entry in directive.entries:
        index = entry.part_index
        if index is None or not 0 <= index < len(parts):
            raise RenderError(f"directive targets part {index}, the message has {len(parts)}")
        part = parts[index]
        if caps.requires_signed_reasoning and isinstance(part, ReasoningPart) and part.signature:
            continue
        if index in message.redacted:
            continue
        parts[index] = renderer(part, entry)
        applied.append(entry)
    return msgspec.structs.replace(message, parts=tuple(parts)), applied


def _without_media(message: Message) -> Message:
    """Every media part and media item as a placeholder (for providers without media support)."""
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, (ImagePart, DocumentPart)):
            parts.append(media_placeholder(part))
        elif isinstance(part, ToolResult) and not isinstance(part.content, str):
            items = tuple(
                media_placeholder(i) if isinstance(i, (ImagePart, DocumentPart)) else i for i in part.content
            )
            parts.append(msgspec.structs.replace(part, content=items))
        else:
            parts.append(part)
    return msgspec.structs.replace(message, parts=tuple(parts))


def _media_in(message: Message) -> list[ImagePart | DocumentPart]:
    found: list[ImagePart | DocumentPart] = []
    for part in message.parts:
        if isinstance(part, (ImagePart, DocumentPart)):
            found.append(part)
        elif isinstance(part, ToolResult) and not isinstance(part.content, str):
            found.extend(i for i in part.content if isinstance(i, (ImagePart, DocumentPart)))
    return found


PLACEHOLDER_TOKENS: Final = 8


def render_entry(
    entry: Entry, directive: ProjectionDirective | None, caps: ProviderCaps
) -> tuple[Message, int]:
    """One message as the model sees it, and its token count (stored counts adjusted by the directive;
    reasoning that no wire format sends counts nothing).

    Caps-driven media placeholders count `PLACEHOLDER_TOKENS` each instead of the media estimate.
    """
    message = entry.message
    tokens = entry.shown_tokens
    if directive is not None:
        message, applied = apply_directive(message, directive, caps)
        tokens += sum(e.rendered_tokens - e.original_tokens for e in applied)
    if not caps.supports_media:
        media = _media_in(message)
        if media:
            message = _without_media(message)
            tokens -= sum(media_tokens(item) - PLACEHOLDER_TOKENS for item in media)
    return message, max(tokens, 0)
