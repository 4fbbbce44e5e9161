"""Summarizers: the small protocol full compaction calls, and the deterministic local summarizer.

A summarizer is any callable `summarize(request: SummaryRequest) -> str` (or an async one returning
an awaitable of `str`). It is asked (`prompt_text`) for only what the summarized messages add to the
previous checkpoint, as a JSON object or in the `## Goal` markdown form
(`transcript.model.checkpoint`); `complete` turns any reply into the checkpoint: merged into the
previous one, the task the user gave as its goal, the files edit tools named added. A reply that
does not parse makes the round fall back to the local summarizer and keeps the parse error on the
round's result. A summarizer signals a prompt that is too long by raising `PromptTooLong`; errors
whose message says so ("prompt too long", "context length", HTTP 413, ...) are recognised too. The
local summarizer needs no model: its `reply` reads the messages themselves (the user's answers and
constraints, recent key items, tool errors, approval blocks) and is completed like a model's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol

import msgspec

from planner.facts import named_facts
from planner.intent import (
    answers_of,
    clip as clip,
    constraints_of,
    edited_files,
    normalize,
    requests,
    task_goal,
)
from planner.outcomes import (
    TODO_TOOLS,
    Step,
    failure,
    latest_analysis,
    matches,
    outcome,
    plan_sentences,
    same_subject,
    steps,
    subject_of,
    todos,
    unresolved,
)
from transcript.model import DocumentPart, ImagePart, Message, TextPart, ToolCall, ToolResult, media_tokens
from transcript.model.checkpoint import LIST_CAP, Checkpoint, merge, to_json
from transcript.model.errors import PromptTooLong

ITEM_CLIP_CHARS: Final = 2_000
# How much of the task a request repeats when the conversation it summarizes does not hold it.
TASK_CLIP_CHARS: Final = 600
ARGUMENT_CLIP_CHARS: Final = 500
SYSTEM_PROMPT: Final = (
    "You keep the checkpoint of a long coding-agent session whose older history is being replaced by "
    "a summary. Read the conversation and reply with what it adds to the checkpoint. Keep file paths, "
    "commands, error messages and decisions exactly. Do not invent work."
)
# The lists a reply may give, with what each holds (the prompt's shape of a reply).
REPLY_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("constraints", "requirements and limits the user set"),
    ("done", "work that is finished"),
    ("in_progress", "work started and not finished"),
    ("blocked", "what is blocked, and on what"),
    ("key_decisions", "decisions taken, and why"),
    ("next_steps", "what to do next, in order"),
    ("critical_context", "facts the work depends on: paths, names, commands, errors, values"),
    ("process_snapshots", "state of running processes, servers and jobs"),
    ("files", "files edited or created by commands (those an edit tool's call names are added for you)"),
)
# How much of a model's goal must be the task's text for the goal to count as restating the task.
_GOAL_HEAD: Final = 200
# Between the task and a model's own goal when that goal lost the task.
CURRENT_AIM: Final = "\n\nCurrent aim: "
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
# The headings of the prompt's history sections.
_CONVERSATION: Final = "Conversation to summarize, oldest first:\n"
_TURN_PART: Final = (
    "The current turn began before the cut and continues after it. Summarise its part before the "
    "cut on its own, as work in progress (in_progress), not as finished work:\n"
)
# What an item's label ("[tool Bash] ") and a clipping note add, in tokens: estimates for pricing a
# request from stored counts (`item_tokens`), never tokenized.
_LABEL_TOKENS: Final = 4
_CLIP_NOTE_TOKENS: Final = 8
_FILES_NOTE: Final = "files touched: "
ANALYSIS_NOTE: Final = "latest analysis: "
NAMES_NOTE: Final = "names used: "
# How many names the names note holds (those of the newest rounds first).
NAMES_CAP: Final = 16


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
    `list_cap` bounds every list of the checkpoint. `item_tokens` estimates each item's tokens from
    the stored counts (`serialized`), so a round prices its request without tokenizing the history
    again (`prompt_tokens`); a request built by hand may leave it empty. `focus` is what the caller
    asked this round's summary to keep above all ("" for none).
    """

    system_prompt: str
    items: tuple[str, ...]
    previous_checkpoint: Checkpoint | None
    max_output_tokens: int
    goal_hint: str = ""
    messages: tuple[Message, ...] = ()
    prefix_items: int = 0
    list_cap: int = LIST_CAP
    item_tokens: tuple[int, ...] = ()
    focus: str = ""

    @property
    def task(self) -> str:
        """The task the user gave: `goal_hint`, else the one the conversation holds ("" when none)."""
        return self.goal_hint or task_goal(self.messages)

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
            self,
            items=items,
            item_tokens=self.item_tokens[drop:],
            messages=self.messages[drop:],
            prefix_items=min(self.prefix_items, len(items)),
            goal_hint=self.task,  # the task stays the same when the part that held it is dropped
        )


