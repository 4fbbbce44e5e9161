"""Prompt-cache breakpoints: `to_anthropic(cache=True)` marks the system prompt, the end of the longest
prefix unchanged since the previous served view, and the end of the request — at most four, none on a
prefix under the minimum cacheable length, never on a thinking block.

The main test drives an agent loop for 20 turns with a compaction round before every call: every
request validates against the Anthropic SDK's request type and our rules, has at most four
breakpoints, and its middle one sits at the end of the longest prefix the view shares with the view
served before it (computed here from the two views themselves).
"""

from __future__ import annotations

from typing import Any

import pytest

from planner import CompactConfig
from projection.view import View
from projection.wire.anthropic import encode_anthropic
from projection.wire.check import check_anthropic_request
from tests.test_wire import anthropic_sdk_problem
from transcript import InvalidArgument, Message, ReasoningPart, Store, ToolCall

SYSTEM = "You are a coding agent. Read before you edit; run the tests after every change. " * 60


def marks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """Every block with `cache_control`, as (message, block); -1 for the system prompt."""
    found = [(-1, k) for k, block in enumerate(body.get("system", [])) if "cache_control" in block]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        found += [
            (i, k) for k, block in enumerate(content) if isinstance(block, dict) and "cache_control" in block
        ]
    return found


def flat(body: dict[str, Any]) -> list[tuple[int, int]]:
    """Every message block's position, in request order."""
    return [(i, k) for i, message in enumerate(body["messages"]) for k in range(len(message["content"]))]


def shared_prefix(before: View, now: View) -> int:
    """How many leading messages two views share, byte for byte."""
    count = 0
    for a, b in zip(before.messages, now.messages, strict=False):
        if (
            View.of([a], source="canonical", tokens=0).canonical_json()
            != View.of([b], source="canonical", tokens=0).canonical_json()
        ):
            break
        count += 1
    return count


def test_twenty_turns_keep_the_middle_breakpoint_on_the_unchanged_prefix() -> None:
    # The priced policy's micro rounds (policy 3 would reach a full round here: a shared prefix of the
    # system prompt alone, which this test does not place a middle breakpoint for).
    config = CompactConfig.priced(micro_compact_stale_steps=2, micro_field_threshold_chars=400)
    t = Store.open(":memory:").session("s", config=config)
    t.append(Message.system(SYSTEM))
    t.append(Message.user("read every module, then fix the failing test"))
    previous: View | None = None
    outcomes = []
    for n in range(20):
        outcomes.append(t.compact(budget_tokens=9_000).outcome)
        view = t.visible_messages(record=True)
        body = view.to_anthropic(cache=True)
        assert anthropic_sdk_problem(body) is None
        assert check_anthropic_request(body) == ()
        placed = marks(body)
        assert 2 <= len(placed) <= 4
        assert placed[0] == (-1, len(body["system"]) - 1)  # the system prompt, over 1,024 tokens
        assert placed[-1][0] == len(body["messages"]) - 1  # the end of the request
        if previous is not None:
            shared = shared_prefix(previous, view)
            assert view.cache is not None and view.cache.messages == shared
            prefix = encode_anthropic(view.messages[:shared], archive=False)  # it may end mid-step
            blocks = sum(len(m["content"]) for m in prefix["messages"])
            if blocks and view.cache.tokens >= 1_024:
                middle = flat(body)[blocks - 1]
                assert middle in placed, (n, shared, middle, placed)
        previous = view
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/module_{n}.py"})
        source = "".join(f"def f{n}_{k}(x):\n    return x * {k}\n" for k in range(60))
        t.append_turn(
            [Message.assistant(f"Reading module {n}.", [call]), Message.tool_result(f"c{n}", source)]
        )
    assert "micro_applied" in outcomes, outcomes


def test_no_breakpoint_on_a_prefix_under_the_minimum() -> None:
    t = Store.open(":memory:").session("s")
    t.append(Message.system("short"))
    t.append(Message.user("hello"))
    body = t.visible_messages(record=True).to_anthropic(cache=True)
    assert marks(body) == []
    assert marks(t.visible_messages(record=True).to_anthropic(cache=True, cache_min_tokens=1)) == [
        (-1, 0),
        (0, 0),
    ]


def test_a_breakpoint_never_sits_on_thinking() -> None:
    t = Store.open(":memory:").session("s")
    t.append(Message.user("x " * 3_000))
    thinking = ReasoningPart(text="hmm", signature="sig", provider="anthropic")
    t.append(Message.assistant("answer", reasoning=[thinking]))
    t.append(Message.assistant("", reasoning=[thinking]))
    body = t.visible_messages(record=True).to_anthropic(cache=True)
    (placed,) = marks(body)
    assert body["messages"][placed[0]]["content"][placed[1]]["type"] == "text"
    assert anthropic_sdk_problem(body) is None


def test_an_unrecorded_view_gets_the_system_and_last_breakpoints_only() -> None:
    t = Store.open(":memory:").session("s")
    t.append(Message.system(SYSTEM))
    for n in range(4):
        t.append(Message.user(f"question {n} " + "detail " * 400))
        t.append(Message.assistant(f"answer {n}"))
    view = t.visible_messages()
    assert view.cache is None
    assert marks(view.to_anthropic(cache=True)) == [(-1, 0), (7, 0)]
    assert view.to_anthropic() == t.visible_messages().to_anthropic()  # cache=False marks nothing
    assert marks(view.to_anthropic()) == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1024"])
def test_a_minimum_that_is_no_whole_number_is_refused(bad: Any) -> None:
    t = Store.open(":memory:").session("s")
    t.append(Message.user("hi"))
    with pytest.raises(InvalidArgument):
        t.visible_messages().to_anthropic(cache=True, cache_min_tokens=bad)
