"""The pure part of a full compaction step: the request, the checkpoint, the summary message.

`prepare_full` plans the cut and the summarizer request from a snapshot. Once the summarizer replied
(outside any transaction, driven by `mutate`), `checkpoint_from` turns the reply into a checkpoint —
the local one when the reply is missing or unreadable — and `summary_message` builds the message that
replaces the excluded history in the view, anchored before the kept tail. Time and ids come from the
caller (`now`, `new_id`), so the same inputs always give the same output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Final, NamedTuple

import msgspec

from planner.config import CompactConfig
from planner.cut import CutPlan, plan_cut
from planner.intent import REDIRECT_MARK, clip_within, task_goal
from planner.summary import (
    ANALYSIS_NOTE,
    NAMES_NOTE,
    SYSTEM_PROMPT,
    LocalSummarizer,
    SummaryRequest,
    clip,
    complete,
    serialized,
)
from transcript.model.checkpoint import (
    Checkpoint,
    CheckpointParseError,
    parse_checkpoint,
    to_json,
    to_markdown,
)
from transcript.model.message import Message, TextPart
from transcript.model.snapshot import Entry, TranscriptSnapshot

CONTINUATION_HINT: Final = (
    "[The earlier history of this session was compacted into this checkpoint. This is a continuation, "
    "not a new task: carry on from the checkpoint and the messages after it.]"
)
# The whole summary when not even an empty checkpoint fits beside the newest step: the view must fit
# (a view over budget cannot be sent); the round's record still carries the checkpoint.
BARE_HINT: Final = "[Earlier history compacted: this is a continuation, not a new task.]"
REINJECT_HEADING: Final = "## Re-injected context"
# The least of the goal `fit` keeps when a checkpoint must shrink (the task's opening survives), unless
# even that leaves the view over budget; below `_GOAL_LEAST_CHARS` a goal is dropped rather than
# clipped, and `_CLIP_NOTE_CHARS` is more than a clipping note ("… [clipped N chars]") adds, so a
# goal clipped to its length less the excess and that always gets shorter.
GOAL_FLOOR_CHARS: Final = 250
_GOAL_LEAST_CHARS: Final = 40
_CLIP_NOTE_CHARS: Final = 30
# How long a summarizer error or a parse error is kept on a round's result, the clipping note included.
ERROR_CHARS: Final = 500
# How short `fit` makes the caller's notes before any item of the checkpoint goes.
_LEAST_NAMES: Final = 4
_LEAST_ANALYSIS_CHARS: Final = 200
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

# A host callback for re-injection: (paths read in the summarized history, the most recent first,
# possibly none; token budget)
# -> (title, content) pairs: current files, skill definitions, anything the model should see again.
# Called after every full step; without one, nothing is re-injected.
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
    keep_tokens: int,
    shown: Callable[[Entry], Message],
    floor_seq: int | None = None,
    building_on: tuple[PreparedFull, Checkpoint] | None = None,
    focus: str = "",
) -> PreparedFull | None:
    """Plan a full step; None when nothing older than the kept window can be summarized.

    The kept window holds `keep_tokens` (none when aggressive) and always everything from
    `floor_seq` on (default: the kept recent steps). `shown` gives a message as the model's view
    shows it (the caller renders; the planner does not): the summarizer is asked about what the
    model saw, shortened results shortened. `building_on` is the round's first step and the
    checkpoint it made, when this (aggressive) step summarizes more: the request then holds only
    what that step kept, on top of that checkpoint.
    """
    keep = 0 if aggressive else keep_tokens
    cut = plan_cut(snapshot, config, keep_recent_tokens=keep, force=force, floor_seq=floor_seq)
    if cut is None:
        return None
    entries = [snapshot.entries[seq] for seq in cut.summarize]
    summarized = [shown(entry) for entry in entries]
    pairs = [(m, e) for m, e in zip(summarized, entries, strict=True) if m.kind != "summary"]
    messages = tuple(m for m, _ in pairs)
    goal_hint = _goal_hint(snapshot, messages)
    checkpoint = previous
    if building_on is not None:
        first, checkpoint = building_on
        # The hint was left out when the whole request held the task; what is left of it may not.
        goal_hint = goal_hint or task_goal(messages)
        pairs = pairs[len(first.request.messages) :]
        messages = messages[len(first.request.messages) :]
    max_tokens = config.summary_tokens(budget_tokens) // (2 if aggressive else 1)
    items = [serialized(m, shown_part_tokens(e)) for m, e in pairs]
    request = SummaryRequest(
        system_prompt=SYSTEM_PROMPT,
        items=tuple(text for text, _ in items),
        item_tokens=tuple(tokens for _, tokens in items),
        messages=messages,
        previous_checkpoint=checkpoint,
        max_output_tokens=max_tokens,
        # The split turn's part before the cut ends the items; the prompt shows it once, on its own.
        prefix_items=min(len(cut.turn_prefix), len(messages)),
        goal_hint=goal_hint,
        list_cap=config.checkpoint_list_cap,
        focus=focus,
    )
    return PreparedFull(
        cut=cut, request=request, previous=previous, aggressive=aggressive, read_paths=_read_paths(summarized)
    )


def shown_part_tokens(entry: Entry) -> tuple[int, ...]:
    """An entry's per-part counts as the view shows it: the stored counts, with what its directive
    shortens at the counts the directive froze."""
    directive = entry.flags.projection
    if directive is None:
        return entry.tokens
    counts = list(entry.tokens)
    for item in directive.entries:
        index = item.part_index
        if index is not None and 0 <= index < len(counts):
            counts[index] = max(0, counts[index] + item.rendered_tokens - item.original_tokens)
    return tuple(counts)


class Reading(msgspec.Struct, frozen=True, kw_only=True):
    """A step's checkpoint as read from the summarizer's reply: whether it fell back to the local
    summarizer, why the reply could not be read (`parse_error`, type and message, bounded), and
    `answer`, the summarizer's output as a model would have sent it (the model's own text, or the
    local summarizer's reply as JSON when no model answered)."""

    checkpoint: Checkpoint
    fallback: bool
    answer: str = ""
    parse_error: str = ""


