"""The event loop never waits on the store: 100 tasks on `AsyncTranscript`, and the turn's cost.

Part 1 — stalls. One store holds a session of 10,000 messages (built once, through the public API,
with the cl100k tokenizer); 100 tasks run agent loops at once on an event loop: task 0 on the big
session (its cold open, its rounds), the others on sessions of their own; every loop compacts before
each call (a summarizer that sleeps 50 ms when a full round asks it), records the view and appends a
step. A monitor task sleeps 1 ms at a time and records how late it wakes: the longest stall is how
long the event loop was kept from running anything.

Part of a stall can be the garbage collector: a collection holds the interpreter in whichever thread
triggers it, and a full one walks every tracked object of the process (its imports above all: ~22k
objects here, ~1 us each on this machine), which no library can shorten. Each run times every
collection and prints, beside the longest stall, the time collections took inside it and the longest
stall less that time: what the store's own work held the loop. `--freeze` runs the loops the way a
latency-minded service does, its start-up heap frozen (`gc.freeze()` after imports and set-up), so
that full collections walk only what the run itself keeps.

Part 2 — the per-turn cost of going through worker threads. The same turn (compact, view, append) on
one session through `AsyncTranscript` and on another through a plain `Transcript`, interleaved turn by
turn in the same process; the ratio async / sync per repetition, median and spread over repetitions.

    python benchmarks/bench_async.py            # 10k messages, 100 tasks, 3 repetitions
    python benchmarks/bench_async.py --freeze   # the same, start-up heap frozen
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from transcript import AsyncTranscript, Message, ToolCall, Transcript  # noqa: E402

GOAL = "make the date parser accept ISO weeks"


def turn(key: str, n: int, size: int = 40) -> list[Message]:
    call = ToolCall(id=f"c{key}-{n}", name="Read", input={"file_path": f"src/{key}/m{n}.py"})
    return [
        Message.assistant(f"reading src/{key}/m{n}.py", tool_calls=[call]),
        Message.tool_result(call.id, f"def f{n}(x):\n    return x + {n}\n" * size, name="Read"),
    ]


def build(path: Path, messages: int) -> None:
    with Transcript.open(path, session_id="big") as t:
        t.append(Message.system("You are a coding agent."))
        t.append(Message.user(GOAL))
        for n in range((messages - 2) // 2):
            t.append_turn(turn("big", n))


async def summarizer(request: object) -> str:
    await asyncio.sleep(0.05)
    return '{"done": ["read the files"], "next_steps": ["fix parse_week"]}'


async def agent(path: Path, session_id: str, turns: int, budget: int | None) -> int:
    async with await AsyncTranscript.open(path, session_id=session_id) as t:
        if not (await t.messages()).entries:
            await t.append(Message.user(GOAL))
        view = await t.visible_messages()
        limit = budget or max(int(view.tokens * 1.02), 3_000)
        for n in range(turns):
            await t.compact(budget_tokens=limit, summarizer=summarizer)
            await t.visible_messages(record=True)
            await t.append_turn(turn(session_id, n))
        return turns


class Collections:
    """Every garbage collection's start and end (perf_counter seconds), in any thread."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._start = 0.0

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._time)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._time)

    def _time(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spans.append((self._start, time.perf_counter()))

    def within(self, start: float, end: float) -> float:
        """Seconds of collections inside [start, end]."""
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.spans)


