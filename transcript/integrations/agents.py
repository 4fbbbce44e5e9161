"""The OpenAI Agents SDK on this store: `pip install 'transcript-store[agents]'`.

`TranscriptSession` is an Agents SDK session over one store session. Each item the Runner writes
becomes part of a message (a run of assistant-side items — reasoning, output messages, function
calls — one assistant message; each other item a message of its own) and is kept in that message's
metadata exactly as received, so `get_items` gives back what `add_items` took, item for item, and the
SDK's own check on resume (it compares fingerprints of what it wrote) holds. `pop_item` and
`clear_session` retract, never delete (`Transcript.retract`); so wrapped in the SDK's
`OpenAIResponsesCompactionSession`, whose replacement of the history is `clear_session` then
`add_items`, the old items are retracted and the compaction item is kept (a `meta` message) and sent
back exactly as received. `model_input_filter` (or `run_config`)
runs one compaction round before every model call and sends the compacted view: unchanged messages as
their items, shortened ones and summaries rendered by the Responses codec. `hooks()` records each
call's billed usage beside the view it was served.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Self

import msgspec

try:
    from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, RunHooks
    from agents.items import ModelResponse
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "transcript.integrations.agents needs the OpenAI Agents SDK: pip install 'transcript-store[agents]'"
    ) from exc

from projection.view import View
from projection.wire import from_responses, message_items
from transcript.integrations.rounds import ROUND_KEYS, RoundSettings
from transcript.model.errors import InvalidArgument, InvalidMessage, SessionClosed, UnsupportedItem
from transcript.model.message import INTERRUPTED_RESULT, Message, TextPart
from transcript.model.usage import Usage
from transcript.session.aio import AsyncTranscript
from transcript.session.budget import count_tool_tokens
from transcript.session.facade import Transcript
from transcript.store.offloop import off_loop

__all__ = ["ITEMS_KEY", "TranscriptSession", "items_to_messages"]

# The metadata key under which a message keeps the SDK items it was made from, exactly as received.
ITEMS_KEY: Final = "agents_items"
# Assistant-side items: a run of them is one model output, stored as one assistant message.
_OUTPUT: Final = frozenset({"reasoning", "function_call"})
_INPUT_ROLES: Final = frozenset({"user", "system", "developer"})
COMPACTION_TEXT: Final = "[compacted history: an OpenAI compaction item, sent back as received]"

ModelInputFilter = Callable[[CallModelData[Any]], Awaitable[ModelInputData]]


class TranscriptSession:
    """An Agents SDK `Session` over one session of a store (open with `TranscriptSession.open`, or wrap
    a `Transcript` / `AsyncTranscript`). Every store call runs off the event loop."""

    def __init__(
        self, transcript: Transcript | AsyncTranscript, *, session_settings: SessionSettings | None = None
    ) -> None:
        if isinstance(transcript, Transcript):
            transcript = AsyncTranscript(transcript)
        if not isinstance(transcript, AsyncTranscript):
            raise InvalidArgument(
                f"TranscriptSession wraps a Transcript or an AsyncTranscript, not {type(transcript).__name__}"
            )
        self.transcript = transcript
        self.session_id = transcript.session_id
        self.session_settings = session_settings
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | Path | None = None,
        *,
        session_id: str,
        session_settings: SessionSettings | None = None,
        **settings: Any,
    ) -> Self:
        """Open a store file and one of its sessions (`settings` as for `Transcript.open`)."""
        return cls(
            await AsyncTranscript.open(path, session_id=session_id, **settings),
            session_settings=session_settings,
        )

    async def close(self) -> None:
        """Close the store if this session's transcript opened it; later calls are `SessionClosed`."""
        if not self._closed:
            self._closed = True
            await self.transcript.close()

    @property
    def _sync(self) -> Transcript:
        if self._closed:
            raise SessionClosed(f"session {self.session_id!r} is closed; nothing was read or written")
        return self.transcript.sync

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The items the SDK wrote and has not taken back, oldest first, exactly as received; the
        latest `limit` of them when given."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit is a whole number >= 0 or None, not {limit!r}")
        transcript = self._sync
        items = await off_loop(_owned_items, transcript, limit)
        return copy.deepcopy(items)

    async def add_items(self, items: list[Any]) -> None:
        """Store the items in one transaction (all of them or none). Calls left unanswered before a new
        turn are answered by a synthetic "interrupted" result (the SDK drops such calls from its
        input: the view sends them answered). An item with no message form is `UnsupportedItem`, an
        item of the wrong shape `InvalidMessage`, naming the item; nothing is stored then."""
        transcript = self._sync
        if not isinstance(items, list):
            raise InvalidArgument(f"add_items takes a list of items, not {type(items).__name__}")
        if not items:
            return

        def add() -> None:
            messages = items_to_messages(items, transcript.pending_tools)
            transcript.append_turn(messages)

        await off_loop(add)

    async def pop_item(self) -> Any | None:
        """Take back the latest item the SDK wrote (None when there is none): it is retracted, never
        deleted — no later view or `get_items` shows it, `replay` of an earlier point still does."""
        transcript = self._sync
        return await off_loop(_pop, transcript)

    async def clear_session(self) -> None:
        """Retract every message of the session (nothing is deleted; `replay` still shows them)."""
        transcript = self._sync

        def clear() -> None:
            live = [e.message.id for e in transcript.messages().entries if not e.flags.retracted]
            if live:
                transcript.retract(live, reason="clear_session")

        await off_loop(clear)

    def model_input_filter(self, *, window_tokens: int, **settings: Any) -> ModelInputFilter:
        """A `RunConfig.call_model_input_filter`: before every model call, one compaction round with
        the window less the agent's instructions, its tool schemas and `overhead_tokens` (`settings`:
        those of `RoundSettings`); it records the view served (for `replay --verify` and the usage the
        hooks record) and returns it as the model's input, followed by any input items not stored in
        this session."""
        rounds = RoundSettings.of(window_tokens=window_tokens, **settings)

        async def model_input(data: CallModelData[Any]) -> ModelInputData:
            transcript = self._sync
            instructions = data.model_data.instructions
            tools = await data.agent.get_all_tools(RunContextWrapper(context=data.context))
            await rounds.arun(self.transcript, await off_loop(_host_tokens, transcript, instructions, tools))
            served = await off_loop(_served_items, transcript, data.model_data.input)
            return ModelInputData(input=served, instructions=instructions)

        return model_input

    def run_config(self, *, window_tokens: int, **options: Any) -> RunConfig:
        """A `RunConfig` whose model-input filter is `model_input_filter(...)`: the options a round
        takes (`RoundSettings`) go to it, the others to `RunConfig`."""
        rounds = {key: value for key, value in options.items() if key in ROUND_KEYS}
        config = {key: value for key, value in options.items() if key not in ROUND_KEYS}
        config["call_model_input_filter"] = self.model_input_filter(window_tokens=window_tokens, **rounds)
        return RunConfig(**config)

    def hooks(self) -> RunHooks[Any]:
        """`RunHooks` that record each model call's billed usage against the view the filter served."""
        return _UsageHooks(self)

    async def record_response_usage(self, response: ModelResponse, agent: Agent[Any] | None = None) -> None:
        """Record a model response's usage against the latest served view (nothing when no view
        served by the filter is waiting for its bill, as when the filter is not installed)."""
        transcript = self._sync
        usage = _usage(response, agent)
        if usage is None:
            return

        def record() -> None:
            try:
                transcript.record_usage(usage)
            except InvalidArgument:
                return  # no served view awaits a bill: the filter did not serve this call

        await off_loop(record)

    def __repr__(self) -> str:
        return f"<TranscriptSession {self.session_id!r}>"


