"""The writer capability: the only way marks, summaries and compaction records enter a store.

The event log refuses those events (`WriteRefused`) unless the write comes with a `FlagWriter`, and a
`FlagWriter` is made only by `writer_for`, which hands one only to the single mutator's own modules
(`mutate`): user code that builds one, or asks for one, gets `WriteRefused`. Import-linter protects
this module too (only `mutate` and the event log import it). Whatever holds the capability, the log
still takes a mark only with the round record or import record that explains it (see
`transcript.store.explained`), and `verify` names any mark no record explains.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from typing import Final

from transcript.model.errors import WriteRefused
from transcript.store.port import Committed, EventStore, SessionWrite

# The package whose modules may hold the capability.
MUTATOR: Final = "mutate"
_MINT: Final = object()
_MINTED: Final[weakref.WeakSet[FlagWriter]] = weakref.WeakSet()


class FlagWriter:
    """Commits writes that may hold marks, summaries and compaction records, in one transaction.

    Made only by `writer_for` (for the single mutator); constructing one directly is `WriteRefused`.
    """

    __slots__ = ("__weakref__", "_store")

    def __init__(self, store: EventStore, *, _mint: object = None) -> None:
        if _mint is not _MINT:
            raise WriteRefused(
                "the writer capability is the mutator's: marks, summaries and compaction records are "
                "written by compaction rounds, imports, restore and fork, never directly"
            )
        self._store = store
        _MINTED.add(self)

    def commit(self, writes: Sequence[SessionWrite]) -> list[Committed]:
        """Append each write's events (see `EventStore.commit`), with this capability."""
        return self._store.commit(writes, writer=self)


def writer_for(store: EventStore) -> FlagWriter:
    """The writer capability over `store`, for a module of the single mutator; anyone else asking gets
    `WriteRefused`."""
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller != MUTATOR and not str(caller).startswith(f"{MUTATOR}."):
        raise WriteRefused(
            f"the writer capability is the mutator's; {caller or 'this caller'!s} may not hold it"
        )
    return FlagWriter(store, _mint=_MINT)


def is_writer(writer: object) -> bool:
    """Whether a backend was handed the writer capability that `writer_for` made (the log calls this)."""
    return isinstance(writer, FlagWriter) and writer in _MINTED