class Summarizer(Protocol):
    """Turns a request into checkpoint text (JSON or markdown); may be sync or async."""

    def __call__(self, request: SummaryRequest, /) -> str | Awaitable[str]: ...


def prompt_text(request: SummaryRequest) -> str:
    """The user prompt a text model summarizer sends: what to reply, the previous checkpoint, the task,
    the history and the split turn's part.

    The model is asked only for what the history adds (`complete` merges it into the previous
    checkpoint): its output is the dearest part of a round. The task is said once, and when the
    caller knows it the model does not restate it (`complete` keeps it as the goal).
    """
    previous = request.previous_checkpoint
    adds = "adds to the previous checkpoint" if previous is not None else "holds"
    lines = [
        f"Reply with one JSON object of at most about {request.max_output_tokens} tokens, holding only "
        f"what the conversation below {adds}: lists of short plain strings under these keys, a key left "
        "out when it has nothing:",
        *(f"- {name}: {meaning}" for name, meaning in REPLY_FIELDS),
    ]
    if previous is not None:
        lines.append(
            "Do not repeat what the previous checkpoint holds, except to list one of its open items again, "
            "in the same words, under its new status (in progress -> done)."
        )
    if request.focus.strip():
        lines.append(f"Keep above all what concerns: {clip(request.focus.strip(), ARGUMENT_CLIP_CHARS)}")
    task = request.task
    if task:
        lines.append("The goal is the task the user gave, kept for you: leave it out.")
    else:
        lines.append('Also give "goal": what the user is trying to achieve, in one or two sentences.')
    sections = ["\n".join(lines)]
    if previous is not None:
        # What the model needs of it: the items whose status may change (the rest is merged in by the
        # caller, whatever the reply says); the task is shown once.
        shown = Checkpoint(
            goal="" if task else previous.goal,
            in_progress=previous.in_progress,
            blocked=previous.blocked,
            next_steps=previous.next_steps,
        )
        sections.append(f"Previous checkpoint's open items:\n{to_json(shown)}")
    if request.goal_hint.strip():
        sections.append(f"The task the user gave: {clip(request.goal_hint, TASK_CLIP_CHARS)}")
    if request.conversation:
        sections.append(f"{_CONVERSATION}{request.conversation}")
    if request.turn_part:
        sections.append(f"{_TURN_PART}{request.turn_part}")
    return "\n\n".join(sections)


def prompt_tokens(request: SummaryRequest, count: Callable[[str], int]) -> int:
    """The input tokens of `request` as a text model is sent it — its system prompt and `prompt_text`
    — with the history priced from `item_tokens` instead of tokenized again: the framing (instructions,
    previous checkpoint, task, headings) is counted exactly, each item by its estimate, each separator
    as one token. A request without estimates is counted whole."""
    items = len(request.items)
    if len(request.item_tokens) != items:
        return count(request.system_prompt) + count(prompt_text(request))
    frame = prompt_text(msgspec.structs.replace(request, items=(), item_tokens=(), prefix_items=0))
    headings = 0
    if items > request.prefix_items:
        headings += count(_CONVERSATION) + 1
    if request.prefix_items:
        headings += count(_TURN_PART) + 1
    return count(request.system_prompt) + count(frame) + headings + sum(request.item_tokens) + items


