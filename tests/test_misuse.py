"""Every public function, given an argument of the wrong type, raises a `TranscriptError` — never a
`TypeError` or `AttributeError` from somewhere inside — and stores nothing.

The table below names a valid call of every public function of the facade (`Transcript`), `Store`,
`Message` (and `ToolCall`), `LoopPolicy`, `SessionState`, `verify` and the formats. Each argument in turn is
replaced by every value that its annotation says is of the wrong type (an object, a number, a string,
None, a bytes value, a list of objects, a mapping, `True` for a number), and the call must raise a
`TranscriptError`. A test also checks that the table covers every public function, so a function
added later without a row fails here.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import planner.full
import planner.micro
import planner.summary
import planner.trigger
import transcript.formats
import transcript.model.events
import transcript.store.port
from planner import CompactConfig, LoopPolicy
from planner.micro import plan_micro
from transcript import (
    CompactResult,
    Message,
    ProviderCaps,
    SessionState,
    Store,
    ToolCall,
    Transcript,
    TranscriptError,
    TranscriptSnapshot,
    Usage,
)
from transcript.formats import anthropic_messages, openai_chat
from transcript.formats.registry import IMPORTERS
from transcript.model import ImagePart, TextPart
from transcript.session.facade import SETTINGS

FIXTURES = Path(__file__).parent.parent / "fixtures"
FIXTURE = FIXTURES / "openai_chat_sample.jsonl"
# A file of each format, for a valid call of its importer.
SAMPLES = {
    "claude-code": FIXTURES / "formats" / "claude-code" / "session_head_2.1.29_entire.jsonl",
    "codex": FIXTURES / "formats" / "codex" / "rollout_0.80.0_built.jsonl",
    "gemini-cli": FIXTURES / "formats" / "gemini-cli" / "chat_tool_calls_built.json",
    "openhands": FIXTURES / "formats" / "openhands" / "resolver_output_flat_history.jsonl",
    "swe-agent": FIXTURES / "corpus" / "sweagent_marshmallow-1867_fc.traj",
    "mini-swe-agent": FIXTURES / "formats" / "mini-swe-agent" / "local.traj.json",
    "openai-jsonl": FIXTURE,
    "openai-json": FIXTURES / "formats" / "openai-json" / "weather_loop_built.json",
    "anthropic-json": FIXTURES / "anthropic_messages_sample.json",
    "cline": FIXTURES / "formats" / "cline" / "1769000000000_built" / "api_conversation_history.json",
    "llm-logs": FIXTURES / "formats" / "llm-logs" / "logs.db",
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Every name a public annotation may use, for `typing.get_type_hints`.
NAMESPACE: dict[str, Any] = {
    **vars(typing),
    **{
        name: getattr(__import__("collections.abc").abc, name)
        for name in ("Callable", "Iterable", "Sequence")
    },
    "Mapping": Mapping,
    "Path": Path,
    "datetime": datetime,
    "Message": Message,
    "ToolCall": ToolCall,
    "Transcript": Transcript,
    "Store": Store,
    "ImportReport": transcript.ImportReport,
    "View": transcript.View,
    "Status": transcript.Status,
    "Checkpoint": transcript.Checkpoint,
    "CompactConfig": CompactConfig,
    "LoopPolicy": LoopPolicy,
    "CompactResult": CompactResult,
    "SessionState": SessionState,
    "TranscriptSnapshot": TranscriptSnapshot,
    "ProviderCaps": ProviderCaps,
    "Summarizer": planner.summary.Summarizer,
    "Reinject": planner.full.Reinject,
    "BeforeCompact": planner.trigger.BeforeCompact,
    "MicroPlan": planner.micro.MicroPlan,
    "EventStore": transcript.store.port.EventStore,
    **{name: getattr(transcript.model, name) for name in transcript.model.__all__},
    **{name: getattr(transcript.model.events, name) for name in dir(transcript.model.events)},
}

# Candidates for a wrong value: each is used where its type does not fit the annotation.
CANDIDATES: tuple[object, ...] = (object(), 5, "x", None, 1.5, True, b"x", [object()], {"k": object()})


def _fits(value: object, hint: Any) -> bool:
    """Whether `value` is of the type `hint` names (True for what this checker cannot judge)."""
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (Callable, typing.Callable) or hint is Callable:
        return callable(value)
    if origin in (list, tuple, Sequence, Iterable):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
            return False
        element = args[0] if args else Any
        return all(_fits(item, element) for item in value)
    if origin in (dict, Mapping):
        key, item = args if args else (Any, Any)
        return isinstance(value, Mapping) and all(_fits(k, key) and _fits(v, item) for k, v in value.items())
    if getattr(hint, "_is_protocol", False):
        return all(hasattr(value, name) for name in ("commit", "head"))
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def wrong_values(hint: Any) -> list[object]:
    """The candidates that do not fit `hint`."""
    return [value for value in CANDIDATES if not _fits(value, hint)]


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, evaluated in the function's module (and `NAMESPACE`, for names its
    module imports only for type checking)."""
    target = function.__init__ if isinstance(function, type) else function  # type: ignore[misc]
    scope = {**NAMESPACE, **getattr(inspect.unwrap(target), "__globals__", {})}
    hints = {}
    for name, parameter in inspect.signature(target).parameters.items():
        if name in ("self", "cls") or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        annotation = parameter.annotation
        hints[name] = eval(annotation, scope) if isinstance(annotation, str) else annotation
    return hints


