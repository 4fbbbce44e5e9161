"""Marks of a message in a session: `truncated`, `excluded`, and the projection directive it renders by.

A directive freezes the numbers it uses (`keep_head`, `keep_tail`, token counts) when it is written,
so a later config never changes how a stored view renders.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from transcript.model.value import Value

DirectiveTarget: TypeAlias = Literal["message", "part", "tool_call"]
# Directive actions: keep the head and tail of a text; show a media item as a short placeholder;
# keep a text's head, tail and some of its lines (`lines`); show a pointer (`note`) instead of a text a
# later message supersedes. The last two are projection policy 3's.
TRUNCATE: Final = "truncate"
PLACEHOLDER: Final = "placeholder"
EXCERPT: Final = "excerpt"
SUPERSEDE: Final = "supersede"


class DirectiveEntry(Value, frozen=True):
    """One instruction of a projection directive, frozen when written.

    The target is a part of the message (`part_index`), or one item of a tool result's content list
    (`item_index`). `keep_head`/`keep_tail` are copied from the config of the round that wrote it, so
    later config changes never alter how it renders. `original_tokens` and `rendered_tokens` are the
    target's size as stored and as rendered, counted once when the directive was written, so a view's
    size is known without tokenizing at render. An excerpt also keeps the target's lines numbered in
    `lines` (0-based); a supersede shows `note`. Both are frozen like the rest.
    """

    message_id: str
    target: DirectiveTarget
    action: str
    part_index: int | None = None
    item_index: int | None = None
    call_id: str | None = None
    keep_head: int = 0
    keep_tail: int = 0
    original_chars: int = 0
    original_tokens: int = 0
    rendered_tokens: int = 0
    lines: tuple[int, ...] = ()
    note: str = ""


class ProjectionDirective(Value, frozen=True):
    """How one message renders in the model view: a policy version and its entries."""

    policy_version: int
    entries: tuple[DirectiveEntry, ...]


class MessageFlags(Value, frozen=True):
    """The marks of a message in one session: the fold of that session's mark events.

    `retracted`: the session's owner took the message back (an Agents SDK `pop_item`, a cleared
    session); it is excluded too, so no view shows it, and it is no longer part of the owner's history.
    """

    truncated: bool = False
    excluded: bool = False
    projection: ProjectionDirective | None = None
    retracted: bool = False


NO_FLAGS: Final = MessageFlags()
