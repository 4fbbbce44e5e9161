"""A budget that matches the bill: the request's limit, the overhead the session does not hold, and a
calibration fitted from recorded usage.

`compact(budget_tokens=... | window_tokens=..., overhead_tokens=N)` gives the view what the limit
leaves after the host's own tokens; `compact(calibrated=True)` lets the session's fit of billed
prompts to its estimates set that room. A loop that passes its context window then stays within it
as billed, where a loop that passes the window as the view's budget overflows it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import ToolParam

from transcript import (
    Calibration,
    InvalidArgument,
    Message,
    Store,
    ToolCall,
    Transcript,
    Usage,
    count_tool_tokens,
)
from transcript.tokens import get_counter

TOOLS: list[ToolParam] = [
    {
        "name": "Read",
        "description": "Read a file from the local filesystem.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
    {
        "name": "Bash",
        "description": "Run a shell command and return its output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
]


def _session(steps: int = 30) -> Transcript:
    t = Store.open(":memory:").session("s")
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("read every module"))
    for n in range(steps):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
        t.append_turn(
            [Message.assistant(f"reading m{n}", [call]), Message.tool_result(f"c{n}", "x = 1\n" * 150)]
        )
    return t


def test_the_overhead_comes_off_the_limit() -> None:
    t = _session()
    view = t.visible_messages().tokens
    limit = 3 * view
    plain = t.compact(budget_tokens=limit, shadow=True)
    assert plain.outcome == "skipped"  # the view alone fits well (a third: under the micro threshold)
    with_tools = t.compact(budget_tokens=limit, overhead_tokens=view, shadow=True)
    assert with_tools.budget_tokens == limit - view and with_tools.outcome == "shadowed"
    same = t.compact(window_tokens=limit, overhead_tokens=view, shadow=True)
    assert (same.outcome, same.budget_tokens) == (with_tools.outcome, with_tools.budget_tokens)


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"budget_tokens": 1_000, "window_tokens": 1_000},
        {"budget_tokens": 1_000, "overhead_tokens": -1},
        {"budget_tokens": 1_000, "overhead_tokens": True},
        {"budget_tokens": 1_000, "overhead_tokens": 1.5},
        {"budget_tokens": 1_000, "overhead_tokens": 1_000},
        {"window_tokens": 0},
        {"budget_tokens": 1_000, "calibrated": "yes"},
    ],
)
def test_limits_that_leave_no_room_or_are_not_numbers_are_refused(arguments: dict[str, Any]) -> None:
    t = _session(2)
    version = t.version
    with pytest.raises(InvalidArgument):
        t.compact(**arguments)
    assert t.version == version


def test_calibrated_uses_the_fit_and_the_overhead_until_there_is_one() -> None:
    t = _session(3)
    limit = 40_000
    first = t.compact(window_tokens=limit, overhead_tokens=9_000, calibrated=True, shadow=True)
    assert first.budget_tokens == limit - 9_000  # no bill yet
    for estimate_offset in range(2):
        t.visible_messages(record=True)
        view = t.visible_messages()
        t.record_usage(Usage(input_tokens=round(1.25 * view.tokens) + 12_000, model="m"))
        call = ToolCall(id=f"d{estimate_offset}", name="Read", input={"file_path": "b.py"})
        t.append_turn(
            [Message.assistant("more", [call]), Message.tool_result(f"d{estimate_offset}", "y" * 4_000)]
        )
    fit = t.calibration()
    assert fit is not None and fit.calls == 2 and fit.slope == pytest.approx(1.25, abs=0.01)
    calibrated = t.compact(window_tokens=limit, overhead_tokens=9_000, calibrated=True, shadow=True)
    assert calibrated.budget_tokens == fit.view_budget(limit)
    given = Calibration.fit([(1_000, 3_000), (2_000, 4_000)])
    assert t.compact(window_tokens=limit, calibrated=given, shadow=True).budget_tokens == given.view_budget(
        limit
    )


def test_a_loop_that_passes_its_window_stays_within_it_as_billed() -> None:
    """A stand-in provider bills 1.3 tokens per estimated token plus 6,000 for the host's system prompt
    and tools. Compacting to the window with the fit keeps every bill within it once two bills are
    known; compacting with the window as the view's budget does not."""
    window = 12_000

    def run(calibrated: bool) -> list[int]:
        t = Store.open(":memory:").session("loop")
        t.append(Message.system("You are a coding agent."))
        t.append(Message.user("read every module"))
        bills = []
        for n in range(40):
            t.compact(window_tokens=window, overhead_tokens=6_000 if calibrated else 0, calibrated=calibrated)
            view = t.visible_messages(record=True)
            bills.append(round(1.3 * view.tokens) + 6_000)
            t.record_usage(Usage(input_tokens=bills[-1], model="stand-in"))
            call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/m{n}.py"})
            t.append_turn(
                [Message.assistant(f"reading m{n}", [call]), Message.tool_result(f"c{n}", "x = 1\n" * 120)]
            )
        return bills

    assert max(run(calibrated=True)[2:]) <= window
    assert max(run(calibrated=False)) > window


def test_tool_schemas_are_counted_as_the_host_sends_them() -> None:
    counter = get_counter()
    expected = sum(counter.count(json.dumps(tool, sort_keys=True, separators=(",", ":"))) for tool in TOOLS)
    assert count_tool_tokens(TOOLS) == expected > 0
    assert count_tool_tokens(TOOLS, tokenizer="chars/4") < count_tool_tokens(TOOLS) * 2
    with pytest.raises(InvalidArgument):
        count_tool_tokens({"name": "Read"})
    with pytest.raises(InvalidArgument):
        count_tool_tokens([{"name": object()}])
    with pytest.raises(InvalidArgument):
        count_tool_tokens(TOOLS, tokenizer="o200k")