def complete(reply: Checkpoint, request: SummaryRequest) -> Checkpoint:
    """The checkpoint a summarizer's reply makes: the reply merged into the previous checkpoint
    (`merge`: what it leaves out is kept), the goal the task the user gave (a model's own goal that
    lost the task follows it), the files the summarized part edited or created added.

    The same for a model's reply and the local summarizer's, so they differ only in what they say.
    The local summarizer's own notes in the previous checkpoint (a split-turn note, the files note of
    earlier releases) are replaced, not repeated.
    """
    previous = request.previous_checkpoint or Checkpoint()
    added = context_notes(request, " ".join((*reply.done, *reply.blocked, *reply.files)))
    replaced = _notes(added)
    resolved = {subject_of(item) for item in reply.done} - {""}
    previous = msgspec.structs.replace(
        previous,
        in_progress=tuple(i for i in previous.in_progress if not i.startswith(_SPLIT_NOTE)),
        blocked=tuple(
            i for i in previous.blocked if not any(same_subject(subject_of(i), done) for done in resolved)
        ),
        # The current plan replaces the previous one (an item it repeats keeps its place).
        next_steps=previous.next_steps if not reply.next_steps else (),
        critical_context=tuple(
            i for i in previous.critical_context if not i.startswith(_FILES_NOTE) and _note(i) not in replaced
        ),
    )
    own = tuple(i for i in reply.critical_context if not _note(i))
    critical = _merged_names((*own, *added), request.previous_checkpoint)
    # The task is bounded where it is read (`planner.intent.task_goal`): its redirect is never cut off.
    goal = anchored_goal(reply.goal, request) if reply.goal.strip() else request.task
    delta = msgspec.structs.replace(
        reply,
        goal=goal,
        critical_context=critical,
        files=(*reply.files, *edited_files(request.messages)),
        source_item_count=len(request.messages),
    )
    return merge(previous, delta, cap=max(request.list_cap, 1))


def context_notes(request: SummaryRequest, said: str = "") -> tuple[str, ...]:
    """What the caller adds to every checkpoint's critical context, read from the summarized messages
    (no summarizer is asked for it, nor paid for it): the latest substantive analysis of the model,
    and the names (paths, identifiers) the agent itself used most — with a focus, what speaks of it
    first; names already `said` elsewhere in the checkpoint are not repeated."""
    messages, focus = request.messages, request.focus
    found = []
    analysis = latest_analysis(messages, prefer=focus)
    if analysis:
        found.append(f"{ANALYSIS_NOTE}{analysis}")
    said = f"{said} {analysis}"
    names = [name for name in ranked_facts(messages, focus) if name not in said][:NAMES_CAP]
    if names:
        found.append(f"{NAMES_NOTE}{', '.join(names)}")
    return tuple(found)


def _note(item: str) -> str:
    """Which of the local summarizer's own notes an item is ("" for any other item)."""
    return next((note for note in (ANALYSIS_NOTE, NAMES_NOTE) if item.startswith(note)), "")


def _notes(items: Sequence[str]) -> set[str]:
    return {_note(item) for item in items} - {""}


def _merged_names(items: Sequence[str], previous: Checkpoint | None) -> tuple[str, ...]:
    """The reply's critical context, its names note holding the previous note's names after its own
    (the newest first, at most `NAMES_CAP`)."""
    new = next((i for i in items if i.startswith(NAMES_NOTE)), None)
    if new is None or previous is None:
        return tuple(items)
    old = next((i for i in previous.critical_context if i.startswith(NAMES_NOTE)), "")
    names = [*_names(new), *_names(old)]
    merged = f"{NAMES_NOTE}{', '.join(list(dict.fromkeys(names))[:NAMES_CAP])}"
    return tuple(merged if i is new else i for i in items)


def _names(item: str) -> list[str]:
    return [name.strip() for name in item[len(NAMES_NOTE) :].split(", ") if name.strip()]


