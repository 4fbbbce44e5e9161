"""`Status`: a session at a glance, for status lines and dashboards (`Transcript.status()`)."""

from __future__ import annotations

import msgspec

from transcript.model.processes import ProcessSnapshot
from transcript.model.result import BreakerState
from transcript.session.billing import BilledCall


class Overview(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where the work stands, from the latest checkpoint: what was done, is in progress, is blocked;
    and the processes running (as the host last registered them, else as the checkpoint says)."""

    done: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    processes: tuple[str, ...] = ()


class Status(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session at a glance, for status lines and dashboards.

    `summary` is the latest checkpoint, whole, in markdown (the view may show less of it to fit the
    budget), `overview` where the work stands; `last_error` is the latest summarizer failure the
    breaker counted (type and message); `processes` the processes as the host last registered them.
    `last_call` is the latest model call with recorded usage — the view's estimate against the bill —
    and `billed_calls` how many have one.
    """

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
    title: str = ""
    summary: str = ""
    overview: Overview = Overview()
    last_error: str = ""
    processes: tuple[ProcessSnapshot, ...] = ()
    billed_calls: int = 0
    last_call: BilledCall | None = None
    # Storage faults the session lives with (`BODY_MISSING`), and a restore no head vouched for
    # (`RESTORE_UNVERIFIED`): it keeps working, and says so here.
    diagnostics: tuple[str, ...] = ()