def _served(w: World) -> int:
    """The version of a view just recorded as served: what a usage record answers."""
    w.t.visible_messages(record=True)
    return w.t.version


class World:
    """A store with a session that has tool calls and a compaction, and what a valid call needs."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "t.db"
        self.store = Store.open(self.path, tokenizer="chars/4")
        self.t = self.store.session("s")
        self.t.append(Message.system("sys", created_at=T0))
        self.t.append(Message.user("make the failing test pass", created_at=T0))
        for n in range(4):
            call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
            self.t.append_turn(
                [
                    Message.assistant(f"step {n}", tool_calls=[call], created_at=T0),
                    Message.tool_result(f"c{n}", f"line {n}\n" * 300, name="Bash", created_at=T0),
                ]
            )
        self.result = self.t.compact(budget_tokens=2_000, force=True)
        self.state = self.t.export_state()
        self.fresh = iter(range(1_000_000))

    def new_id(self) -> str:
        return f"n{next(self.fresh)}"

    def close(self) -> None:
        self.t.close()
        self.store.close()


def _noop(*args: object) -> list[tuple[str, str]]:
    return []


# A valid round's arguments (`compact` and `acompact`).
ROUND: dict[str, Any] = {
    "budget_tokens": 100_000,
    "config": None,
    "manual": False,
    "force": False,
    "shadow": False,
    "summarizer": None,
}


async def _areply(view: object) -> str:
    return "reply"


def _settings() -> dict[str, Any]:
    return {name: None for name in SETTINGS}


def _importer(target: str) -> Callable[..., Any]:
    import importlib

    module, _, function = target.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), function or "parse")
    return found


def _sync(coroutine_function: Callable[..., Any]) -> Callable[..., Any]:
    import asyncio

    def run(**kwargs: Any) -> Any:
        return asyncio.run(coroutine_function(**kwargs))

    return run


# name -> (the function as its class has it, whose annotations say what fits; the function to call,
# given the world; a valid call's arguments, given the world)
Row = tuple[Callable[..., Any], Callable[[World], Callable[..., Any]], Callable[[World], dict[str, Any]]]
TABLE: dict[str, Row] = {
    "Transcript.open": (
        Transcript.open,
        lambda w: Transcript.open,
        lambda w: {
            "path": w.path,
            "session_id": "s",
            "readonly": False,
            "create": True,
            "timeout": 5.0,
            "synchronous": "FULL",
            "tokenizer": "chars/4",
            **_settings(),
        },
    ),
    "Transcript.attach": (
        Transcript.attach,
        lambda w: Transcript.attach,
        lambda w: {"events": w.store.events, "session_id": "s", "create": True, **_settings()},
    ),
    "Transcript.append": (
        Transcript.append,
        lambda w: w.t.append,
        lambda w: {"message": Message.user("more")},
    ),
    "Transcript.append_turn": (
        Transcript.append_turn,
        lambda w: w.t.append_turn,
        lambda w: {"messages": [Message.user("more")]},
    ),
    "Transcript.visible_messages": (
        Transcript.visible_messages,
        lambda w: w.t.visible_messages,
        lambda w: {"record": False},
    ),
    "Transcript.entry": (Transcript.entry, lambda w: w.t.entry, lambda w: {"message_id": "x"}),
    "Transcript.retract": (
        Transcript.retract,
        lambda w: w.t.retract,
        lambda w: {
            "message_ids": [m.id for m in w.t.stored_messages() if m.role in ("assistant", "tool")][-2:],
            "reason": "pop_item",
            "then": [Message.user("again")],
        },
    ),
    "Transcript.record_usage": (
        Transcript.record_usage,
        lambda w: w.t.record_usage,
        lambda w: {"usage": Usage(input_tokens=5), "served": _served(w)},
    ),
    "Transcript.compact": (
        Transcript.compact,
        lambda w: w.t.compact,
        lambda w: dict(ROUND),
    ),
    "Transcript.acompact": (
        Transcript.acompact,
        lambda w: _sync(w.t.acompact),
        lambda w: dict(ROUND),
    ),
    "Transcript.call_model": (
        Transcript.call_model,
        lambda w: w.t.call_model,
        lambda w: {"call": lambda view: "reply", "budget_tokens": 100_000, "policy": None, "record": False},
    ),
    "Transcript.acall_model": (
        Transcript.acall_model,
        lambda w: _sync(w.t.acall_model),
        lambda w: {"call": _areply, "budget_tokens": 100_000, "policy": None, "record": False},
    ),
    "Transcript.set_processes": (
        Transcript.set_processes,
        lambda w: w.t.set_processes,
        lambda w: {"processes": [{"id": "p1", "command": "npm run dev", "state": "running"}]},
    ),
    "Transcript.drain_compact_results": (
        Transcript.drain_compact_results,
        lambda w: w.t.drain_compact_results,
        lambda w: {"automatic_only": False},
    ),
    "Transcript.apply_micro_plan": (
        Transcript.apply_micro_plan,
        lambda w: w.t.apply_micro_plan,
        lambda w: {"plan": plan_micro(w.t.messages(), CompactConfig())},
    ),
    "Transcript.continuation_prompt": (
        Transcript.continuation_prompt,
        lambda w: w.t.continuation_prompt,
        lambda w: {"result": w.result},
    ),
    "Transcript.set_provider": (
        Transcript.set_provider,
        lambda w: w.t.set_provider,
        lambda w: {"provider": "anthropic"},
    ),
    "Transcript.set_title": (Transcript.set_title, lambda w: w.t.set_title, lambda w: {"title": "a title"}),
    "Transcript.write_state": (
        Transcript.write_state,
        lambda w: w.t.write_state,
        lambda w: {"out": bytearray().extend},
    ),
    "Store.open": (
        Store.open,
        lambda w: Store.open,
        lambda w: {
            "path": w.path,
            "readonly": False,
            "timeout": 5.0,
            "synchronous": "FULL",
            "tokenizer": "chars/4",
        },
    ),
    "Store.session": (
        Store.session,
        lambda w: w.store.session,
        lambda w: {"session_id": "s", "create": True, **_settings()},
    ),
    "Store.head": (Store.head, lambda w: w.store.head, lambda w: {"session_id": "s"}),
    "Store.has_session": (Store.has_session, lambda w: w.store.has_session, lambda w: {"session_id": "s"}),
    "Store.search": (
        Store.search,
        lambda w: w.store.search,
        lambda w: {"phrase": "test", "session_id": None, "limit": 5},
    ),
    "Store.stored_differently": (
        Store.stored_differently,
        lambda w: w.store.stored_differently,
        lambda w: {"messages": [Message.user("x", created_at=T0)]},
    ),
    "Store.import_file": (
        Store.import_file,
        lambda w: w.store.import_file,
        lambda w: {"path": FIXTURE, "format": "auto"},
    ),
    "Store.backup": (
        Store.backup,
        lambda w: w.store.backup,
        lambda w: {"target": w.path.parent / f"backup-{w.new_id()}.db"},
    ),
    "Store.restore": (
        Store.restore,
        lambda w: w.store.restore,
        lambda w: {"state": w.state, "session_id": w.new_id(), **_settings()},
    ),
    "Store.redact": (
        Store.redact,
        lambda w: w.store.redact,
        lambda w: {"message_id": w.t.stored_messages()[3].id, "reason": "test", "parts": [0], "by": None},
    ),
    "Transcript.redact": (
        Transcript.redact,
        lambda w: w.t.redact,
        lambda w: {"message_id": w.t.stored_messages()[5].id, "reason": "test", "parts": None, "by": "me"},
    ),
    "Store.erase": (
        Store.erase,
        lambda w: w.store.erase,
        lambda w: {"session_id": "s", "reason": "test", "by": None},
    ),
    "Store.fork": (
        Store.fork,
        lambda w: w.store.fork,
        lambda w: {"session_id": "s", "at": "last", "new_session_id": w.new_id(), **_settings()},
    ),
    "Message.system": (
        Message.system,
        lambda w: Message.system,
        lambda w: {"text": "t", "id": None, "created_at": None},
    ),
    "Message.user": (
        Message.user,
        lambda w: Message.user,
        lambda w: {"content": [TextPart(text="t")], "id": "u", "created_at": T0, "metadata": {"k": 1}},
    ),
    "Message.assistant": (
        Message.assistant,
        lambda w: Message.assistant,
        lambda w: {
            "text": "t",
            "tool_calls": [ToolCall(id="c", name="n", input={})],
            "reasoning": (),
            "id": None,
            "created_at": None,
            "metadata": None,
        },
    ),
    "Message.tool_result": (
        Message.tool_result,
        lambda w: Message.tool_result,
        lambda w: {
            "call_id": "c",
            "content": [TextPart(text="t"), ImagePart(media_type="image/png", data="iVBORw0KGgo=")],
            "name": "n",
            "is_error": False,
            "id": None,
            "created_at": None,
        },
    ),
    "Message.continuation": (
        Message.continuation,
        lambda w: Message.continuation,
        lambda w: {"text": "go on", "reason": "follow_up", "id": None, "created_at": None},
    ),
    "ToolCall.from_arguments": (
        ToolCall.from_arguments,
        lambda w: ToolCall.from_arguments,
        lambda w: {"id": "c", "name": "n", "arguments": "{}"},
    ),
    "LoopPolicy": (
        LoopPolicy,
        lambda w: LoopPolicy,
        lambda w: {
            "auto_continue": False,
            "max_auto_follow_ups": 3,
            "max_total_turns": 50,
            "continue_after_compact": True,
            "stop_on_approval_block": True,
            "stop_on_explicit_question": True,
            "ask_user_tools": ("AskUserQuestion",),
            "follow_up_prompt": "go on",
        },
    ),
    "LoopPolicy.after_round": (
        LoopPolicy.after_round,
        lambda w: LoopPolicy().after_round,
        lambda w: {"result": w.result},
    ),
    "LoopPolicy.after_overflow": (
        LoopPolicy.after_overflow,
        lambda w: LoopPolicy().after_overflow,
        lambda w: {"error": RuntimeError("prompt is too long"), "retried": False},
    ),
    "LoopPolicy.after_reply": (
        LoopPolicy.after_reply,
        lambda w: LoopPolicy().after_reply,
        lambda w: {"snapshot": w.t.messages()},
    ),
    "verify": (
        transcript.verify,
        lambda w: transcript.verify,
        lambda w: {"path": w.path, "deep": False, "expect_heads": {"s": w.store.head("s")[1]}},
    ),
    "SessionState.from_json": (
        SessionState.from_json,
        lambda w: SessionState.from_json,
        lambda w: {"data": w.state.to_json()},
    ),
    "formats.parse": (
        transcript.formats.parse,
        lambda w: transcript.formats.parse,
        lambda w: {"path": FIXTURE, "format": "openai-jsonl"},
    ),
    "formats.detect_format": (
        transcript.formats.detect_format,
        lambda w: transcript.formats.detect_format,
        lambda w: {"path": FIXTURE},
    ),
    "formats.openai_chat.export": (
        openai_chat.export,
        lambda w: openai_chat.export,
        lambda w: {"messages": w.t.stored_messages()},
    ),
    "formats.anthropic_messages.export": (
        anthropic_messages.export,
        lambda w: anthropic_messages.export,
        lambda w: {"messages": w.t.stored_messages()},
    ),
    **{
        f"formats.{name}": (
            _importer(target),
            lambda w, target=target: _importer(target),  # type: ignore[misc]
            lambda w, name=name: {"path": SAMPLES[name]},  # type: ignore[misc]
        )
        for name, target in IMPORTERS.items()
    },
}

# What a row's `**settings` stand for: the parameters of `Transcript` they are passed to.
SETTINGS_OF = {"Store.session", "Store.restore", "Store.fork", "Transcript.attach"}


def _parameter_hints(name: str, source: Callable[..., Any]) -> dict[str, Any]:
    hints = _hints(source)
    if name in SETTINGS_OF:
        settings = _hints(Transcript.__init__)
        hints.update({key: settings[key] for key in _settings()})
    return hints


def _misuses() -> Iterator[tuple[str, str, object]]:
    for name, (source, _, _) in TABLE.items():
        for parameter, hint in _parameter_hints(name, source).items():
            for value in wrong_values(hint):
                yield name, parameter, value


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.close()


@pytest.mark.parametrize("name", list(TABLE))
def test_every_row_is_a_valid_call(world: World, name: str) -> None:
    _, function, arguments = TABLE[name]
    function(world)(**arguments(world))


MISUSES = list(_misuses())


def _label(case: tuple[str, str, object]) -> str:
    name, parameter, value = case
    shown = type(value).__name__ if not isinstance(value, (int, str)) else repr(value)
    return f"{name}-{parameter}-{shown}"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One world for every misuse: none of them may store anything, which each test checks."""
    w = World(tmp_path_factory.mktemp("misuse"))
    yield w
    w.close()


