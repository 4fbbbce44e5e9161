"""Store work for asyncio loops, off the event loop: one small pool of worker threads for all of it.

A call into the store holds Python's interpreter lock while it decodes, encodes and hashes; an event
loop competing with many such threads for that lock waits many switch intervals. So the work of
every `AsyncTranscript` (and `acompact`) goes to one pool of `WORKERS` threads: the store's own
locks serialize it anyway, and the loop gets the interpreter back within a switch interval or two.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

P = ParamSpec("P")
R = TypeVar("R")

WORKERS: Final = 1
_pool: ThreadPoolExecutor | None = None
_pool_lock: Final = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="transcript-store")
        return _pool


async def off_loop(function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `function(*args, **kwargs)` in the store's worker pool and await its result."""
    import asyncio  # here, not at the top: a program that never awaits the store never imports it

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(function, *args, **kwargs))
