"""A conversation made with `llm`'s Python API and a fake model, logged to a `logs.db` as `llm` logs.

`python -m tests.llm_chat PATH` writes one (the fixture `fixtures/formats/llm-logs/logs.db` was made
so); the tests make their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llm
import sqlite_utils
from llm.migrations import migrate


class FakeModel(llm.Model):
    """An `llm` model (the library's own base class) that records every prompt's messages: it calls
    `read_file` when asked to read, else answers with the number of messages it was sent."""

    model_id = "fake-coder"
    supports_tools = True

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Iterator[str]:
        self.seen.append(list(prompt.messages))
        last = prompt.messages[-1]
        if last.role == "user" and prompt.tools and "read" in last.parts[0].text:
            response.add_tool_call(
                llm.ToolCall(name="read_file", arguments={"path": "app.py"}, tool_call_id="call_1")
            )
            response.set_usage(input=50, output=5)
            yield ""
            return
        response.set_usage(input=40 + len(prompt.messages), output=7)
        yield f"I was sent {len(prompt.messages)} messages."


def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + "def handler():\n    return 42\n" * 40


def make_logs(path: Path) -> FakeModel:
    """A logs.db with one conversation: a tool call and its result, then two more questions."""
    model = FakeModel()
    db = sqlite_utils.Database(path)
    migrate(db)  # type: ignore[no-untyped-call]
    conversation = model.conversation(tools=[read_file])
    chain = conversation.chain("please read app.py", system="You are a coding agent.")
    chain.text()
    for response in chain._responses:
        response.log_to_db(db)  # type: ignore[no-untyped-call]
    for question in ("what does handler return?", "and why?"):
        response = conversation.prompt(question)
        response.text()
        response.log_to_db(db)  # type: ignore[no-untyped-call]
    db.close()
    return model


if __name__ == "__main__":
    make_logs(Path(sys.argv[1]))
