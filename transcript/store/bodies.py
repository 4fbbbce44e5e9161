"""Preparing a body for the store: checked, in its canonical bytes, hashed and counted.

This runs before any transaction opens, so a write holds its lock only for the inserts. The message
a caller keeps is the one `normalize_message` returns — exactly what a resumed process reads back.
"""

from __future__ import annotations

from transcript.model.codec import normalize_message
from transcript.model.hashing import body_hash
from transcript.model.message import Message
from transcript.store.port import NewBody
from transcript.tokens import TokenCounter, message_tokens


def prepare(message: Message, counter: TokenCounter, *, count: bool = True) -> NewBody:
    """Check, normalize, hash and (unless `count=False`) count a message. Raises `InvalidMessage`."""
    normal, data = normalize_message(message)
    tokens = message_tokens(normal, counter) if count else ()
    return NewBody(normal, data, body_hash(normal), tokens, counter.name)


def counted(body: NewBody, counter: TokenCounter) -> NewBody:
    """The body with its per-part token counts."""
    return body._replace(tokens=message_tokens(body.message, counter), tokenizer=counter.name)
