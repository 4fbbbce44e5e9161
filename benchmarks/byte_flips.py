"""The byte-flip campaign: flip one to three bits of a compacted session's SQLite file, many times,
and meet each damaged copy with open, view, compact, fork, replay, timeline and export (each on its
own: `tests.test_corruption.every_operation`). Printed: per operation, how many flips came to each
outcome — ok, a named diagnostic, `StoreCorrupted`, or any other error by type (a mis-typed
corruption, with a few of its messages).

    python benchmarks/byte_flips.py --flips 1500

Not part of the test suite (`tests/test_corruption.py` runs a smaller campaign of the same).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_corruption import ALLOWED, OPERATIONS, UNTYPED, build_pristine, every_operation, flipped  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flips", type=int, default=1_500)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    counts = {operation: Counter[str]() for operation in OPERATIONS}
    flips_bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        pristine = build_pristine(Path(tmp) / "pristine.db")
        data = pristine.read_bytes()
        rng = random.Random(args.seed)
        for n in range(args.flips):
            path = flipped(data, rng, Path(tmp) / f"flip-{n}.db")
            outcomes = every_operation(path)
            for operation, outcome in outcomes.items():
                counts[operation][outcome] += 1
            flips_bad += any(outcome not in ALLOWED for outcome in outcomes.values())
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"{args.flips} flips (seed {args.seed}); flips with a mis-typed outcome: {flips_bad}")
    for operation, counter in counts.items():
        print(f"  {operation:9} " + ", ".join(f"{name} {count}" for name, count in counter.most_common()))
    for name, messages in sorted(UNTYPED.items()):
        print(f"  {name}: {len(messages)}, e.g. {messages[0]!r}")
    return 1 if flips_bad else 0


if __name__ == "__main__":
    sys.exit(main())
