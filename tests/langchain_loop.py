"""A 20-turn LangChain agent (`create_agent`, `TranscriptMiddleware`) for the kill-and-resume test.

Run as `python -m tests.langchain_loop DB LOG MODE`. The app is stateless between turns, as many are:
it keeps the conversation in a file (`messages_to_dict`, after each turn) and passes it whole to the
next `invoke`, its own messages under ids of its own. `through` runs every turn; `kill` is killed in
the middle of turn 12 (inside the tool, after the model's call was stored); `resume` loads the saved
conversation in a new process and does turn 12 again, then the rest. Every model input is appended
to LOG, as the OpenAI chat messages a provider would be sent, before the model answers.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from transcript import Transcript
from transcript.integrations.langchain import TranscriptMiddleware

TURNS = 20
KILL_TURN = 12
WINDOW_TOKENS = 5_000
KILL = {"now": False}


class ScriptedChatModel(BaseChatModel):
    """A fake chat model whose answer depends only on its input (LangChain's own base class)."""

    log: str

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self  # the script knows its one tool

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        line = json.dumps(convert_to_openai_messages(messages), sort_keys=True)
        with open(self.log, "a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        last = max(
            k for k, m in enumerate(messages) if isinstance(m, HumanMessage) and m.text.startswith("task ")
        )
        turn = int(messages[last].text.split()[1])
        outputs = sum(isinstance(m, ToolMessage) for m in messages[last:])
        if outputs == 0:
            call = {"name": "read_file", "args": {"path": f"src/module_{turn}.py"}, "id": f"call_{turn}"}
            reply = AIMessage(content="", tool_calls=[call], id=f"ai-{turn}-0")
        else:
            reply = AIMessage(content=f"Turn {turn} is done.", id=f"ai-{turn}-1")
        reply.usage_metadata = {
            "input_tokens": len(line) // 4,
            "output_tokens": 12,
            "total_tokens": len(line) // 4 + 12,
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    if KILL["now"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"# {path}\n" + "".join(f"def function_{k}(value):\n    return value * {k}\n" for k in range(60))


def agent_for(transcript: Transcript, log: Path) -> Any:
    middleware = TranscriptMiddleware(transcript, window_tokens=WINDOW_TOKENS)
    return create_agent(
        ScriptedChatModel(log=str(log)),
        tools=[read_file],
        system_prompt="You are a careful coding agent.",
        middleware=[middleware],
    )


def main(db: str, log: Path, mode: str) -> None:
    state_file = Path(db + ".messages.json")
    first = 0
    messages: list[BaseMessage] = []
    if mode == "resume":
        messages = messages_from_dict(json.loads(state_file.read_text()))
        first = KILL_TURN
    with Transcript.open(db, session_id="langchain-run") as transcript:
        agent = agent_for(transcript, log)
        for turn in range(first, TURNS):
            KILL["now"] = mode == "kill" and turn == KILL_TURN
            request = {"messages": [*messages, HumanMessage(f"task {turn}", id=f"task-{turn}")]}
            result = agent.invoke(request)
            messages = result["messages"]
            state_file.write_text(json.dumps(messages_to_dict(messages)))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3])
