"""The canonical view order: the order in which visible messages are shown to the model.

Excluded messages are left out, bodies are shown as stored, and a summary message is shown just
before its anchor (the first kept message it precedes) rather than at its own position at the end of
the history, so a full compaction reads as system messages, summary, then the kept tail.
"""

from __future__ import annotations

from collections.abc import Sequence

from transcript.model.snapshot import Entry


def canonical_order(entries: Sequence[Entry]) -> list[Entry]:
    """The visible entries in view order."""
    summaries = [e for e in entries if e.message.kind == "summary" and e.message.anchor is not None]
    if not summaries:
        return [e for e in entries if not e.flags.excluded]
    visible_ids = {e.message.id for e in entries if not e.flags.excluded}
    anchored: dict[str, list[Entry]] = {}
    for entry in summaries:
        if not entry.flags.excluded and entry.message.anchor in visible_ids:
            anchored.setdefault(entry.message.anchor, []).append(entry)
    placed = {id(e) for group in anchored.values() for e in group}
    order: list[Entry] = []
    for entry in entries:
        if entry.flags.excluded or id(entry) in placed:
            continue
        order.extend(anchored.get(entry.message.id, ()))
        order.append(entry)
    return order


def needs_reorder(entry: Entry) -> bool:
    """Whether appending this entry can change the place of earlier ones (a summary with an anchor)."""
    return entry.message.kind == "summary" and entry.message.anchor is not None
