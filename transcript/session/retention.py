"""Retention of later-used facts: how much of what the agent goes on to use a compacted view still holds.

Over a replay (`simulate`), at each model call: the *relevant* facts are the distinctive tokens
(`planner.facts`) that occurred in a message before the call and that the agent uses again at or
after it (in the text or the tool call arguments of the assistant message the call produces, or of a
later one); the *kept* facts are those of them present anywhere in the view the call was sent.
Retention is kept / relevant, pooled over every call after the first compaction of the replay. A
replay that never compacts keeps them all (P0 is 100%).

The sets are kept incrementally (a fact enters once it has occurred, leaves after its last use), and
each message's facts are read once (by digest, for the views), so a replay costs what it reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner.facts import message_facts, used_facts
from transcript.model.message import Message


class Retention:
    """The relevant facts of a replay, call by call (see the module docstring)."""

    def __init__(self, messages: Sequence[Message]) -> None:
        first: dict[str, int] = {}
        last_use: dict[str, int] = {}
        for index, message in enumerate(messages):
            for fact in message_facts(message):
                first.setdefault(fact, index)
            for fact in used_facts(message):
                last_use[fact] = index
        self._enter: dict[int, list[str]] = {}
        self._leave: dict[int, list[str]] = {}
        for fact, seen in first.items():
            used = last_use.get(fact, -1)
            if used > seen:  # used again after it first occurred
                self._enter.setdefault(seen + 1, []).append(fact)
                self._leave.setdefault(used + 1, []).append(fact)
        self._active: set[str] = set()
        self._at = 0
        self._seen: dict[str, frozenset[str]] = {}

    def relevant(self, index: int) -> set[str]:
        """The relevant facts at the call that produces `messages[index]` (calls come in order)."""
        while self._at < index:
            self._at += 1
            self._active.update(self._enter.get(self._at, ()))
            self._active.difference_update(self._leave.get(self._at, ()))
        return self._active

    def kept(self, index: int, view: Sequence[Message], digests: Sequence[str]) -> tuple[int, int]:
        """(relevant, kept) at the call that produces `messages[index]`, sent `view` (whose messages
        have these digests)."""
        relevant = self.relevant(index)
        if not relevant:
            return 0, 0
        shown: set[str] = set()
        for message, digest in zip(view, digests, strict=True):
            facts = self._seen.get(digest)
            if facts is None:
                facts = self._seen[digest] = frozenset(message_facts(message))
            shown |= facts
        return len(relevant), len(relevant & shown)
