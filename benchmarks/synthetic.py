"""A seeded synthetic coding-agent session, for the demo, benchmarks and tests.

The same seed always gives the same messages (ids, times and bytes), so a benchmark can store the
very same bodies through the library and through a raw floor. Content is ASCII-heavy like real tool
output; 5% of tool results are large (20-200 KB), the rest a few hundred to a few thousand characters.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final

from transcript.model import Message, ToolCall

_WORDS: Final = (
    "error warning passed failed test module import return value config path file line assert "
    "expected actual def class self None True False build install cache session request "
    "response token budget context window compact summary message tool result output input "
).split()
_TOOLS: Final = ("Bash", "Read", "Grep", "Edit", "Glob")
_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
LARGE_FRACTION: Final = 0.05


def _text(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        words = rng.choices(_WORDS, k=rng.randint(4, 14))
        line = (
            f"{rng.choice(('src', 'tests', 'lib'))}/{rng.choice(_WORDS)}.py:{rng.randint(1, 999)}: "
            + " ".join(words)
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


class SyntheticSession:
    """Turns of a synthetic agent session: a system prompt and goal, then steps of call + result."""

    def __init__(self, seed: int = 7, *, steps_per_user_turn: int = 20) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._count = 0
        self._steps_per_user_turn = steps_per_user_turn

    def _meta(self) -> tuple[str, datetime]:
        self._count += 1
        return f"syn{self.seed}-{self._count:07d}", _START + timedelta(seconds=self._count)

    def turns(self) -> Iterator[list[Message]]:
        """Endless turns: the opening (system + user), then one step (assistant call + result) each."""
        rng = self._rng
        mid, at = self._meta()
        opening = [
            Message.system("You are a careful coding agent. " + _text(rng, 600), id=mid, created_at=at)
        ]
        step = 0
        while True:
            if step % self._steps_per_user_turn == 0:
                mid, at = self._meta()
                opening.append(
                    Message.user(
                        "Please fix this: " + _text(rng, rng.randint(80, 600)), id=mid, created_at=at
                    )
                )
                yield opening
                opening = []
            step += 1
            yield self._step(step)

    def _step(self, step: int) -> list[Message]:
        rng = self._rng
        tool = rng.choice(_TOOLS)
        call_id = f"call-{self.seed}-{step}"
        mid, at = self._meta()
        call = ToolCall(
            id=call_id, name=tool, input={"command": _text(rng, rng.randint(20, 120)), "step": step}
        )
        assistant = Message.assistant(
            _text(rng, rng.randint(40, 400)), tool_calls=[call], id=mid, created_at=at
        )
        size = rng.randint(20_000, 200_000) if rng.random() < LARGE_FRACTION else rng.randint(200, 3_000)
        mid, at = self._meta()
        result = Message.tool_result(
            call_id, _text(rng, size), name=tool, is_error=rng.random() < 0.05, id=mid, created_at=at
        )
        return [assistant, result]

    def messages(self, count: int) -> list[list[Message]]:
        """Whole turns until at least `count` messages."""
        turns: list[list[Message]] = []
        total = 0
        for turn in self.turns():
            turns.append(turn)
            total += len(turn)
            if total >= count:
                return turns
        return turns
