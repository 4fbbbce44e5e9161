"""The peer policies (planner.peers): each one's rule as its source describes it, on built sessions,
and that every peer's view is one a provider accepts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from planner.peers import (
    CLEARED,
    PEERS,
    AnthropicClear,
    ClaudeCode,
    OpenCode,
    OpenCodeTurns,
    OpenHands,
    Peer,
    PeerState,
    PeerTools,
    view_of,
)
from projection import check_view_order
from transcript import Message, Store, ToolCall, Transcript
from transcript.model.ids import utc_now
from transcript.model.message import ToolResult
from transcript.model.result import CompactResult
from transcript.session.simulate import simulate


def _session(sizes: list[int], *, tool: str = "Bash", requests: int = 1) -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s")
    t.append(Message.system("You are a coding agent."))
    per_turn = max(1, len(sizes) // requests)
    for n, size in enumerate(sizes):
        if n % per_turn == 0 and n // per_turn < requests:
            t.append(Message.user(f"request {n // per_turn}: make parse_week accept ISO weeks"))
        call = ToolCall(id=f"c{n}", name=tool, input={"command": f"step {n}"})
        output = "".join(f"line {n}.{i} of the output\n" for i in range(size // 24 + 1))[:size]
        t.append_turn(
            [Message.assistant(f"step {n}", tool_calls=[call]), Message.tool_result(call.id, output)]
        )
    return t


def _tools(t: Transcript) -> PeerTools:
    return PeerTools(count=t.counter.count, now=utc_now, config=CompactConfig())


def _round(
    peer: Peer, t: Transcript, budget: int, state: PeerState | None = None
) -> tuple[PeerState, CompactResult]:
    return peer.round(state or PeerState(), t.messages(), budget, _tools(t))


def _shown(t: Transcript, state: PeerState) -> list[Message]:
    return list(view_of(state, t.messages(), _tools(t)).messages)


def _cleared(messages: list[Message]) -> list[str]:
    return [
        m.id for m in messages if any(isinstance(p, ToolResult) and p.content == CLEARED for p in m.parts)
    ]


def _results(t: Transcript) -> list[str]:
    return [e.message.id for e in t.messages().entries if e.message.role == "tool"]


# Claude Code


def test_claude_code_waits_for_92_percent_then_summarizes_everything() -> None:
    t = _session([2_000] * 6)
    whole = view_of(PeerState(), t.messages(), _tools(t)).total
    state, result = _round(ClaudeCode(), t, int(whole / 0.91))
    assert result.outcome == "skipped" and state == PeerState()
    state, result = _round(ClaudeCode(), t, int(whole / 0.93))
    shown = _shown(t, state)
    assert result.outcome == "full_applied" and result.checkpoint is not None
    assert [m.role for m in shown] == ["system", "user"] and shown[1].kind == "summary"
    conversation = sum(e.token_count for e in t.messages().entries if e.message.role != "system")
    assert result.summary_input_tokens == conversation  # Claude Code sends the conversation itself


def test_claude_codes_next_summary_builds_on_the_previous_one() -> None:
    t = _session([2_000] * 6)
    budget = int(view_of(PeerState(), t.messages(), _tools(t)).total / 0.93)
    state, _ = _round(ClaudeCode(), t, budget)
    for n in range(6, 12):
        call = ToolCall(id=f"c{n}", name="Bash", input={"command": f"step {n}"})
        t.append_turn(
            [Message.assistant(f"step {n}", tool_calls=[call]), Message.tool_result(call.id, "x" * 9_000)]
        )
    again, result = _round(ClaudeCode(), t, budget, state)
    assert result.strategy == "checkpoint-delta" and result.checkpoint_reused
    assert [m.kind for m in _shown(t, again)] == ["message", "summary"]


# Anthropic clear_tool_uses


def test_anthropic_clear_does_nothing_below_the_trigger() -> None:
    t = _session([1_000] * 8)
    whole = view_of(PeerState(), t.messages(), _tools(t)).total
    state, result = _round(AnthropicClear(), t, whole)
    assert result.outcome == "skipped" and not state.cleared


def test_anthropic_clear_clears_every_result_but_the_last_three_and_keeps_the_inputs() -> None:
    t = _session([1_000] * 8)
    whole = view_of(PeerState(), t.messages(), _tools(t)).total
    state, result = _round(AnthropicClear(), t, whole - 1)
    shown = _shown(t, state)
    assert result.outcome == "micro_applied" and result.compacted_count == 5
    assert _cleared(shown) == _results(t)[:5]
    stored_calls = [m.tool_calls for m in t.stored_messages() if m.role == "assistant"]
    assert [m.tool_calls for m in shown if m.role == "assistant"] == stored_calls


def test_anthropic_clear_is_not_applied_when_it_would_clear_too_little() -> None:
    t = _session([60] * 8)
    t.append(Message.user("and keep the API " * 200))  # the old results now hold under 10% of it all
    whole = view_of(PeerState(), t.messages(), _tools(t)).total
    state, result = _round(AnthropicClear(), t, whole - 1)
    assert result.outcome == "skipped" and not state.cleared
    state, _ = _round(AnthropicClear(clear_at_least=0.0), t, whole - 1)
    assert state.cleared


def test_anthropic_clear_is_computed_from_the_whole_history_at_every_call() -> None:
    t = _session([1_000] * 8)
    budget = view_of(PeerState(), t.messages(), _tools(t)).total - 1
    state, _ = _round(AnthropicClear(), t, budget)
    t.append_turn(
        [
            Message.assistant("step 8", tool_calls=[ToolCall(id="c8", name="Bash", input={})]),
            Message.tool_result("c8", "y" * 1_000),
        ]
    )
    later, _ = _round(AnthropicClear(), t, budget, state)
    assert _cleared(_shown(t, later)) == _results(t)[:6]  # one more: the server edits every request


# OpenHands


def test_openhands_keeps_the_first_four_messages_and_half_the_budget_of_tail() -> None:
    t = _session([1_500] * 10)
    budget = view_of(PeerState(), t.messages(), _tools(t)).total - 1
    state, result = _round(OpenHands(), t, budget)
    shown = _shown(t, state)
    stored = t.stored_messages()
    assert result.outcome == "full_applied"
    assert shown[:4] == stored[:4] and shown[4].kind == "summary"
    tail = view_of(state, t.messages(), _tools(t)).tokens[5:]
    head = sum(e.token_count for e in t.messages().entries[:4])
    assert sum(tail) <= budget // 2 - head and shown[5:] == stored[len(stored) - len(tail) :]


def test_openhands_does_nothing_within_the_budget() -> None:
    t = _session([1_500] * 10)
    budget = view_of(PeerState(), t.messages(), _tools(t)).total
    assert _round(OpenHands(), t, budget)[1].outcome == "skipped"


# opencode


def test_opencode_prunes_whole_outputs_beyond_the_protected_ones_when_that_frees_enough() -> None:
    t = _session([1_000] * 10)
    budget = 5_000  # outputs of 250 tokens; protect 1,000 tokens of them (20%), prune above 500 (10%)
    state, result = _round(OpenCode(), t, budget)
    assert result.outcome == "micro_applied"
    cleared = _cleared(_shown(t, state))
    results = _results(t)
    assert results[-1] not in cleared  # the newest step is never pruned: the model has not seen it
    sizes = {e.message.id: e.token_count for e in t.messages().entries}
    protected = [r for r in results[:-1] if r not in cleared]
    assert (
        sum(sizes[r] for r in protected)
        <= 0.2 * budget
        < sum(sizes[r] for r in protected) + sizes[cleared[-1]]
    )
    assert cleared == results[: len(cleared)]  # the oldest go, whole


def test_opencode_does_not_prune_what_would_free_too_little() -> None:
    t = _session([1_000] * 10)
    state, result = _round(OpenCode(), t, 40_000)  # candidates hold under 10% of this budget
    assert result.outcome == "skipped" and not state.cleared


def test_opencodes_walk_stops_at_an_output_it_pruned_before() -> None:
    t = _session([1_000] * 10)
    state, _ = _round(OpenCode(), t, 5_000)
    first = set(state.cleared)
    for n in range(10, 16):
        call = ToolCall(id=f"c{n}", name="Bash", input={})
        t.append_turn(
            [Message.assistant(f"step {n}", tool_calls=[call]), Message.tool_result(call.id, "z" * 4_000)]
        )
    again, _ = _round(OpenCode(), t, 5_000, state)
    assert first < again.cleared
    newly = again.cleared - first
    order = _results(t)
    assert min(order.index(i) for i in newly) > max(order.index(i) for i in first)


def test_opencode_summarizes_everything_on_overflow() -> None:
    t = _session([6_000, 6_000, 6_000, 30_000])  # the newest output alone is over the budget
    budget = 5_000
    state, result = _round(OpenCode(), t, budget)
    assert result.outcome == "full_applied"
    assert [m.role for m in _shown(t, state)] == ["system", "user"]


def test_opencode_turns_never_prunes_within_the_last_two_user_turns() -> None:
    single = _session([1_000] * 10)
    within = view_of(PeerState(), single.messages(), _tools(single)).total
    assert OpenCode().prune(PeerState(), single.messages(), within)  # without the rule it would prune
    state, result = _round(OpenCodeTurns(), single, within)
    assert result.outcome == "skipped" and not state.cleared
    several = _session([1_000] * 12, requests=3)
    state, _ = _round(OpenCodeTurns(), several, 2_500)
    entries = several.messages().entries
    second_turn = [e.seq for e in entries if e.message.role == "user"][1]
    assert state.cleared and all(e.seq < second_turn for e in entries if e.message.id in state.cleared)


# Every peer


@pytest.mark.parametrize("name", sorted(PEERS))
@given(sizes=st.lists(st.integers(10, 6_000), min_size=1, max_size=14), fraction=st.floats(0.1, 1.2))
@settings(max_examples=15, deadline=None)
def test_every_peer_view_is_provider_valid(name: str, sizes: list[int], fraction: float) -> None:
    peer = PEERS[name]
    t = Store.open(":memory:", tokenizer="chars/4").session("s")
    messages: list[Message] = [Message.system("sys"), Message.user("fix parse_week")]
    for n, size in enumerate(sizes):
        call = ToolCall(id=f"c{n}", name="Bash", input={"n": n})
        messages += [
            Message.assistant(f"step {n}", tool_calls=[call]),
            Message.tool_result(call.id, "o" * size),
        ]
    budget = max(50, int(sum(sizes) // 4 * fraction))
    seen: list[list[Message]] = []
    run = simulate(
        t, messages, budget_tokens=budget, peer=peer, on_model_call=lambda v, r: seen.append(list(v.messages))
    )
    assert len(run.calls) == len(seen) == len(sizes)
    for view in seen:
        assert check_view_order(view).ok and view[0].role == "system"


def test_simulate_with_a_peer_writes_only_the_messages() -> None:
    t = _session([3_000] * 8)
    messages = t.stored_messages()
    fresh = Store.open(":memory:", tokenizer="chars/4").session("p")
    run = simulate(fresh, messages, budget_tokens=4_000, peer=ClaudeCode(), record=False)
    assert any(call.full_round for call in run.calls)
    assert fresh.compact_results() == [] and not any(
        e.flags.truncated or e.flags.excluded for e in fresh.messages().entries
    )
    assert fresh.stored_messages() == messages
