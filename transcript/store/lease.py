"""Session leases: one worker at a time runs a session's loop.

A lease is held for a block (`EventLog.lease`) and refused at once, with `SessionLeased`, while any
other holder has it: another thread or process of this host (this module's registry, and for a store
file a lock on one byte of `<file>.leases`), or another worker of a PostgreSQL store (an advisory lock
of the server, in `transcript.store.postgres`). A holder that dies lets it go: the operating system
drops a dead process's file locks, the server ends a dead connection's locks. Appends never need a
lease; it keeps two loops from spending model calls on one session at once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Final

from transcript.model.errors import SessionLeased, StoreUnavailable

SUFFIX: Final = ".leases"
_HELD: Final[set[tuple[str, str]]] = set()
_HELD_LOCK: Final = threading.Lock()


def key(scope: str, session_id: str) -> int:
    """A stable 63-bit number for a session of a store (an advisory lock key, a byte offset)."""
    import hashlib  # on first use: an open that takes no lease never loads it (~5 ms)

    digest = hashlib.sha256(f"{scope}\x00{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def refused(session_id: str, where: str) -> SessionLeased:
    return SessionLeased(
        f"session {session_id!r} is leased by another worker ({where}); let it finish, or run another session"
    )


@contextlib.contextmanager
def in_process(scope: str, session_id: str) -> Iterator[None]:
    """The lease among this process's threads."""
    held = (scope, session_id)
    with _HELD_LOCK:
        if held in _HELD:
            raise refused(session_id, "in this process")
        _HELD.add(held)
    try:
        yield
    finally:
        with _HELD_LOCK:
            _HELD.discard(held)


@contextlib.contextmanager
def on_file(path: str, session_id: str) -> Iterator[None]:
    """The lease among this host's processes: a lock on one byte of `<file>.leases` (created 0600,
    never through a link), and among this process's threads."""
    import fcntl

    with in_process(os.path.abspath(path), session_id):
        try:
            fd = os.open(path + SUFFIX, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the lease file {path}{SUFFIX}: {exc.strerror}") from exc
        try:
            offset = key("", session_id) % (2**31)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
            except OSError:
                raise refused(session_id, "another process of this host") from None
            yield
        finally:
            os.close(fd)  # which lets the lock go
