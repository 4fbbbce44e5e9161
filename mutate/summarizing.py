"""Calling a summarizer: prompt-too-long retries, outside any transaction, sync or async.

The retry policy is written once, as a generator that yields each attempt's request and receives the
reply (text) or the error; `drive` runs it with a sync summarizer, `adrive` from an event loop (its
steps in worker threads, so the loop never waits on the store). Prompt too
long drops the oldest quarter of the conversation and retries, at most `MAX_RETRIES` times.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Final, TypeVar

import msgspec

from planner.summary import Summarizer, SummaryRequest, is_prompt_too_long
from transcript.store.offloop import off_loop

MAX_RETRIES: Final = 3

Reply = str | BaseException
T = TypeVar("T")
Steps = Generator[SummaryRequest, Reply, T]


class Attempts(msgspec.Struct, frozen=True, kw_only=True):
    """How a model summarizer call went: its text (None when it failed), the error, the retries, and
    every request sent (each one's input is paid for)."""

    text: str | None
    error: str = ""
    retries: int = 0
    sent: tuple[SummaryRequest, ...] = ()


def attempts(request: SummaryRequest) -> Steps[Attempts]:
    """Yield requests until one is answered, or the retries or the conversation run out."""
    retries = 0
    sent: list[SummaryRequest] = []
    while True:
        reply = yield request
        sent.append(request)
        if isinstance(reply, str):
            return Attempts(text=reply, retries=retries, sent=tuple(sent))
        if is_prompt_too_long(reply) and retries < MAX_RETRIES and len(request.items) > 1:
            retries += 1
            request = request.without_oldest_quarter()
            continue
        error = f"{type(reply).__name__}: {reply}"
        return Attempts(text=None, error=error, retries=retries, sent=tuple(sent))


def drive(steps: Steps[T], summarizer: Summarizer) -> T:
    """Run steps with a synchronous summarizer."""

    def ask(request: SummaryRequest) -> object:
        answer = summarizer(request)
        if inspect.isawaitable(answer):
            close = getattr(answer, "close", None)
            if close is not None:
                close()
            raise TypeError("this summarizer is async: use `await transcript.acompact(...)`")
        return answer

    try:
        request = next(steps)
        while True:
            try:
                reply = _as_reply(ask(request))
            except Exception as error:
                reply = error
            request = steps.send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(steps: Steps[T], summarizer: Summarizer) -> T:
    """Run steps with a summarizer that may be async, without blocking the event loop: each step
    (planning, and the commits it makes) runs in a worker thread, one at a time; an async summarizer
    is awaited on the loop, a synchronous one runs in a worker thread too."""

    async def ask(request: SummaryRequest) -> object:
        answer = await off_loop(summarizer, request)
        return await answer if inspect.isawaitable(answer) else answer

    done, value = await off_loop(_advance, steps, None)
    while not done:
        try:
            reply = _as_reply(await ask(value))  # type: ignore[arg-type]
        except Exception as error:
            reply = error
        done, value = await off_loop(_advance, steps, reply)
    return value  # type: ignore[return-value]


def _advance(steps: Steps[T], reply: Reply | None) -> tuple[bool, SummaryRequest | T]:
    """One step: (False, the next request) or (True, the result). A `StopIteration` may not cross
    into a coroutine, so the generator's end comes back as a value."""
    try:
        return False, next(steps) if reply is None else steps.send(reply)
    except StopIteration as stop:
        return True, stop.value


def _as_reply(answer: object) -> Reply:
    """A summarizer's answer as a reply: its text, or an error when it returned something else."""
    return answer if isinstance(answer, str) else TypeError(f"summarizer returned {type(answer).__name__}")
