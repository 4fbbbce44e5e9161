"""How well the calibrated budget matches the bill, on every corpus file that records billed usage.

Each file is imported (its sessions' calls carry the usage Claude Code or Codex recorded); for each
session and model a fit (billed prompt ≈ slope × the store's estimate + intercept) is made on the
first half of its calls and checked on the second half. Printed per file: calls checked, the median
relative error of the plain estimate ("before") and of the calibrated prediction ("after"), and the
fit of the file's main session. Run: `python benchmarks/bench_calibration.py [DIR]`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transcript import Store
from transcript.session.billing import holdout

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"


def main(directory: Path) -> None:
    header = f"{'file':<40} {'sessions':>8} {'calls':>6} {'checked':>7} {'before':>7} {'after':>6}"
    print(f"{header}  main session fit")
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name != "README.md"):
        store = Store.open(":memory:")
        sessions = [s.session_id for s in store.import_file(path).sessions]
        billings = [store.session(s, create=False).billing() for s in sessions]
        calls = sum(len(b.calls) for b in billings)
        check = holdout(*(b.calls for b in billings))
        if check is None:
            continue
        fit = billings[0].fits[0] if billings[0].fits else None
        line = f"billed = {fit.slope:.3f} x estimate + {fit.intercept:,.0f}" if fit else "-"
        print(
            f"{path.name[:40]:<40} {len(sessions):>8} {calls:>6} {check.checked:>7} "
            f"{check.before:>7.1%} {check.after:>6.1%}  {line}"
        )
        store.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
