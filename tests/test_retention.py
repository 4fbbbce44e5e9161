"""Facts and the retention of later-used facts, by their definitions (planner.facts,
transcript.session.retention)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from planner.facts import facts, message_facts, used_facts
from transcript import Message, Store, ToolCall
from transcript.session.retention import Retention
from transcript.session.simulate import simulate


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("edit src/app.py now", {"src/app.py"}),
        ("see /tmp/build/ and docs/api/.", {"/tmp/build", "docs/api"}),
        ("fields.py and self.precision and os.path.join", {"fields.py", "self.precision", "os.path.join"}),
        ("snake_case camelCase TimeDelta ValueError", {"snake_case", "camelCase", "TimeDelta", "ValueError"}),
        ("pr 1458 year 2024 port 80", {"1458", "2024"}),
        ("commit fe5e1c67 and a641a5d", {"fe5e1c67", "a641a5d"}),
    ],
)
def test_facts_are_paths_names_numbers_and_ids(text: str, found: set[str]) -> None:
    assert facts(text) == found


@pytest.mark.parametrize(
    "text", ["the tests pass", "_private __init__", "ok 123 abcdef", "deadbeef", "1.2.3", "tests/"]
)
def test_plain_words_short_numbers_and_letter_only_hex_are_no_facts(text: str) -> None:
    assert facts(text) == set()


def test_a_tool_name_is_not_a_fact_of_its_call_but_its_arguments_are() -> None:
    call = ToolCall(id="c1", name="str_replace_editor", input={"path": "src/parser_utils.py"})
    message = Message.assistant("", tool_calls=[call])
    assert message_facts(message) == used_facts(message) == {"src/parser_utils.py"}
    result = Message.tool_result("c1", "defines parse_week")
    assert message_facts(result) == {"parse_week"} and used_facts(result) == set()


def _brute(messages: list[Message], index: int, view: list[Message]) -> tuple[int, int]:
    """Retention's definition, computed directly."""
    before = set().union(*(message_facts(m) for m in messages[:index]))
    later = set().union(*(used_facts(m) for m in messages[index:]))
    relevant = before & later
    shown = set().union(*(message_facts(m) for m in view))
    return len(relevant), len(relevant & shown)


WORDS = ["alpha_one", "BetaTwo", "src/x.py", "12345", "plain", "gamma_three", "deltaFour", "fe5e1c67"]
texts = st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join)
turns = st.lists(st.tuples(texts, texts, texts), min_size=1, max_size=8)


@given(turns=turns, data=st.data())
@settings(max_examples=60, deadline=None)
def test_incremental_retention_equals_its_definition(
    turns: list[tuple[str, str, str]], data: st.DataObject
) -> None:
    messages: list[Message] = [Message.user("task")]
    for n, (said, argument, output) in enumerate(turns):
        call = ToolCall(id=f"c{n}", name="Bash", input={"command": argument})
        messages += [Message.assistant(said, tool_calls=[call]), Message.tool_result(f"c{n}", output)]
    retention = Retention(messages)
    calls = [i for i, m in enumerate(messages) if m.role == "assistant"]
    for index in calls:
        view = data.draw(st.lists(st.sampled_from(messages[:index]), max_size=index), label="view")
        digests = [f"{m.id}" for m in view]
        assert retention.kept(index, view, digests) == _brute(messages, index, view)


def test_never_compacting_keeps_every_fact_and_a_small_budget_does_not() -> None:
    messages: list[Message] = [Message.system("sys"), Message.user("rename parse_week in src/weeks.py")]
    for n in range(12):
        call = ToolCall(id=f"c{n}", name="Read", input={"file_path": f"src/mod_{n}.py"})
        # each file defines a helper, in its middle; the agent calls it by name five steps later
        output = "filler line\n" * 40 + f"def helper_{n}(): ...\n" + "filler line\n" * 40
        messages += [
            Message.assistant(f"reading src/mod_{n}.py; now helper_{n - 5}()", tool_calls=[call]),
            Message.tool_result(f"c{n}", output, name="Read"),
        ]
    whole = simulate(Store.open(":memory:").session("p0"), messages, budget_tokens=10**6, record=False)
    assert whole.retention == 1.0 and not any(call.after_compaction for call in whole.calls)
    tight = simulate(Store.open(":memory:").session("t"), messages, budget_tokens=900, record=False)
    assert any(call.after_compaction for call in tight.calls)
    assert 0 < tight.retention < 1.0
    counted = [c for c in tight.calls if c.after_compaction]
    assert tight.retention == sum(c.facts_kept for c in counted) / sum(c.facts for c in counted)
