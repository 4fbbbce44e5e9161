"""A 20-turn OpenAI Agents SDK run on a `TranscriptSession`, for the kill-and-resume test.

Run as `python -m tests.agents_loop DB LOG MODE`: `through` runs every turn (the approval at turn 12
granted in the same process), `kill` stops waiting for that approval — the run state saved as an app
saves it — and is killed, `resume` loads the saved state in a new process, approves, and runs the
rest. The resumed turn's write is tried three times, so the SDK's own check of what it wrote runs
both ways: a write lock held by another connection makes the first fail before anything is stored
(the check finds the history unchanged and writes again); the second is stored but its
acknowledgement is lost (the check finds, by fingerprints, exactly the items it wrote, and does not
write them twice). Every model input is appended to LOG as one line of JSON before the model answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from transcript.integrations.agents import TranscriptSession
from transcript.model.errors import StoreLocked

TURNS = 20
APPROVAL_TURN = 12
WINDOW_TOKENS = 5_000


class ScriptedModel(Model):
    """A fake model whose answer depends only on its input: the SDK's `Model` interface, no network."""

    model = "scripted-model"

    def __init__(self, log: Path) -> None:
        self.log = log

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        given: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        items: list[dict[str, Any]] = given
        line = json.dumps({"instructions": system_instructions, "input": items}, sort_keys=True)
        with self.log.open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        turn = _turn(items)
        outputs = sum(1 for item in items[_last_user(items) :] if item.get("type") == "function_call_output")
        output: list[Any]
        if outputs == 0:
            output = [_call(f"fc_{turn}_0", f"call_{turn}_0", "read_file", {"path": f"src/module_{turn}.py"})]
        elif outputs == 1 and turn == APPROVAL_TURN:
            output = [_call(f"fc_{turn}_1", f"call_{turn}_1", "deploy", {"target": "staging"})]
        else:
            output = [
                ResponseOutputMessage(
                    id=f"msg_{turn}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[
                        ResponseOutputText(type="output_text", text=f"Turn {turn} is done.", annotations=[])
                    ],
                )
            ]
        usage = Usage(requests=1, input_tokens=len(line) // 4, output_tokens=12)
        return ModelResponse(output=output, usage=usage, response_id=f"resp_{turn}_{outputs}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _call(item_id: str, call_id: str, name: str, arguments: dict[str, str]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", id=item_id, call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


def _last_user(items: list[dict[str, Any]]) -> int:
    return max(
        k
        for k, item in enumerate(items)
        if item.get("role") == "user" and str(item.get("content", "")).startswith("task ")
    )


def _turn(items: list[dict[str, Any]]) -> int:
    return int(str(items[_last_user(items)]["content"]).split()[1])


class AckLost(TranscriptSession):
    """The session whose next write is stored but reported failed, as when a connection drops after
    the commit: the SDK must then find its items in `get_items`, exactly as written."""

    lose_next = False

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items(items)
        if self.lose_next:
            self.lose_next = False
            raise ConnectionResetError("the acknowledgement of a stored write was lost")


@function_tool
def read_file(path: str) -> str:
    """Read a source file."""
    return f"# {path}\n" + "".join(f"def function_{k}(value):\n    return value * {k}\n" for k in range(60))


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Deploy the build (a person approves it first)."""
    return f"deployed to {target}"


async def _fails(run: Awaitable[Any], error: type[BaseException], otherwise: str) -> None:
    try:
        await run
    except error:
        return
    raise SystemExit(otherwise)


async def main(db: str, log: Path, mode: str) -> None:
    set_tracing_disabled(True)
    session = await AckLost.open(db, session_id="agents-run", timeout=0.2)
    agent = Agent(
        name="coder",
        instructions="You are a careful coding agent.",
        model=ScriptedModel(log),
        tools=[read_file, deploy],
    )
    config = session.run_config(window_tokens=WINDOW_TOKENS)
    state_file = Path(db + ".state.json")
    first = APPROVAL_TURN + 1 if mode == "resume" else 0
    if mode == "resume":
        state = await RunState.from_json(agent, json.loads(state_file.read_text()))
        for interruption in state.get_interruptions():
            state.approve(interruption)
        lock = sqlite3.connect(db, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # another writer: the resumed write fails once
        run = Runner.run(agent, state, session=session, run_config=config, hooks=session.hooks())
        await _fails(run, StoreLocked, "the locked write did not fail")
        lock.execute("ROLLBACK")
        lock.close()
        session.lose_next = True
        run = Runner.run(agent, state, session=session, run_config=config, hooks=session.hooks())
        await _fails(run, ConnectionResetError, "the lost acknowledgement did not fail the run")
        await Runner.run(agent, state, session=session, run_config=config, hooks=session.hooks())
    for turn in range(first, TURNS):
        result = await Runner.run(
            agent, f"task {turn}", session=session, run_config=config, hooks=session.hooks()
        )
        if result.interruptions:
            state = result.to_state()
            if mode == "kill":
                state_file.write_text(json.dumps(state.to_json()))
                os.kill(os.getpid(), signal.SIGKILL)
            for interruption in state.get_interruptions():
                state.approve(interruption)
            await Runner.run(agent, state, session=session, run_config=config, hooks=session.hooks())
    await session.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3]))
