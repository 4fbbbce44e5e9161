"""Scale benchmark: every operation against a fair floor run in the same process, at 1k / 10k / 100k.

Each row names both sides of its ratio. A floor is what any correct implementation must do for the
same result, written with plain `sqlite3` (the same pragmas: WAL, synchronous=FULL), `msgspec` and the
same tokenizer, and nothing else:

- per turn: tokenize the turn's messages, encode them, hash them, one transaction storing bodies and
  events (fsync'd); with `record=True`, also hash the new messages and a second small transaction;
- cold open + first view (a fresh interpreter, timed after `import`): read and decode only the bodies
  the view shows (uncompacted: every body);
- micro round: tokenize what it keeps of each message it marks, encode one mark each, one transaction;
- full round: one encode pass over the messages it summarizes, one transaction (summary + event); an
  automatic round also pays its micro step's floor;
- `replay --verify`: the run that recorded the views (appends with `record=True`);
- SQL: the README's queries, in milliseconds (their floor is the 50 ms target).

Ours goes through the public API with the cl100k tokenizer and every integrity check on. Ours and its
floor are interleaved in the same process; each row prints the floor, ours, the ratio, and the median
and spread (min-max) of the ratio over the repetitions. CPU time is printed beside wall time where it
is the fairer measure (the machine is shared).

    python benchmarks/bench_scale.py                        # 1k and 10k
    python benchmarks/bench_scale.py --sizes 1000 10000 100000
    python benchmarks/bench_scale.py --rows turn,micro --sizes 10000 30000

Sessions are built once per size (through `append_turn`, cl100k) into `--cache`
(default benchmarks/.cache, never committed) and copied for each measurement. The 100k session takes
minutes to build and is kept out of CI. Not part of the test suite: speed is measured here, never
asserted in tests.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_compact import _steps  # noqa: E402
from synthetic import SyntheticSession  # noqa: E402

from planner import CompactConfig, facts  # noqa: E402
from transcript import Message, Store, Transcript  # noqa: E402
from transcript.session import snapshots  # noqa: E402
from transcript.tokens import TokenCounter, get_counter, message_tokens  # noqa: E402

SESSION = "bench"
CACHE = ROOT / "benchmarks" / ".cache"
_ENCODER = msgspec.json.Encoder()
_BIG = 10**12  # a budget no view reaches: a no-op round


class Row(NamedTuple):
    """One printed row: what, the floor's and our medians (seconds), and the ratio's median and spread."""

    name: str
    size: int
    floor: float
    ours: float
    ratios: list[float]
    unit: str = "ms"
    note: str = ""

    def line(self) -> str:
        scale = 1000.0 if self.unit == "ms" else 1.0
        ratio = statistics.median(self.ratios)
        spread = f"{min(self.ratios):.2f}-{max(self.ratios):.2f}"
        return (
            f"{self.name:<38} {self.size:>7} {self.floor * scale:>10.3f} {self.ours * scale:>10.3f} "
            f"{ratio:>7.2f} {spread:>11} {len(self.ratios):>3}  {self.note}"
        )


HEADER = f"{'row':<38} {'size':>7} {'floor':>10} {'ours':>10} {'ratio':>7} {'spread':>11} {'n':>3}"


# Building and copying sessions.


def build(size: int, cache: Path) -> Path:
    """The synthetic session of `size` messages, appended turn by turn (cl100k), built once."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"synthetic-{size}.db"
    if path.exists():
        return path
    partial = path.with_suffix(".partial")
    _remove(partial)
    started = time.perf_counter()
    with Store.open(partial) as store:
        t = store.session(SESSION)
        for turn in SyntheticSession(seed=7).messages(size):
            t.append_turn(turn)
    _checkpoint(partial)
    partial.rename(path)
    print(f"(built {path.name} in {time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return path


def compacted(size: int, cache: Path) -> Path:
    """The same session after one forced full round: its view is a few messages (built again when
    the snapshot format changes: an open passes over a snapshot of an older one)."""
    path = cache / f"synthetic-{size}-compacted-s{snapshots.FORMAT}.db"
    if not path.exists():
        partial = path.with_suffix(".partial")
        _copy(build(size, cache), partial)
        with Transcript.open(partial, session_id=SESSION) as t:
            t.compact(budget_tokens=60_000, force=True)
        _checkpoint(partial)
        partial.rename(path)
    return path


def _checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".anchor"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _copy(source: Path, target: Path) -> Path:
    _remove(target)
    shutil.copyfile(source, target)
    return target


# Floors.


class Floor:
    """A raw store: one table of bodies, one of events, the library's pragmas."""

    def __init__(self, path: Path) -> None:
        _remove(path)
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE bodies (message_id TEXT PRIMARY KEY, tokens TEXT, body TEXT)")
        self.conn.execute("CREATE TABLE events (version INTEGER PRIMARY KEY, payload TEXT, hash TEXT)")
        self.version = 0

    def commit(self, bodies: Sequence[tuple[str, bytes, bytes]], events: Sequence[bytes]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO bodies VALUES (?, ?, ?)", bodies)
        rows = []
        for payload in events:
            self.version += 1
            rows.append((self.version, payload, hashlib.sha256(payload).hexdigest()))
        self.conn.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        self.conn.execute("COMMIT")


def floor_turn(floor: Floor, turn: Sequence[Message], counter: TokenCounter, record: bool) -> None:
    """What storing a turn must do: tokenize, encode, hash, one transaction (and a record's)."""
    bodies, events = [], []
    for message in turn:
        tokens = message_tokens(message, counter)
        data = _ENCODER.encode(message)
        digest = hashlib.sha256(data).hexdigest()
        bodies.append((message.id, _ENCODER.encode(tokens), data))
        events.append(_ENCODER.encode({"message_id": message.id, "hash": digest}))
    floor.commit(bodies, events)
    if record:
        digests = [hashlib.sha256(_ENCODER.encode(m)).hexdigest() for m in turn]
        floor.commit([], [_ENCODER.encode({"changed": digests})])


def floor_marks(
    floor: Floor, texts: Sequence[str], count: Callable[[str], int], head: int, tail: int
) -> None:
    """What a micro step must do: tokenize what it keeps of each text it marks, one mark each, one
    transaction."""
    events = []
    for text in texts:
        kept = count(text[:head] + text[-tail:] if len(text) > head + tail else text)
        events.append(_ENCODER.encode({"truncated": True, "rendered_tokens": kept}))
    floor.commit([], events)


def floor_full(floor: Floor, summarized: Sequence[Message], summary: Message) -> None:
    """What a full step must do: one encode pass over what it summarizes, one transaction."""
    encoded = 0
    for message in summarized:
        encoded += len(_ENCODER.encode(message))
    data = _ENCODER.encode(summary)
    floor.commit([(summary.id + str(floor.version), b"[]", data)], [_ENCODER.encode({"excluded": encoded})])


# Measurements.


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def _probe(count: int) -> list[list[Message]]:
    """Fresh turns (another seed, so no id is stored yet) for the per-turn rows."""
    turns: list[list[Message]] = []
    for turn in SyntheticSession(seed=11).turns():
        if turn[0].role == "assistant":
            turns.append(turn)
        if len(turns) == count:
            return turns
    return turns


def turn_rows(size: int, cache: Path, work: Path, turns: int, repeats: int) -> list[Row]:
    """A turn as the README loop makes it: a no-op `compact()`, the view, `append_turn`; interleaved
    turn by turn with the floor. Wall with fsync, and CPU."""
    rows = []
    count = get_counter().count
    for record in (False, True):
        walls: list[float] = []
        cpus: list[float] = []
        ours_wall: list[float] = []
        floor_wall: list[float] = []
        ours_cpu: list[float] = []
        floor_cpu: list[float] = []
        for _ in range(repeats):
            path = _copy(build(size, cache), work / "turn.db")
            floor = Floor(work / "turn-floor.db")
            ow, fw, oc, fc = [], [], [], []
            with Transcript.open(path, session_id=SESSION) as t:
                t.visible_messages()
                count("warm up the tokenizer")
                for turn in _probe(turns):
                    start = _clock()
                    t.compact(budget_tokens=_BIG)
                    t.visible_messages(record=record)
                    t.append_turn(turn)
                    wall, cpu = _since(start)
                    ow.append(wall)
                    oc.append(cpu)
                    start = _clock()
                    floor_turn(floor, turn, get_counter(), record)
                    wall, cpu = _since(start)
                    fw.append(wall)
                    fc.append(cpu)
            floor.conn.close()
            ours_wall.append(statistics.median(ow))
            floor_wall.append(statistics.median(fw))
            ours_cpu.append(statistics.median(oc))
            floor_cpu.append(statistics.median(fc))
            walls.append(ours_wall[-1] / floor_wall[-1])
            cpus.append(ours_cpu[-1] / floor_cpu[-1])
        label = "per turn, record=True" if record else "per turn"
        rows.append(
            Row(f"{label} (wall)", size, statistics.median(floor_wall), statistics.median(ours_wall), walls)
        )
        rows.append(
            Row(f"{label} (cpu)", size, statistics.median(floor_cpu), statistics.median(ours_cpu), cpus)
        )
    return rows


_PEAK = """
def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
def start_peak():
    # The peak from here on: reset the high-water mark to the RSS now (Linux: clear_refs 5), so
    # what the imports before took and freed is not counted; returns that RSS.
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return rss_kb()
"""

_COLD_OURS = (
    _PEAK
    + """
import sys, time
import transcript
import sqlite3  # as the floor: the module any SQLite reader needs, loaded before either clock
from transcript import Transcript
base = start_peak()
wall, cpu = time.perf_counter(), time.process_time()
t = Transcript.open(sys.argv[1], session_id=sys.argv[2])
view = t.visible_messages()
print(time.perf_counter() - wall, time.process_time() - cpu, len(view), peak_kb() - base)
"""
)

_COLD_FLOOR = (
    _PEAK
    + """
import sys, time
import transcript
import sqlite3, msgspec
from transcript.model import Message
base = start_peak()
wall, cpu = time.perf_counter(), time.process_time()
decoder = msgspec.json.Decoder(Message)
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
ids = sys.argv[3].split(",") if sys.argv[3] else None
if ids is None:
    rows = conn.execute("SELECT body FROM bodies ORDER BY id")
else:
    rows = conn.execute(
        f"SELECT body FROM bodies WHERE message_id IN ({','.join('?' * len(ids))})", ids
    )
messages = [decoder.decode(body) for (body,) in rows]
print(time.perf_counter() - wall, time.process_time() - cpu, len(messages), peak_kb() - base)
"""
)


def _fresh(script: str, *args: str) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    if done.returncode:
        raise SystemExit(f"a fresh interpreter failed:\n{done.stderr}")
    return [float(value) for value in done.stdout.split()]


def cold_rows(size: int, cache: Path, work: Path, repeats: int) -> list[Row]:
    """Cold open + first view in a fresh interpreter, uncompacted and compacted, interleaved with a
    fresh interpreter reading and decoding only the visible bodies; and the peak RSS above the RSS
    after `import transcript`, against the visible bodies' bytes."""
    rows = []
    for name, source in (("uncompacted", build(size, cache)), ("compacted", compacted(size, cache))):
        path = _copy(source, work / "cold.db")
        with Transcript.open(path, session_id=SESSION) as t:  # migrates and attests once, untimed
            view = t.visible_messages()
            stored = {m.id for m in t.stored_messages()}
            shown = [m.id for m in view.messages if m.id in stored]
            whole = name == "uncompacted"
            ids = "" if whole else ",".join(shown)
            visible_bytes = sum(len(_ENCODER.encode(m)) for m in view.messages)
        _fresh(_COLD_OURS, str(path), SESSION)  # warm the page cache and the bytecode
        walls, cpus, ours_w, floor_w, ours_c, floor_c, peaks, floor_peaks = [], [], [], [], [], [], [], []
        for _ in range(repeats):
            ours = _fresh(_COLD_OURS, str(path), SESSION)
            floor = _fresh(_COLD_FLOOR, str(path), SESSION, ids)
            ours_w.append(ours[0])
            ours_c.append(ours[1])
            floor_w.append(floor[0])
            floor_c.append(floor[1])
            peaks.append(ours[3] * 1024 / max(visible_bytes, 1))
            floor_peaks.append(floor[3] * 1024)
            walls.append(ours[0] / floor[0])
            cpus.append(ours[1] / floor[1])
        rows.append(
            Row(
                f"cold open + view, {name} (wall)",
                size,
                statistics.median(floor_w),
                statistics.median(ours_w),
                walls,
            )
        )
        rows.append(
            Row(
                f"cold open + view, {name} (cpu)",
                size,
                statistics.median(floor_c),
                statistics.median(ours_c),
                cpus,
            )
        )
        rows.append(
            Row(
                f"cold open peak RSS / view bytes, {name}",
                size,
                visible_bytes / 2**20,
                statistics.median(peaks) * visible_bytes / 2**20,
                peaks,
                unit="MB",
                note=f"view {len(view)} messages; the floor's own peak "
                f"{statistics.median(floor_peaks) / 2**20:.3f} MB",
            )
        )
    return rows


def _micro_texts(t: Transcript, ids: Sequence[str]) -> list[str]:
    wanted = set(ids)
    return [e.message.text for e in t.messages().entries if e.message.id in wanted]


def micro_rows(size: int, cache: Path, work: Path, repeats: int) -> list[Row]:
    """The first micro round over a never-compacted history (every stale result), and a steady one
    (k = 10 new results), each against the floor of the marks it wrote."""
    config = CompactConfig(full_compact_enabled=False)
    count = get_counter().count
    head, tail = config.micro_field_keep_head_chars, config.micro_field_keep_tail_chars
    first: list[tuple[float, float, float, float]] = []
    steady: list[tuple[float, float, float, float]] = []

    def measure(t: Transcript) -> tuple[float, float, float, float]:
        """One micro round at 80% of the view against the floor of the marks it wrote."""
        budget = math.ceil(t.visible_messages().tokens / 0.8)
        start = _clock()
        result = t.compact(budget_tokens=budget, config=config, manual=True)
        ours = _since(start)
        texts = _micro_texts(t, result.compacted_ids)
        start = _clock()
        floor_marks(floor, texts, count, head, tail)
        return (*ours, *_since(start))

    for _ in range(repeats):
        path = _copy(build(size, cache), work / "micro.db")
        floor = Floor(work / "micro-floor.db")
        with Transcript.open(path, session_id=SESSION) as t:
            count("warm up the tokenizer")
            _cold_facts()
            first.append(measure(t))
            for r in range(3):
                _steps(t, 1_000_000 + r * 100, 10, 2_000)
                _steps(t, 1_000_000 + r * 100 + 10, 3, 100)
                steady.append(measure(t))
        floor.conn.close()
    return _pairs("first micro round", size, first) + _pairs("steady micro round (k=10)", size, steady)


def _cold_facts() -> None:
    """Forget the facts the planner remembered of the text it read (`planner.facts`), as a new
    process starts: a repetition that found the previous one's would read a history it has not
    seen faster, and only at the sizes whose text fits that memory, which bends the growth."""
    facts._KNOWN.clear()


def _pairs(name: str, size: int, runs: list[tuple[float, float, float, float]]) -> list[Row]:
    """Rows (wall and CPU) from (ours wall, ours cpu, floor wall, floor cpu) per repetition."""
    walls = [ow / fw for ow, _, fw, _ in runs]
    cpus = [oc / fc for _, oc, _, fc in runs]
    return [
        Row(
            f"{name} (wall)",
            size,
            statistics.median(r[2] for r in runs),
            statistics.median(r[0] for r in runs),
            walls,
        ),
        Row(
            f"{name} (cpu)",
            size,
            statistics.median(r[3] for r in runs),
            statistics.median(r[1] for r in runs),
            cpus,
        ),
    ]


def full_rows(size: int, cache: Path, work: Path, repeats: int) -> list[Row]:
    """A forced full round, and an automatic one (its micro step, then its full step: micro alone is
    not enough), each on a fresh copy, against the floor of what it summarized and marked."""
    count = get_counter().count
    config = CompactConfig()
    head, tail = config.micro_field_keep_head_chars, config.micro_field_keep_tail_chars
    forced: list[tuple[float, float, float, float]] = []
    automatic: list[tuple[float, float, float, float]] = []
    for _ in range(repeats):
        for kind, runs in (("forced", forced), ("automatic", automatic)):
            path = _copy(build(size, cache), work / "full.db")
            floor = Floor(work / "full-floor.db")
            with Transcript.open(path, session_id=SESSION) as t:
                view = t.visible_messages()
                count("warm up the tokenizer")
                before = {e.message.id for e in t.messages().entries if not e.flags.excluded}
                _cold_facts()
                start = _clock()
                if kind == "forced":
                    result = t.compact(budget_tokens=60_000, force=True)
                else:
                    result = t.compact(budget_tokens=max(60_000, view.tokens // 20))
                ours = _since(start)
                assert result.outcome == "full_applied", result
                entries = t.messages().entries
                summarized = [e.message for e in entries if e.flags.excluded and e.message.id in before]
                summary = entries[-1].message
                texts = _micro_texts(t, result.compacted_ids)
                start = _clock()
                if texts:
                    floor_marks(floor, texts, count, head, tail)
                floor_full(floor, summarized, summary)
                runs.append((*ours, *_since(start)))
            floor.conn.close()
    return _pairs("forced full round", size, forced) + _pairs("automatic full round", size, automatic)


def replay_rows(sizes: Sequence[int], work: Path, repeats: int) -> list[Row]:
    """`replay --verify` (the CLI's check, in process) against the run that recorded its views: each
    turn appended and its view served with `record=True`."""
    from transcript.session.replay import check_served

    rows = []
    for size in sizes:
        ratios, ours_t, floor_t = [], [], []
        for _ in range(repeats):
            path = work / "replay.db"
            _remove(path)
            start = _clock()
            with Store.open(path) as store:
                t = store.session(SESSION)
                for turn in SyntheticSession(seed=7).messages(size):
                    t.append_turn(turn)
                    t.visible_messages(record=True)
            recording = _since(start)[1]
            start = _clock()
            with Store.open(path, readonly=True) as store:
                checked = check_served(store.events, SESSION)
            ours = _since(start)[1]
            assert checked.ok and checked.verified
            ratios.append(ours / recording)
            ours_t.append(ours)
            floor_t.append(recording)
        rows.append(
            Row(
                "replay --verify / recording run (cpu)",
                size,
                statistics.median(floor_t),
                statistics.median(ours_t),
                ratios,
                unit="s",
            )
        )
    return rows


def export_rows(size: int, cache: Path, work: Path, repeats: int) -> list[Row]:
    """`transcript export` of a compacted session's view (bytes read from the store by a second export
    in the same interpreter, so the modules the first imported do not count, against the view's
    bytes) and `export --state` (peak RSS above the RSS after `import transcript`, against the
    largest body), each in a fresh interpreter."""
    path = _copy(compacted(size, cache), work / "export.db")
    with Transcript.open(path, session_id=SESSION) as t:
        view_bytes = len(t.visible_messages().canonical_json())
        largest = max(len(_ENCODER.encode(m)) for m in t.stored_messages())
    script = (
        _PEAK
        + """
import sys
import transcript
from transcript.cli import cli
def rchar():
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))
base, read = start_peak(), rchar()
try:
    cli.main(sys.argv[3:], standalone_mode=False)
finally:
    sys.stdout.flush()
    peak, read = peak_kb() - base, rchar() - read
if "--state" not in sys.argv:
    # Again, on a new connection (SQLite keeps no page across connections): what the command reads
    # from the store, without the modules the first run imported.
    read = rchar()
    cli.main(sys.argv[3:], standalone_mode=False)
    sys.stdout.flush()
    read = rchar() - read
print(read, peak, file=sys.stderr)
"""
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    reads: list[int] = []
    peaks: list[int] = []
    # What the RSS target is set against: a bare connection that reads the schema, nothing else.
    bare = [_fresh(_BARE_CONNECTION, str(path))[0] * 1024 for _ in range(repeats)]
    for _ in range(repeats):
        for args, into in (
            (["export", "--session", SESSION, "--db", str(path)], reads),
            (["export", "--session", SESSION, "--state", "--db", str(path)], peaks),
        ):
            done = subprocess.run(
                [sys.executable, "-c", script, str(path), SESSION, *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=env,
            )
            if done.returncode:
                raise SystemExit(f"a fresh interpreter failed:\n{done.stderr}")
            read, peak = (int(v) for v in done.stderr.split()[-2:])
            into.append(read if into is reads else peak * 1024)
    return [
        Row(
            "export (view): store bytes read / view bytes",
            size,
            view_bytes / 2**20,
            statistics.median(reads) / 2**20,
            [r / view_bytes for r in reads],
            unit="MB",
        ),
        Row(
            "export --state: peak RSS / largest body",
            size,
            largest / 2**20,
            statistics.median(peaks) / 2**20,
            [p / largest for p in peaks],
            unit="MB",
            note=f"a bare sqlite3 connection reading the schema peaks {statistics.median(bare) / 2**20:.3f} "
            "MB",
        ),
    ]


_BARE_CONNECTION = (
    _PEAK
    + """
import sys
import transcript
import sqlite3
base = start_peak()
connection = sqlite3.connect(sys.argv[1])
connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
print(peak_kb() - base)
"""
)


README_QUERIES = (
    "SELECT session_id, substr(title, 1, 40) AS title, messages, stored_tokens FROM sessions",
    "SELECT role, count(*) AS messages, sum(tokens) AS tokens, sum(truncated) AS truncated, "
    "sum(excluded) AS excluded FROM messages WHERE session_id = 'bench' GROUP BY role",
    "SELECT version, outcome, strategy, tokens_before, tokens_after, payback_calls FROM compactions "
    "WHERE session_id = 'bench'",
)


def sql_rows(size: int, cache: Path, work: Path, repeats: int) -> list[Row]:
    """The README's three queries on a session of `size` messages after micro and full rounds; the
    floor is the 50 ms target."""
    path = work / "sql.db"
    if not path.exists() or getattr(sql_rows, "built", None) != size:
        _copy(build(size, cache), path)
        with Transcript.open(path, session_id=SESSION) as t:
            tokens = t.visible_messages().tokens
            t.compact(budget_tokens=math.ceil(tokens / 0.8), manual=True)
            t.compact(budget_tokens=60_000, force=True)
        sql_rows.built = size  # type: ignore[attr-defined]
    rows = []
    for number, query in enumerate(README_QUERIES, start=1):
        times = []
        for _ in range(repeats):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            start = time.perf_counter()
            conn.execute(query).fetchall()
            times.append(time.perf_counter() - start)
            conn.close()
        rows.append(
            Row(
                f"README query {number} (target 50 ms)",
                size,
                0.05,
                statistics.median(times),
                [t / 0.05 for t in times],
            )
        )
    return rows


ROWS = ("turn", "cold", "micro", "full", "replay", "export", "sql")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold-repeats", type=int, default=5)
    parser.add_argument("--turns", type=int, default=100, help="turns per per-turn repetition")
    parser.add_argument("--replay-sizes", type=int, nargs="+", default=[1_000, 2_000, 4_000])
    parser.add_argument("--sql-size", type=int, default=20_000)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    chosen = [row for row in args.rows.split(",") if row]
    unknown = sorted(set(chosen) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}")
    print(f"load average {os.getloadavg()[0]:.2f}; tokenizer cl100k_base; integrity checks on")
    print(HEADER)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def show(new: list[Row]) -> None:
            for row in new:
                print(row.line(), flush=True)
            rows.extend(new)

        for size in args.sizes:
            if "turn" in chosen:
                show(turn_rows(size, args.cache, work, args.turns, args.repeats))
            if "cold" in chosen:
                show(cold_rows(size, args.cache, work, args.cold_repeats))
            if "micro" in chosen:
                show(micro_rows(size, args.cache, work, args.repeats))
            if "full" in chosen:
                show(full_rows(size, args.cache, work, args.repeats))
            if "export" in chosen:
                show(export_rows(size, args.cache, work, args.repeats))
        if "replay" in chosen:
            show(replay_rows(args.replay_sizes, work, args.repeats))
        if "sql" in chosen:
            show(sql_rows(args.sql_size, args.cache, work, max(args.repeats, 5)))
    _growth(rows)
    return 0


def _growth(rows: list[Row]) -> None:
    """The growth exponent of `ours` between the smallest and largest size of each row."""
    by_name: dict[str, list[Row]] = {}
    for row in rows:
        by_name.setdefault(row.name, []).append(row)
    lines = []
    for name, group in by_name.items():
        group = sorted(group, key=lambda r: r.size)
        if len(group) < 2 or group[0].ours <= 0 or group[-1].ours <= 0:
            continue
        low, high = group[0], group[-1]
        exponent = math.log(high.ours / low.ours) / math.log(high.size / low.size)
        ratio = statistics.median(high.ratios) / statistics.median(low.ratios)
        lines.append(
            f"{name:<38} {low.size}->{high.size}: ours grows with exponent {exponent:.2f}; ratio {ratio:.2f}x"
        )
    if lines:
        print()
        print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
