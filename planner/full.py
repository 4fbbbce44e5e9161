"""The pure part of a full compaction step: the request, the checkpoint, the summary message.

`prepare_full` plans the cut and the summarizer request from a snapshot. Once the summarizer replied
(outside any transaction, driven by `mutate`), `checkpoint_from` turns the reply into a checkpoint —
the local one when the reply is missing or unreadable — and `summary_message` builds the message that
replaces the excluded history in the view, anchored before the kept tail. Time and ids come from the
caller (`now`, `new_id`), so the same inputs always give the same output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import msgspec

from planner.config import CompactConfig
from planner.cut import CutPlan, plan_cut
from planner.summary import SYSTEM_PROMPT, LocalSummarizer, SummaryRequest, clip, latest_goal, serialize
from transcript.model.checkpoint import Checkpoint, CheckpointParseError, parse_checkpoint, to_markdown
from transcript.model.message import Message, TextPart
from transcript.model.snapshot import Entry, TranscriptSnapshot

CONTINUATION_HINT: Final = (
    "[This session continues earlier work. Its older history was compacted into the checkpoint below to "
    "save context. This is a continuation, not a new task: carry on from the checkpoint and the messages "
    "that follow it.]"
)
REINJECT_HEADING: Final = "## Current content of recently read files"
# How much of the message that opened a split turn the request repeats (the rest is among its items).
TURN_OPENING_CHARS: Final = 300
# The list sections `fit` drops items from, oldest first, when a checkpoint is too large.
_FIT_SECTIONS: Final = (
    "process_snapshots",
    "key_decisions",
    "done",
    "critical_context",
    "blocked",
    "next_steps",
    "in_progress",
    "constraints",
)

# A host callback for re-injection: (paths read in the summarized history, token budget) ->
# (title, current content) pairs. Without one, nothing is re-injected.
Reinject = Callable[[Sequence[str], int], Sequence[tuple[str, str]]]


class PreparedFull(msgspec.Struct, frozen=True, kw_only=True):
    """A planned full step: the cut, the request for the summarizer, and what it builds on."""

    cut: CutPlan
    request: SummaryRequest
    previous: Checkpoint | None
    aggressive: bool
    read_paths: tuple[str, ...]


def prepare_full(
    snapshot: TranscriptSnapshot,
    config: CompactConfig,
    *,
    previous: Checkpoint | None,
    budget_tokens: int,
    force: bool,
    aggressive: bool,
    keep_tokens: int | None = None,
    floor_seq: int | None = None,
    shown: Callable[[Entry], Message] | None = None,
) -> PreparedFull | None:
    """Plan a full step; None when nothing older than the kept window can be summarized.

    The kept window holds `keep_tokens` (default `config.kept_tokens`; none when aggressive) and
    always everything from `floor_seq` on (default: the kept recent steps). `shown` gives a message as
    the model's view shows it (the caller renders; the planner does not): the summarizer is asked
    about what the model saw, shortened results shortened. Without it, the stored bodies.
    """
    keep = config.kept_tokens(budget_tokens) if keep_tokens is None else keep_tokens
    if aggressive:
        keep = 0
    cut = plan_cut(snapshot, config, keep_recent_tokens=keep, force=force, floor_seq=floor_seq)
    if cut is None:
        return None
    by_seq = snapshot.entries
    summarized = [by_seq[seq].message if shown is None else shown(by_seq[seq]) for seq in cut.summarize]
    prefix = [by_seq[seq].message for seq in cut.turn_prefix]
    max_tokens = config.summary_tokens(budget_tokens) // (2 if aggressive else 1)
    request = SummaryRequest(
        system_prompt=SYSTEM_PROMPT,
        items=tuple(serialize(m) for m in summarized if m.kind != "summary"),
        messages=tuple(m for m in summarized if m.kind != "summary"),
        previous_checkpoint=previous,
        max_output_tokens=max_tokens,
        # The turn's messages before the cut are the end of `items`: naming its opening message is
        # enough (repeating them all doubled what a summarizer is sent).
        turn_prefix=clip(serialize(prefix[0]), TURN_OPENING_CHARS) if prefix else "",
        goal_hint=_goal_hint(snapshot, summarized),
    )
    return PreparedFull(
        cut=cut, request=request, previous=previous, aggressive=aggressive, read_paths=_read_paths(summarized)
    )


def building_on(aggressive: PreparedFull, first: PreparedFull, checkpoint: Checkpoint) -> PreparedFull:
    """The aggressive step's request: only what the first step kept, on top of the first checkpoint."""
    already = len(first.request.messages)
    request = msgspec.structs.replace(
        aggressive.request,
        items=aggressive.request.items[already:],
        messages=aggressive.request.messages[already:],
        previous_checkpoint=checkpoint,
    )
    return msgspec.structs.replace(aggressive, request=request, previous=first.previous)


