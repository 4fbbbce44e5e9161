"""`AsyncTranscript`: one session for asyncio loops, never waiting on the store on the event loop.

Every call that reads or writes the store — opening it, an append, a view, a round — runs in the
store's worker pool (`transcript.store.offloop`), so other tasks go on meanwhile; an async summarizer
is awaited on the loop. It wraps a `Transcript`, which may be used from any thread: its lock orders
what the tasks of one loop, and other threads, do to the session.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projection.view import View
from transcript.model.errors import InvalidArgument
from transcript.model.message import Message
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot
from transcript.session.facade import Transcript
from transcript.session.status import Status
from transcript.store.offloop import off_loop

if TYPE_CHECKING:
    from planner.config import CompactConfig
    from planner.summary import Summarizer
    from transcript.model.events import UsageRecorded
    from transcript.model.state import SessionState
    from transcript.model.usage import Calibration, Usage


class AsyncTranscript:
    """One session, for `async` agent loops (see the module docstring). Open with `AsyncTranscript.open`
    or wrap a `Transcript` (`AsyncTranscript(transcript)`); `sync` is the transcript underneath."""

    def __init__(self, transcript: Transcript) -> None:
        self.sync = transcript

    @classmethod
    async def open(
        cls, path: str | Path | None = None, *, session_id: str, **settings: Any
    ) -> AsyncTranscript:
        """Open a store and one of its sessions, in a worker thread (`settings` as for `Transcript.open`)."""
        return cls(await off_loop(Transcript.open, path, session_id=session_id, **settings))

    @property
    def session_id(self) -> str:
        return self.sync.session_id

    @property
    def version(self) -> int:
        """The session's version as this transcript last saw it."""
        return self.sync.version

    async def close(self) -> None:
        await off_loop(self.sync.close)

    async def __aenter__(self) -> AsyncTranscript:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def append(self, message: Message) -> Message:
        """`Transcript.append`, off the event loop."""
        return await off_loop(self.sync.append, message)

    async def append_turn(self, messages: Sequence[Message], *, usage: Usage | Any = None) -> list[Message]:
        """`Transcript.append_turn` (with the reply's billed usage, if given), off the event loop."""
        return await off_loop(self.sync.append_turn, messages, usage=usage)

    async def record_usage(self, usage: Usage | Any, *, served: int | None = None) -> UsageRecorded:
        """`Transcript.record_usage`, off the event loop."""
        return await off_loop(self.sync.record_usage, usage, served=served)

    async def repair_interrupted(self) -> list[Message]:
        return await off_loop(self.sync.repair_interrupted)

    async def visible_messages(self, *, record: bool = False) -> View:
        """`Transcript.visible_messages`, off the event loop."""
        return await off_loop(lambda: self.sync.visible_messages(record=record))

    async def messages(self) -> TranscriptSnapshot:
        return await off_loop(self.sync.messages)

    async def stored_messages(self) -> list[Message]:
        return await off_loop(self.sync.stored_messages)

    async def compact(
        self,
        *,
        budget_tokens: int | None = None,
        window_tokens: int | None = None,
        overhead_tokens: int = 0,
        calibrated: bool | Calibration = False,
        config: CompactConfig | None = None,
        manual: bool = False,
        force: bool = False,
        shadow: bool = False,
        summarizer: Summarizer | None = None,
        summary: str | None = None,
        reason: str | None = None,
    ) -> CompactResult:
        """One round (`Transcript.acompact`): its store work in worker threads, an async summarizer
        awaited here. An append made while the summarizer runs does not throw the round away."""
        return await self.sync.acompact(
            budget_tokens=budget_tokens,
            window_tokens=window_tokens,
            overhead_tokens=overhead_tokens,
            calibrated=calibrated,
            config=config,
            manual=manual,
            force=force,
            shadow=shadow,
            summarizer=summarizer,
            summary=summary,
            reason=reason,
        )

    async def status(self) -> Status:
        return await off_loop(self.sync.status)

    async def export_state(self) -> SessionState:
        return await off_loop(self.sync.export_state)

    async def write_state(self, out: Callable[[bytes], object]) -> None:
        """`Transcript.write_state` off the event loop: `out` is called on the worker thread, so it
        must be a plain function that never waits on the loop (a file's `write`; not a coroutine
        function, and not one that waits for a coroutine, which would wait for the worker)."""
        if inspect.iscoroutinefunction(out):
            raise InvalidArgument(
                "out must be a plain function (it runs off the event loop), not a coroutine function"
            )
        await off_loop(self.sync.write_state, out)

    async def continuation_prompt(self, result: CompactResult | None = None) -> str:
        return await off_loop(self.sync.continuation_prompt, result)

    def __repr__(self) -> str:
        return f"<AsyncTranscript {self.sync!r}>"
