"""`plan_from_persisted_directives`: the plan the stored directives describe, or why there is none.

The result is `Valid(directives)`, `Absent()` (no directive at all: the canonical view applies) or
`Invalid(code)`. The checks fail closed: a directive from a newer release, an entry that names another
message, or a message marked truncated without a directive is never guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

from projection.render import PROJECTION_POLICY_VERSION, known_versions, policy_for
from transcript.model import DirectiveEntry, Entry, Message, ProjectionDirective

DIRECTIVE_VERSION_MISMATCH: Final = "DIRECTIVE_VERSION_MISMATCH"
DIRECTIVE_ID_MISMATCH: Final = "DIRECTIVE_ID_MISMATCH"
CORRUPTED_PROJECTION: Final = "CORRUPTED_PROJECTION"
RENDER_FAILED: Final = "RENDER_FAILED"
PROJECTION_REBUILT: Final = "PROJECTION_REBUILT"
PENDING_TOOL_CALLS: Final = "PENDING_TOOL_CALLS"
MARK_UNREADABLE: Final = "MARK_UNREADABLE"


class Valid(msgspec.Struct, frozen=True):
    """Every stored directive can be rendered; `directives` maps message id to its directive."""

    directives: Mapping[str, ProjectionDirective]


class Absent(msgspec.Struct, frozen=True):
    """No visible message has a directive."""


class Invalid(msgspec.Struct, frozen=True, kw_only=True):
    """A stored directive cannot be trusted; `code` says why and `message_id` where."""

    code: str
    message_id: str
    detail: str


PersistedPlan: TypeAlias = Valid | Absent | Invalid


def check_entry(entry: Entry) -> Invalid | None:
    """Whether one message's stored directive can be rendered (excluded messages are ignored)."""
    flags = entry.flags
    if flags.excluded:
        return None
    message_id = entry.message.id
    directive = flags.projection
    if directive is None:
        if flags.truncated:
            return Invalid(
                code=CORRUPTED_PROJECTION,
                message_id=message_id,
                detail="marked truncated but has no directive",
            )
        return None
    if directive.policy_version not in known_versions():
        return Invalid(
            code=DIRECTIVE_VERSION_MISMATCH,
            message_id=message_id,
            detail=f"policy version {directive.policy_version} is unknown here (a newer release wrote it)",
        )
    for item in directive.entries:
        if item.message_id != message_id:
            return Invalid(
                code=DIRECTIVE_ID_MISMATCH,
                message_id=message_id,
                detail=f"a directive entry names message {item.message_id!r}",
            )
    return None


def plan_from_persisted_directives(entries: Sequence[Entry]) -> PersistedPlan:
    """The plan the stored directives of these entries describe (see the module docstring)."""
    directives: dict[str, ProjectionDirective] = {}
    for entry in entries:
        problem = check_entry(entry)
        if problem is not None:
            return problem
        if not entry.flags.excluded and entry.flags.projection is not None:
            directives[entry.message.id] = entry.flags.projection
    return Valid(directives) if directives else Absent()


def group_directives(
    entries: Sequence[DirectiveEntry],
    policy_version: int = PROJECTION_POLICY_VERSION,
    *,
    messages: Mapping[str, Message] | None = None,
) -> dict[str, ProjectionDirective]:
    """One directive per message from plan entries, keeping their order.

    With `messages` (by id), each directive gets the policy its entries need (`policy_for`).
    """
    grouped: dict[str, list[DirectiveEntry]] = {}
    for entry in entries:
        grouped.setdefault(entry.message_id, []).append(entry)
    return {
        message_id: ProjectionDirective(
            policy_version=policy_version
            if messages is None or message_id not in messages
            else policy_for(messages[message_id], items),
            entries=tuple(items),
        )
        for message_id, items in grouped.items()
    }
