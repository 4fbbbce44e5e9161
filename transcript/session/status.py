"""`Status`: a session at a glance, for status lines and dashboards (`Transcript.status()`)."""

from __future__ import annotations

import msgspec

from transcript.model.result import BreakerState


class Status(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session at a glance, for status lines and dashboards."""

    session_id: str
    version: int
    messages: int
    visible_messages: int
    view_tokens: int
    stored_tokens: int
    goal: str = ""
    last_outcome: str | None = None
    last_strategy: str | None = None
    rounds: int = 0
    breaker: BreakerState = "closed"
    consecutive_failures: int = 0
    pending_calls: tuple[str, ...] = ()
    head_hash: str = ""
