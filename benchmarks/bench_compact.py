"""Compaction benchmark: a micro round and the next view must not grow with session length.

For each size the synthetic session is built and fully micro-compacted once. Then, repeatedly, 13
steps are appended whose first 10 results are over the threshold, so the next micro round truncates
exactly k = 10 messages. Measured: the whole round (snapshot, plan, commit) and the first
`visible_messages()` after it. Printed: medians and the 10k/1k ratios.

    python benchmarks/bench_compact.py            # 1k and 10k messages
    python benchmarks/bench_compact.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synthetic import SyntheticSession  # noqa: E402

from planner import CompactConfig  # noqa: E402
from transcript import Message, Store, ToolCall, Transcript  # noqa: E402

K = 10


def _steps(t: Transcript, first: int, count: int, size: int) -> None:
    for n in range(first, first + count):
        call = ToolCall(id=f"k{n}", name="Bash", input={"n": n})
        output = f"log line {n} of the bench step\n" * (size // 30)
        t.append_turn(
            [Message.assistant(f"bench step {n}", tool_calls=[call]), Message.tool_result(f"k{n}", output)]
        )


def measure(path: Path, size: int, repeats: int) -> tuple[float, float, list[int]]:
    store = Store.open(path, tokenizer="chars/4")
    t = store.session("bench")
    for turn in SyntheticSession(seed=7).messages(size):
        t.append_turn(turn)
    config = CompactConfig()
    micro_only = CompactConfig(full_compact_enabled=False)
    _steps(t, 0, 3, 100)
    t.compact(budget_tokens=1, config=config, manual=True)  # everything eligible now is truncated
    rounds, views, truncated = [], [], []
    for r in range(repeats):
        base = 1_000_000 + r * 100
        _steps(t, base, K, 2_000)
        _steps(t, base + K, 3, 100)
        t.visible_messages()
        start = time.perf_counter()
        done = t.compact(budget_tokens=1, config=micro_only, manual=True).compacted_ids
        middle = time.perf_counter()
        t.visible_messages()
        end = time.perf_counter()
        rounds.append(middle - start)
        views.append(end - middle)
        truncated.append(len(done))
    store.close()
    return statistics.median(rounds), statistics.median(views), truncated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="sizes 200 and 2000, fewer repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [200, 2_000], 5
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            results[size] = measure(Path(tmp) / f"c{size}.db", size, args.repeats)
    small, big = (results[s] for s in args.sizes)
    assert all(n == K for n in small[2] + big[2]), "every measured round must truncate exactly k messages"
    ms = 1000.0
    print(f"{'size':>7} {'micro round ms':>15} {'view after ms':>14}   (k = {K} truncated per round)")
    for size in args.sizes:
        round_s, view_s, _ = results[size]
        print(f"{size:>7} {round_s * ms:>15.3f} {view_s * ms:>14.3f}")
    targets = [
        (f"micro round (snapshot, plan, commit) {args.sizes[1]}/{args.sizes[0]}", big[0] / small[0], 2.0),
        (f"view after a round of k={K} {args.sizes[1]}/{args.sizes[0]}", big[1] / small[1], 1.5),
    ]
    print()
    for name, value, limit in targets:
        print(f"{name:<52} {value:6.2f}  (target <= {limit})  {'ok' if value <= limit else 'OVER'}")
    return 0 if all(value <= limit for _, value, limit in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
