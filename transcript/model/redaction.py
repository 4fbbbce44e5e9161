"""Redaction as values: the tombstone that replaces removed content, and the scrub of quotes of it.

A redacted part keeps its kind and what pairs it (a tool call's id and name, a result's call id),
and its content becomes the tombstone `[redacted: REASON]` (a tool call's input `{"redacted":
TOMBSTONE}`; a media part a text part); the message lists the part in `redacted`, so a redacted body
is told from one that only says those words. What copied the removed text elsewhere — a summary, a
checkpoint, a stored error, an adapter's raw item in the metadata — is scrubbed: each run of it made
of `QUOTE_WINDOW`-character windows of the removed text becomes `SCRUBBED`. Pure functions; nothing
here knows a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import msgspec

from transcript.model.errors import InvalidArgument
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

# What a quote of removed text becomes inside a copy of it (a summary, a checkpoint, an error).
SCRUBBED: Final = "[redacted]"
# The shortest run of removed text that counts as a quote of it elsewhere: shorter runs ("the", a
# path) are everyday text; every key format a scanner knows is longer. A removed string shorter than
# this (a password) is looked for whole, from `SHORT_SECRET` characters on.
QUOTE_WINDOW: Final = 16
SHORT_SECRET: Final = 6
_REASON_MAX: Final = 200


def tombstone_text(reason: str) -> str:
    """The text a redacted part holds."""
    return f"[redacted: {reason}]"


def check_reason(reason: object) -> str:
    """`InvalidArgument` unless `reason` is a short one-line text (it is stored, and shown in views)."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(f"a redaction needs a reason: a non-empty string, not {reason!r:.80}")
    if len(reason) > _REASON_MAX or not reason.isprintable():
        raise InvalidArgument(
            f"a redaction's reason is one printable line of at most {_REASON_MAX} characters"
        )
    return reason.strip()


def tombstone_part(part: Part, reason: str) -> Part:
    """The tombstone that replaces `part` (its kind, ids and pairing kept; a media part becomes text)."""
    text = tombstone_text(reason)
    if isinstance(part, TextPart):
        return TextPart(text=text, item_id=part.item_id)
    if isinstance(part, ReasoningPart):
        return ReasoningPart(text=text, provider=part.provider, item_id=part.item_id)
    if isinstance(part, RedactedReasoningPart):
        return RedactedReasoningPart(data=text)
    if isinstance(part, ToolCall):
        return ToolCall(id=part.id, name=part.name, input={"redacted": text}, item_id=part.item_id)
    if isinstance(part, ToolResult):
        return ToolResult(call_id=part.call_id, content=text, name=part.name, is_error=part.is_error)
    if isinstance(part, (ImagePart, DocumentPart)):
        return TextPart(text=text)
    raise InvalidArgument(f"a {type(part).__name__} part cannot be redacted")


def is_tombstone(part: Part, reason: str) -> bool:
    """Whether `part` is exactly the tombstone of a redaction for `reason`."""
    return tombstone_part(part, reason) == part


