"""The base of the model's plain values: frozen, keyword-only, defaults omitted on the wire."""

from __future__ import annotations

import msgspec


class Value(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Base of the plain values of the model: frozen, keyword-only, defaults omitted on the wire.

    `gc=False`: these values never form reference cycles, so the garbage collector need not track
    them — a session of 10,000 messages would otherwise be traversed again and again as it loads.
    Omitting defaults means adding a field with a default never changes the bytes (or hashes) of what
    is already stored.
    """