def anchored_goal(goal: str, request: SummaryRequest) -> str:
    """A model's own goal, anchored to the task the user gave (`request.task`, with its latest
    redirect; else the previous checkpoint's): the goal when it holds the whole task, the task when
    the goal opens as the task does (it restates it), else the task followed by the goal."""
    previous = request.previous_checkpoint.goal if request.previous_checkpoint is not None else ""
    task = request.task or previous.split(CURRENT_AIM, 1)[0]  # without an aim an earlier reply added
    said, whole = normalize(goal), normalize(task)
    if not whole or whole in said:
        return goal
    if said[:_GOAL_HEAD] in whole:
        return task  # the goal restates the task (perhaps more of it than the task keeps)
    return f"{task}{CURRENT_AIM}{clip(goal.strip(), 500)}"


def serialize(message: Message) -> str:
    """One message as summarizer input: role, tool names and arguments kept, long items clipped."""
    return serialized(message, ())[0]


def serialized(message: Message, part_tokens: Sequence[int]) -> tuple[str, int]:
    """`serialize(message)`, and an estimate of its tokens from the message's per-part counts as shown
    (`part_tokens`; none: the labels alone): a part's count, its share of it when clipped, plus its
    label. One pass, no tokenizing: a full round prices its request in proportion to the messages it
    summarizes, at the cost of serializing them."""
    lines: list[str] = []
    tokens = 0
    label = message.role if message.kind == "message" else f"{message.role}:{message.kind}"
    for index, part in enumerate(message.parts):
        counted = part_tokens[index] if index < len(part_tokens) else 0
        tokens += _LABEL_TOKENS
        if isinstance(part, TextPart):
            lines.append(f"[{label}] {clip(part.text, ITEM_CLIP_CHARS)}")
            tokens += _share(counted, len(part.text), ITEM_CLIP_CHARS)
        elif isinstance(part, ToolCall):
            arguments = part.arguments
            lines.append(f"[{label} → {part.name}] {clip(arguments, ARGUMENT_CLIP_CHARS)}")
            tokens += _share(counted, len(arguments), ARGUMENT_CLIP_CHARS)
        elif isinstance(part, ToolResult):
            status = " (error)" if part.is_error else ""
            text = part.text
            lines.append(f"[tool {part.name or part.call_id}{status}] {clip(text, ITEM_CLIP_CHARS)}")
            if not isinstance(part.content, str):  # media items are not serialized
                counted -= sum(
                    media_tokens(i) for i in part.content if isinstance(i, (ImagePart, DocumentPart))
                )
            tokens += _share(max(counted, 0), len(text), ITEM_CLIP_CHARS)
        else:
            lines.append(f"[{label}: {part.kind}]")
    return "\n".join(lines), tokens


def _share(tokens: int, chars: int, limit: int) -> int:
    """The tokens of a text of `chars` characters counted `tokens` once it is clipped to `limit`."""
    if chars <= limit:
        return tokens
    return math.ceil(tokens * limit / chars) + _CLIP_NOTE_TOKENS


