"""LangChain 1.x on this store: `pip install 'transcript-store[langchain]'`.

`TranscriptMiddleware` is an agent middleware (`create_agent(..., middleware=[...])`): before every
model call it mirrors the agent state's messages into the session — each LangChain message once, known
by its id across restarts; stored messages a restarted run no longer holds (the turn it is doing
again) are retracted — runs one compaction round with the window less the system prompt and the tool
schemas, records the view served and sends it instead of the state's messages
(`request.override(messages=...)`); it records each reply's usage beside that view.
`TranscriptChatHistory` is a `BaseChatMessageHistory` over one session (the older interface, used
by `RunnableWithMessageHistory`): its `messages` are the session's view, its async methods run the
store's work off the event loop, from any loop.

Every message keeps the LangChain message it was made from (`messages_to_dict`, in its metadata),
so a message the view shows unchanged goes back exactly as it came; a shortened one or a summary is
rendered anew (`to_langchain`). A tool call without an id gets one made from its message's id and
place (`<message id>:<k>`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "transcript.integrations.langchain needs LangChain 1.x: pip install 'transcript-store[langchain]'"
    ) from exc

from projection.view import View
from transcript.integrations.rounds import RoundSettings
from transcript.model.errors import InvalidArgument, InvalidMessage, UnsupportedItem
from transcript.model.message import INTERRUPTED_RESULT, Message, TextPart, ToolCall
from transcript.model.usage import Usage
from transcript.session.budget import count_tool_tokens
from transcript.session.facade import Transcript
from transcript.store.offloop import off_loop

__all__ = [
    "LANGCHAIN_KEY",
    "TranscriptChatHistory",
    "TranscriptMiddleware",
    "from_langchain",
    "to_langchain",
]

# The metadata key under which a message keeps the LangChain message it was made from.
LANGCHAIN_KEY: Final = "langchain"


def from_langchain(messages: Sequence[BaseMessage], pending: dict[str, str] | None = None) -> list[Message]:
    """LangChain messages as the messages that store them, each keeping its original. `pending` are
    the calls (id -> tool name) unanswered before them: a message that is not their result first gets
    a synthetic "interrupted" result for each (which keeps no original: it is not the agent's)."""
    open_calls = dict(pending or {})
    stored: list[Message] = []
    for index, message in enumerate(messages):
        converted = _message(message, index, open_calls)
        if converted.role != "tool" and open_calls:
            stored.extend(
                Message.tool_result(call_id, INTERRUPTED_RESULT, name=name, is_error=True)
                for call_id, name in open_calls.items()
            )
            open_calls.clear()
        if converted.role == "tool":
            open_calls.pop(converted.tool_results[0].call_id)
        elif converted.role == "assistant":
            open_calls = {call.id: call.name for call in converted.tool_calls}
        stored.append(converted)
    return stored


def to_langchain(view: View | Sequence[Message], transcript: Transcript | None = None) -> list[BaseMessage]:
    """A view (or messages) as LangChain messages: a message shown as stored (checked against
    `transcript` when given) is the very message it was made from; others are rendered anew."""
    messages = view.messages if isinstance(view, View) else view
    out: list[BaseMessage] = []
    for message in messages:
        kept = (message.metadata or {}).get(LANGCHAIN_KEY)
        entry = transcript.entry(message.id) if transcript is not None and kept is not None else None
        unchanged = kept is not None and (
            transcript is None or (entry is not None and entry.message == message)
        )
        if isinstance(kept, dict) and unchanged:
            out.append(messages_from_dict([copy.deepcopy(kept)])[0])
        else:
            out.append(_render(message, kept))
    return out


def _where(message: object, index: int) -> str:
    kind = type(message).__name__
    ident = getattr(message, "id", None)
    return f"messages[{index}] ({kind}{f' {ident!r}' if ident else ''})"


def _texts(content: object, where: str, *, skip: frozenset[str] = frozenset()) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        raise InvalidMessage(f"{where}: content is neither text nor a list of blocks")
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") in skip:
            continue
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise UnsupportedItem(
                f"{where}: a content block of type {kind!r} this store has no form for", where
            )
    return texts


def _keeping(message: Message, original: BaseMessage) -> Message:
    import msgspec

    kept = message_to_dict(original)
    try:
        json.dumps(kept)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"{type(original).__name__} {original.id!r} is not JSON: {exc}") from exc
    metadata = dict(message.metadata or {})
    metadata[LANGCHAIN_KEY] = kept
    return msgspec.structs.replace(message, metadata=metadata)


