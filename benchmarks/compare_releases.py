"""Compare this checkout's benchmark ratios with another release's, runs interleaved.

Each benchmark script (`bench_store.py`, `bench_compact.py`) is run alternately from the other
release's checkout (with its own interpreter) and from this one, `--repeats` times each, so both see
the same machine conditions. Every ratio line a script prints ("name   value  (target ...)") is
collected; the table shows each ratio's median and spread (min-max) per release.

    git worktree add /tmp/r010 a641a5d && python3 -m venv /tmp/r010/.venv \\
        && /tmp/r010/.venv/bin/pip install -e /tmp/r010
    python benchmarks/compare_releases.py --old /tmp/r010 --old-python /tmp/r010/.venv/bin/python
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_RATIO = re.compile(r"^(?P<name>\S.*?\S)\s{2,}(?P<value>\d+\.\d+)\s+\(target")
SCRIPTS = ("bench_store.py", "bench_compact.py")


def ratios(python: str, script: Path, args: list[str]) -> dict[str, float]:
    """Run one benchmark script; the ratios it printed, by name."""
    # A script exits 1 when a ratio misses its target; the numbers are what this comparison wants.
    out = subprocess.run([python, str(script), *args], capture_output=True, text=True, check=False).stdout
    found = {}
    for line in out.splitlines():
        match = _RATIO.match(line)
        if match:
            found[re.sub(r"\s+\d+/\d+$", "", match["name"]).strip()] = float(match["value"])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", type=Path, required=True, help="the other release's checkout")
    parser.add_argument("--old-python", required=True, help="the interpreter that has it installed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="pass --quick to the scripts")
    options = parser.parse_args(argv)
    extra = ["--quick"] if options.quick else []
    runs: dict[tuple[str, str], list[float]] = {}
    for script in SCRIPTS:
        for repeat in range(options.repeats):
            for label, python, root in (
                ("old", options.old_python, options.old),
                ("new", sys.executable, HERE.parent),
            ):
                for name, value in ratios(python, root / "benchmarks" / script, extra).items():
                    runs.setdefault((name, label), []).append(value)
                print(f"{script} run {repeat + 1} ({label}) done", file=sys.stderr)
    names = list(dict.fromkeys(name for name, _ in runs))
    print(f"{'ratio':58}  {'old median':>10}  {'old spread':>11}  {'new median':>10}  {'new spread':>11}")
    for name in names:
        cells = []
        for label in ("old", "new"):
            values = runs.get((name, label), [])
            if values:
                cells += [f"{statistics.median(values):10.2f}", f"{min(values):5.2f}-{max(values):<5.2f}"]
            else:
                cells += [f"{'-':>10}", f"{'-':>11}"]
        print(f"{name:58}  {cells[0]}  {cells[1]:>11}  {cells[2]}  {cells[3]:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