class _UsageHooks(RunHooks[Any]):
    def __init__(self, session: TranscriptSession) -> None:
        self.session = session

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await self.session.record_response_usage(response, agent)


def items_to_messages(items: Sequence[Any], pending: dict[str, str] | None = None) -> list[Message]:
    """SDK input items as the messages that store them, each keeping its items (`ITEMS_KEY`).

    `pending` are the calls (id -> tool name) unanswered before the items: an item that is not their
    result while some are pending first gets a synthetic "interrupted" result for each (which keeps
    no item: `get_items` never shows it).
    """
    open_calls = dict(pending or {})
    messages: list[Message] = []
    run: list[tuple[int, dict[str, Any]]] = []

    def close_run() -> None:
        if run:
            message = _assistant(run)
            messages.append(message)
            open_calls.clear()
            open_calls.update({call.id: call.name for call in message.tool_calls})
            run.clear()

    for index, raw in enumerate(items):
        item = _plain(raw, index)
        kind = _kind(item, index)
        if kind in _OUTPUT or (kind == "message" and item.get("role") == "assistant"):
            if open_calls and not run:
                messages.extend(_interrupted(open_calls))
            run.append((index, item))
            continue
        close_run()
        if kind == "function_call_output":
            result = _result(item, index, open_calls)
            open_calls.pop(result.tool_results[0].call_id)
            messages.append(result)
            continue
        if open_calls:
            messages.extend(_interrupted(open_calls))
        messages.append(_input(item, index, kind))
    close_run()
    return messages


def _interrupted(open_calls: dict[str, str]) -> list[Message]:
    repairs = [
        Message.tool_result(call_id, INTERRUPTED_RESULT, name=name, is_error=True)
        for call_id, name in open_calls.items()
    ]
    open_calls.clear()
    return repairs