def _message(message: BaseMessage, index: int, open_calls: dict[str, str]) -> Message:
    where = _where(message, index)
    if isinstance(message, HumanMessage):
        texts = _texts(message.content, where)
        return _keeping(Message.user([TextPart(text=t) for t in texts] or [TextPart(text="")]), message)
    if isinstance(message, SystemMessage):
        return _keeping(Message.system("\n\n".join(_texts(message.content, where))), message)
    if isinstance(message, AIMessage):
        # tool_use blocks repeat `tool_calls`; reasoning blocks go back with the kept original
        texts = _texts(message.content, where, skip=frozenset({"tool_use", "thinking", "reasoning"}))
        calls = []
        for k, call in enumerate(message.tool_calls):
            call_id = call.get("id") or f"{message.id or index}:{k}"
            if not isinstance(call.get("name"), str) or not call["name"]:
                raise InvalidMessage(f"{where}: tool call {k} has no name")
            calls.append(ToolCall(id=call_id, name=call["name"], input=call.get("args") or {}))
        return _keeping(Message.assistant("".join(texts), tool_calls=calls), message)
    if isinstance(message, ToolMessage):
        call_id = message.tool_call_id
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(f"{where}: a tool message without its tool_call_id")
        if call_id not in open_calls:
            raise InvalidMessage(f"{where}: it answers call {call_id!r}, which is not waiting for a result")
        text = "".join(_texts(message.content, where))
        result = Message.tool_result(
            call_id, text, name=message.name or open_calls[call_id], is_error=message.status == "error"
        )
        return _keeping(result, message)
    raise UnsupportedItem(f"{where}: a message type this store has no form for", where)


def _render(message: Message, kept: object) -> BaseMessage:
    """A message the view changed (shortened, a summary, a synthetic result) as a LangChain message,
    under its original's id when it has one."""
    ident = kept.get("data", {}).get("id") if isinstance(kept, dict) else None
    text = message.text
    if message.role == "assistant":
        calls = [
            {"name": c.name, "args": c.input, "id": c.id, "type": "tool_call"} for c in message.tool_calls
        ]
        return AIMessage(content=text, tool_calls=calls, id=ident)
    if message.role == "tool":
        result = message.tool_results[0]
        status = "error" if result.is_error else "success"
        return ToolMessage(
            content=result.text, tool_call_id=result.call_id, name=result.name, status=status, id=ident
        )
    if message.role == "system":
        return SystemMessage(content=text, id=ident)
    return HumanMessage(content=text, id=ident)


def _key(message: BaseMessage) -> str:
    """How a LangChain message is known across restarts: its id, or its content when it has none."""
    if message.id:
        return f"id:{message.id}"
    return "content:" + json.dumps(message_to_dict(message), sort_keys=True, default=str)


def _stored_key(message: Message) -> str | None:
    kept = (message.metadata or {}).get(LANGCHAIN_KEY)
    if not isinstance(kept, dict):
        return None
    ident = kept.get("data", {}).get("id")
    if ident:
        return f"id:{ident}"
    return "content:" + json.dumps(kept, sort_keys=True, default=str)