def checkpoint_from(prepared: PreparedFull, text: str | None, now: datetime) -> tuple[Checkpoint, bool]:
    """The step's checkpoint from the model's text, or the local fallback; and whether it fell back."""
    fallback = text is None
    checkpoint: Checkpoint | None = None
    if text is not None:
        try:
            checkpoint = parse_checkpoint(text)
        except CheckpointParseError:
            fallback = True
    if checkpoint is None:
        checkpoint = LocalSummarizer().checkpoint(prepared.request)
    checkpoint = msgspec.structs.replace(
        checkpoint,
        generated_at=now,
        source_item_count=len(prepared.cut.summarize),
        split_turn=prepared.cut.split_turn,
    )
    return fit(checkpoint, prepared.request.max_output_tokens * 4), fallback


def fit(checkpoint: Checkpoint, max_chars: int) -> Checkpoint:
    """The checkpoint with its oldest list items dropped until its markdown fits `max_chars`."""
    while len(to_markdown(checkpoint)) > max_chars:
        longest = max(_FIT_SECTIONS, key=lambda name: len(getattr(checkpoint, name)))
        items = getattr(checkpoint, longest)
        if not items:
            return msgspec.structs.replace(checkpoint, goal=clip(checkpoint.goal, max(100, max_chars // 4)))
        checkpoint = msgspec.structs.replace(checkpoint, **{longest: items[1:]})
    return checkpoint


def summary_message(
    prepared: PreparedFull,
    checkpoint: Checkpoint,
    reinjected: Sequence[tuple[str, str]],
    *,
    message_id: str,
    now: datetime,
) -> Message:
    """The summary that replaces the excluded history in the view, anchored before the kept tail."""
    text = f"{CONTINUATION_HINT}\n\n{to_markdown(checkpoint)}"
    if reinjected:
        files = "\n\n".join(f"### {title}\n```\n{content}\n```" for title, content in reinjected)
        text = f"{text}\n\n{REINJECT_HEADING}\n\n{files}"
    return Message(
        id=message_id,
        role="user",
        kind="summary",
        anchor=prepared.cut.anchor_id,
        parts=(TextPart(text=text),),
        created_at=now,
    )


def reinjected_content(
    prepared: PreparedFull, reinject: Reinject | None, config: CompactConfig, budget_tokens: int
) -> list[tuple[str, str]]:
    """Current content of recently read files from the host, clipped to the re-injection budget."""
    if reinject is None or not prepared.read_paths:
        return []
    allowance = min(config.reinject_max_tokens, budget_tokens // 10) * 4
    chosen: list[tuple[str, str]] = []
    for title, content in reinject(prepared.read_paths, allowance // 4):
        if allowance <= len(title):
            break
        body = clip(content, allowance - len(title))
        chosen.append((title, body))
        allowance -= len(title) + len(body)
    return chosen


def _read_paths(messages: Sequence[Message]) -> tuple[str, ...]:
    """Files the summarized history read (most recent last), for re-injection."""
    paths: dict[str, None] = {}
    for message in messages:
        for call in message.tool_calls:
            if call.name.casefold() in ("read", "view", "open_file", "str_replace_editor") and isinstance(
                call.input, dict
            ):
                path = call.input.get("file_path") or call.input.get("path")
                if isinstance(path, str):
                    paths.pop(path, None)
                    paths[path] = None
    return tuple(paths)


def _goal_hint(snapshot: TranscriptSnapshot, summarized: Sequence[Message]) -> str:
    """The user's latest goal, unless the conversation sent to the summarizer already ends with it
    as its latest goal (said once: the request carries only what is summarised)."""
    goal = latest_goal([entry.message for entry in snapshot.entries])
    return "" if goal and goal == latest_goal(list(summarized)) else goal
