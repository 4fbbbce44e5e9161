"""The outer loop: after each compaction round and each model reply, go on by itself or stop — and why.

A loop asks twice per model call. `LoopPolicy.after_round(result)`, before the call: a round that
compacted the context continues with the continuation prompt that re-anchors the model on the
checkpoint (or stops, when continuing after a compaction is off). `LoopPolicy.after_reply(snapshot)`,
after the reply and its tool results are appended: it stops when the model asked the user something
(an explicit question, or a call of an ask-the-user tool), when a tool call was refused or awaits
approval, when the turn has run out of model calls, or when the model ended its turn and automatic
follow-ups are off or used up; otherwise it continues, with the follow-up prompt when the model had
ended its turn. `LoopPolicy.after_overflow(error, retried=...)`, when the model call itself raised:
a provider's prompt-too-long refusal means one forced compaction round and one retry, a second one
stops (`transcript.session.overflow` drives it around a call). A prompt is appended as
`Message.continuation(prompt, reason=decision.code)`: a
`meta` message that no summary ever takes for the user's goal; only `follow_up` ones count against
`max_auto_follow_ups` (a compaction's re-anchor prompt is no follow-up). Pure: nothing is read or
written but what is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from planner.continuation import continuation_prompt
from transcript.model.arguments import check_flag, check_type
from transcript.model.errors import InvalidArgument
from transcript.model.message import Message
from transcript.model.result import CompactResult
from transcript.model.snapshot import TranscriptSnapshot

DEFAULT_ASK_TOOLS: Final = ("AskUserQuestion", "ask_user", "ask_followup_question", "request_user_input")
FOLLOW_UP_PROMPT: Final = (
    "Continue with the task from where you stopped. If it is finished, say so in one sentence and stop."
)
# What a tool result says when the user (or a permission rule) refused the call.
_REFUSED: Final = re.compile(
    r"doesn't want to proceed|user (declined|denied|rejected)|(denied|rejected) by the user|"
    r"permission to use \S+ (has been|was) denied|tool use was rejected|not approved|"
    r"requires (user )?approval|awaiting approval",
    re.IGNORECASE,
)
# Markup a reply may end with after its question (emphasis, a closing quote or bracket, in ASCII or
# full width).
_TRAILING: Final = " \t\n*_`\"')]\u3000」』）】》”’"
_QUESTION_MARKS: Final = ("?", "？")
# The line that opens a fenced code block (a reply may end with one: "Shall I run this?" and the command).
_FENCE: Final = re.compile(r"[ \t]*(`{3,}|~{3,})")
# What asks nothing although it may hold a "?": inline code (`why?`) and quoted text ("Are you sure?").
_INLINE_CODE: Final = re.compile(r"`[^`\n]*`")
_QUOTED: Final = re.compile(r'"[^"\n]*"|“[^”\n]*”|「[^」\n]*」|『[^』\n]*』')
_MASK: Final = re.compile(r"\x00(\d+)\x00")
_EMPHASIS: Final = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")
_SENTENCE: Final = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
# A question with no question mark. Chinese ends it with 吗 / 嗎, or opens its last clause with 是否 /
# 要不要 / 需不需要 / 是不是 / 请问 ...; Japanese ends it with a polite predicate and か (続けますか,
# どうしますか, よろしいでしょうか): these ask even before a full stop. A question ending in 呢, or
# in a plain predicate and か (いいか, 進めるかな), asks only where no full stop follows.
_MARKLESS: Final = re.compile(
    r"(?:[吗嗎]|(?:ます|です|でしょう|ません|ましょう)か|"
    r"(?:^|[，,：:])\s*(?:请问|請問|是否|要不要|需不需要|需要不需要|是不是|可不可以|能不能|好不好)[^，,：:]*)$"
)
_MARKLESS_UNSTOPPED: Final = re.compile(
    r"(?:呢|(?:ます|です|でしょう|ません|ましょう|でした|ました|だろう|ない|いい|よい|る|た|う)(?:か|かな|かね))$"
)
# A question put to the user, not to the reader of a report ("Why did it fail? The fixture was stale."):
# it speaks to them, or offers them something; in Chinese and Japanese, a yes-no question does.
_TO_THE_USER: Final = re.compile(
    r"\b(?:you|your|yours|shall i|should i|can i|could i|may i|do i|want me|like me|need me|prefer)\b|"
    r"[你您]|[吗嗎][?？]?$|ますか|でしょうか|ませんか",
    re.IGNORECASE,
)
# Options the reply ends with: list items, introduced by a question or a choice put to the user.
_OPTION: Final = re.compile(r"[ \t]*(?:\d{1,2}[.)]|[a-zA-Z][.)]|[-*•+]|[（(]?\d{1,2}[）)]|[①-⑩])[ \t]+\S")
_CHOICE: Final = re.compile(
    r"\b(?:which|would you|do you|should i|shall i|prefer|choose|pick|want me|like me|your call)\b|"
    r"哪|选择|選擇|您|你|どれ|どちら|どの|選んで",
    re.IGNORECASE,
)
Code = Literal[
    "no_compaction",
    "tool_results",
    "compacted",
    "follow_up",
    "explicit_question",
    "ask_tool",
    "approval_block",
    "pending_calls",
    "max_turns",
    "max_follow_ups",
    "auto_continue_off",
    "continue_after_compact_off",
    "no_reply",
    "replied",
    "context_overflow",
    "overflow_recovered",
    "overflow_again",
]


class LoopDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Continue or stop, with a stable code and a reason; `prompt` is what to append before the next
    model call when continuing needs one (empty otherwise)."""

    action: Literal["continue", "stop"]
    code: Code
    reason: str
    prompt: str = ""

    @property
    def proceed(self) -> bool:
        """Whether the loop calls the model again."""
        return self.action == "continue"


class LoopPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """When the loop goes on by itself after a model call (the design source's outer-loop settings).

    `max_total_turns` counts model calls since the user's last request; `max_auto_follow_ups` counts
    the follow-up prompts appended since then.
    """

    auto_continue: bool = False
    max_auto_follow_ups: int = 3
    max_total_turns: int = 50
    continue_after_compact: bool = True
    stop_on_approval_block: bool = True
    stop_on_explicit_question: bool = True
    ask_user_tools: tuple[str, ...] = DEFAULT_ASK_TOOLS
    follow_up_prompt: str = FOLLOW_UP_PROMPT

    def __post_init__(self) -> None:
        for name in ("max_auto_follow_ups", "max_total_turns"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a whole number (0 or more), not {value!r}")
        for name in (
            "auto_continue",
            "continue_after_compact",
            "stop_on_approval_block",
            "stop_on_explicit_question",
        ):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"{name} must be True or False, not {getattr(self, name)!r}")
        if not isinstance(self.follow_up_prompt, str) or not self.follow_up_prompt.strip():
            raise InvalidArgument("follow_up_prompt must be a non-blank string")
        tools = self.ask_user_tools
        if (
            isinstance(tools, str)
            or not isinstance(tools, Sequence)
            or not all(isinstance(t, str) for t in tools)
        ):
            raise InvalidArgument(f"ask_user_tools must be a sequence of tool names, not {tools!r}")
        msgspec.structs.force_setattr(self, "ask_user_tools", tuple(tools))

    def after_round(self, result: CompactResult) -> LoopDecision:
        """Before the model call: after a round that compacted the context, re-anchor or stop."""
        check_type(result, CompactResult, "result")
        # A full step that left the view over budget (only the newest step would not fit) still
        # replaced the history with its checkpoint.
        if result.checkpoint is None or result.outcome not in ("full_applied", "over_budget_irreducible"):
            return _continue("no_compaction", "no summary replaced the history: call the model")
        if not self.continue_after_compact:
            return _stop(
                "continue_after_compact_off", "the context was compacted; continuing after it is off"
            )
        return _continue(
            "compacted",
            "the context was compacted: re-anchor on the checkpoint and go on",
            continuation_prompt(result),
        )

    def after_reply(self, snapshot: TranscriptSnapshot) -> LoopDecision:
        """After the model's reply (and the tool results appended to it): call the model again, or stop."""
        check_type(snapshot, TranscriptSnapshot, "snapshot")
        entries = snapshot.entries
        last_reply = next((e.seq for e in reversed(entries) if e.message.role == "assistant"), None)
        if last_reply is None:
            return _stop("no_reply", "the model has not replied yet")
        reply = entries[last_reply].message
        after = [e.message for e in entries[last_reply + 1 :]]
        ask = {name.casefold() for name in self.ask_user_tools}
        asked = [call for call in reply.tool_calls if call.name.casefold() in ask]
        if asked:
            return _stop("ask_tool", f"the model asked the user through {asked[0].name}")
        answered = {r.call_id for m in after for r in m.tool_results}
        pending = [call.id for call in reply.tool_calls if call.id not in answered]
        if pending:
            return _stop("pending_calls", f"tool calls {', '.join(pending)} await their results or approval")
        refused = [r for m in after for r in m.tool_results if r.is_error and _REFUSED.search(r.text)]
        if refused and self.stop_on_approval_block:
            tool = refused[0].name or "a tool"
            return _stop("approval_block", f"the call of {tool} was refused: {_clip(refused[0].text)}")
        since_request = _since_request(snapshot)
        calls = sum(1 for m in since_request if m.role == "assistant")
        if calls >= self.max_total_turns:
            return _stop(
                "max_turns", f"{calls} model calls since the user's last request (max {self.max_total_turns})"
            )
        if reply.tool_calls:
            return _continue("tool_results", "the tools answered: call the model with their results")
        asked_text = _question(reply.text) if self.stop_on_explicit_question else None
        if asked_text is not None:
            return _stop("explicit_question", f"the model asked the user: {_clip(asked_text)}")
        if not self.auto_continue:
            return _stop("auto_continue_off", "the model ended its turn")
        follow_ups = sum(1 for m in since_request if _is_follow_up(m))
        if follow_ups >= self.max_auto_follow_ups:
            return _stop(
                "max_follow_ups",
                f"{follow_ups} follow-ups since the user's last request (max {self.max_auto_follow_ups})",
            )
        return _continue(
            "follow_up",
            "the model ended its turn: an automatic follow-up asks it to go on",
            self.follow_up_prompt,
        )

    def after_overflow(self, error: BaseException, *, retried: bool) -> LoopDecision | None:
        """After the model call raised: None when `error` is no context overflow (the caller re-raises
        it); after a first overflow, continue (`context_overflow`: force one compaction round and retry
        once); after an overflow of that retry, stop (`overflow_again`), with the provider's words."""
        check_type(error, BaseException, "error")
        check_flag(retried, "retried")
        from planner.overflow import is_context_overflow  # the summarizer's module, only when refused

        if not is_context_overflow(error):
            return None
        said = _clip(f"{type(error).__name__}: {error}")
        if retried:
            return _stop("overflow_again", f"the provider refused the request as too long again: {said}")
        return _continue(
            "context_overflow",
            f"the provider refused the request as too long ({said}): compact and retry once",
        )


