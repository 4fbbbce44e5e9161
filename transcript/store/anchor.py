"""The head anchor: a file beside a store that remembers the highest head each session reached.

After every commit the event log appends the heads it moved to `<file>.anchor` (JSON lines, mode
0600, opened without following a link and only as a regular file). A SQLite file store keeps one by
default, appended without fsync: a killed process loses none of it (the kernel has the bytes), and
after a power loss it may lag the store (with `synchronous="FULL"` it never leads it). `anchor=True`
(or a path) fsyncs every line.

Reading it is monotonic: per session it keeps the highest head it has seen, and a lower or different
head recorded later never replaces that one. A later lower head comes from two writers whose lines
landed out of order, or from a store that lost its tail (a deleted `-wal`, an old backup put back)
and was written again; the highest head is then kept alongside the new ones, and every head kept
must stay on its session's chain. So `verify` names a lost tail after later writes too, until an
acknowledgement (`transcript.store.acknowledge`: a line naming the lost heads, the head the store
holds, who, why and when) lets it go; writes go on meanwhile. `verify` lists acknowledged losses as
information.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from transcript.model.errors import InvalidArgument, NotARegularFile, StoreUnavailable
from transcript.model.events import EVENT_DECODER, SessionErased
from transcript.store.location import file_kind

ANCHOR_SUFFIX: Final = ".anchor"


class HeadAnchor:
    """Appends each commit's heads to the anchor file (see the module docstring). `durable`: fsync
    every line, and raise `StoreUnavailable` when one cannot be written (`anchor=True`); otherwise
    (the default anchor) a line that cannot be written stops the anchor with a `RuntimeWarning`, as
    the commit it would record is already stored: the anchor then lags, it never leads."""

    def __init__(self, path: str, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self._fd: int | None = None
        self._stopped = False

    def record(self, heads: Mapping[str, tuple[int, str]]) -> None:
        """Append the heads just committed (durably when `durable`)."""
        if not heads or self._stopped:
            return
        lines = b"".join(
            ENCODER.encode(_HeadLine(session_id=sid, version=version, hash=digest)) + b"\n"
            for sid, (version, digest) in heads.items()
        )
        try:
            if self._fd is None:
                self._fd = open_anchor(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(self._fd, lines)
            if self.durable:
                os.fsync(self._fd)
        except (OSError, NotARegularFile) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            if self.durable:
                raise StoreUnavailable(
                    f"the write was committed, but the head anchor {self.path} could not record it: {reason}"
                ) from exc
            self._stopped = True
            warnings.warn(
                f"the head anchor {self.path} could not record a commit ({reason}); it records no more "
                "commits of this open store (the write itself was committed)",
                RuntimeWarning,
                stacklevel=2,
            )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class AcknowledgedLoss(msgspec.Struct, frozen=True, kw_only=True):
    """A loss the anchor named and someone acknowledged: the heads the store no longer holds
    (version and hash each), the head it held then, who acknowledged it, why, and when."""

    session_id: str
    lost: tuple[tuple[int, str], ...]
    version: int  # the session's head when the loss was acknowledged (0: the store held none of it)
    hash: str
    by: str
    reason: str
    at: str

    def __str__(self) -> str:
        versions = ", ".join(str(version) for version, _ in self.lost)
        who = self.by or "an unnamed user"
        return (
            f"session {self.session_id}: the loss of version {versions} was acknowledged by {who} "
            f"at {self.at} ({self.reason}); the store then held version {self.version}"
        )


class Anchor(msgspec.Struct, frozen=True):
    """What an anchor file says: per session, the heads its chain must hold (ascending versions: the
    highest recorded, and any higher one a later lower head did not descend from), and the losses
    acknowledged so far, in the order they were."""

    heads: dict[str, tuple[tuple[int, str], ...]]
    acknowledged: tuple[AcknowledgedLoss, ...] = ()


class _HeadLine(msgspec.Struct, frozen=True):
    session_id: str
    version: int
    hash: str


class Line(msgspec.Struct, frozen=True):
    """A head line, or an acknowledgement (`lost` given; `version`/`hash` the head then held)."""

    session_id: str
    version: int
    hash: str
    lost: tuple[tuple[int, str], ...] | None = None
    by: str = ""
    reason: str = ""
    at: str = ""


ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Line)


class _Track:
    """One session's heads while an anchor file is read (see `Anchor`)."""

    def __init__(self) -> None:
        self.top: tuple[int, str] | None = None
        self.kept: list[tuple[int, str]] = []  # earlier tops a lower or other head followed
        self.fell = False  # whether a lower or other head followed the top

    def see(self, head: tuple[int, str]) -> None:
        if self.top is None:
            self.top = head
        elif head[0] > self.top[0]:
            if self.fell:
                self.kept.append(self.top)
            self.top, self.fell = head, False
        elif head != self.top:
            self.fell = True

    def acknowledge(self, lost: tuple[tuple[int, str], ...], head: tuple[int, str]) -> None:
        gone = set(lost)
        self.kept = [kept for kept in self.kept if kept not in gone]
        self.top, self.fell = (head if head[0] else None), False

    def heads(self) -> tuple[tuple[int, str], ...]:
        return tuple(sorted({*self.kept, *([self.top] if self.top else [])}))


