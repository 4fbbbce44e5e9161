"""The writer capability: the only way marks, summaries and compaction records enter a store.

A backend's `commit` refuses those events (`WriteRefused`) unless the write comes through a
`FlagWriter`. Import-linter protects this module: only `mutate` may import it, so the single mutator
— the compaction steps, and its protected copies of a log for restore, fork and import — is the only
code that can write them, at run time as well as by the import rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from transcript.store.port import Committed, EventStore, SessionWrite


class FlagWriter:
    """Commits writes that may hold marks, summaries and compaction records, in one transaction."""

    __slots__ = ("_store",)

    def __init__(self, store: EventStore) -> None:
        self._store = store

    def commit(self, writes: Sequence[SessionWrite]) -> list[Committed]:
        """Append each write's events (see `EventStore.commit`), with this capability."""
        return self._store.commit(writes, writer=self)


def is_writer(writer: object) -> bool:
    """Whether a backend was handed the writer capability (backends call this, nothing else does)."""
    return isinstance(writer, FlagWriter)