def _plain(raw: Any, index: int) -> dict[str, Any]:
    dump = getattr(raw, "model_dump", None)
    value = dump(exclude_unset=True, mode="json") if callable(dump) else raw
    if not isinstance(value, dict):
        raise InvalidMessage(f"items[{index}] is not an input item (a dict), but {type(raw).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"items[{index}] is not JSON: {exc}") from exc
    return copy.deepcopy(value)


def _kind(item: dict[str, Any], index: int) -> str:
    kind = item.get("type", "message" if "role" in item else None)
    if not isinstance(kind, str):
        raise InvalidMessage(f"items[{index}] has no type and no role")
    return kind


def _keeping(message: Message, items: list[dict[str, Any]]) -> Message:
    metadata = dict(message.metadata or {})
    metadata[ITEMS_KEY] = items
    return msgspec.structs.replace(message, metadata=metadata)


def _assistant(run: list[tuple[int, dict[str, Any]]]) -> Message:
    output = [_as_output(item) for _, item in run]
    first = run[0][0]
    try:
        message = from_responses(output)
    except UnsupportedItem as exc:
        raise UnsupportedItem(_renamed(str(exc), first), _renamed(exc.item, first)) from exc
    except InvalidMessage as exc:
        raise InvalidMessage(_renamed(str(exc), first)) from exc
    metadata = {key: value for key, value in (message.metadata or {}).items() if key != "api"}
    return _keeping(msgspec.structs.replace(message, metadata=metadata or None), [item for _, item in run])


def _renamed(text: str, first: int) -> str:
    """A reply decoder's `output[k]` as the item's place in the list the SDK gave (`items[first + k]`)."""
    import re

    return re.sub(r"output\[(\d+)\]", lambda m: f"items[{first + int(m.group(1))}]", text)


def _as_output(item: dict[str, Any]) -> dict[str, Any]:
    """An assistant item as a reply's output item (an easy message `{"role", "content": str}` too)."""
    if item.get("type") is None and isinstance(item.get("content"), str):
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": item["content"], "annotations": []}],
        }
    return item


def _result(item: dict[str, Any], index: int, open_calls: dict[str, str]) -> Message:
    where = f"items[{index}] (function_call_output)"
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessage(f"{where}: a function call output without its call_id")
    if call_id not in open_calls:
        raise InvalidMessage(f"{where}: it answers call {call_id!r}, which is not waiting for a result")
    output = item.get("output")
    content: str | list[TextPart]
    if isinstance(output, str):
        content = output
    elif isinstance(output, list) and all(
        isinstance(part, dict) and part.get("type") == "input_text" and isinstance(part.get("text"), str)
        for part in output
    ):
        content = [TextPart(text=part["text"]) for part in output]
    else:
        raise UnsupportedItem(f"{where}: an output that is neither text nor input_text parts", where)
    message = Message.tool_result(call_id, content, name=open_calls[call_id])
    return _keeping(message, [item])


def _input(item: dict[str, Any], index: int, kind: str) -> Message:
    if kind == "compaction":  # OpenAIResponsesCompactionSession's opaque replacement of the history
        return _keeping(msgspec.structs.replace(Message.user(COMPACTION_TEXT), kind="meta"), [item])
    role = item.get("role")
    where = f"items[{index}] ({kind})"
    if kind != "message" or role not in _INPUT_ROLES:
        raise UnsupportedItem(f"{where}: an item this store has no message form for", where)
    content = item.get("content")
    texts: list[str]
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "input_text" and isinstance(part.get("text"), str)
        for part in content
    ):
        texts = [part["text"] for part in content]
    else:
        raise UnsupportedItem(f"{where}: content other than text (input_text parts)", where)
    parts = [TextPart(text=text) for text in texts]
    if role == "user":
        message = Message.user(parts)
    else:  # a system or developer message, its parts as given
        metadata = {"role": "developer"} if role == "developer" else None
        message = msgspec.structs.replace(
            Message.system(texts[0] if texts else ""), parts=tuple(parts), metadata=metadata
        )
    return _keeping(message, [item])


