"""The canonical encoding of message bodies, and the check every stored message passes first.

A body is stored as its canonical msgspec JSON; `normalize_message` returns the message exactly as
it will be read back together with those bytes, so a live process and a resumed one hold the same
value. Anything JSON cannot carry exactly (NaN, non-string keys, lone surrogates) is refused.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from transcript.model.errors import InvalidMessage
from transcript.model.message import ROLES, Message, ToolCall, check_message, describe_id
from transcript.model.nesting import MAX_JSON_DEPTH

_MESSAGE_ENCODER: Final = msgspec.json.Encoder()
MESSAGE_DECODER: Final = msgspec.json.Decoder(Message)


def encode_message(message: Message) -> bytes:
    """The canonical JSON bytes of a message (what the store keeps as the body)."""
    return _MESSAGE_ENCODER.encode(message)


def decode_message(data: bytes) -> Message:
    """A message from its canonical JSON bytes, types validated."""
    return MESSAGE_DECODER.decode(data)


def normalize_message(message: Message) -> tuple[Message, bytes]:
    """Check a message and return (the message as it will be read back, its canonical bytes).

    The store keeps exactly these bytes and the live process keeps exactly this object, so what a
    resumed process reads back is byte for byte what the live one served. Raises `InvalidMessage`.
    """
    if not isinstance(message, Message):
        raise InvalidMessage(f"expected a Message, got {type(message).__name__}")
    if message.role not in ROLES:
        expected = ", ".join(ROLES)
        raise InvalidMessage(
            f"message {describe_id(message)}: unknown role {message.role!r} (expected one of {expected})"
        )
    for part in message.parts if isinstance(message.parts, (tuple, list)) else ():
        if isinstance(part, ToolCall):
            _check_json_value(part.input, f"message {message.id!r}: tool call {part.id!r} input")
    if message.metadata is not None:
        _check_json_value(message.metadata, f"message {message.id!r}: metadata")
    try:
        data = _MESSAGE_ENCODER.encode(message)
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"message {describe_id(message)}: text is not valid Unicode (lone surrogate at position "
            f"{exc.start} of a string); nothing was stored"
        ) from exc
    except (TypeError, OverflowError) as exc:
        raise InvalidMessage(f"message {describe_id(message)}: cannot be encoded: {exc}") from exc
    try:
        normal = MESSAGE_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidMessage(f"message {describe_id(message)}: {exc}") from exc
    check_message(normal)
    return normal, data


def _check_json_value(value: object, where: str, depth: int = 0) -> None:
    """Refuse what JSON cannot carry exactly (NaN, non-string keys, arbitrary objects)."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidMessage(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessage(f"{where}: {value!r} has no JSON form")
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_json_value(item, where, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidMessage(f"{where}: object key {key!r} is not a string")
            _check_json_value(item, where, depth + 1)
        return
    raise InvalidMessage(f"{where}: {type(value).__name__} is not a JSON value")
