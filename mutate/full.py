"""Full compaction: the only writer of `excluded` and of summary messages.

A step has three phases. `prepare_full` plans the cut and the summarizer request from a snapshot
(pure). The summarizer then runs outside any transaction. `commit_full` builds the summary message —
a continuation hint and the rendered checkpoint, anchored before the kept tail — and writes the
exclusions, the summary and the round's result record in one transaction, checked against the version
the step was planned from: a lost race is a `ConflictError` with nothing written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import msgspec

from planner.config import CompactConfig
from planner.cut import CutPlan, plan_cut
from transcript.checkpoint import Checkpoint, CheckpointParseError, parse_checkpoint, to_markdown
from transcript.flagwrite import WritableEvent, write_events
from transcript.model import (
    CompactionRecorded,
    Message,
    MessageAppended,
    MessageMarked,
    TextPart,
    new_message_id,
)
from transcript.results import CompactResult
from transcript.store import PreparedMessage
from transcript.summary import SYSTEM_PROMPT, LocalSummarizer, SummaryRequest, clip, latest_goal, serialize

if TYPE_CHECKING:
    from transcript.session import Transcript

CONTINUATION_HINT: Final = (
    "[This session continues earlier work. Its older history was compacted into the checkpoint below to "
    "save context. This is a continuation, not a new task: carry on from the checkpoint and the messages "
    "that follow it.]"
)
REINJECT_HEADING: Final = "## Current content of recently read files"

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
    transcript: Transcript, config: CompactConfig, *, budget_tokens: int, force: bool, aggressive: bool
) -> PreparedFull | None:
    """Plan a full step; None when nothing older than the kept window can be summarized."""
    snapshot = transcript.messages()
    keep = 0 if aggressive else config.kept_tokens(budget_tokens)
    cut = plan_cut(snapshot, config, keep_recent_tokens=keep, force=force)
    if cut is None:
        return None
    by_seq = snapshot.entries
    summarized = [by_seq[seq].message for seq in cut.summarize]
    prefix = [by_seq[seq].message for seq in cut.turn_prefix]
    previous = transcript.latest_checkpoint()
    max_tokens = config.summary_tokens(budget_tokens) // (2 if aggressive else 1)
    request = SummaryRequest(
        system_prompt=SYSTEM_PROMPT,
        items=tuple(serialize(m) for m in summarized if m.kind != "summary"),
        messages=tuple(m for m in summarized if m.kind != "summary"),
        previous_checkpoint=previous,
        max_output_tokens=max_tokens,
        turn_prefix="\n\n".join(serialize(m) for m in prefix),
        goal_hint=latest_goal([entry.message for entry in snapshot.entries]),
    )
    return PreparedFull(
        cut=cut, request=request, previous=previous, aggressive=aggressive, read_paths=_read_paths(summarized)
    )


def checkpoint_from(prepared: PreparedFull, text: str | None) -> tuple[Checkpoint, bool]:
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
        generated_at=datetime.now(UTC),
        source_item_count=len(prepared.cut.summarize),
        split_turn=prepared.cut.split_turn,
    )
    return fit(checkpoint, prepared.request.max_output_tokens * 4), fallback


def fit(checkpoint: Checkpoint, max_chars: int) -> Checkpoint:
    """The checkpoint with its oldest list items dropped until its markdown fits `max_chars`."""
    sections = (
        "process_snapshots",
        "key_decisions",
        "done",
        "critical_context",
        "blocked",
        "next_steps",
        "in_progress",
        "constraints",
    )
    while len(to_markdown(checkpoint)) > max_chars:
        longest = max(sections, key=lambda name: len(getattr(checkpoint, name)))
        items = getattr(checkpoint, longest)
        if not items:
            return msgspec.structs.replace(checkpoint, goal=clip(checkpoint.goal, max(100, max_chars // 4)))
        checkpoint = msgspec.structs.replace(checkpoint, **{longest: items[1:]})
    return checkpoint


def summary_message(
    prepared: PreparedFull, checkpoint: Checkpoint, reinjected: Sequence[tuple[str, str]]
) -> Message:
    """The summary that replaces the excluded history in the view, anchored before the kept tail."""
    text = f"{CONTINUATION_HINT}\n\n{to_markdown(checkpoint)}"
    if reinjected:
        files = "\n\n".join(f"### {title}\n```\n{content}\n```" for title, content in reinjected)
        text = f"{text}\n\n{REINJECT_HEADING}\n\n{files}"
    return Message(
        id=new_message_id(),
        role="user",
        kind="summary",
        anchor=prepared.cut.anchor_id,
        parts=(TextPart(text=text),),
        created_at=datetime.now(UTC),
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


def commit_full(
    transcript: Transcript, prepared: PreparedFull, body: PreparedMessage, result: CompactResult
) -> int:
    """Write exclusions, the summary and the result record in one transaction; returns the version."""
    cut = prepared.cut
    marks = [MessageMarked(message_id=message_id, excluded=True) for message_id in cut.summarize_ids]
    appended = MessageAppended(seq=cut.next_seq, message_id=body.message.id, body_hash=body.hash)
    recorded = msgspec.structs.replace(result, version=cut.version + len(marks) + 2)
    events: list[WritableEvent] = [*marks, appended, CompactionRecorded(result=recorded)]
    version = write_events(
        transcript.store, transcript.session_id, cut.version, events, {body.message.id: body}
    )
    transcript.refresh()
    return version


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
