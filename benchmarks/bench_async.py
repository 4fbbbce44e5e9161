"""The event loop never waits on the store: 100 tasks on `AsyncTranscript`, and the turn's cost.

Part 1 — stalls. One store holds a session of 10,000 messages (built once, through the public API,
with the cl100k tokenizer); 100 tasks run agent loops at once on an event loop: task 0 on the big
session (its cold open, its rounds), the others on sessions of their own; every loop compacts before
each call (a summarizer that sleeps 50 ms when a full round asks it), records the view and appends a
step. A monitor task sleeps 1 ms at a time and records how late it wakes: the longest stall is how
long the event loop was kept from running anything.

Part 2 — the per-turn cost of going through worker threads. The same turn (compact, view, append) on
one session through `AsyncTranscript` and on another through a plain `Transcript`, interleaved turn by
turn in the same process; the ratio async / sync per repetition, median and spread over repetitions.

    python benchmarks/bench_async.py            # 10k messages, 100 tasks, 3 repetitions
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


async def stalls(path: Path, tasks: int, turns: int) -> tuple[float, float, int, float]:
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    running = True

    async def monitor() -> None:
        while running:
            start = loop.time()
            await asyncio.sleep(0.001)
            lags.append(loop.time() - start - 0.001)

    watcher = asyncio.create_task(monitor())
    start = time.perf_counter()
    done = await asyncio.gather(
        agent(path, "big", turns, None), *(agent(path, f"s{k}", turns, 4_000) for k in range(1, tasks))
    )
    wall = time.perf_counter() - start
    running = False
    await watcher
    lags.sort()
    return lags[-1] * 1e3, lags[int(len(lags) * 0.99)] * 1e3, sum(done), wall


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
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.db"
        build(base, options.messages)
        print(
            f"store: a session of {options.messages:,} messages, cl100k_base; {options.tasks} tasks x "
            f"{options.turns} turns (compact, record the view, append), summarizer sleeps 50 ms"
        )
        print(
            f"{'run':>4}  {'longest stall ms':>16}  {'p99 stall ms':>12}  {'turns':>6}  {'wall s':>7}  "
            f"{'async turn ms':>13}  {'sync turn ms':>12}  {'async/sync':>10}"
        )
        worst: list[float] = []
        ratios: list[float] = []
        for run in range(1, options.repeats + 1):
            path = Path(tmp) / f"run{run}.db"
            path.write_bytes(base.read_bytes())
            longest, p99, turns, wall = asyncio.run(stalls(path, options.tasks, options.turns))
            mean_async, mean_sync = per_turn(path, options.turn_probe)
            worst.append(longest)
            ratios.append(mean_async / mean_sync)
            print(
                f"{run:>4}  {longest:16.1f}  {p99:12.2f}  {turns:6}  {wall:7.2f}  "
                f"{mean_async * 1e3:13.3f}  {mean_sync * 1e3:12.3f}  {ratios[-1]:10.2f}"
            )
        print()
        print(
            f"longest event-loop stall, median of {options.repeats}: {statistics.median(worst):.1f} ms "
            f"(spread {min(worst):.1f}-{max(worst):.1f}; target <= 20)"
        )
        print(
            f"per-turn async / sync, median of {options.repeats}: {statistics.median(ratios):.2f} "
            f"(spread {min(ratios):.2f}-{max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