def checkpoint_from(
    prepared: PreparedFull,
    text: str | None,
    now: datetime,
    *,
    local: Checkpoint | None = None,
    given: str | None = None,
) -> Reading:
    """The step's checkpoint from the model's text, or from the local summarizer's reply when the text
    is missing or unreadable (`local`, when the caller already has it:
    `LocalSummarizer().reply(prepared.request)`). Either reply is completed the same way
    (`planner.summary.complete`: merged into the previous checkpoint, the task kept as the goal, the
    files edited added).

    `given` is a summary the caller wrote instead (`compact(summary=...)`): read in either form, and
    any other text kept whole as the checkpoint's `summary`; it is never clipped here (the view shows
    what fits, the record keeps all of it)."""
    request = prepared.request
    reply: Checkpoint | None = None
    parse_error = ""
    if given is not None:
        try:
            reply = parse_checkpoint(given)
        except CheckpointParseError:
            reply = Checkpoint(summary=given.strip())
        checkpoint = msgspec.structs.replace(
            complete(reply, request),
            generated_at=now,
            source_item_count=len(prepared.cut.summarize),
            split_turn=prepared.cut.split_turn,
        )
        return Reading(checkpoint=checkpoint, fallback=False)
    if text is not None:
        try:
            reply = parse_checkpoint(text)
        except CheckpointParseError as exc:
            parse_error = bounded_error(exc)
    fallback = reply is None
    if reply is None:
        reply = local if local is not None else LocalSummarizer().reply(request)
    checkpoint = msgspec.structs.replace(
        complete(reply, request),
        generated_at=now,
        source_item_count=len(prepared.cut.summarize),
        split_turn=prepared.cut.split_turn,
    )
    return Reading(
        checkpoint=fit(checkpoint, request.max_output_tokens * 4),
        fallback=fallback,
        answer=text if text is not None else to_json(reply),
        parse_error=parse_error,
    )


