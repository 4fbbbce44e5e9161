"""Summarizers: the small protocol full compaction calls, and the deterministic local summarizer.

A summarizer is any callable `summarize(request: SummaryRequest) -> str` (or an async one returning
an awaitable of `str`). It replies with the checkpoint as a JSON object or in the `## Goal` markdown
form (`transcript.model.checkpoint`); a reply that does not parse makes the round fall back to the
local summarizer and keeps the parse error on the round's result. It signals a prompt that is too
long by raising `PromptTooLong`; errors whose message says so ("prompt too long", "context length",
HTTP 413, ...) are recognised too. The local summarizer needs no model: it builds the checkpoint from
the messages themselves (the task the user gave and its redirects, the user's answers and
constraints, recent key items, tool errors, approval blocks, the files edited or created), merged
into the previous one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from typing import Final, Protocol

import msgspec

from planner.intent import answers_of, clip as clip, constraints_of, edited_files, goal_of, requests
from transcript.model import Message, TextPart, ToolCall, ToolResult
from transcript.model.checkpoint import CHECKPOINT_JSON_SCHEMA_HINT, LIST_CAP, Checkpoint, merge, to_json
from transcript.model.errors import PromptTooLong

ITEM_CLIP_CHARS: Final = 2_000
ARGUMENT_CLIP_CHARS: Final = 500
GOAL_CLIP_CHARS: Final = 1_000
SYSTEM_PROMPT: Final = (
    "You maintain the checkpoint of a long coding-agent session whose older history is being "
    "replaced by a summary. Read the conversation (and the previous checkpoint, if any) and return the "
    "updated checkpoint as JSON with the keys goal, constraints, done, in_progress, blocked, "
    "key_decisions, next_steps, critical_context, process_snapshots, files (lists of short strings; goal "
    "is a string). The goal is the task the user gave, in their words, not the latest message. Keep "
    "file paths, commands, error messages and decisions exactly. Do not invent work."
)
_TOO_LONG: Final = re.compile(
    r"prompt (is )?too long|context (length|window)|maximum context|too many (input )?tokens|"
    r"request too large|\b413\b",
    re.IGNORECASE,
)
_APPROVAL: Final = re.compile(
    r"denied|rejected|not allowed|permission|doesn't want to proceed|user declined", re.IGNORECASE
)
# The notes the local summarizer writes itself; a later checkpoint replaces them instead of adding more.
_SPLIT_NOTE: Final = "the current turn continues past this checkpoint; it began: "
_FILES_NOTE: Final = "files touched: "


def is_prompt_too_long(error: BaseException) -> bool:
    """Whether an error from a summarizer means the prompt was too long (by type or by message)."""
    return isinstance(error, PromptTooLong) or bool(_TOO_LONG.search(str(error)))


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a summarizer is asked: the serialized conversation, the previous checkpoint, a size limit.

    `items` is the conversation to summarize, one serialized message per item; `messages` are the same
    messages as values, for summarizers that work on structure rather than text. When the cut fell
    inside a turn, the last `prefix_items` items are that turn's part before the cut: a text prompt
    shows them once, in their own section, to be summarised on their own as work in progress
    (`conversation` joins the items before them, `turn_part` the turn's). `goal_hint` is the
    task the user gave (their first request and latest redirect, read from the whole session);
    `list_cap` bounds every list of the checkpoint.
    """

    system_prompt: str
    items: tuple[str, ...]
    previous_checkpoint: Checkpoint | None
    max_output_tokens: int
    goal_hint: str = ""
    messages: tuple[Message, ...] = ()
    prefix_items: int = 0
    list_cap: int = LIST_CAP

    @property
    def conversation(self) -> str:
        """The messages to summarize before the split turn's part, serialized, oldest first."""
        return "\n\n".join(self.items[: len(self.items) - self.prefix_items])

    @property
    def turn_part(self) -> str:
        """The split turn's part before the cut, serialized ("" when the cut split no turn)."""
        if self.prefix_items:
            return "\n\n".join(self.items[-self.prefix_items :])
        return ""

    def without_oldest_quarter(self) -> SummaryRequest:
        """The same request with the oldest quarter of its items dropped (at least one)."""
        drop = max(1, len(self.items) // 4)
        items = self.items[drop:]
        return msgspec.structs.replace(
            self, items=items, messages=self.messages[drop:], prefix_items=min(self.prefix_items, len(items))
        )


class Summarizer(Protocol):
    """Turns a request into checkpoint text (JSON or markdown); may be sync or async."""

    def __call__(self, request: SummaryRequest, /) -> str | Awaitable[str]: ...


def prompt_text(request: SummaryRequest) -> str:
    """The user prompt a text model summarizer sends: previous checkpoint, split-turn prefix, history."""
    size = f"Return the checkpoint as JSON, at most about {request.max_output_tokens} tokens."
    sections = [f"{size}\n{CHECKPOINT_JSON_SCHEMA_HINT}"]
    if request.previous_checkpoint is not None:
        sections.append(
            f"Previous checkpoint (update it with what follows):\n{to_json(request.previous_checkpoint)}"
        )
    previous_goal = request.previous_checkpoint.goal if request.previous_checkpoint is not None else ""
    hint = request.goal_hint.strip()
    if hint and previous_goal.strip() not in (hint, clip(hint, GOAL_CLIP_CHARS)):
        # Said once: a goal the previous checkpoint already holds is not repeated.
        sections.append(
            f"The task the user gave (keep it in the goal): {clip(request.goal_hint, ITEM_CLIP_CHARS)}"
        )
    sections.append(f"Conversation to summarize, oldest first:\n{request.conversation}")
    if request.turn_part:
        sections.append(
            "The current turn began before the cut and continues after it. Summarise its part before the "
            "cut on its own, as work in progress (in_progress), not as finished work:\n"
            f"{request.turn_part}"
        )
    return "\n\n".join(sections)


def serialize(message: Message) -> str:
    """One message as summarizer input: role, tool names and arguments kept, long items clipped."""
    lines: list[str] = []
    label = message.role if message.kind == "message" else f"{message.role}:{message.kind}"
    for part in message.parts:
        if isinstance(part, TextPart):
            lines.append(f"[{label}] {clip(part.text, ITEM_CLIP_CHARS)}")
        elif isinstance(part, ToolCall):
            lines.append(f"[{label} → {part.name}] {clip(part.arguments, ARGUMENT_CLIP_CHARS)}")
        elif isinstance(part, ToolResult):
            status = " (error)" if part.is_error else ""
            lines.append(f"[tool {part.name or part.call_id}{status}] {clip(part.text, ITEM_CLIP_CHARS)}")
        else:
            lines.append(f"[{label}: {part.kind}]")
    return "\n".join(lines)


class LocalSummarizer:
    """The deterministic, model-free summarizer; also the fallback when a model summarizer fails.

    It reads `request.messages`, so it always sees the whole delta (a model's text prompt may have
    been shortened by prompt-too-long retries).
    """

    def __init__(self, *, recent_items: int = 8, item_chars: int = 200) -> None:
        self.recent_items = recent_items
        self.item_chars = item_chars

    def checkpoint(self, request: SummaryRequest) -> Checkpoint:
        """The checkpoint this summarizer would return, as a value.

        The goal is the task the user gave (`request.goal_hint`, else the first request of the
        messages, see `planner.intent`); the user's answers become decisions and the sentences of
        their requests that set limits constraints; `files` names every file edited or created.
        Merged into the previous checkpoint (each list capped at `request.list_cap`), its own
        split-turn note is replaced, not repeated.
        """
        messages = request.messages
        said = [m.text.strip().splitlines()[0] for m in messages if m.role == "assistant" and m.text.strip()]
        errors, approvals = self._errors(messages)
        found = list(requests(messages))  # the user's requests, read once for the goal, constraints, answers
        task = request.goal_hint or None
        previous = request.previous_checkpoint
        if previous is not None:
            previous = msgspec.structs.replace(
                previous,
                in_progress=tuple(i for i in previous.in_progress if not i.startswith(_SPLIT_NOTE)),
                # The note earlier releases kept instead of `files` (it named read files too).
                critical_context=tuple(i for i in previous.critical_context if not i.startswith(_FILES_NOTE)),
            )
        delta = Checkpoint(
            goal=clip(request.goal_hint or goal_of(found), GOAL_CLIP_CHARS),
            constraints=tuple(constraints_of(found, task=task)),
            done=tuple(clip(item, self.item_chars) for item in said[-self.recent_items :]),
            in_progress=(self._split_turn(request),) if request.turn_part else (),
            blocked=tuple(approvals[-self.recent_items :]) + tuple(errors[-self.recent_items :]),
            key_decisions=tuple(answers_of(found, task=task)[-self.recent_items :]),
            files=tuple(edited_files(messages)),
            source_item_count=len(messages),
        )
        cap = max(request.list_cap, 1)
        return merge(previous if previous is not None else Checkpoint(), delta, cap=cap)

    def __call__(self, request: SummaryRequest, /) -> str:
        return to_json(self.checkpoint(request))

    def _split_turn(self, request: SummaryRequest) -> str:
        part = request.turn_part.strip()
        first = part.splitlines()[0] if part else ""
        return f"{_SPLIT_NOTE}{clip(first, self.item_chars)}"

    def _errors(self, messages: Sequence[Message]) -> tuple[list[str], list[str]]:
        errors: list[str] = []
        approvals: list[str] = []
        for message in messages:
            for result in message.tool_results:
                if not result.is_error:
                    continue
                line = clip((result.text.strip().splitlines() or [""])[0], self.item_chars)
                item = f"{result.name or 'tool'} failed: {line}"
                (approvals if _APPROVAL.search(result.text) else errors).append(item)
        return errors, approvals
