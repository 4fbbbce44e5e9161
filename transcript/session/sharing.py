"""One transcript shared by threads and tasks: its own writes never conflict with each other.

A `Transcript` may be used from any thread, and an `AsyncTranscript` (which wraps one) from many
tasks at once. Two things keep its siblings out of each other's way:

- `OwnWrites` is the store as the transcript's rounds write to it: each commit is made under the
  transcript's lock and folded into its session at once, so an append of a sibling, which checks its
  write against the version the transcript last folded, never finds the store ahead of it because of
  the transcript's own round (a `ConflictError` is then always another object's or process's write);
- `RoundTurn` lets one round run at a time on a transcript (sync callers wait their turn, async ones
  too, without holding a worker thread): a round that comes second plans from what the first left, so
  a session is summarized, and a summarizer paid, once per race.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from transcript.model.errors import InvalidArgument
from transcript.store.port import Committed, EventStore, SessionWrite, Written

_REENTERED = (
    "compact() was called from inside a round of the same transcript (its summarizer or a hook): "
    "that round holds the transcript's turn until it ends"
)


class OwnWrites:
    """The event store as one transcript's rounds see it: commits to its session fold as they land.

    Everything but `commit` is the store's own (reads pass straight through)."""

    def __init__(
        self, events: EventStore, session_id: str, lock: threading.RLock, fold: Callable[[Written], None]
    ) -> None:
        self._events = events
        self._session_id = session_id
        self._lock = lock
        self._fold = fold

    def commit(
        self, writes: Sequence[SessionWrite], *, writer: object = None, expect_new: bool = False
    ) -> list[Committed]:
        """`EventStore.commit`, under the transcript's lock; what lands in its session is folded
        before the lock is let go."""
        with self._lock:
            options = {"expect_new": True} if expect_new else {}
            done = self._events.commit(writes, writer=writer, **options)
            for write, committed in zip(writes, done, strict=True):
                if write.session_id == self._session_id:
                    self._fold(Written.of(write, committed))
            return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._events, name)


class RoundTurn:
    """One round at a time on a transcript; the next waits for the one running to end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: object = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Wait for the turn (a synchronous round)."""
        me = ("thread", threading.get_ident())
        if self._owner == me:
            raise InvalidArgument(_REENTERED)
        with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None

    @contextlib.asynccontextmanager
    async def aheld(self) -> AsyncIterator[None]:
        """Wait for the turn without blocking the event loop or a worker thread (an async round)."""
        me = ("task", id(asyncio.current_task()))
        if self._owner == me:
            raise InvalidArgument(_REENTERED)
        delay = 0.0005
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        self._owner = me
        try:
            yield
        finally:
            self._owner = None
            self._lock.release()
