"""LangChain 1.x on the store: `create_agent` with `TranscriptMiddleware`, and `TranscriptChatHistory`
under `RunnableWithMessageHistory` — the real packages, a scripted chat model."""

from __future__ import annotations

import asyncio
import json
import signal
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain_core._api import LangChainDeprecationWarning
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

from tests import langchain_loop
from tests.helpers import run_loop
from tests.langchain_loop import TURNS, WINDOW_TOKENS, agent_for
from transcript import Transcript
from transcript.integrations.langchain import (
    TranscriptChatHistory,
    TranscriptMiddleware,
    from_langchain,
    to_langchain,
)
from transcript.model.errors import InvalidArgument, InvalidMessage, UnsupportedItem
from transcript.session.replay import check_served, view_at
from transcript.store.verify import verify


def test_an_agent_killed_mid_turn_resumes_in_a_new_process_with_the_same_model_inputs(tmp_path: Path) -> None:
    langchain_loop.main(str(tmp_path / "through.db"), tmp_path / "through.log", "through")
    killed = run_loop("tests.langchain_loop", tmp_path / "resumed.db", tmp_path / "resumed.log", "kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before_kill = (tmp_path / "resumed.log").read_text().splitlines()
    resumed = run_loop("tests.langchain_loop", tmp_path / "resumed.db", tmp_path / "resumed.log", "resume")
    assert resumed.returncode == 0, resumed.stderr

    expected = (tmp_path / "through.log").read_text().splitlines()
    got = (tmp_path / "resumed.log").read_text().splitlines()
    assert len(expected) == 2 * TURNS
    # the killed process made the first call of its turn; the resumed one makes it again, then the rest
    assert got[: len(before_kill)] == expected[: len(before_kill)]
    assert got[len(before_kill) :] == expected[len(before_kill) - 1 :]

    with Transcript.open(tmp_path / "resumed.db", session_id="langchain-run") as transcript:
        assert sum(r.outcome == "micro_applied" for r in transcript.compact_results()) > 1
        assert transcript.stored_tokens > WINDOW_TOKENS > transcript.visible_messages().tokens
        assert check_served(transcript.events, "langchain-run").drifts == ()
        assert len(transcript.billing().calls) == len(got)
        # the turn the killed process was doing is kept, taken back, and done again: nothing lost
        retracted = [e for e in transcript.messages().entries if e.flags.retracted]
        assert any(e.message.tool_calls for e in retracted)
    assert verify(tmp_path / "resumed.db").ok


def test_a_restarted_agent_does_not_store_its_messages_twice(db_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "model.log"
    with Transcript.open(db_path, session_id="lc") as transcript:
        first = agent_for(transcript, log).invoke({"messages": [HumanMessage("task 0", id="t0")]})
        stored = len(transcript)
    with Transcript.open(db_path, session_id="lc") as transcript:  # a new middleware, the same state
        again = agent_for(transcript, log).invoke({"messages": [*first["messages"], HumanMessage("task 1")]})
        assert len(transcript) == stored + 4  # the new request, a call, its result and the answer
        live = [e.message for e in transcript.messages().entries if not e.flags.retracted]
        assert [m.text for m in live if m.role == "user"] == ["task 0", "task 1"]
        assert [type(m) for m in again["messages"]] == [HumanMessage, AIMessage, ToolMessage, AIMessage] * 2


def test_the_model_is_sent_the_compacted_view_and_the_state_keeps_everything(
    db_path: Path, tmp_path: Path
) -> None:
    log = tmp_path / "model.log"
    with Transcript.open(db_path, session_id="lc") as transcript:
        agent = agent_for(transcript, log)
        messages: list[Any] = []
        for turn in range(8):
            messages = agent.invoke({"messages": [*messages, HumanMessage(f"task {turn}")]})["messages"]
        sent = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(sent) == 16
        outcomes = [r.outcome for r in transcript.compact_results()]
        assert outcomes and set(outcomes) == {"micro_applied"}  # micro rounds only, no summary
        state_chars = len(json.dumps(messages_to_dict(messages)))
        # the last input is the view, not the state: results were shortened, the state still has them
        results = [len(m["content"]) for m in sent[-1] if m["role"] == "tool"]
        kept = [len(str(m.content)) for m in messages if isinstance(m, ToolMessage)]
        assert min(results) < max(kept) / 4
        assert len(json.dumps(sent[-1])) < state_chars * 0.6
        assert sent[-1][0] == {"role": "system", "content": "You are a careful coding agent."}
        view = to_langchain(transcript.visible_messages(), transcript)
        assert len(sent[-1]) == len(view)  # the system prompt more, the last answer less
        assert check_served(transcript.events, "lc").drifts == ()


def test_the_async_agent_runs_the_same(db_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "model.log"
    with Transcript.open(db_path, session_id="lc") as transcript:
        agent = agent_for(transcript, log)

        async def main() -> list[Any]:
            messages: list[Any] = []
            for turn in range(3):
                result = await agent.ainvoke(
                    {"messages": [*messages, HumanMessage(f"task {turn}", id=f"t{turn}")]}
                )
                messages = result["messages"]
            return messages

        messages = asyncio.run(main())
        assert len(messages) == 12
        assert len(transcript) == 12 and len(transcript.billing().calls) == 6


def _history_chain(
    histories: dict[str, TranscriptChatHistory], replies: list[str]
) -> RunnableWithMessageHistory:
    model = FakeMessagesListChatModel(responses=[AIMessage(text) for text in replies])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with pytest.warns(LangChainDeprecationWarning):
        return RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: histories[session_id],
            input_messages_key="question",
            history_messages_key="history",
        )


def test_runnable_with_message_history_round_trips_sync_and_async(db_path: Path) -> None:
    with Transcript.open(db_path, session_id="chat") as transcript:
        history = TranscriptChatHistory(transcript, window_tokens=50_000)
        chain = _history_chain({"chat": history}, ["Paris.", "About 2 million.", "Yes."])
        config: RunnableConfig = {"configurable": {"session_id": "chat"}}
        assert chain.invoke({"question": "Capital of France?"}, config=config).content == "Paris."
        second = asyncio.run(chain.ainvoke({"question": "Its population?"}, config=config))
        assert second.content == "About 2 million."
        third = asyncio.run(chain.ainvoke({"question": "Big?"}, config=config))  # another event loop
        assert third.content == "Yes."
        texts = [m.text for m in transcript.stored_messages()]
        assert texts == [
            "Capital of France?",
            "Paris.",
            "Its population?",
            "About 2 million.",
            "Big?",
            "Yes.",
        ]
        assert [m.content for m in history.messages] == texts
        assert [m.content for m in asyncio.run(history.aget_messages())] == texts
        asyncio.run(history.aclear())
        assert history.messages == [] and len(transcript) == 6  # retracted, not deleted
        assert [m.text for m in view_at(transcript.events, "chat", "last").messages] == []
        history.add_messages([HumanMessage("again")])
        assert [m.content for m in history.messages] == ["again"]


def test_messages_come_back_exactly_and_ids_may_be_missing(db_path: Path) -> None:
    call = AIMessage(content="", tool_calls=[{"name": "grep", "args": {"q": "x"}, "id": None}], id="ai-1")
    with Transcript.open(db_path, session_id="lc") as transcript:
        history = TranscriptChatHistory(transcript)
        original = [SystemMessage("sys", id="s"), HumanMessage("hi", id="h"), call]
        history.add_messages(original)
        (stored_call,) = transcript.stored_messages()[-1].tool_calls
        assert stored_call.id == "ai-1:0"  # made from its message's id and place
        history.add_messages([ToolMessage("found", tool_call_id="ai-1:0", id="r")])
        back = history.messages
        assert back[:3] == original  # the very messages, tool call without an id included
        assert isinstance(back[3], ToolMessage) and back[3].tool_call_id == "ai-1:0"


@pytest.mark.parametrize(
    ("messages", "error", "named"),
    [
        ([ToolMessage("x", tool_call_id="nope", id="r1")], InvalidMessage, "'r1'"),
        (
            [HumanMessage([{"type": "image", "url": "https://example.com/a.png"}], id="h1")],
            UnsupportedItem,
            "'h1'",
        ),
        (
            [HumanMessage("ok"), ChatMessage(content="x", role="critic", id="c1")],
            UnsupportedItem,
            "messages[1]",
        ),
        (["not a message"], InvalidMessage, "messages[0]"),
    ],
)
def test_a_message_with_no_form_here_is_refused_naming_it_and_nothing_is_stored(
    db_path: Path, messages: list[Any], error: type[Exception], named: str
) -> None:
    with Transcript.open(db_path, session_id="lc") as transcript:
        history = TranscriptChatHistory(transcript)
        history.add_messages([HumanMessage("first")])
        version = transcript.version
        with pytest.raises(error) as caught:
            history.add_messages(messages)
        assert named in str(caught.value)
        assert transcript.version == version


def test_bad_arguments_are_typed_errors(db_path: Path) -> None:
    with Transcript.open(db_path, session_id="lc") as transcript:
        with pytest.raises(InvalidArgument):
            TranscriptMiddleware(transcript, window_tokens=0)
        with pytest.raises(InvalidArgument):
            TranscriptChatHistory(transcript, window_tokens=-5)
        with pytest.raises(InvalidArgument):
            TranscriptChatHistory("lc")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        from_langchain([ToolMessage("x", tool_call_id="c")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert from_langchain([]) == []
