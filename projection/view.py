"""The model view: the exact, provider-neutral messages a loop sends for one model call.

A `View` is a pure value. "The same view" means the same `canonical_json()` bytes: the canonical
msgspec JSON of its messages, which is what resume and replay tests compare.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from transcript.model import Message

ViewSource: TypeAlias = Literal["persisted", "canonical", "rebuilt", "fallback"]

_ENCODER: Final = msgspec.json.Encoder()


class Diagnostic(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Something the read path noticed, with a stable code (e.g. `CORRUPTED_PROJECTION`)."""

    code: str
    message: str
    message_id: str | None = None


class View(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the model is shown: messages, where they came from, diagnostics and their token count.

    `tokens` is the sum of the stored per-part counts of what is shown (message framing overhead,
    which differs per provider, is not included).
    """

    messages: tuple[Message, ...]
    source: ViewSource
    tokens: int
    diagnostics: tuple[Diagnostic, ...] = ()

    def canonical_json(self) -> bytes:
        """The canonical JSON bytes of the view's messages: the unit of "byte for byte"."""
        return _ENCODER.encode(self.messages)

    def __len__(self) -> int:
        return len(self.messages)