def _owned_items(transcript: Transcript, limit: int | None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for entry in reversed(transcript.messages().entries):
        if limit is not None and len(items) >= limit:
            break
        if entry.flags.retracted:
            continue
        kept = (entry.message.metadata or {}).get(ITEMS_KEY)
        if isinstance(kept, list):
            items.extend(reversed(kept))
    items.reverse()
    return items if limit is None else items[len(items) - limit :] if limit else []


def _pop(transcript: Transcript) -> Any | None:
    """Retract the latest item. An item of a step (a model output or a tool output) takes its whole
    step back — a call never stays without its result in the view — and the step's other items are
    appended again in the same write, so `get_items` shows all but the popped one."""
    entries = transcript.messages().entries
    for at in range(len(entries) - 1, -1, -1):
        entry = entries[at]
        kept = (entry.message.metadata or {}).get(ITEMS_KEY)
        if entry.flags.retracted or not isinstance(kept, list) or not kept:
            continue
        step = [entry]
        if entry.message.role in ("assistant", "tool"):
            start = next(k for k in range(at, -1, -1) if entries[k].message.role == "assistant")
            step = [
                e
                for e in entries[start:]
                if not e.flags.retracted and e.message.role in ("assistant", "tool")
            ]
        items = [item for e in step for item in (e.message.metadata or {}).get(ITEMS_KEY) or ()]
        popped = items.pop()
        then = items_to_messages(items) if items else []
        transcript.retract([e.message.id for e in step], reason="pop_item", then=then)
        return copy.deepcopy(popped)
    return None


def _host_tokens(transcript: Transcript, instructions: str | None, tools: Sequence[Any]) -> int:
    """The tokens the SDK sends besides the input: the instructions and each tool's schema."""
    schemas: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, FunctionTool):
            schemas.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.params_json_schema,
                    "strict": tool.strict_json_schema,
                }
            )
        else:
            schemas.append({"type": str(getattr(tool, "name", type(tool).__name__))})
    counter = transcript.counter
    return (counter.count(instructions) if instructions else 0) + count_tool_tokens(
        schemas, tokenizer=counter
    )


def _served_items(transcript: Transcript, given: Sequence[Any]) -> list[Any]:
    """The compacted view as input items (recorded as served), then the input items this session does
    not hold (what the SDK has not stored yet), in their order."""
    view = transcript.visible_messages(record=True)
    items = _view_items(transcript, view)
    return _without_orphans(items + [copy.deepcopy(item) for item in _unstored(transcript, given)])


def _unstored(transcript: Transcript, given: Sequence[Any]) -> Sequence[Any]:
    """The items of `given` after the last one this session holds. The SDK's input ends with the
    session's latest item, or with the few items it has not written yet, so the search goes from the
    end and stops at once; only an input that does not hold the latest item (a host's own
    `session_input_callback`) is compared with as many stored items as it has."""
    tail = _owned_items(transcript, 1)
    if not tail or not given:
        return given
    latest = _fingerprint(tail[0])
    for k in range(len(given) - 1, -1, -1):
        if _fingerprint(given[k]) == latest:
            return given[k + 1 :]
    stored = {_fingerprint(item) for item in _owned_items(transcript, len(given))}
    last = max((k for k, item in enumerate(given) if _fingerprint(item) in stored), default=-1)
    return given[last + 1 :]


def _view_items(transcript: Transcript, view: View) -> list[Any]:
    items: list[Any] = []
    for message in view.messages:
        kept = (message.metadata or {}).get(ITEMS_KEY)
        entry = transcript.entry(message.id) if isinstance(kept, list) else None
        if isinstance(kept, list) and entry is not None and entry.message == message:
            items.extend(copy.deepcopy(kept))  # shown as stored: the very items the SDK wrote
        else:
            items.extend(message_items(message))
    return items


def _without_orphans(items: list[Any]) -> list[Any]:
    """Leave out calls without an output and outputs without a call (and the reasoning right before a
    call left out), as the SDK does with its own input: the Responses API refuses them."""
    calls = {
        item.get("call_id")
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call"
    }
    outputs = {
        item.get("call_id")
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }
    kept: list[Any] = []
    for item in reversed(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call" and item.get("call_id") not in outputs:
            continue
        if kind == "function_call_output" and item.get("call_id") not in calls:
            continue
        kept.append(item)
    kept.reverse()
    return kept


def _fingerprint(item: Any) -> str:
    dump = getattr(item, "model_dump", None)
    value = dump(exclude_unset=True, mode="json") if callable(dump) else item
    return json.dumps(value, sort_keys=True, default=str)


def _usage(response: ModelResponse, agent: Agent[Any] | None) -> Usage | None:
    usage = response.usage
    if usage is None or (not usage.requests and not usage.input_tokens and not usage.output_tokens):
        return None
    cached = usage.input_tokens_details.cached_tokens or 0 if usage.input_tokens_details else 0
    reasoning = usage.output_tokens_details.reasoning_tokens or 0 if usage.output_tokens_details else 0
    model = getattr(agent, "model", None) if agent is not None else None
    name = model if isinstance(model, str) else getattr(model, "model", None)
    return Usage(
        input_tokens=max(usage.input_tokens - cached, 0),
        cache_read_tokens=cached,
        output_tokens=usage.output_tokens,
        reasoning_tokens=reasoning,
        model=name if isinstance(name, str) else None,
    )
