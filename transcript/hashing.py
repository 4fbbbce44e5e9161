"""Content hashes of bodies and the per-session hash chain of events.

A body's hash covers what the message says (role, kind, anchor, parts), not where or when it was
stored (`seq`, `created_at`, token counts, metadata), so a fork or a re-import of the same content
hashes the same. An event's hash covers its session, version, time and payload bytes and the hash of
the event before it, so editing, removing or reordering any event breaks every later link.
"""

from __future__ import annotations

import hashlib
from typing import Final

import msgspec

from transcript.model import Message, MessageKind, Part, Role

GENESIS: Final = ""


class _HashedContent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    role: Role
    kind: MessageKind = "message"
    anchor: str | None = None
    parts: tuple[Part, ...]


_ENCODER: Final = msgspec.json.Encoder()


def body_hash(message: Message) -> str:
    """The content hash of a message body (hex sha256)."""
    content = _HashedContent(role=message.role, kind=message.kind, anchor=message.anchor, parts=message.parts)
    return hashlib.sha256(_ENCODER.encode(content)).hexdigest()


def event_hash(prev_hash: str, session_id: str, version: int, recorded_at: str, payload: bytes) -> str:
    """The chained hash of one event (hex sha256)."""
    digest = hashlib.sha256(_ENCODER.encode([prev_hash, session_id, version, recorded_at]))
    digest.update(b"\n")
    digest.update(payload)
    return digest.hexdigest()