def _stop(code: Code, reason: str) -> LoopDecision:
    return LoopDecision(action="stop", code=code, reason=reason)


def _continue(code: Code, reason: str, prompt: str = "") -> LoopDecision:
    return LoopDecision(action="continue", code=code, reason=reason, prompt=prompt)


def _since_request(snapshot: TranscriptSnapshot) -> list[Message]:
    """The messages after the user's last request (a user message that is not meta, a summary or a
    continuation), or the whole session when there is none."""
    starts = snapshot.turn_starts
    first = starts[-1] + 1 if starts else 0
    return [entry.message for entry in snapshot.entries[first:]]


def _is_follow_up(message: Message) -> bool:
    """A follow-up prompt this policy asked for (not a compaction's re-anchor prompt). `True` is how
    a continuation was marked before it named its reason."""
    reason = (message.metadata or {}).get("continuation") if message.kind == "meta" else None
    return reason is True or reason == "follow_up"


def _question(text: str) -> str | None:
    """The question a reply puts to the user, or None when it asks nothing.

    A reply asks when its prose — the code blocks that end it, inline code and quoted text taken off
    — ends with a question (`?`, `？`, or a Chinese or Japanese question without its mark: 要继续吗,
    続けますか); when a sentence of its closing paragraphs (the last two) is a question put to the
    user — it speaks to them or offers them something — whatever follows it ("Would you like me to
    also update the docs? I can do that next."); or when it ends with options introduced by a
    question or a choice put to the user ("Which option do you prefer:" and a numbered list). A
    question the reply answers itself ("Why did it fail? The fixture was stale."), a quoted one, or
    a "?" in code asks nothing."""
    spans: list[str] = []
    closing = _masked(_closing(text), spans)
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", closing) if p.strip()]
    if not paragraphs:
        return None
    last = _sentences(paragraphs[-1])
    if last and _is_question(last[-1]):
        found: str | None = last[-1]
    else:
        near_the_end = [s for p in paragraphs[-2:] for s in _sentences(p)]
        found = next((s for s in near_the_end if _is_question(s) and _TO_THE_USER.search(s)), None)
        found = found or _options(closing)
    if found is None:
        return None
    return _MASK.sub(lambda m: spans[int(m[1])] if int(m[1]) < len(spans) else m[0], found)


