"""The model view: the exact, provider-neutral messages a loop sends for one model call.

A `View` is a pure value. "The same view" means the same `canonical_json()` bytes: the canonical
msgspec JSON of its messages, which is what resume and replay tests compare.

The messages are held in fixed-size chunks of tuples, so a live session can hand out a new view after
an append or a re-render by rebuilding only the chunks that changed: the cost of a view does not grow
with the session's length. `view.messages` reads as one immutable sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

import msgspec

from projection.cache import CacheHint
from transcript.model import Message
from transcript.model.chunked import CHUNK, Chunked

ViewSource: TypeAlias = Literal["persisted", "canonical", "rebuilt", "fallback"]

_ENCODER: Final = msgspec.json.Encoder()
# Chunks known to be whole while a view is made of them (`View.over`, `View.with_cache`): the view
# is not checked again. The check walks every chunk, the one part of a live session's new view per
# turn that grew with the session (~20 µs at 100k messages). Held only while that view is made (no
# view's messages are kept alive by it); another thread making one meanwhile only costs a check.
_CHECKED: tuple[tuple[Message, ...], ...] = ()


class Diagnostic(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Something the read path noticed, with a stable code (e.g. `CORRUPTED_PROJECTION`)."""

    code: str
    message: str
    message_id: str | None = None


class Messages(Chunked[Message]):
    """An immutable sequence of messages stored as chunks of tuples (shared between views).

    Every chunk but the last holds exactly `CHUNK` messages.
    """

    __slots__ = ()

    def __init__(self, chunks: tuple[tuple[Message, ...], ...]) -> None:
        self._chunks = chunks
        self._len = (len(chunks) - 1) * CHUNK + len(chunks[-1]) if chunks else 0


def _unchecked(chunks: tuple[tuple[Message, ...], ...], make: Callable[[], View]) -> View:
    """`make()`, whose view holds these chunks, known to be whole: they are not checked again."""
    global _CHECKED
    _CHECKED = chunks
    try:
        return make()
    finally:
        _CHECKED = ()


def chunked(messages: Sequence[Message]) -> tuple[tuple[Message, ...], ...]:
    """Messages split into the view's chunks."""
    return tuple(tuple(messages[start : start + CHUNK]) for start in range(0, len(messages), CHUNK))


class View(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the model is shown: messages, where they came from, diagnostics and their token count.

    `tokens` is the sum of the stored per-part counts of what is shown (message framing overhead,
    which differs per provider, is not included). `cache` is set on a view that was recorded as
    served (`visible_messages(record=True)`): what it shares with the view served before it, which
    `to_anthropic(cache=True)` places its middle breakpoint by. Build one with `View.of(...)`.
    """

    chunks: tuple[tuple[Message, ...], ...]
    source: ViewSource
    tokens: int
    diagnostics: tuple[Diagnostic, ...] = ()
    cache: CacheHint | None = None

    def __post_init__(self) -> None:
        if self.chunks is _CHECKED:
            return
        # (`min`/`max` over the lengths run in C: a view of 100k messages checks 400 chunks in µs.)
        full = self.chunks[:-1]
        if full and (min(map(len, full)) != CHUNK or max(map(len, full)) != CHUNK):
            raise ValueError(f"every chunk of a view but the last holds {CHUNK} messages")

    @classmethod
    def over(
        cls,
        messages: Chunked[Message],
        *,
        source: ViewSource,
        tokens: int,
        diagnostics: tuple[Diagnostic, ...] = (),
    ) -> View:
        """A view of messages already in chunks (a live session's, rebuilt only where they changed).
        A `Chunked` itself (not a subclass, whose chunks may come from elsewhere) made its chunks:
        they are not checked again."""
        chunks = messages.chunks
        if type(messages) is not Chunked:
            return cls(chunks=chunks, source=source, tokens=tokens, diagnostics=diagnostics)
        return _unchecked(
            chunks, lambda: cls(chunks=chunks, source=source, tokens=tokens, diagnostics=diagnostics)
        )

    def with_cache(self, cache: CacheHint | None) -> View:
        """This view with its cache hint set (its chunks, checked when it was made, are not checked
        again)."""
        return _unchecked(self.chunks, lambda: msgspec.structs.replace(self, cache=cache))

    @classmethod
    def of(
        cls,
        messages: Sequence[Message],
        *,
        source: ViewSource,
        tokens: int,
        diagnostics: tuple[Diagnostic, ...] = (),
    ) -> View:
        """A view of these messages."""
        return cls(chunks=chunked(messages), source=source, tokens=tokens, diagnostics=diagnostics)

    @property
    def messages(self) -> Messages:
        """The messages to send, in order (an immutable sequence)."""
        return Messages(self.chunks)

    def canonical_json(self) -> bytes:
        """The canonical JSON bytes of the view's messages: the unit of "byte for byte"."""
        parts = [_ENCODER.encode(chunk)[1:-1] for chunk in self.chunks if chunk]
        return b"[" + b",".join(parts) + b"]"

    def __len__(self) -> int:
        chunks = self.chunks
        return (len(chunks) - 1) * CHUNK + len(chunks[-1]) if chunks else 0

    def to_openai(self) -> list[dict[str, Any]]:
        """The view as OpenAI Chat Completions `messages` (see `projection.wire.openai.to_openai`)."""
        from projection.wire.openai import to_openai

        return to_openai(self.messages)

    def to_responses(self) -> list[dict[str, Any]]:
        """The view as OpenAI Responses `input` items (see `projection.wire.responses.to_responses`)."""
        from projection.wire.responses import to_responses

        return to_responses(self.messages)

    def to_anthropic(self, *, cache: bool = False, cache_min_tokens: int = 1_024) -> dict[str, Any]:
        """The view as an Anthropic Messages body (see `projection.wire.anthropic.to_anthropic`);
        `cache=True` places prompt-cache breakpoints (none on a prefix under `cache_min_tokens`)."""
        from projection.wire.anthropic import to_anthropic

        if not cache:
            return to_anthropic(self.messages)
        return to_anthropic(self, cache=True, cache_min_tokens=cache_min_tokens)