class LocalSummarizer:
    """The deterministic, model-free summarizer; also the fallback when a model summarizer fails.

    It reads `request.messages`, so it always sees the whole delta (a model's text prompt may have
    been shortened by prompt-too-long retries), and what they did (`planner.outcomes`).
    """

    def __init__(
        self,
        *,
        recent_items: int = 8,
        recent_outcomes: int = 16,
        item_chars: int = 200,
        names: int = NAMES_CAP,
    ) -> None:
        self.recent_items = recent_items
        self.recent_outcomes = recent_outcomes
        self.item_chars = item_chars
        self.names = names

    def reply(self, request: SummaryRequest) -> Checkpoint:
        """What this summarizer says of the request, as a model asked by `prompt_text` would reply:
        only what the conversation adds, no goal (the caller keeps the task), no files an edit tool
        names (the caller adds them).

        Done: the outcomes of its steps (files edited or created, commands that changed something
        and succeeded, test runs that passed, sub-agents that finished, todos completed), never what
        the agent only announced. Blocked: the failures no later step resolved, and refused
        approvals. Next steps: the agent's own plan (its todo list's pending items, else what its
        latest reply says it will do next), else the latest request. The user's answers become
        decisions and the sentences of their requests that set limits constraints; a split turn's part
        a note of work in progress. With `request.focus`, what speaks of the focus is kept first.
        (The latest analysis and the names used are the caller's to add: `context_notes`.)
        """
        messages = request.messages
        focus = request.focus
        found = steps(messages)
        todo_done, todo_doing, todo_pending = todos(messages)
        # A todo keeps its own words in every list, so that a later checkpoint moves it (to done).
        outcomes = [item for step in found if (item := outcome(step))] + todo_done
        errors, approvals = self._failures(found)
        requested = list(requests(messages))  # the user's requests, read once for constraints and answers
        task = request.goal_hint or None
        done = self._recent(list(dict.fromkeys(outcomes)), focus, self.recent_outcomes)
        blocked = self._recent(approvals, focus) + self._recent(errors, focus)
        return Checkpoint(
            constraints=tuple(constraints_of(requested, task=task)),
            done=tuple(done),
            in_progress=((self._split_turn(request),) if request.turn_part else ()) + tuple(todo_doing),
            blocked=tuple(blocked),
            key_decisions=tuple(answers_of(requested, task=task)[-self.recent_items :]),
            next_steps=tuple(self._next_steps(messages, todo_pending, requested)),
        )

    def checkpoint(self, request: SummaryRequest) -> Checkpoint:
        """The checkpoint this summarizer makes: its `reply` completed as any reply is (`complete`):
        the goal is the task the user gave (`request.goal_hint`, else the first request of the
        messages and the latest redirect, see `planner.intent`), `files` names every file edited or
        created, and all of it is merged into the previous checkpoint (each list capped at
        `request.list_cap`)."""
        return complete(self.reply(request), request)

    def __call__(self, request: SummaryRequest, /) -> str:
        return to_json(self.reply(request))

    def _recent(self, items: list[str], focus: str, keep: int | None = None) -> list[str]:
        """The latest `keep` (default `recent_items`) of `items`, and before them any older one that
        speaks of the focus."""
        keep = self.recent_items if keep is None else keep
        latest = items[-keep:] if keep else []
        if not focus:
            return [clip(item, self.item_chars) for item in latest]
        older = [item for item in items[: len(items) - len(latest)] if matches(item, focus)]
        return [clip(item, self.item_chars) for item in (*older, *latest)]

    def _failures(self, found: Sequence[Step]) -> tuple[list[str], list[str]]:
        errors: list[str] = []
        approvals: list[str] = []
        for step in unresolved(found):
            (approvals if _APPROVAL.search(step.detail) else errors).append(failure(step))
        return errors, approvals

    def _next_steps(self, messages: Sequence[Message], pending: list[str], requested: list[str]) -> list[str]:
        if pending:
            return pending[: self.recent_items]
        last = next((m for m in reversed(messages) if m.role == "assistant" and m.text.strip()), None)
        planned = plan_sentences(last) if last is not None else []
        if planned:
            return planned
        return [f"continue with: {clip(requested[-1], self.item_chars)}"] if requested else []

    def _split_turn(self, request: SummaryRequest) -> str:
        part = request.turn_part.strip()
        first = part.splitlines()[0] if part else ""
        return f"{_SPLIT_NOTE}{clip(first, self.item_chars)}"


def ranked_facts(messages: Sequence[Message], focus: str = "") -> list[str]:
    """The facts (`planner.facts`) the agent itself used in these messages, those it used most first
    (then the latest used); with a focus, those that speak of it before all."""
    counts: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, message in enumerate(messages):
        if any(call.name.casefold() in TODO_TOOLS for call in message.tool_calls):
            continue  # a todo list's words are in the checkpoint's lists already
        for fact in named_facts(message):
            if fact.startswith("/") and fact.count("/") == 1 and "." not in fact:
                continue  # a closing tag (`</div>`) reads like a path: no name
            counts[fact] = counts.get(fact, 0) + 1
            last[fact] = index
    return sorted(counts, key=lambda f: (not (focus and matches(f, focus)), -counts[f], -last[f], f))
