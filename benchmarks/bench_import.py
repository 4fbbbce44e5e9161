"""Import benchmark: the 774 KB Claude Code session, parse and store, against a raw floor.

`Store.import_file` is `parse` (the format module, pure) followed by `import_sessions` (the store's
part: check, hash, count tokens, write every session in one transaction). Both are timed on a fresh
file store each run; tokenizing is timed inside the store's part and reported apart, so "DB" is the
store's part without it. The floor is plain `sqlite3` with the same pragmas (WAL, synchronous=FULL)
inserting the same encoded message bodies in one transaction. Medians of `--runs` runs.

    python benchmarks/bench_import.py
    python benchmarks/bench_import.py --tokenizer chars/4 --runs 3

Not part of the test suite: speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transcript import Store  # noqa: E402
from transcript.formats import parse  # noqa: E402
from transcript.formats.base import ParsedSession  # noqa: E402
from transcript.model.codec import encode_message  # noqa: E402
from transcript.session.importing import import_sessions  # noqa: E402
from transcript.tokens import CL100K, get_counter  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import TimedCounter, _remove  # noqa: E402

CORPUS_FILE = ROOT / "fixtures" / "corpus" / "claude-code_ccviewer_fe5e1c67.jsonl"
FORMAT = "claude-code"
DB_TARGET_SECONDS = 1.0


def library_run(source: Path, db: Path, tokenizer: str) -> dict[str, float]:
    """One import into a fresh file store: seconds for parse, the store's part, and its tokenizing."""
    _remove(db)
    store = Store.open(db, tokenizer=tokenizer)
    timed = TimedCounter(get_counter(tokenizer))
    timed.count("warm up the tokenizer")
    timed.seconds = 0.0
    try:
        start = time.perf_counter()
        parsed = parse(source, FORMAT)
        parsed_at = time.perf_counter()
        import_sessions(store.events, timed, parsed, source=f"{FORMAT}:{source.name}")
        stored_at = time.perf_counter()
    finally:
        store.close()
    return {
        "parse": parsed_at - start,
        "store": stored_at - parsed_at,
        "tokenizing": timed.seconds,
        "db": stored_at - parsed_at - timed.seconds,
    }


def floor_run(parsed: list[ParsedSession], db: Path) -> float:
    """The raw floor: the same bodies, encoded and inserted by plain sqlite3 in one transaction."""
    _remove(db)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE bodies (message_id TEXT PRIMARY KEY, body BLOB NOT NULL)")
        start = time.perf_counter()
        rows = [(m.id, encode_message(m)) for session in parsed for m in session.messages]
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO bodies (message_id, body) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
        return time.perf_counter() - start
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--file", type=Path, default=CORPUS_FILE)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokenizer", default=CL100K, help="cl100k_base (default) or chars/4")
    args = parser.parse_args(argv)
    parsed = parse(args.file, FORMAT)
    messages = sum(len(s.messages) for s in parsed)
    body_bytes = sum(len(encode_message(m)) for s in parsed for m in s.messages)
    runs: list[dict[str, float]] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            runs.append(library_run(args.file, Path(tmp) / "import.db", args.tokenizer))
            floors.append(floor_run(parsed, Path(tmp) / "floor.db"))
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    floor = statistics.median(floors)
    ms = 1000.0
    print(
        f"{args.file.name}: {args.file.stat().st_size / 1e3:.0f} KB, {len(parsed)} sessions, "
        f"{messages} messages, {body_bytes / 1e3:.0f} KB of bodies; tokenizer {args.tokenizer}; "
        f"median of {args.runs} runs"
    )
    print(f"{'parse ms':>9} {'store ms':>9} {'tokenize ms':>12} {'DB ms':>7} {'floor ms':>9} {'DB/floor':>9}")
    print(
        f"{median['parse'] * ms:>9.1f} {median['store'] * ms:>9.1f} {median['tokenizing'] * ms:>12.1f} "
        f"{median['db'] * ms:>7.1f} {floor * ms:>9.1f} {median['db'] / floor:>9.2f}"
    )
    ok = median["db"] < DB_TARGET_SECONDS
    print(
        f"\nDB work of the import {median['db']:.3f} s  (target < {DB_TARGET_SECONDS:.1f} s)  "
        f"{'ok' if ok else 'OVER'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
