"""`SessionState`: a portable, versioned document of one session's whole log.

It holds every event in order and every body the log appends (with the token counts stored for it),
so another file can rebuild the identical session — same history, same marks, same compaction
records, hence the same view. It is plain JSON; nothing in it is ever evaluated.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import msgspec

from transcript.model.errors import InvalidArgument, SchemaError
from transcript.model.events import Event
from transcript.model.message import Message

STATE_FORMAT: Final = "transcript-store/session-state"
STATE_VERSION: Final = 1


class ExportedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event of the exported log."""

    version: int
    recorded_at: str
    event: Event


class ExportedBody(msgspec.Struct, frozen=True, kw_only=True):
    """A body the log appends, with its per-part token counts and the tokenizer that made them."""

    message: Message
    tokens: tuple[int, ...]
    tokenizer: str


class SessionState(msgspec.Struct, frozen=True, kw_only=True):
    """One session's log and bodies: what `Transcript.export_state()` returns and `Store.restore` takes."""

    format: Literal["transcript-store/session-state"] = STATE_FORMAT
    format_version: int = STATE_VERSION
    session_id: str
    exported_at: datetime
    events: tuple[ExportedEvent, ...]
    bodies: tuple[ExportedBody, ...]
    # The hash of the last event as the exporting store chained it ("" from older releases): a
    # restore re-derives the chain from the events and refuses a document that does not reach it.
    head: str = ""

    def to_json(self) -> bytes:
        """The document as JSON bytes."""
        return msgspec.json.encode(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> SessionState:
        """A document read back from JSON; a newer format version is refused."""
        if not isinstance(data, (bytes, bytearray, memoryview, str)):
            raise InvalidArgument(
                f"a session-state document is JSON bytes or text, not {type(data).__name__}"
            )
        try:
            state = msgspec.json.decode(data, type=cls)
        except msgspec.DecodeError as exc:
            raise SchemaError(f"not a session-state document: {exc}") from exc
        except RecursionError:
            raise SchemaError(
                "not a session-state document: nested deeper than a decoder can follow"
            ) from None
        except UnicodeEncodeError as exc:  # text holding a lone surrogate is no JSON text
            raise InvalidArgument(
                f"a session-state document given as text must be valid Unicode; position {exc.start} "
                "holds a lone surrogate"
            ) from None
        if state.format_version > STATE_VERSION:
            raise SchemaError(
                f"session-state format {state.format_version} is newer than this release ({STATE_VERSION})"
            )
        return state
