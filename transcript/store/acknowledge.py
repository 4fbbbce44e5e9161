"""Acknowledging a loss the head anchor names (`transcript.store.anchor`): the one way to let
`verify` pass over heads a store no longer holds, recorded in the anchor with who, why and when."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from transcript.model.arguments import check_type
from transcript.model.errors import InvalidArgument, StoreUnavailable
from transcript.model.ids import check_session_id
from transcript.store.anchor import ENCODER, AcknowledgedLoss, Line, held_at, open_anchor, read_anchor
from transcript.store.backends import anchor_location, open_recorder
from transcript.store.location import check_location
from transcript.store.redaction import who

_TEXT_MAX: Final = 200


def acknowledge_loss(
    path: str | Path,
    session_id: str,
    *,
    reason: str,
    by: str | None = None,
    anchor: bool | str | Path = True,
) -> AcknowledgedLoss:
    """Acknowledge that a store lost heads its anchor file recorded for `session_id` (a deleted
    `-wal`, an old backup put back): append a line naming the lost heads, the head the store holds now,
    `by` (default: this process's user), `reason` and the time, fsync'd. From then on `verify` lists
    the loss as acknowledged instead of naming it as a problem; heads recorded later are checked as
    before. `anchor` is the anchor file as for `verify` (True: `<file>.anchor`). Raises
    `InvalidArgument` when the anchor names no loss of that session (nothing is written)."""
    target = check_location(path)
    check_session_id(session_id)
    check_type(reason, str, "reason")
    check_type(anchor, (bool, str, Path), "anchor")
    if not reason.strip() or len(reason) > _TEXT_MAX or not reason.isprintable():
        raise InvalidArgument(
            f"an acknowledgement needs a reason: one printable line of at most {_TEXT_MAX} characters"
        )
    author = who(by)
    anchor_path = anchor_location(target, anchor)
    if anchor_path is None:
        raise InvalidArgument(f"{target} keeps no head anchor, so it names no loss to acknowledge")
    kept = read_anchor(anchor_path).heads.get(session_id, ())
    recorder = open_recorder(target, verifying=True)
    try:
        with recorder.reading():
            rows = list(recorder.events(session_id))
    finally:
        recorder.close()
    held = held_at(kept, [(row.version, row.payload, row.hash) for row in rows])
    lost = tuple((version, digest) for version, digest in kept if held.get(version) != digest)
    if not lost:
        raise InvalidArgument(
            f"the head anchor {anchor_path} names no loss of session {session_id!r}; nothing was written"
        )
    head = (rows[-1].version, rows[-1].hash) if rows else (0, "")
    loss = AcknowledgedLoss(
        session_id=session_id,
        lost=lost,
        version=head[0],
        hash=head[1],
        by=author,
        reason=reason.strip(),
        at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    line = Line(
        session_id=session_id,
        version=loss.version,
        hash=loss.hash,
        lost=lost,
        by=loss.by,
        reason=loss.reason,
        at=loss.at,
    )
    try:
        fd = open_anchor(anchor_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, ENCODER.encode(line) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreUnavailable(
            f"the head anchor {anchor_path} could not record the acknowledgement: {exc.strerror}"
        ) from exc
    return loss
