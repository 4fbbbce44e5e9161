"""`verify` of a whole store: the store layer's checks, and every snapshot against a fold of its log.

The store layer checks what the rows mean (hashes, chains, heads, marks, the schema); a snapshot is
the fold's state, which only this layer computes, so its check is added here: each stored snapshot
must be what a full fold of its session's log gives at the version it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from transcript.model.errors import StoreCorrupted
from transcript.model.hashing import snapshot_digest
from transcript.session.snapshots import check_snapshots
from transcript.store.log import EventLog, stored_bytes
from transcript.store.recorder import Problem, Recorder
from transcript.store.verify import VerifyReport, verify as verify_store


def verify(
    path: str | Path,
    *,
    deep: bool = False,
    expect_heads: Mapping[str, str] | None = None,
    anchor: bool | str | Path = True,
) -> VerifyReport:
    """Check a store end to end: `transcript.store.verify.verify` (pages, hashes, digests, chains,
    heads, marks, schema; `deep`, `expect_heads` and `anchor` as there), and every stored snapshot
    against a full fold of its session's log (`snapshot_damaged` names one that differs)."""
    return verify_store(path, deep=deep, expect_heads=expect_heads, anchor=anchor, extra=snapshot_problems)


def snapshot_problems(recorder: Recorder) -> list[Problem]:
    """Every stored snapshot of every session against a fold of its log (each log folded once)."""
    rows: dict[str, list[tuple[int, str, bytes, bool]]] = {}
    for row in recorder.scan_snapshots():
        session_id, version, head, payload, digest = row
        if not (isinstance(session_id, str) and isinstance(version, int) and isinstance(head, str)):
            rows.setdefault(str(session_id), [])
            continue
        data = stored_bytes(payload)
        intact = digest == snapshot_digest(session_id, version, head, data)
        rows.setdefault(session_id, []).append((version, head, data, intact))
    log = EventLog(recorder)
    problems: list[Problem] = []
    for session_id, kept in sorted(rows.items(), key=lambda item: str(item[0])):
        try:
            problems.extend(check_snapshots(log, session_id, iter(kept)))
        except StoreCorrupted:  # a log too damaged to fold: the chain checks have named it
            problems.append(
                Problem(
                    code="snapshot_damaged",
                    detail="its session's log cannot be folded to check it against; opens pass over it",
                    session_id=session_id,
                )
            )
    return problems