class _Mirror:
    """The session side of a LangChain conversation: which of its messages are stored (live), where."""

    def __init__(self, transcript: Transcript) -> None:
        if not isinstance(transcript, Transcript):
            raise InvalidArgument(
                f"the LangChain adapters wrap a Transcript, not {type(transcript).__name__}"
            )
        self.transcript = transcript

    def live(self) -> list[tuple[str, Message]]:
        """The stored LangChain messages not taken back, in order, with their keys."""
        out = []
        for entry in self.transcript.messages().entries:
            key = _stored_key(entry.message)
            if key is not None and not entry.flags.retracted:
                out.append((key, entry.message))
        return out

    def sync(self, messages: Sequence[BaseMessage]) -> None:
        """Make the session hold `messages`: append those it lacks (after the last it holds), and
        retract the stored ones after that point which the conversation no longer has."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise InvalidArgument(f"messages is a list of LangChain messages, not {type(messages).__name__}")
        for index, message in enumerate(messages):
            if not isinstance(message, BaseMessage):
                raise InvalidMessage(
                    f"messages[{index}] is not a LangChain message, but {type(message).__name__}"
                )
        live = self.live()
        known = {key: k for k, (key, _) in enumerate(live)}
        start = len(messages)
        anchor = -1
        for k in range(len(messages) - 1, -1, -1):
            found = known.get(_key(messages[k]))
            if found is not None:
                anchor = found
                break
            start = k
        if anchor < len(live) - 1:  # stored after the last message the conversation still has
            self._retract_after(live[anchor][1].id if anchor >= 0 else None)
        if start < len(messages):
            self.transcript.append_turn(from_langchain(messages[start:], self.transcript.pending_tools))

    def _retract_after(self, anchor_id: str | None) -> None:
        entries = self.transcript.messages().entries
        position = 0 if anchor_id is None else next(e.seq for e in entries if e.message.id == anchor_id) + 1
        taken = [
            e.message.id for e in entries[position:] if not e.flags.retracted and e.message.kind != "summary"
        ]
        if taken:
            self.transcript.retract(taken, reason="langchain_state")

    def add(self, messages: Sequence[BaseMessage]) -> None:
        for index, message in enumerate(messages):
            if not isinstance(message, BaseMessage):
                raise InvalidMessage(
                    f"messages[{index}] is not a LangChain message, but {type(message).__name__}"
                )
        if messages:
            self.transcript.append_turn(from_langchain(messages, self.transcript.pending_tools))

    def clear(self) -> None:
        live = [e.message.id for e in self.transcript.messages().entries if not e.flags.retracted]
        if live:
            self.transcript.retract(live, reason="clear")


class TranscriptMiddleware(AgentMiddleware):
    """Mirror the agent's messages into a session and send its compacted view (module docstring)."""

    def __init__(self, transcript: Transcript, *, window_tokens: int, **settings: Any) -> None:
        super().__init__()
        self.rounds = RoundSettings.of(window_tokens=window_tokens, **settings)
        self.mirror = _Mirror(transcript)
        self.transcript = transcript

    def _prepare(self, request: ModelRequest) -> ModelRequest:
        self.mirror.sync(request.messages)
        counter = self.transcript.counter
        system = request.system_message
        host = counter.count(system.text) if system is not None else 0
        tools = [convert_to_openai_tool(tool) for tool in request.tools]
        self.rounds.run(self.transcript, host + count_tool_tokens(tools, tokenizer=counter))
        view = self.transcript.visible_messages(record=True)
        return request.override(messages=to_langchain(view, self.transcript))  # type: ignore[arg-type]

    def _bill(self, response: object) -> None:
        usage = _usage(response)
        if usage is not None:
            try:
                self.transcript.record_usage(usage)
            except InvalidArgument:
                return  # no served view awaits a bill

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        response = handler(self._prepare(request))
        self._bill(response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        response = await handler(await off_loop(self._prepare, request))
        await off_loop(self._bill, response)
        return response

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the reply as the state holds it (under the id the agent gave it)."""
        self.mirror.sync(state["messages"])
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        await off_loop(self.mirror.sync, state["messages"])
        return None


class TranscriptChatHistory(BaseChatMessageHistory):
    """A `BaseChatMessageHistory` over one session: `messages` is its view (after a compaction round
    when `window_tokens` is given), `add_messages` appends, `clear` retracts (nothing is deleted)."""

    def __init__(self, transcript: Transcript, *, window_tokens: int | None = None, **settings: Any) -> None:
        self.rounds = (
            None if window_tokens is None else RoundSettings.of(window_tokens=window_tokens, **settings)
        )
        self.mirror = _Mirror(transcript)
        self.transcript = transcript

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        if self.rounds is not None:
            self.rounds.run(self.transcript, 0)
        return to_langchain(self.transcript.visible_messages(record=True), self.transcript)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.mirror.add(messages)

    def clear(self) -> None:
        self.mirror.clear()

    async def aget_messages(self) -> list[BaseMessage]:
        return await off_loop(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await off_loop(self.mirror.add, messages)

    async def aclear(self) -> None:
        await off_loop(self.mirror.clear)


def _usage(response: object) -> Usage | None:
    result = getattr(response, "result", None)
    replies = result if isinstance(result, list) else [response]
    for reply in replies:
        metadata = getattr(reply, "usage_metadata", None)
        if isinstance(metadata, dict) and (metadata.get("input_tokens") or metadata.get("output_tokens")):
            details = metadata.get("input_token_details") or {}
            cached = int(details.get("cache_read") or 0)
            written = int(details.get("cache_creation") or 0)
            name = (getattr(reply, "response_metadata", None) or {}).get("model_name")
            return Usage(
                input_tokens=max(int(metadata.get("input_tokens") or 0) - cached - written, 0),
                cache_read_tokens=cached,
                cache_write_tokens=written,
                output_tokens=int(metadata.get("output_tokens") or 0),
                model=name if isinstance(name, str) else None,
            )
    return None
