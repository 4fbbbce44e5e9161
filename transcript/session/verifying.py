"""`verify` of a whole store: the store layer's checks, and every snapshot against a fold of its log.

The store layer checks what the rows mean (hashes, chains, heads, marks, the schema); a snapshot is
the fold's state, which only this layer computes, so its check is added here: each stored snapshot
must be what a full fold of its session's log gives at the version it names, and the chain must
prove it as an open checks it (its record, the event after that version: `log.proves`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from transcript.model.errors import StoreCorrupted
from transcript.model.hashing import snapshot_digest
from transcript.session.snapshots import check_snapshots
from transcript.store.log import EventLog, proves, stored_bytes
from transcript.store.recorder import Problem, Recorder, SnapshotRow
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
    against a full fold of its session's log (`snapshot_damaged` names one that differs,
    `snapshot_unproven` one that no chained record proves)."""
    return verify_store(path, deep=deep, expect_heads=expect_heads, anchor=anchor, extra=snapshot_problems)


def snapshot_problems(recorder: Recorder) -> list[Problem]:
    """Every stored snapshot of every session against a fold of its log (each log folded once), and
    whether the chain proves it (as an open checks it)."""
    rows: dict[str, list[tuple[int, str, bytes, bool, str]]] = {}
    for row in recorder.scan_snapshots():
        session_id, version, head, payload, digest = row
        if not (isinstance(session_id, str) and isinstance(version, int) and isinstance(head, str)):
            rows.setdefault(str(session_id), [])
            continue
        data = stored_bytes(payload)
        intact = digest == snapshot_digest(session_id, version, head, data)
        standing = (
            _standing(recorder, session_id, SnapshotRow(version, head, data, str(digest))) if intact else ""
        )
        rows.setdefault(session_id, []).append((version, head, data, intact, standing))
    log = EventLog(recorder)
    problems: list[Problem] = []
    for session_id, kept in sorted(rows.items(), key=lambda item: str(item[0])):
        try:
            problems.extend(check_snapshots(log, session_id, iter(kept)))
        except StoreCorrupted:  # a log too damaged to fold: the chain checks have named it
            problems.append(
                Problem(
                    code="snapshot_damaged",
                    detail="its session's log cannot be folded to check it against (the chain checks "
                    "name what is damaged)",
                    session_id=session_id,
                )
            )
    return problems


def _standing(recorder: Recorder, session_id: str, row: SnapshotRow) -> str:
    """What an open makes of a snapshot whose digest holds: "proven" (the chain proves it as
    `EventLog.snapshot` checks it: an open takes it), "rewritten" (proven, but a redaction or an
    erasure came after it: an open passes over it, `Transcript._from_snapshot`), or "" (not proven, or
    the events around it cannot be read, which the chain checks name: passed over)."""
    try:
        near = list(recorder.events(session_id, after=row.version - 1, until=row.version + 2))
        if not proves(session_id, row, near, recorder.head(session_id) if len(near) == 2 else None):
            return ""
        later = recorder.events(session_id, after=row.version, kinds="others")
        return "rewritten" if any(event.kind in _REWRITES for event in later) else "proven"
    except StoreCorrupted:
        return ""


_REWRITES: Final = frozenset(("message_redacted", "session_erased"))