def part_strings(part: Part) -> list[str]:
    """Every string of a part's content (what a redaction removes), ids and names left out."""
    if isinstance(part, TextPart):
        return [part.text]
    if isinstance(part, ReasoningPart):
        return [part.text, part.signature or ""]
    if isinstance(part, RedactedReasoningPart):
        return [part.data]
    if isinstance(part, ToolCall):
        found = list(strings_in(part.input))
        return [*found, part.raw_input or "", part.raw_arguments or ""]
    if isinstance(part, ToolResult):
        if isinstance(part.content, str):
            return [part.content]
        return [s for item in part.content for s in part_strings(item)]
    if isinstance(part, (ImagePart, DocumentPart)):
        return [part.data, getattr(part, "title", None) or ""]
    return []


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value (keys and values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


class Quotes:
    """What counts as a quote of removed text: every `QUOTE_WINDOW`-character window of it, and each
    removed string shorter than that (from `SHORT_SECRET` characters) whole."""

    def __init__(self, removed: Iterable[str]) -> None:
        self.windows: set[str] = set()
        self.short: set[str] = set()
        for text in removed:
            if len(text) >= QUOTE_WINDOW:
                self.windows.update(text[i : i + QUOTE_WINDOW] for i in range(len(text) - QUOTE_WINDOW + 1))
            elif len(text.strip()) >= SHORT_SECRET:
                self.short.add(text.strip())

    def __bool__(self) -> bool:
        return bool(self.windows or self.short)

    def scrub(self, text: str) -> str:
        """`text` with every quote of the removed text replaced by `SCRUBBED`."""
        covered = [False] * len(text)
        windows = self.windows
        for start in range(len(text) - QUOTE_WINDOW + 1):
            if text[start : start + QUOTE_WINDOW] in windows:
                covered[start : start + QUOTE_WINDOW] = [True] * QUOTE_WINDOW
        for secret in self.short:
            start = text.find(secret)
            while start >= 0:
                covered[start : start + len(secret)] = [True] * len(secret)
                start = text.find(secret, start + 1)
        if not any(covered):
            return text
        out: list[str] = []
        index = 0
        while index < len(text):
            if covered[index]:
                while index < len(text) and covered[index]:
                    index += 1
                out.append(SCRUBBED)
            else:
                out.append(text[index])
                index += 1
        return "".join(out)

    def scrub_value(self, value: Any) -> Any:
        """A JSON value with every string in it scrubbed (keys kept)."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {key: self.scrub_value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.scrub_value(item) for item in value]
        return value


def scrub_part(part: Part, quotes: Quotes) -> Part:
    """A part with every quote in its content scrubbed (same kind, same ids)."""
    data = msgspec.json.decode(msgspec.json.encode(part))
    scrubbed = {key: value if key in _KEPT else quotes.scrub_value(value) for key, value in data.items()}
    if scrubbed == data:
        return part
    result: Part = msgspec.json.decode(msgspec.json.encode(scrubbed), type=Part)
    return result


# What pairs or names a part: never scrubbed.
_KEPT: Final = frozenset(("kind", "id", "call_id", "name", "item_id", "media_type", "provider", "is_error"))


def redacted_message(message: Message, parts: Sequence[int] | None, reason: str) -> tuple[Message, list[str]]:
    """The message with `parts` (all when None) replaced by their tombstones, and what was removed.

    A whole redaction also drops the metadata (an adapter's raw provider items); a redaction of some
    parts scrubs the metadata of quotes of what they held.
    """
    indices = range(len(message.parts)) if parts is None else parts
    chosen = sorted(set(indices))
    already = set(message.redacted)
    removed: list[str] = []
    new_parts = list(message.parts)
    for index in chosen:
        if index in already:
            continue
        removed.extend(s for s in part_strings(message.parts[index]) if s)
        new_parts[index] = tombstone_part(message.parts[index], reason)
    redacted = tuple(sorted(already | set(chosen)))
    metadata = message.metadata
    if parts is None:
        metadata = None
    elif metadata is not None:
        metadata = Quotes(removed).scrub_value(metadata)
    return (
        msgspec.structs.replace(message, parts=tuple(new_parts), metadata=metadata, redacted=redacted),
        removed,
    )


def scrubbed_message(message: Message, quotes: Quotes) -> tuple[Message, tuple[int, ...]]:
    """The message with quotes scrubbed from its parts (and then its metadata too), and the parts that
    changed; a message none of whose parts quotes the removed text is returned as it is."""
    changed: list[int] = []
    new_parts = list(message.parts)
    for index, part in enumerate(message.parts):
        if index in message.redacted:
            continue
        scrubbed = scrub_part(part, quotes)
        if scrubbed != part:
            new_parts[index] = scrubbed
            changed.append(index)
    if not changed:
        return message, ()
    metadata = quotes.scrub_value(message.metadata) if message.metadata is not None else None
    redacted = tuple(sorted(set(message.redacted) | set(changed)))
    return (
        msgspec.structs.replace(message, parts=tuple(new_parts), metadata=metadata, redacted=redacted),
        tuple(changed),
    )
