"""Digests of a view: what a served-view record stores and what replay checks it against.

Each message has a digest (sha256 of its canonical JSON, 32 hex characters). The view's hash covers
the digests chunk by chunk (the same chunks as `View`), so a live session re-hashes only the chunks
that changed since the last record, and replay recomputes the same value from the log alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from transcript.model import Message
from transcript.model.chunked import CHUNK

DIGEST_CHARS: Final = 32
_ENCODER: Final = msgspec.json.Encoder()


def _sha256(data: bytes) -> str:
    # Imported on first use: a process that never records a view never pays for loading hashlib.
    import hashlib

    return hashlib.sha256(data).hexdigest()


def message_digest(message: Message) -> str:
    """The digest of one rendered message."""
    return _sha256(_ENCODER.encode(message))[:DIGEST_CHARS]


def chunk_hash(digests: Sequence[str]) -> str:
    """The hash of one chunk of message digests."""
    return _sha256("\n".join(digests).encode())


def combine(chunk_hashes: Sequence[str], length: int) -> str:
    """The view hash from its chunk hashes and its length."""
    return _sha256(f"{length}\n{chr(10).join(chunk_hashes)}".encode())


def digest_view(messages: Sequence[Message]) -> tuple[str, tuple[str, ...]]:
    """The view hash and the per-message digests of a list of rendered messages."""
    digests = tuple(message_digest(m) for m in messages)
    chunks = [chunk_hash(digests[i : i + CHUNK]) for i in range(0, len(digests), CHUNK)]
    return combine(chunks, len(digests)), digests
