"""Ids and times: time-ordered UUIDv7 message ids, the rule for session ids, UTC timestamps."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime

from transcript.model.errors import InvalidSession


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class _IdClock:
    """UUIDv7 source: 48-bit milliseconds, then a counter that keeps ids in one process ordered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._counter = 0

    def next(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms > self._last_ms:
                self._last_ms = ms
                self._counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
            else:
                self._counter += 1
                if self._counter > 0xFFF:
                    self._last_ms += 1
                    self._counter = 0
            ms = self._last_ms
            rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
            value = (ms << 80) | (0x7 << 76) | (self._counter << 64) | (0b10 << 62) | rand_b
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_ID_CLOCK = _IdClock()


def new_message_id() -> str:
    """A new time-ordered message id (UUIDv7 text form)."""
    return _ID_CLOCK.next()


def check_session_id(session_id: object) -> None:
    """Refuse a session id that is not a non-empty, valid-Unicode string of at most 256 characters."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > 256:
        raise InvalidSession(
            f"session id must be a non-empty string of at most 256 characters, not {session_id!r}"
        )
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidSession(f"session id {session_id!r} is not valid Unicode (lone surrogate)") from exc