def _masked(text: str, spans: list[str]) -> str:
    """Prose with what asks nothing masked (inline code, quoted text: kept in `spans`, a mark in their
    place) and emphasis markers taken off."""

    def mask(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    return _EMPHASIS.sub("", _QUOTED.sub(mask, _INLINE_CODE.sub(mask, text)))


def _sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences (and lines), closing markup taken off each."""
    return [s for part in _SENTENCE.split(paragraph) if (s := part.strip().rstrip(_TRAILING).strip())]


def _is_question(sentence: str) -> bool:
    """Whether a sentence is a question: its mark, or a Chinese or Japanese question without one."""
    if sentence.endswith(_QUESTION_MARKS):
        return True
    if _MARKLESS_UNSTOPPED.search(sentence.rstrip(" ~～…")):
        return True
    return bool(_MARKLESS.search(sentence.rstrip(" 。.!！~～…")))


def _options(closing: str) -> str | None:
    """The question that introduces the options a reply ends with (two items or more), or None."""
    lines = [line for line in closing.split("\n") if line.strip()]
    items = 0
    while items < len(lines) and _OPTION.match(lines[-1 - items]):
        items += 1
    if items < 2 or items == len(lines):
        return None
    intro = lines[-1 - items].strip().rstrip(_TRAILING)
    head = intro.rstrip(":：").strip()
    if _is_question(head) or (intro.endswith((":", "：")) and _CHOICE.search(intro)):
        return intro
    return None


def _closing(text: str) -> str:
    """The reply's prose up to its end: the code blocks that end it and closing markup taken off."""
    lines = text.split("\n")
    blocks: list[tuple[int, int]] = []  # (first line, last line) of each closed fenced block
    opened: tuple[int, str] | None = None
    for number, line in enumerate(lines):
        if opened is None:
            fence = _FENCE.match(line)
            if fence is not None:
                opened = (number, fence.group(1))
        elif line.strip().startswith(opened[1]) and not line.strip().strip(opened[1][0]):
            blocks.append((opened[0], number))
            opened = None
    end = len(lines)
    while opened is None and blocks and not "".join(lines[blocks[-1][1] + 1 : end]).strip():
        end = blocks.pop()[0]
    return "\n".join(lines[:end])


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
