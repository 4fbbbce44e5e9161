"""The shared-session race, many times: 20 tasks append turns to one `AsyncTranscript` while a task
compacts (the async repro of "one sealed write path"), on SQLite and on a throwaway PostgreSQL.

Each run uses a fresh store; after it, `verify` must pass, the acknowledged appends must all be stored
(read back by a fresh process), and no appending task may have got a `ConflictError`. Printed per
backend: runs, runs corrupted (verify failed), acknowledged appends missing, conflicts raised.

    python benchmarks/race_async.py --runs 20
    python benchmarks/race_async.py --runs 20 --backend sqlite

Not part of the test suite (`tests/test_sharing.py` runs the race once per backend).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pgserver import Cluster, bin_dir  # noqa: E402
from tests.test_sharing import _agents_and_a_compactor  # noqa: E402
from transcript import verify  # noqa: E402

_READ = (
    "import json, sys\nfrom transcript import Store\n"
    "with Store.open(sys.argv[1]) as s:\n"
    "    print(json.dumps([m.id for m in s.session('a', create=False).stored_messages()]))\n"
)


def _run_once(location: str) -> tuple[bool, int, int]:
    acked, errors = asyncio.run(_agents_and_a_compactor(location))
    ok = verify(location).ok
    done = subprocess.run(
        [sys.executable, "-c", _READ, location], capture_output=True, text=True, cwd=ROOT, check=False
    )
    stored = set(json.loads(done.stdout)) if done.returncode == 0 else set()
    return ok and done.returncode == 0, len(set(acked) - stored), len(errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        totals = [0, 0, 0]
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.runs):
                ok, missing, conflicts = _run_once(str(Path(tmp) / f"run{k}.db"))
                totals = [totals[0] + (not ok), totals[1] + missing, totals[2] + conflicts]
        bad, missing, conflicts = totals
        print(f"sqlite: {args.runs} runs, {bad} corrupted, {missing} acked missing, {conflicts} conflicts")
    if args.backend in ("postgres", "both"):
        binaries = bin_dir()
        if binaries is None:
            raise SystemExit("PostgreSQL server binaries not found (Debian's postgresql-15)")
        cluster = Cluster(binaries).start()
        try:
            totals = [0, 0, 0]
            for _ in range(args.runs):
                location = cluster.url()
                ok, missing, conflicts = _run_once(location)
                totals = [totals[0] + (not ok), totals[1] + missing, totals[2] + conflicts]
                cluster.drop_schema(location)
            print(
                f"postgres: {args.runs} runs, {totals[0]} corrupted, {totals[1]} acked missing, "
                f"{totals[2]} conflicts"
            )
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
