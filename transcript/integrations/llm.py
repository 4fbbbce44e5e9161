"""Simon Willison's `llm` library: `pip install 'transcript-store[llm]'`.

`to_llm(view)` and `from_llm(messages)` convert between views and `llm`'s message parts
(`llm.parts.Message`), so `llm` builds its next prompt from a compacted view
(`model.prompt(text, messages=to_llm(view))`); its `logs.db` conversations import as format
`llm-logs` (`transcript.formats.llm_logs`). `LlmSummarizer` writes checkpoints with an `llm` model.

Any model `llm` knows (and its plugins add) can write the checkpoints. The prompt is
`planner.summary.prompt_text`; a reply that is not a checkpoint, or any error, makes the round fall
back to the local summary, and an error that says the prompt was too long becomes `PromptTooLong`, so
the round retries with less history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.summary import SummaryRequest, is_prompt_too_long, prompt_text
from projection.view import View
from transcript.model.errors import InvalidMessage, PromptTooLong, UnsupportedItem
from transcript.model.message import (
    Message,
    ReasoningPart as CoreReasoning,
    TextPart as CoreText,
    ToolCall as CoreCall,
    ToolResult as CoreResult,
)

__all__ = ["LlmSummarizer", "from_llm", "to_llm"]


class LlmSummarizer:
    """`summarize(request) -> str` through an `llm` model (by id, the default model, or a model object)."""

    def __init__(self, model: str | Any | None = None, **options: Any) -> None:
        if model is None or isinstance(model, str):
            try:
                import llm  # type: ignore[import-not-found, unused-ignore]
            except ImportError as exc:
                raise ImportError(
                    "LlmSummarizer needs the llm library: pip install 'transcript-store[llm]'"
                ) from exc
            model = llm.get_model(model) if model else llm.get_model()
        self.model: Any = model
        self.options = options

    def __call__(self, request: SummaryRequest, /) -> str:
        try:
            response = self.model.prompt(prompt_text(request), system=request.system_prompt, **self.options)
            return str(response.text())
        except Exception as exc:
            if is_prompt_too_long(exc):
                raise PromptTooLong(str(exc)) from exc
            raise


def to_llm(view: View | Sequence[Message]) -> list[Any]:
    """A view (or messages) as `llm` messages (`llm.parts.Message`), for `model.prompt(messages=...)`
    or `conversation.prompt(messages=...)`: each message's parts in order, a tool message's results
    as `ToolResultPart`s (an error result with its text as the `exception`)."""
    from llm.parts import Message as LlmMessage, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

    messages = view.messages if isinstance(view, View) else view
    out = []
    for message in messages:
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, CoreText):
                parts.append(TextPart(text=part.text))
            elif isinstance(part, CoreReasoning):
                parts.append(ReasoningPart(text=part.text, redacted=not part.text))
            elif isinstance(part, CoreCall):
                parts.append(ToolCallPart(name=part.name, arguments=part.input, tool_call_id=part.id))
            elif isinstance(part, CoreResult):
                output = part.text
                parts.append(
                    ToolResultPart(
                        name=part.name or "",
                        output=output,
                        tool_call_id=part.call_id,
                        exception=output if part.is_error else None,
                    )
                )
            else:
                raise UnsupportedItem(
                    f"message {message.id!r}: a {type(part).__name__} has no llm form", message.id
                )
        out.append(LlmMessage(role=message.role, parts=parts))
    return out


def from_llm(messages: Sequence[Any]) -> list[Message]:
    """`llm` messages (`llm.parts.Message`, or their `to_dict()` form) as messages to append, in
    order; a part with no form here is `UnsupportedItem`, one of the wrong shape `InvalidMessage`,
    naming the message."""
    from transcript.formats.base import BadRecord
    from transcript.formats.llm_logs import part_from_dict

    out: list[Message] = []
    for index, raw in enumerate(messages):
        to_dict = getattr(raw, "to_dict", None)
        value = to_dict() if callable(to_dict) else raw
        where = f"messages[{index}]"
        if not isinstance(value, dict) or not isinstance(value.get("parts"), list):
            raise InvalidMessage(f"{where} is not an llm message (role and parts), but {type(raw).__name__}")
        role = value.get("role")
        try:
            parts = [part_from_dict(part, where, k) for k, part in enumerate(value["parts"])]
        except (BadRecord, AttributeError) as exc:
            raise UnsupportedItem(f"{where}: {exc}", where) from exc
        results = [p for p in parts if isinstance(p, tuple)]
        plain = [p for p in parts if not isinstance(p, tuple)]
        texts = [p for p in plain if isinstance(p, CoreText)]
        if role == "tool" and results and not plain:
            out.extend(
                Message.tool_result(call_id, output, name=name or None, is_error=is_error)
                for call_id, output, is_error, name in results
            )
        elif role == "assistant" and not results:
            out.append(
                Message.assistant(
                    "".join(p.text for p in texts),
                    tool_calls=[p for p in plain if isinstance(p, CoreCall)],
                    reasoning=[p for p in plain if isinstance(p, CoreReasoning)],
                )
            )
        elif role == "user" and len(texts) == len(parts):
            out.append(Message.user(texts or [CoreText(text="")]))
        elif role == "system" and len(texts) == len(parts):
            out.append(Message.system("".join(p.text for p in texts)))
        else:
            raise UnsupportedItem(f"{where}: a {role!r} message with parts this store has no form for", where)
    return out
