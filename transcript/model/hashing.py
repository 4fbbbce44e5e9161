"""Content hashes and record digests of bodies, and the per-session hash chain of events.

A body's content hash covers what the message says (role, kind, anchor, parts), not where or when it
was stored, so a fork or a re-import of the same content hashes the same; the event chain holds it. A
body's record digest covers everything a view renders or counts: the message's canonical bytes
(`created_at`, `metadata` and all), its per-part token counts and the tokenizer that made them, so
`verify` names any edit of a stored body. An event's hash covers its session, version, time and
payload bytes and the hash of the event before it, so editing, removing or reordering any event
breaks every later link.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec

from transcript.model.message import Message, MessageKind, Part, Role

if TYPE_CHECKING:
    from hashlib import _Hash

GENESIS: Final = ""


# Up to this many bytes, a hash computed before anything loaded hashlib uses the interpreter's own
# sha256 (the same digest): loading hashlib (OpenSSL) costs ~5 ms, while the builtin hashes ~40 MB/s
# against OpenSSL's ~800, so a cold open checking one small snapshot need not load it.
SMALL: Final = 32 * 1024


def _sha256(data: bytes, more: int | None = None) -> _Hash:
    """A sha256 of `data`, and of the `more` bytes `update` adds (None: an unknown number)."""
    if more is not None and "hashlib" not in sys.modules and len(data) + more <= SMALL:
        builtin = _builtin_sha256()
        if builtin is not None:
            return builtin(data)
    import hashlib  # on first use: reading a store rarely hashes, and hashlib costs ~5 ms to load

    return hashlib.sha256(data)


@functools.cache
def _builtin_sha256() -> Callable[[bytes], _Hash] | None:
    """CPython's own sha256 (`_sha2` from 3.12, `_sha256` before), or None in a build without it."""
    for name in ("_sha2", "_sha256"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        constructor: Callable[[bytes], _Hash] = module.sha256
        return constructor
    return None


class _HashedContent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    role: Role
    kind: MessageKind = "message"
    anchor: str | None = None
    parts: tuple[Part, ...]
    redacted: tuple[int, ...] = ()


_ENCODER: Final = msgspec.json.Encoder()


def body_hash(message: Message) -> str:
    """The content hash of a message body (hex sha256)."""
    content = _HashedContent(
        role=message.role,
        kind=message.kind,
        anchor=message.anchor,
        parts=message.parts,
        redacted=message.redacted,
    )
    return _sha256(_ENCODER.encode(content)).hexdigest()


def event_hash(prev_hash: str, session_id: str, version: int, recorded_at: str, payload: bytes) -> str:
    """The chained hash of one event (hex sha256)."""
    framing = _ENCODER.encode([prev_hash, session_id, version, recorded_at])
    # (Its length known: an open checking a snapshot's record before anything loaded hashlib need not.)
    digest = _sha256(framing, more=len(payload) + 1)
    digest.update(b"\n")
    digest.update(payload)
    return digest.hexdigest()


def snapshot_digest(session_id: str, version: int, head: str, payload: bytes) -> str:
    """The digest of a snapshot (hex sha256): its session, the version and event hash it folds to, and
    its payload, so a snapshot damaged or moved to another point is told at load."""
    framing = _ENCODER.encode(["transcript-store snapshot", session_id, version, head])
    digest = _sha256(framing, more=len(payload) + 1)
    digest.update(b"\n")
    digest.update(payload)
    return digest.hexdigest()


def record_digest(body: bytes, tokens: bytes, tokenizer: str) -> str:
    """The record digest of a stored body (hex sha256) from its canonical bytes: the message's JSON,
    the JSON of its per-part counts, and the tokenizer's name."""
    digest = _sha256(b"transcript-store record\n")
    digest.update(_ENCODER.encode(tokenizer))
    digest.update(b"\n")
    digest.update(tokens)
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()


def payload_digest(payload: bytes) -> str:
    """The digest of an event payload a redaction rewrote (hex sha256): the redaction event names it,
    so the chain pins the rewritten bytes as it pinned the original ones."""
    return _sha256(payload).hexdigest()


def salted_digest(salt: bytes, data: bytes) -> str:
    """A digest of removed content under a random salt that is never stored (hex sha256): whoever kept
    the salt can show what was removed; nobody can test a guess against what is stored."""
    digest = _sha256(b"transcript-store removed\n")
    digest.update(salt)
    digest.update(data)
    return digest.hexdigest()
