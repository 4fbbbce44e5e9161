"""The micro step as pure functions: a micro plan's entries become marks with exact token counts.

This is the only code that sets `truncated`. Each message gets one directive holding every entry that
targets it, with the exact token counts of the target as stored and as rendered (counted here, once,
with the counter the caller injects, so no later render ever tokenizes). What the marks do to the
view's size is computed from the same renderer the view uses, for the k messages they touch only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from planner.config import CompactConfig
from planner.micro import MicroPlan, plan_micro, with_entries
from projection.caps import NEUTRAL, ProviderCaps
from projection.directives import group_directives
from projection.render import (
    PROJECTION_POLICY_VERSION,
    RenderError,
    apply_directive,
    policy_for,
    render_entry,
)
from transcript.model.errors import ConflictError, InvalidMessage
from transcript.model.events import MessageMarked, apply_mark
from transcript.model.marks import DirectiveEntry, ProjectionDirective
from transcript.model.message import DocumentPart, ImagePart, Message, TextPart, ToolResult, media_tokens
from transcript.model.order import canonical_order
from transcript.model.snapshot import Entry, TranscriptSnapshot

CountText = Callable[[str], int]


def micro_marks(snapshot: TranscriptSnapshot, plan: MicroPlan, count: CountText) -> list[MessageMarked]:
    """The marks that apply `plan` to `snapshot`: one directive per message, exact counts.

    Raises `ConflictError` when the plan was made from another version of the session, and
    `InvalidMessage` when it names a message the session does not hold.
    """
    if plan.session_id != snapshot.session_id or plan.version != snapshot.version:
        raise ConflictError(
            f"the plan is for session {plan.session_id!r} at version {plan.version}, not "
            f"{snapshot.session_id!r} at {snapshot.version}; nothing was written (plan again)"
        )
    marks = []
    seqs = plan.seqs()
    for message_id, proposed in group_directives(plan.entries).items():
        entry = _entry(snapshot, message_id, seqs.get(message_id))
        version = policy_for(entry.message, proposed.entries)
        exact = tuple(_counted(entry, item, count, version) for item in proposed.entries)
        directive = ProjectionDirective(policy_version=version, entries=exact)
        marks.append(MessageMarked(message_id=message_id, truncated=True, projection=directive))
    return marks


def view_delta(
    snapshot: TranscriptSnapshot, plan: MicroPlan, marks: Sequence[MessageMarked], caps: ProviderCaps
) -> int:
    """How many tokens the view gains (negative: loses) when these marks of `plan` are applied."""
    delta = 0
    seqs = plan.seqs()
    for mark in marks:
        before = _entry(snapshot, mark.message_id, seqs.get(mark.message_id))
        if before.flags.excluded:
            continue
        after = msgspec.structs.replace(before, flags=apply_mark(before.flags, mark))
        delta += _rendered_tokens(after, caps) - _rendered_tokens(before, caps)
    return delta


def view_token_count(entries: Sequence[Entry], caps: ProviderCaps) -> int:
    """The tokens of the whole view of these entries, as the view renders them (a whole render)."""
    return sum(_rendered_tokens(entry, caps) for entry in canonical_order(entries))


def marked(
    snapshot: TranscriptSnapshot, plan: MicroPlan, marks: Sequence[MessageMarked], version: int
) -> TranscriptSnapshot:
    """The snapshot after these marks of `plan` were written as the events up to `version`."""
    changed: dict[int, Entry] = {}
    seqs = plan.seqs()
    for mark in marks:
        entry = _entry(snapshot, mark.message_id, seqs.get(mark.message_id))
        current = changed.get(entry.seq, entry)
        changed[entry.seq] = msgspec.structs.replace(current, flags=apply_mark(current.flags, mark))
    return with_entries(snapshot, changed, version=version)


def _entry(snapshot: TranscriptSnapshot, message_id: str, seq: int | None = None) -> Entry:
    """The entry of a message, found at `seq` when the plan knows it (else by a scan)."""
    entries = snapshot.entries
    if seq is not None and 0 <= seq < len(entries) and entries[seq].message.id == message_id:
        return entries[seq]
    for entry in entries:
        if entry.message.id == message_id:
            return entry
    raise InvalidMessage(f"the plan names message {message_id!r}, which is not in the session")


def shown_message(entry: Entry, caps: ProviderCaps) -> Message:
    """A message as the view shows it under its directive (as stored when that cannot render)."""
    if entry.flags.projection is None:
        return entry.message
    try:
        return render_entry(entry, entry.flags.projection, caps)[0]
    except RenderError:
        return entry.message


def _rendered_tokens(entry: Entry, caps: ProviderCaps) -> int:
    try:
        return render_entry(entry, entry.flags.projection, caps)[1]
    except RenderError:  # a directive that cannot render: the view shows the stored message
        return render_entry(entry, None, caps)[1]


def repair_marks(
    snapshot: TranscriptSnapshot, unusable: Sequence[str], config: CompactConfig, count: CountText
) -> list[MessageMarked]:
    """Marks that supersede stored directives the view cannot use, planned again from the stored
    bodies (what is no longer eligible gets a directive that shows it whole)."""
    wanted = set(unusable)
    fresh = plan_micro(snapshot, config, skip_existing_truncated=False)
    entries = tuple(e for e in fresh.entries if e.message_id in wanted)
    plan = msgspec.structs.replace(
        fresh,
        entries=entries,
        positions=tuple((name, seq) for name, seq in fresh.positions if name in wanted),
        estimated_saved_tokens=0,
    )
    marks = [msgspec.structs.replace(mark, supersedes=True) for mark in micro_marks(snapshot, plan, count)]
    planned = {mark.message_id for mark in marks}
    whole = ProjectionDirective(policy_version=PROJECTION_POLICY_VERSION, entries=())
    for message_id in unusable:
        entry = _entry(snapshot, message_id)
        if message_id not in planned and not entry.flags.excluded:
            marks.append(
                MessageMarked(message_id=message_id, truncated=True, projection=whole, supersedes=True)
            )
    return marks


def _counted(entry: Entry, item: DirectiveEntry, count: CountText, version: int) -> DirectiveEntry:
    """The entry with the exact token counts of its target as stored and as rendered."""
    directive = ProjectionDirective(policy_version=version, entries=(item,))
    rendered, _ = apply_directive(entry.message, directive, NEUTRAL)
    index = item.part_index if item.part_index is not None else 0
    before, after = entry.message.parts[index], rendered.parts[index]
    if item.item_index is None or not isinstance(before, ToolResult) or not isinstance(after, ToolResult):
        original = entry.tokens[index]
        rendered_tokens = count(after.text) if isinstance(after, (ToolResult, TextPart)) else original
    else:
        old_item = before.content[item.item_index]
        new_item = after.content[item.item_index]
        assert not isinstance(old_item, str) and not isinstance(new_item, str)
        original = (
            media_tokens(old_item)
            if isinstance(old_item, (ImagePart, DocumentPart))
            else count(old_item.text)
        )
        rendered_tokens = count(new_item.text) if isinstance(new_item, TextPart) else original
    return msgspec.structs.replace(item, original_tokens=original, rendered_tokens=rendered_tokens)
