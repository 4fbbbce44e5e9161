"""Store benchmark: the library against a raw floor measured in the same run.

The floor is plain `sqlite3` with the same pragmas (WAL, synchronous=FULL) plus `msgspec`, storing
the very same encoded bodies in one table, one transaction per turn. Both run on a seeded synthetic
agent session (ASCII-heavy; 5% of tool results 20-200 KB). Printed ratios are library / floor.

    python benchmarks/bench_store.py             # 1k and 10k messages
    python benchmarks/bench_store.py --quick     # smaller, for a smoke run

Not part of the test suite: speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synthetic import SyntheticSession  # noqa: E402

from transcript import Store, Transcript  # noqa: E402
from transcript.model import Message  # noqa: E402
from transcript.store.log import EventLog  # noqa: E402
from transcript.store.sqlite import SqliteRecorder  # noqa: E402
from transcript.tokens import TokenCounter, get_counter  # noqa: E402

SESSION = "bench"
_ENCODER = msgspec.json.Encoder()


class TimedCounter:
    """Wraps the real counter to add up the time spent tokenizing."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def count(self, text: str) -> int:
        start = time.perf_counter()
        try:
            return self.inner.count(text)
        finally:
            self.seconds += time.perf_counter() - start


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _floor_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def build_both(path: Path, floor_path: Path, turns: list[list[Message]]) -> dict[str, float]:
    """Append every turn through the facade and, right after, through the raw floor.

    Interleaving puts both under the same disk conditions (the fsync dominates a turn). A turn's
    time splits into its DB part (the write transaction: the event store's `commit`), tokenizing, and the
    rest (checking, encoding and hashing the messages, updating the live session). Returns medians
    per turn (tokenizing: the mean) and the floor's transaction.
    """
    for target in (path, floor_path):
        _remove(target)
    store = Store.open(path)
    timed = TimedCounter(get_counter())
    transcript = store.session(SESSION)
    transcript._counter = timed
    in_write = _time_writes(store)
    conn = _floor_connect(floor_path)
    conn.execute("CREATE TABLE bodies (id INTEGER PRIMARY KEY, message_id TEXT NOT NULL, body BLOB NOT NULL)")
    totals: list[float] = []
    tokenizing: list[float] = []
    floor: list[float] = []
    writes: list[float] = []
    for turn in turns:
        before, written = timed.seconds, in_write[0]
        start = time.perf_counter()
        transcript.append_turn(turn)
        totals.append(time.perf_counter() - start)
        tokenizing.append(timed.seconds - before)
        writes.append(in_write[0] - written)
        start = time.perf_counter()
        rows = [(m.id, _ENCODER.encode(m)) for m in turn]
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO bodies (message_id, body) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
        floor.append(time.perf_counter() - start)
    assert isinstance(store.events, EventLog) and isinstance(store.events.recorder, SqliteRecorder)
    store.events.recorder.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    rest = [total - tok - db for total, tok, db in zip(totals, tokenizing, writes, strict=True)]
    return {
        "turn": statistics.median(totals),
        "untokenized": statistics.median(total - tok for total, tok in zip(totals, tokenizing, strict=True)),
        "db": statistics.median(writes),
        "rest": statistics.median(rest),
        "floor": statistics.median(floor),
        "tokenizing": statistics.mean(tokenizing),
    }


def _time_writes(store: Store) -> list[float]:
    """Make the store add up the seconds spent in its write transactions (in the returned cell)."""
    spent = [0.0]
    commit = store.events.commit

    def timed(writes: Any, **options: Any) -> Any:
        start = time.perf_counter()
        try:
            return commit(writes, **options)
        finally:
            spent[0] += time.perf_counter() - start

    store.events.commit = timed  # type: ignore[method-assign]
    return spent


def disk_bytes(path: Path) -> int:
    return sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())


# ru_maxrss survives exec on Linux (it would report the parent's peak); VmHWM belongs to this process.
_PEAK = """
def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""

_COLD_LIBRARY = (
    _PEAK
    + """
import time, sys
start = time.perf_counter()
from transcript import Transcript
t = Transcript.open(sys.argv[1], session_id=sys.argv[2], readonly=False)
view = t.visible_messages()
elapsed = time.perf_counter() - start
print(elapsed, len(view.messages), peak_kb())
"""
)

_COLD_FLOOR = (
    _PEAK
    + """
import time, sys
start = time.perf_counter()
import sqlite3, msgspec
from transcript.model import Message
decoder = msgspec.json.Decoder(Message)
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA synchronous = FULL")
messages = [decoder.decode(body) for (body,) in conn.execute("SELECT body FROM bodies ORDER BY id")]
elapsed = time.perf_counter() - start
print(elapsed, len(messages), peak_kb())
"""
)


def cold(script: str, *args: str, repeats: int = 5) -> tuple[float, int]:
    """Median seconds and max peak RSS (KB) of `repeats` fresh processes, after one warm-up run.

    Bytecode caching is allowed (an installed package has its .pyc files; some shells set
    PYTHONDONTWRITEBYTECODE, which would make every cold open recompile the library), and the warm-up
    run writes the caches, so both sides are measured as a user's process would run.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    times, peaks = [], []
    for attempt in range(repeats + 1):
        out = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
        ).stdout.split()
        if attempt:
            times.append(float(out[0]))
            peaks.append(int(out[2]))
    return statistics.median(times), max(peaks)


