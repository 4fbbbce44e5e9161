"""The continuation policy: every setting, and a recorded reply that asks the user a question."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from planner import LoopPolicy
from tests.conftest import CORPUS
from transcript import InvalidMessage, Message, Store, ToolCall, Transcript
from transcript.model import Checkpoint, CompactResult
from transcript.model.errors import InvalidArgument

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def t() -> Transcript:
    session = Transcript.open(":memory:", session_id="s", tokenizer="chars/4")
    session.append(Message.system("You are a coding agent."))
    session.append(Message.user("make the failing test pass"))
    return session


def _step(t: Transcript, result: str = "1 passed", *, name: str = "Bash", error: bool = False) -> None:
    call = ToolCall(id=f"c{len(t)}", name=name, input={"n": len(t)})
    t.append_turn(
        [
            Message.assistant("working", tool_calls=[call]),
            Message.tool_result(call.id, result, name=name, is_error=error),
        ]
    )


def _reply(t: Transcript, text: str) -> None:
    t.append(Message.assistant(text))


def test_tool_results_keep_the_loop_going(t: Transcript) -> None:
    _step(t)
    decision = LoopPolicy().after_reply(t.messages())
    assert (decision.proceed, decision.code, decision.prompt) == (True, "tool_results", "")


def test_a_reply_without_calls_ends_the_turn_unless_auto_continue_is_on(t: Transcript) -> None:
    _reply(t, "I changed the parser; the test passes now.")
    assert LoopPolicy().after_reply(t.messages()).code == "auto_continue_off"
    on = LoopPolicy(auto_continue=True, max_auto_follow_ups=2)
    decision = on.after_reply(t.messages())
    assert decision.proceed and decision.code == "follow_up" and decision.prompt == on.follow_up_prompt
    for _ in range(2):
        t.append(Message.continuation(decision.prompt))
        _reply(t, "Still on it.")
    decision = on.after_reply(t.messages())
    assert (decision.proceed, decision.code) == (False, "max_follow_ups")
    t.append(Message.user("now update the changelog"))  # a new request: the count starts again
    _reply(t, "Done.")
    assert on.after_reply(t.messages()).code == "follow_up"


def test_an_explicit_question_stops_the_loop_unless_told_otherwise(t: Transcript) -> None:
    _reply(t, "I found two ways to fix it. Should I change the parser or the test?")
    decision = LoopPolicy(auto_continue=True).after_reply(t.messages())
    assert (decision.proceed, decision.code) == (False, "explicit_question")
    assert "Should I change the parser or the test?" in decision.reason
    relaxed = LoopPolicy(auto_continue=True, stop_on_explicit_question=False)
    assert relaxed.after_reply(t.messages()).code == "follow_up"


def test_a_question_inside_a_reply_that_ends_otherwise_is_not_one(t: Transcript) -> None:
    _reply(t, "Why did it fail? The fixture was stale. I refreshed it and the test passes.")
    assert LoopPolicy(auto_continue=True).after_reply(t.messages()).code == "follow_up"


def test_an_ask_the_user_tool_stops_the_loop(t: Transcript) -> None:
    call = ToolCall(id="q1", name="AskUserQuestion", input={"question": "Which branch?"})
    t.append_turn(
        [Message.assistant("", tool_calls=[call]), Message.tool_result("q1", "main", name="AskUserQuestion")]
    )
    assert LoopPolicy().after_reply(t.messages()).code == "ask_tool"
    assert LoopPolicy(ask_user_tools=()).after_reply(t.messages()).code == "tool_results"


def test_a_refused_call_is_an_approval_block(t: Transcript) -> None:
    refusal = "The user doesn't want to proceed with this tool use. The tool use was rejected."
    _step(t, refusal, error=True)
    decision = LoopPolicy().after_reply(t.messages())
    assert (decision.proceed, decision.code) == (False, "approval_block")
    assert LoopPolicy(stop_on_approval_block=False).after_reply(t.messages()).code == "tool_results"
    _step(t, "permission denied: /etc/passwd is not readable", error=True)  # a tool error, not a refusal
    assert LoopPolicy().after_reply(t.messages()).code == "tool_results"


def test_calls_awaiting_results_stop_the_loop(t: Transcript) -> None:
    t.append(Message.assistant("", tool_calls=[ToolCall(id="p1", name="Bash", input={})]))
    assert LoopPolicy().after_reply(t.messages()).code == "pending_calls"


def test_the_turn_runs_out_of_model_calls(t: Transcript) -> None:
    for _ in range(3):
        _step(t)
    assert LoopPolicy(max_total_turns=3).after_reply(t.messages()).code == "max_turns"
    assert LoopPolicy(max_total_turns=4).after_reply(t.messages()).code == "tool_results"


def test_after_a_compaction_the_loop_re_anchors_or_stops() -> None:
    checkpoint = Checkpoint(goal="make the failing test pass", next_steps=("run the suite",))
    compacted = CompactResult(outcome="full_applied", strategy="checkpoint", checkpoint=checkpoint)
    decision = LoopPolicy().after_round(compacted)
    assert decision.proceed and decision.code == "compacted"
    assert "make the failing test pass" in decision.prompt and "run the suite" in decision.prompt
    assert (
        LoopPolicy(continue_after_compact=False).after_round(compacted).code == "continue_after_compact_off"
    )
    skipped = CompactResult(outcome="skipped", reason="below the micro threshold")
    assert LoopPolicy().after_round(skipped) == LoopPolicy(continue_after_compact=False).after_round(skipped)
    assert LoopPolicy().after_round(skipped).prompt == ""


def test_a_full_step_that_leaves_only_the_newest_step_over_budget_still_re_anchors() -> None:
    checkpoint = Checkpoint(goal="make the failing test pass")
    irreducible = CompactResult(
        outcome="over_budget_irreducible", strategy="checkpoint", checkpoint=checkpoint
    )
    decision = LoopPolicy().after_round(irreducible)
    assert decision.code == "compacted" and "make the failing test pass" in decision.prompt
    nothing = CompactResult(outcome="over_budget_irreducible", reason="the newest step alone is over budget")
    assert LoopPolicy().after_round(nothing).code == "no_compaction"


def test_a_compaction_s_prompt_is_no_follow_up(t: Transcript) -> None:
    policy = LoopPolicy(auto_continue=True, max_auto_follow_ups=1)
    compacted = CompactResult(outcome="full_applied", strategy="checkpoint", checkpoint=Checkpoint(goal="g"))
    step = policy.after_round(compacted)
    t.append(Message.continuation(step.prompt, reason=step.code))
    _reply(t, "The test passes now.")
    step = policy.after_reply(t.messages())
    assert step.code == "follow_up"  # the re-anchor prompt did not use up the one follow-up
    t.append(Message.continuation(step.prompt, reason=step.code))
    _reply(t, "Still passing.")
    assert policy.after_reply(t.messages()).code == "max_follow_ups"


def test_no_reply_yet_stops(t: Transcript) -> None:
    assert LoopPolicy().after_reply(t.messages()).code == "no_reply"


def test_a_continuation_is_a_meta_message_never_a_request(t: Transcript) -> None:
    message = Message.continuation("go on")
    assert (message.role, message.kind, message.metadata) == ("user", "meta", {"continuation": "follow_up"})
    t.append(message)
    assert t.messages().turn_starts == (1,)  # not a new turn


@pytest.mark.parametrize(
    "settings",
    [
        {"max_total_turns": -1},
        {"max_auto_follow_ups": 1.5},
        {"auto_continue": "yes"},
        {"follow_up_prompt": " "},
        {"ask_user_tools": "AskUserQuestion"},  # a string is not a list of names
        {"ask_user_tools": None},
        {"ask_user_tools": [1]},
    ],
)
def test_settings_are_checked(settings: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        LoopPolicy(**settings)  # type: ignore[arg-type]


def test_a_recorded_session_stops_where_the_agent_asks_the_user() -> None:
    """OpenHands, basic GUI mode: message `openhands_basic_gui_mode/15` ends 'Would you like me to explain
    any specific part of the implementation or make any adjustments to the functionality?'"""
    store = Store.open(":memory:", tokenizer="chars/4")
    store.import_file(CORPUS / "openhands_basic_gui_mode.json")
    (session,) = store.sessions()
    messages = store.session(session.session_id).stored_messages()
    asking = next(i for i, m in enumerate(messages) if m.id == "openhands_basic_gui_mode/15")
    policy = LoopPolicy(auto_continue=True)
    replay = store.session("replay", create=True)
    stops = []
    for index, message in enumerate(messages):
        replay.append(message)
        following = messages[index + 1] if index + 1 < len(messages) else None
        step_ends = message.role == "assistant" or (
            message.role == "tool" and (following is None or following.role != "tool")
        )
        if step_ends and not replay.pending_calls:
            decision = policy.after_reply(replay.messages())
            if not decision.proceed:
                stops.append((index, decision.code))
    assert (asking, "explicit_question") in stops
    assert all(code != "explicit_question" for index, code in stops if index != asking)


def test_invalid_continuation_is_refused() -> None:
    with pytest.raises(InvalidMessage):
        Message.continuation("go on", id="")
    assert (
        msgspec.json.decode(msgspec.json.encode(Message.continuation("x", created_at=T0)), type=Message).kind
        == "meta"
    )