class Steps:
    """The longest single callback the event loop ran (a task's step, a future's callback): what one
    piece of code held the loop for, as asyncio's debug mode times it (`slow_callback_duration`). A
    stall can be longer: the steps of many tasks made ready at once run one after another."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> Steps:
        timed = self._run

        def run(handle: asyncio.events.Handle) -> None:
            start = time.perf_counter()
            timed(handle)
            self.longest = max(self.longest, time.perf_counter() - start)

        setattr(asyncio.events.Handle, "_run", run)  # noqa: B010 (a method replaced for the run)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(asyncio.events.Handle, "_run", self._run)  # noqa: B010


class Stalls(NamedTuple):
    longest: float  # ms, the longest stall
    in_gc: float  # ms of collections inside it
    outside_gc: float  # ms, the longest stall less the collections inside it
    longest_gc: float  # ms, the longest collection of the run
    longest_step: float  # ms, the longest single callback on the loop
    p99: float
    turns: int
    wall: float


async def stalls(path: Path, tasks: int, turns: int) -> Stalls:
    wakes: list[tuple[float, float]] = []
    running = True

    async def monitor() -> None:
        while running:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            wakes.append((start, time.perf_counter()))

    with Collections() as collections, Steps() as steps:
        watcher = asyncio.create_task(monitor())
        start = time.perf_counter()
        done = await asyncio.gather(
            agent(path, "big", turns, None), *(agent(path, f"s{k}", turns, 4_000) for k in range(1, tasks))
        )
        wall = time.perf_counter() - start
        running = False
        await watcher
    lags = sorted(((b - a - 0.001), a, b) for a, b in wakes)
    longest, a, b = lags[-1]
    in_gc = collections.within(a, b)
    outside = max(lag - collections.within(x, y) for lag, x, y in lags)
    longest_gc = max((b - a for a, b in collections.spans), default=0.0)
    p99 = lags[int(len(lags) * 0.99)][0]
    return Stalls(
        longest * 1e3,
        in_gc * 1e3,
        outside * 1e3,
        longest_gc * 1e3,
        steps.longest * 1e3,
        p99 * 1e3,
        sum(done),
        wall,
    )


def per_turn(path: Path, turns: int) -> tuple[float, float]:
    """Median seconds per turn, async and sync, interleaved turn by turn."""
    sync = Transcript.open(path, session_id="sync-turns")
    sync.append(Message.user(GOAL))

    async def run() -> tuple[float, float]:
        async_times: list[float] = []
        sync_times: list[float] = []
        t = await AsyncTranscript.open(path, session_id="async-turns")
        await t.append(Message.user(GOAL))
        for n in range(turns):
            start = time.perf_counter()
            await t.compact(budget_tokens=1_000_000)
            await t.visible_messages(record=True)
            await t.append_turn(turn("async", n))
            async_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            sync.compact(budget_tokens=1_000_000)
            sync.visible_messages(record=True)
            sync.append_turn(turn("sync", n))
            sync_times.append(time.perf_counter() - start)
        await t.close()
        return statistics.median(async_times), statistics.median(sync_times)

    try:
        return asyncio.run(run())
    finally:
        sync.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turn-probe", type=int, default=200)
    parser.add_argument(
        "--freeze", action="store_true", help="freeze the start-up heap (gc.freeze()) before the loops run"
    )
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.db"
        build(base, options.messages)
        if options.freeze:
            gc.collect()
            gc.freeze()
        frozen = (
            f"start-up heap frozen ({gc.get_freeze_count():,} objects)"
            if options.freeze
            else "nothing frozen"
        )
        print(
            f"store: a session of {options.messages:,} messages, cl100k_base; {options.tasks} tasks x "
            f"{options.turns} turns (compact, record the view, append), summarizer sleeps 50 ms; {frozen}"
        )
        print(
            f"{'run':>4}  {'longest stall ms':>16}  {'of it in gc ms':>14}  {'outside gc ms':>13}  "
            f"{'longest gc ms':>13}  {'longest step ms':>15}  {'p99 ms':>6}  {'turns':>5}  {'wall s':>6}  "
            f"{'async turn ms':>13}  {'sync turn ms':>12}  {'async/sync':>10}"
        )
        runs: list[Stalls] = []
        ratios: list[float] = []
        for run in range(1, options.repeats + 1):
            path = Path(tmp) / f"run{run}.db"
            path.write_bytes(base.read_bytes())
            seen = asyncio.run(stalls(path, options.tasks, options.turns))
            mean_async, mean_sync = per_turn(path, options.turn_probe)
            runs.append(seen)
            ratios.append(mean_async / mean_sync)
            print(
                f"{run:>4}  {seen.longest:16.1f}  {seen.in_gc:14.1f}  {seen.outside_gc:13.1f}  "
                f"{seen.longest_gc:13.1f}  {seen.longest_step:15.1f}  {seen.p99:6.2f}  "
                f"{seen.turns:5}  {seen.wall:6.2f}  "
                f"{mean_async * 1e3:13.3f}  {mean_sync * 1e3:12.3f}  {ratios[-1]:10.2f}"
            )
        print()
        for label, values, target in (
            ("longest event-loop stall", [r.longest for r in runs], "; target <= 20"),
            ("longest stall less the garbage collections inside it", [r.outside_gc for r in runs], ""),
            ("longest garbage collection", [r.longest_gc for r in runs], ""),
            ("longest single step on the loop", [r.longest_step for r in runs], ""),
        ):
            print(
                f"{label}, median of {options.repeats}: {statistics.median(values):.1f} ms "
                f"(spread {min(values):.1f}-{max(values):.1f}{target})"
            )
        print(
            f"per-turn async / sync, median of {options.repeats}: {statistics.median(ratios):.2f} "
            f"(spread {min(ratios):.2f}-{max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