def bounded_error(error: BaseException) -> str:
    """An error as a result keeps it: its type and message, at most `ERROR_CHARS` characters."""
    return clip_within(f"{type(error).__name__}: {error}", ERROR_CHARS)


def fit(checkpoint: Checkpoint, max_chars: int, *, give_way: bool = False) -> Checkpoint:
    """The checkpoint made to fit `max_chars` of markdown: the oldest items of its longest list dropped
    first, then a caller's summary text clipped (or dropped, when too little of it would be left), then
    its goal clipped (its opening kept), then the oldest files edited dropped (they re-orient the model
    best, so they go last); with `give_way`, when even that is too large, the goal gives way further (a
    view over budget cannot be sent at all), down to the empty checkpoint."""
    floor = max(GOAL_FLOOR_CHARS, max_chars // 4)
    goal_clipped = False
    while (size := len(to_markdown(checkpoint, brief=True))) > max_chars:
        shorter = _shorter_notes(checkpoint)
        if shorter is not None:
            checkpoint = shorter
            continue
        longest = max(_FIT_SECTIONS, key=lambda name: len(getattr(checkpoint, name)))
        if getattr(checkpoint, longest):
            checkpoint = msgspec.structs.replace(checkpoint, **{longest: getattr(checkpoint, longest)[1:]})
        elif checkpoint.summary:
            limit = len(checkpoint.summary) - (size - max_chars) - _CLIP_NOTE_CHARS
            summary = clip(checkpoint.summary, limit) if limit >= _GOAL_LEAST_CHARS else ""
            checkpoint = msgspec.structs.replace(checkpoint, summary=summary)
        elif not goal_clipped:
            checkpoint = msgspec.structs.replace(checkpoint, goal=clip_goal(checkpoint.goal, floor))
            goal_clipped = True
        elif checkpoint.files:
            checkpoint = msgspec.structs.replace(checkpoint, files=checkpoint.files[1:])
        elif give_way and checkpoint.goal:
            # What the clipping note adds is taken off too; a goal too short to say anything goes.
            limit = len(checkpoint.goal) - (size - max_chars) - _CLIP_NOTE_CHARS
            goal = clip_goal(checkpoint.goal, limit) if limit >= _GOAL_LEAST_CHARS else ""
            checkpoint = msgspec.structs.replace(checkpoint, goal=goal)
        else:
            break
    return checkpoint


def _shorter_notes(checkpoint: Checkpoint) -> Checkpoint | None:
    """The checkpoint with the caller's own notes shorter (`planner.summary.context_notes`), before any
    of its items goes: the names note down to its first `_LEAST_NAMES`, then the latest analysis
    clipped to `_LEAST_ANALYSIS_CHARS`; None when they are that short already."""
    items = list(checkpoint.critical_context)
    for index, item in enumerate(items):
        if item.startswith(NAMES_NOTE):
            names = item[len(NAMES_NOTE) :].split(", ")
            if len(names) > _LEAST_NAMES:
                items[index] = NAMES_NOTE + ", ".join(names[: max(_LEAST_NAMES, len(names) // 2)])
                return msgspec.structs.replace(checkpoint, critical_context=tuple(items))
    for index, item in enumerate(items):
        if (
            item.startswith(ANALYSIS_NOTE)
            and len(item) > _LEAST_ANALYSIS_CHARS + len(ANALYSIS_NOTE) + _CLIP_NOTE_CHARS
        ):
            text = item[len(ANALYSIS_NOTE) :]
            items[index] = ANALYSIS_NOTE + clip(text, max(_LEAST_ANALYSIS_CHARS, len(text) // 2))
            return msgspec.structs.replace(checkpoint, critical_context=tuple(items))
    return None


def clip_goal(goal: str, limit: int) -> str:
    """A goal clipped to about `limit` characters: the opening of the task and of the user's latest
    redirect both kept (the redirect is the task now) when that is shorter than the goal, else its
    head; never longer than the goal (a clip that would add more than it takes off is not made)."""
    task, mark, redirect = goal.partition(REDIRECT_MARK)
    if mark and len(goal) > limit:
        both = f"{clip(task, limit // 2)}{mark}{clip(redirect, limit // 2)}"
        if len(both) < len(goal):
            return both
    return min(clip(goal, limit), goal, key=len)


def summary_text(checkpoint: Checkpoint, *, bare: bool = False) -> str:
    """The rendered checkpoint a summary shows the model in place of the history: the continuation
    hint and the checkpoint's brief markdown (`bare`: the short hint alone). A summary adds the files
    re-injected after it (`summary_message`); `CompactResult.summary` is this text."""
    return BARE_HINT if bare else f"{CONTINUATION_HINT}\n\n{to_markdown(checkpoint, brief=True)}"


def summary_message(
    prepared: PreparedFull,
    checkpoint: Checkpoint,
    reinjected: Sequence[tuple[str, str]],
    *,
    message_id: str,
    now: datetime,
    bare: bool = False,
) -> Message:
    """The summary that replaces the excluded history in the view, anchored before the kept tail
    (`bare`: the short hint alone, when the room left shows no checkpoint at all)."""
    text = summary_text(checkpoint, bare=bare)
    if reinjected and not bare:
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


class Reinjected(NamedTuple):
    """What the host's re-injection callback gave (clipped), or why it gave nothing (`error`)."""

    files: list[tuple[str, str]]
    error: str = ""


def reinjected_content(
    prepared: PreparedFull, reinject: Reinject | None, config: CompactConfig, budget_tokens: int
) -> Reinjected:
    """What the host re-injects (current files, skill definitions, ...), clipped to the re-injection
    budget; the host is asked after every full step, with the paths read (possibly none).

    A callback that raises, or returns anything but (title, content) pairs of strings, is an outcome
    of the round like a failing summarizer: the summary goes without re-injected content and the
    error is kept (`CompactResult.reinject_error`).
    """
    if reinject is None:
        return Reinjected([])
    allowance = min(config.reinject_max_tokens, budget_tokens // 10) * 4
    try:
        offered = _pairs(reinject(prepared.read_paths, allowance // 4))
    except Exception as exc:  # the host's code: whatever it raises is the round's outcome
        return Reinjected([], bounded_error(exc))
    chosen: list[tuple[str, str]] = []
    for title, content in offered:
        if allowance <= len(title):
            break
        body = clip(content, allowance - len(title))
        chosen.append((title, body))
        allowance -= len(title) + len(body)
    return Reinjected(chosen)


def _pairs(offered: object) -> list[tuple[str, str]]:
    """The callback's answer as (title, content) pairs of strings; a `TypeError` saying what it was
    instead."""
    if isinstance(offered, (str, bytes, dict)) or not isinstance(offered, Iterable):
        raise TypeError(f"reinject returned {type(offered).__name__}, not a list of (title, content) pairs")
    pairs = []
    for item in offered:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise TypeError(
                f"reinject returned an item that is not a (title, content) pair of strings: {item!r:.80}"
            )
        pairs.append((item[0], item[1]))
    return pairs


def _read_paths(messages: Sequence[Message]) -> tuple[str, ...]:
    """Files the summarized history read, the most recently read first, for re-injection (offered in
    that order, so that under a tight budget the latest reads are the ones kept)."""
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
    return tuple(reversed(paths))


def _goal_hint(snapshot: TranscriptSnapshot, summarized: Sequence[Message]) -> str:
    """The task the user gave, unless the conversation sent to the summarizer already holds the same
    task (said once: the request carries only what is summarised)."""
    goal = task_goal([entry.message for entry in snapshot.entries])
    return "" if goal and goal == task_goal(summarized) else goal