@pytest.mark.parametrize("case", MISUSES, ids=[_label(c) for c in MISUSES])
def test_a_wrong_typed_argument_is_a_transcript_error(shared: World, case: tuple[str, str, object]) -> None:
    name, parameter, value = case
    _, function, arguments = TABLE[name]
    call = arguments(shared)
    call[parameter] = value
    before = shared.store.sessions()
    with pytest.raises(TranscriptError):
        function(shared)(**call)
    assert shared.store.sessions() == before  # nothing was stored


def _public(owner: object) -> set[str]:
    names = set()
    for attribute, member in vars(owner).items():
        if attribute.startswith("_") or isinstance(member, property):
            continue
        function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if not callable(function):
            continue
        parameters = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
        if parameters:
            names.add(attribute)
    return names


def test_the_table_covers_every_public_function() -> None:
    covered = set(TABLE)
    expected = {f"Transcript.{n}" for n in _public(Transcript)} | {f"Store.{n}" for n in _public(Store)}
    expected |= {f"Message.{n}" for n in _public(Message)} | {f"ToolCall.{n}" for n in _public(ToolCall)}
    expected |= {f"LoopPolicy.{n}" for n in _public(LoopPolicy)} | {"LoopPolicy", "SessionState.from_json"}
    expected |= {"verify"}
    expected |= {
        f"formats.{n}"
        for n in transcript.formats.__all__
        if inspect.isfunction(getattr(transcript.formats, n))
    }
    expected |= {"formats.openai_chat.export", "formats.anthropic_messages.export"}
    expected |= {f"formats.{name}" for name in IMPORTERS}
    assert expected - covered == set()


def test_the_checker_sees_what_is_wrong() -> None:
    assert wrong_values(int) == [CANDIDATES[0], "x", None, 1.5, True, b"x", CANDIDATES[7], CANDIDATES[8]]
    assert "x" not in wrong_values(str | Path) and None in wrong_values(str | Path)
    assert [object()] not in wrong_values(Sequence[Message]) and CANDIDATES[7] in wrong_values(
        Sequence[Message]
    )
    assert wrong_values(Any) == []


def test_a_budget_past_any_context_is_refused(world: World) -> None:
    for budget in (10**309, 2**63, 10**15 + 1):
        with pytest.raises(TranscriptError, match="budget"):
            world.t.compact(budget_tokens=budget, force=True)
    assert world.t.compact(budget_tokens=10**15).outcome  # the cap itself is a budget