def read_anchor(path: str) -> Anchor:
    """What the anchor file at `path` says (empty when there is none); a torn last line (a crash while
    it was written) is passed over. Raises `InvalidArgument` when the file is not an anchor file, and
    `NotARegularFile` when the path names a FIFO, a device or a directory (never waited on)."""
    try:
        fd = open_anchor(path, os.O_RDONLY)
    except FileNotFoundError:
        return Anchor({})
    except OSError as exc:
        raise InvalidArgument(f"cannot open the head anchor {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as file:
        lines = file.read().splitlines()
    tracks: dict[str, _Track] = {}
    acknowledged: list[AcknowledgedLoss] = []
    for number, line in enumerate(lines, start=1):
        try:
            entry = _DECODER.decode(line)
        except msgspec.DecodeError as exc:
            if number == len(lines):
                break
            raise InvalidArgument(f"{path}, line {number}: not a head anchor line ({exc})") from exc
        track = tracks.setdefault(entry.session_id, _Track())
        if entry.lost is None:
            track.see((entry.version, entry.hash))
            continue
        track.acknowledge(entry.lost, (entry.version, entry.hash))
        acknowledged.append(
            AcknowledgedLoss(
                session_id=entry.session_id,
                lost=entry.lost,
                version=entry.version,
                hash=entry.hash,
                by=entry.by,
                reason=entry.reason,
                at=entry.at,
            )
        )
    heads = {sid: track.heads() for sid, track in tracks.items()}
    return Anchor({sid: kept for sid, kept in heads.items() if kept}, tuple(acknowledged))


def held_at(kept: Iterable[tuple[int, str]], rows: Iterable[tuple[int, object, object]]) -> dict[int, str]:
    """The hash a session's chain holds at the version of each head in `kept` (a version it does not
    reach is left out), from its rows (version, payload, hash) in version order. Where the log starts
    with an erasure, the heads it replaced are vouched for by it: its own version by the head it names,
    an earlier one as the anchor holds it (the log it was on is gone)."""
    wanted = dict(kept)
    held: dict[int, str] = {}
    for index, (version, payload, digest) in enumerate(rows):
        if index == 0 and (erased := _erasure(payload)) is not None:
            held.update({v: h for v, h in wanted.items() if v < erased.version})
            if erased.version in wanted:
                held[erased.version] = erased.head
        if version in wanted and isinstance(digest, str):
            held[version] = digest
    return held


def _erasure(payload: object) -> SessionErased | None:
    """The erasure a session's first event is, if it is one."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogateescape")
    if not isinstance(payload, bytes) or b"session_erased" not in payload:
        return None
    try:
        event = EVENT_DECODER.decode(payload)
    except msgspec.DecodeError:
        return None
    return event if isinstance(event, SessionErased) else None


def open_anchor(path: str, flags: int) -> int:
    """Open an anchor file without following a link and without waiting (created mode 0600); anything
    but a regular file is refused with `NotARegularFile`."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o600)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotARegularFile(f"the head anchor {path} is {file_kind(mode)}; an anchor is a regular file")
    os.set_blocking(fd, True)
    return fd