def warm_per_turn(path: Path, probe: list[list[Message]]) -> float:
    """Median seconds of `append_turn` + `visible_messages()` for the probe turns, on a loaded session."""
    with Transcript.open(path, session_id=SESSION) as transcript:
        transcript.visible_messages()
        get_counter().count("warm up the tokenizer")
        times = []
        for turn in probe:
            start = time.perf_counter()
            transcript.append_turn(turn)
            transcript.visible_messages()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _probe_turns(count: int) -> list[list[Message]]:
    """The same appended workload for every size: fresh ids, no large results (a fair per-turn probe)."""
    probe = []
    for turn in SyntheticSession(seed=991).turns():
        if any(len(m.text) > 20_000 for m in turn) or turn[0].role == "system":
            continue
        probe.append(turn)
        if len(probe) == count:
            return probe
    return probe


def _restore(path: Path, copy: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{copy}{suffix}")
        target = Path(f"{path}{suffix}")
        target.unlink(missing_ok=True)
        if source.exists():
            target.write_bytes(source.read_bytes())


def run(sizes: list[int], probe_count: int, cold_repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    probe = _probe_turns(probe_count)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for size in sizes:
            turns = SyntheticSession(seed=7).messages(size)
            messages = [m for turn in turns for m in turn]
            body_bytes = sum(len(_ENCODER.encode(m)) for m in messages)
            lib_path, floor_path = work / f"lib-{size}.db", work / f"floor-{size}.db"
            append = build_both(lib_path, floor_path, turns)
            floor_turn = append["floor"]
            lib_cold, lib_peak = cold(_COLD_LIBRARY, str(lib_path), SESSION, repeats=cold_repeats)
            floor_cold, floor_peak = cold(_COLD_FLOOR, str(floor_path), repeats=cold_repeats)
            saved = work / f"saved-{size}.db"
            _restore(saved, lib_path)
            warm = warm_per_turn(lib_path, probe)
            _restore(lib_path, saved)
            results[str(size)] = {
                "messages": len(messages),
                "body_bytes": body_bytes,
                "disk_bytes": disk_bytes(lib_path),
                "append_db": append["db"],
                "append_turn": append["turn"],
                "append_untokenized": append["untokenized"],
                "append_rest": append["rest"],
                "append_tokenizing": append["tokenizing"],
                "floor_turn": floor_turn,
                "cold": lib_cold,
                "floor_cold": floor_cold,
                "peak_kb": lib_peak,
                "floor_peak_kb": floor_peak,
                "warm": warm,
            }
            print(f"measured {size} messages", file=sys.stderr)
    return results


def report(results: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    """Print the table; returns (name, value, limit, ok) for every target."""
    sizes = sorted(results, key=int)
    big, small = results[sizes[-1]], results[sizes[0]]
    ms = 1000.0
    print(
        f"{'size':>7} {'turn ms':>8} {'DB ms':>7} {'floor ms':>9} {'tokenize':>9} {'other ms':>9} "
        f"{'cold s':>7} {'floor s':>8} {'peak MB':>8} {'floor MB':>9} {'disk MB':>8} {'body MB':>8} "
        f"{'warm ms':>8}"
    )
    for size in sizes:
        r = results[size]
        print(
            f"{r['messages']:>7} {r['append_turn'] * ms:>8.3f} {r['append_db'] * ms:>7.3f} "
            f"{r['floor_turn'] * ms:>9.3f} {r['append_tokenizing'] * ms:>9.3f} {r['append_rest'] * ms:>9.3f} "
            f"{r['cold']:>7.3f} {r['floor_cold']:>8.3f} {r['peak_kb'] / 1024:>8.1f} "
            f"{r['floor_peak_kb'] / 1024:>9.1f} {r['disk_bytes'] / 1e6:>8.2f} {r['body_bytes'] / 1e6:>8.2f} "
            f"{r['warm'] * ms:>8.3f}"
        )
    print(
        "(turn = a whole append_turn; DB = its write transaction; other = checking, encoding, hashing "
        "and the live update; tokenize = mean per turn)"
    )
    targets = [
        (
            f"warm per-turn (append_turn + view) {big['messages']}/{small['messages']}",
            big["warm"] / small["warm"],
            1.5,
        ),
        ("cold open + first view / floor", big["cold"] / big["floor_cold"], 1.5),
        ("bytes on disk / body bytes", big["disk_bytes"] / big["body_bytes"], 1.3),
        ("append DB part / raw per-turn transaction", big["append_db"] / big["floor_turn"], 2.0),
        (
            "(info) whole append_turn but tokenizing / raw transaction",
            big["append_untokenized"] / big["floor_turn"],
            float("inf"),
        ),
        ("peak memory / floor", big["peak_kb"] / big["floor_peak_kb"], 1.5),
    ]
    print()
    for name, value, limit in targets:
        verdict = (
            f"(target <= {limit})  {'ok' if value <= limit else 'OVER'}" if limit != float("inf") else ""
        )
        print(f"{name:<58} {value:6.2f}  {verdict}")
    return [(name, value, limit, value <= limit) for name, value, limit in targets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--probe-turns", type=int, default=200)
    parser.add_argument("--cold-repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="sizes 200 and 2000, fewer repeats")
    parser.add_argument("--json", type=Path, help="also write the raw numbers to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.probe_turns, args.cold_repeats = [200, 2_000], 50, 3
    results = run(args.sizes, args.probe_turns, args.cold_repeats)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    outcome = report(results)
    return 0 if all(ok for *_, ok in outcome) else 1


if __name__ == "__main__":
    sys.exit(main())
