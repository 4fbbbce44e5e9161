"""`micro_compact`: write a micro plan as per-message projection directives, in one transaction.

This is the only code that sets `truncated`. Each message gets one directive holding every entry
that targets it, with the exact token counts of the target as stored and as rendered (counted here,
once, so no later render ever tokenizes). The write is checked against the version the plan was made
from: a plan of an older version is a `ConflictError`, with nothing written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from planner.micro import MicroPlan
from projection.caps import NEUTRAL
from projection.directives import group_directives
from projection.render import PROJECTION_POLICY_VERSION, apply_directive
from transcript.flagwrite import write_marks
from transcript.model import (
    DirectiveEntry,
    DocumentPart,
    Entry,
    ImagePart,
    MessageMarked,
    ProjectionDirective,
    TextPart,
    ToolResult,
    media_tokens,
)
from transcript.tokens import TokenCounter

if TYPE_CHECKING:
    from transcript.session import Transcript


def micro_compact(transcript: Transcript, plan: MicroPlan) -> list[str]:
    """Apply a plan to its session; returns the ids of the messages now marked truncated."""
    if plan.session_id != transcript.session_id:
        raise ValueError(f"the plan is for session {plan.session_id!r}, not {transcript.session_id!r}")
    if not plan.entries:
        return []
    counter = transcript.store.counter
    marks = []
    for message_id, proposed in group_directives(plan.entries).items():
        entry = transcript.entry(message_id)
        if entry is None:
            raise ValueError(f"the plan names message {message_id!r}, which is not in the session")
        exact = tuple(_counted(entry, item, counter) for item in proposed.entries)
        directive = ProjectionDirective(policy_version=PROJECTION_POLICY_VERSION, entries=exact)
        marks.append(MessageMarked(message_id=message_id, truncated=True, projection=directive))
    write_marks(transcript.store, transcript.session_id, plan.version, marks)
    transcript.refresh()
    return [mark.message_id for mark in marks]


def _counted(entry: Entry, item: DirectiveEntry, counter: TokenCounter) -> DirectiveEntry:
    """The entry with the exact token counts of its target as stored and as rendered."""
    directive = ProjectionDirective(policy_version=PROJECTION_POLICY_VERSION, entries=(item,))
    rendered, _ = apply_directive(entry.message, directive, NEUTRAL)
    index = item.part_index if item.part_index is not None else 0
    before, after = entry.message.parts[index], rendered.parts[index]
    if item.item_index is None or not isinstance(before, ToolResult) or not isinstance(after, ToolResult):
        original = entry.tokens[index]
        rendered_tokens = counter.count(after.text) if isinstance(after, ToolResult) else original
    else:
        old_item = before.content[item.item_index]
        new_item = after.content[item.item_index]
        assert not isinstance(old_item, str) and not isinstance(new_item, str)
        original = (
            media_tokens(old_item)
            if isinstance(old_item, (ImagePart, DocumentPart))
            else counter.count(old_item.text)
        )
        rendered_tokens = counter.count(new_item.text) if isinstance(new_item, TextPart) else original
    return msgspec.structs.replace(item, original_tokens=original, rendered_tokens=rendered_tokens)
