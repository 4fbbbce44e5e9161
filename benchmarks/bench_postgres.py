"""PostgreSQL benchmark: the library on PostgreSQL against SQLite and a raw psycopg floor, in one run.

A throwaway cluster (fsync on, Unix socket) is started and stopped by the script. At each size a
seeded synthetic agent session is loaded into a PostgreSQL store, a SQLite file and the floor's
tables; then, interleaved over the repetitions, each runs the same fresh turns:

- per turn: `append_turn` through the public API (the turn's write: checks, hashes, counts, the
  transaction), vs the floor: plain psycopg storing the same rows (bodies, events, head) in one
  transaction per turn; and `append_turn` + `visible_messages()` (a loop's whole per-turn path);
- cold open: `Transcript.open` + the first `visible_messages()`, vs the floor reading the session's
  bodies in order and decoding them with msgspec.

Printed: median and spread (min-max) over the repetitions, and the ratios library / floor.

    python benchmarks/bench_postgres.py            # 1k and 10k messages, 5 repetitions
    python benchmarks/bench_postgres.py --quick    # 1k, 3 repetitions

Not part of the test suite: speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic import SyntheticSession  # noqa: E402

from tests.pgserver import Cluster, bin_dir  # noqa: E402
from transcript import Message, Transcript  # noqa: E402
from transcript.model.codec import normalize_message  # noqa: E402

SESSION = "bench"
_FLOOR_TABLES = (
    "CREATE TABLE bodies (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "message_id text UNIQUE NOT NULL, body text NOT NULL, hash text NOT NULL)",
    "CREATE TABLE events (session_id text, version bigint, message_id text, payload text NOT NULL, "
    "hash text NOT NULL, PRIMARY KEY (session_id, version))",
    "CREATE TABLE heads (session_id text PRIMARY KEY, version bigint NOT NULL, hash text NOT NULL)",
)


def turns_of(seed: int, messages: int) -> list[list[Message]]:
    """Turns of a synthetic session holding about `messages` messages (no result over 20 KB)."""
    turns: list[list[Message]] = []
    count = 0
    for turn in SyntheticSession(seed=seed).turns():
        if any(len(m.text) > 20_000 for m in turn):
            continue
        turns.append(turn)
        count += len(turn)
        if count >= messages:
            return turns
    return turns


def probe_turns(seed: int, count: int) -> list[list[Message]]:
    return [turn for turn in turns_of(seed, 4 * count) if turn[0].role != "system"][:count]


class Floor:
    """Plain psycopg: the same rows a turn stores, one transaction per turn, nothing else."""

    def __init__(self, cluster: Cluster) -> None:
        self.conninfo = f"host={cluster.root} user=postgres dbname=transcript"
        self.conn = psycopg.connect(self.conninfo, autocommit=True, options="-c search_path=floor")
        self.conn.execute("CREATE SCHEMA floor")
        for statement in _FLOOR_TABLES:
            self.conn.execute(statement)
        self.version = 0
        self.head = ""

    def append(self, turn: list[Message]) -> None:
        rows = []
        for message in turn:
            _, data = normalize_message(message)
            rows.append((message.id, data.decode(), hashlib.sha256(data).hexdigest()))
        events = []
        head = self.head
        for message_id, _, body_hash in rows:
            self.version += 1
            payload = msgspec.json.encode(
                {"kind": "message_appended", "message_id": message_id, "hash": body_hash}
            )
            head = hashlib.sha256(head.encode() + payload).hexdigest()
            events.append((SESSION, self.version, message_id, payload.decode(), head))
        with self.conn.transaction():
            cursor = self.conn.cursor()
            cursor.executemany("INSERT INTO bodies (message_id, body, hash) VALUES (%s, %s, %s)", rows)
            cursor.executemany(
                "INSERT INTO events (session_id, version, message_id, payload, hash) "
                "VALUES (%s, %s, %s, %s, %s)",
                events,
            )
            self.conn.execute(
                "INSERT INTO heads VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE "
                "SET version = excluded.version, hash = excluded.hash",
                (SESSION, self.version, head),
            )
        self.head = head

    def cold(self) -> int:
        with psycopg.connect(self.conninfo, options="-c search_path=floor") as conn:
            rows = conn.execute(
                "SELECT b.body FROM events AS e JOIN bodies AS b ON b.message_id = e.message_id "
                "WHERE e.session_id = %s ORDER BY e.version",
                (SESSION,),
            ).fetchall()
        return len([msgspec.json.decode(body) for (body,) in rows])


def per_turn(run: Callable[[list[Message]], object], turns: list[list[Message]]) -> float:
    """Median seconds per turn."""
    times = []
    for turn in turns:
        start = time.perf_counter()
        run(turn)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _loop_turn(transcript: Transcript, *, view: bool) -> Callable[[list[Message]], None]:
    def turn(messages: list[Message]) -> None:
        transcript.append_turn(messages)
        if view:
            transcript.visible_messages()

    return turn


def library_cold(location: str) -> None:
    with Transcript.open(location, session_id=SESSION, tokenizer="chars/4") as transcript:
        transcript.visible_messages()


def measure(cluster: Cluster, work: Path, size: int, repeats: int, probe: int) -> dict[str, list[float]]:
    stores = {"postgres": cluster.url(f"lib_{size}"), "sqlite": str(work / f"lib-{size}.db")}
    loaded = turns_of(7, size)
    floor = Floor(cluster) if size == SIZES[0] else None
    if floor is None:
        cluster.admin("DROP SCHEMA floor CASCADE", database="transcript")
        floor = Floor(cluster)
    for location in stores.values():
        with Transcript.open(location, session_id=SESSION, tokenizer="chars/4", synchronous="OFF") as t:
            for turn in loaded:
                t.append_turn(turn)
    for turn in loaded:
        floor.append(turn)
    live = {
        name: Transcript.open(location, session_id=SESSION, tokenizer="chars/4")
        for name, location in stores.items()
    }
    for transcript in live.values():
        transcript.visible_messages()
    results: dict[str, list[float]] = {}
    for rep in range(repeats):
        turns = probe_turns(1000 + rep, probe)
        viewed = probe_turns(5000 + rep, probe)
        for name, transcript in live.items():
            results.setdefault(f"{name} turn", []).append(per_turn(_loop_turn(transcript, view=False), turns))
            results.setdefault(f"{name} turn+view", []).append(
                per_turn(_loop_turn(transcript, view=True), viewed)
            )
        results.setdefault("floor turn", []).append(per_turn(floor.append, turns))
        results.setdefault("floor turn+view", []).append(per_turn(floor.append, viewed))
        for name, location in stores.items():
            results.setdefault(f"{name} cold", []).append(timed(functools.partial(library_cold, location)))
        results.setdefault("floor cold", []).append(timed(floor.cold))
    for transcript in live.values():
        transcript.close()
    floor.conn.close()
    return results


SIZES = [1_000, 10_000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k messages, 3 repetitions")
    args = parser.parse_args()
    sizes, repeats, probe = ([1_000], 3, 20) if args.quick else (SIZES, 5, 40)
    binaries = bin_dir()
    if binaries is None:
        sys.exit("PostgreSQL server binaries not found (Debian's postgresql-15, or set $PG_BIN)")
    print(f"{'size':>6} {'path':<19} {'median ms':>10} {'spread ms':>16} {'/ floor':>8}")
    with tempfile.TemporaryDirectory() as work, Cluster(binaries, durable=True) as cluster:
        for size in sizes:
            results = measure(cluster, Path(work), size, repeats, probe)
            for kind in ("turn", "turn+view", "cold"):
                floor = statistics.median(results[f"floor {kind}"])
                for name in ("postgres", "sqlite", "floor"):
                    values = results[f"{name} {kind}"]
                    median = statistics.median(values)
                    spread = f"{min(values) * 1e3:.2f}-{max(values) * 1e3:.2f}"
                    ratio = f"{median / floor:.2f}x" if name != "floor" else ""
                    print(f"{size:>6} {name + ' ' + kind:<19} {median * 1e3:>10.2f} {spread:>16} {ratio:>8}")


if __name__ == "__main__":
    main()
