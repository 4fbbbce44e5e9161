"""What both backends' schemas decide alike: the migrations a store records against this release's.

Migrations are recorded in order, so a name that differs where this release's are was damaged
(`StoreCorrupted`); a name this release does not know was written by a newer one (`SchemaError`).
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from transcript.model.errors import SchemaError, StoreCorrupted


def pending(done: Sequence[str], known: Sequence[str], *, table: str, store: str) -> list[str]:
    """This release's migrations that `done` (recorded in `table`, in order) lacks; `store` names the
    store in the error ("this file", "schema 'x'")."""
    damaged = [name for name, expected in zip(done, known, strict=False) if name != expected]
    if damaged:
        raise StoreCorrupted(f"{table}: migration {damaged[0]!r} is recorded where this release's are")
    unknown = [name for name in done if name not in known]
    if unknown:
        raise SchemaError(
            f"{store} was written by a newer transcript-store (unknown migration {unknown[0]!r}); "
            "upgrade transcript-store to open it"
        )
    return [name for name in known if name not in done]


def readable_as_is(applied: Sequence[str], known: Sequence[str], read_as_is: Set[str]) -> bool:
    """Whether a store recording `applied` is one this release reads without migrating it: all of
    `known`, or all but some a reader does without (`read_as_is`), in their order."""
    missing = {name for name in known if name not in applied}
    return missing <= read_as_is and tuple(applied) == tuple(name for name in known if name not in missing)
