"""Where a peer may cut the history: only before a user or an assistant message, so no tool call is
ever parted from its result (every peer's own rule, in its own terms)."""

from __future__ import annotations

from collections.abc import Sequence

from planner.peers.base import PeerView
from transcript.model.message import Message


def tail_start(view: PeerView, room: int, *, after: int = 0) -> int | None:
    """The index in `view` of the earliest cut point (after index `after`) whose tail, to the end of
    the view, holds at most `room` tokens; None when not even the newest step fits."""
    kept = 0
    best = None
    for index in range(len(view.messages) - 1, after - 1, -1):
        kept += view.tokens[index]
        if kept > room:
            break
        if is_cut_point(view.messages[index]):
            best = index
    return best


def is_cut_point(message: Message) -> bool:
    """Whether the view may be cut just before this message."""
    return message.role in ("user", "assistant") and message.kind != "summary"


def newest_step(messages: Sequence[Message]) -> int:
    """The index of the newest cut point (0 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if is_cut_point(messages[index]):
            return index
    return 0
