"""Oversize outputs (projection policy 3, `micro_oversize_fraction`): an output of the newest step that
alone takes more than that share of the budget is excerpted as soon as a round runs — as a host caps a
tool's output — instead of being kept whole until a summary swallows it. Smaller fresh outputs, errors
and protected tools stay whole; the view renders the same after a reopen; the earlier policies
(`priced()`, `previous()`) keep every fresh output whole."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from planner.micro import oversize_entries
from tests.helpers import shown_result
from transcript import Message, Store, ToolCall, Transcript

BUDGET = 2_000


def _session(path: Path | str, fresh: str, *, tool: str = "Bash", error: bool = False) -> Transcript:
    """A few small steps, then a step whose output is `fresh` (chars/4 tokens)."""
    if path == ":memory:":
        t = Store.open(":memory:", tokenizer="chars/4").session("s")
    else:
        t = Transcript.open(path, session_id="s", tokenizer="chars/4")
    t.append(Message.system("you are a coding agent"))
    t.append(Message.user("find why the build of src/app/main.py fails"))
    for n in range(4):
        call = ToolCall(id=f"c{n}", name="Bash", input={"command": f"ls src/dir_{n}"})
        t.append_turn(
            [
                Message.assistant(f"looking at dir_{n}", tool_calls=[call]),
                Message.tool_result(call.id, "a.py\nb.py"),
            ]
        )
    call = ToolCall(id="big", name=tool, input={"command": "make build"})
    t.append_turn(
        [
            Message.assistant("running the build", tool_calls=[call]),
            Message.tool_result(call.id, fresh, name=tool, is_error=error),
        ]
    )
    return t


def _log(lines: int) -> str:
    return "\n".join(f"step {i}: compiling src/app/module_{i}.py ok" for i in range(lines))


def test_an_oversize_fresh_output_is_excerpted_without_a_summary(tmp_path: Path) -> None:
    fresh = _log(200) + "\nerror: undefined symbol parse_week in src/app/main.py"
    t = _session(tmp_path / "o.db", fresh)
    before = t.visible_messages()
    assert before.tokens > BUDGET
    result = t.compact(budget_tokens=BUDGET)
    assert result.outcome == "micro_applied" and result.checkpoint is None
    shown = shown_result(t, "big")
    assert shown.startswith(fresh[:40]) and shown.endswith("parse_week in src/app/main.py")
    assert "chars omitted" in shown and len(shown) < len(fresh) // 4
    after = t.visible_messages()
    assert after.tokens <= BUDGET
    # Only the newest output changed: every message before it is the one the previous call saw.
    assert after.messages[:-1] == before.messages[:-1]
    t.close()
    with Transcript.open(tmp_path / "o.db", session_id="s", readonly=True) as again:
        assert again.visible_messages().canonical_json() == after.canonical_json()


def test_the_earlier_policies_keep_a_fresh_output_whole() -> None:
    fresh = _log(200)
    for config in (
        CompactConfig.priced(),
        CompactConfig.previous(),
        CompactConfig(micro_oversize_fraction=0),
    ):
        t = _session(":memory:", fresh)
        t.compact(budget_tokens=BUDGET, config=config)
        assert shown_result(t, "big") == fresh


def test_errors_protected_tools_and_outputs_within_the_share_stay_whole() -> None:
    fresh = _log(200)
    for t in (_session(":memory:", fresh, error=True), _session(":memory:", fresh, tool="Task")):
        t.compact(budget_tokens=BUDGET)
        assert shown_result(t, "big") == fresh
    small = _log(12)  # about 150 tokens: under 15% of the budget
    t = _session(":memory:", small)
    t.compact(budget_tokens=BUDGET)
    assert shown_result(t, "big") == small


@given(lines=st.integers(1, 400), budget=st.integers(300, 6_000), fraction=st.sampled_from([0.05, 0.15, 0.5]))
@settings(max_examples=40, deadline=None)
def test_only_outputs_over_the_share_are_candidates_and_views_stay_stable(
    lines: int, budget: int, fraction: float
) -> None:
    fresh = _log(lines)
    t = _session(":memory:", fresh)
    config = CompactConfig(micro_oversize_fraction=fraction)
    snapshot = t.messages()
    chosen = {e.message.id for e in oversize_entries(snapshot, config, budget, 0)}
    newest = snapshot.entries[-1]
    assert (newest.message.id in chosen) == (newest.shown_tokens > fraction * budget)
    assert all(e.shown_tokens > fraction * budget for e in snapshot.entries if e.message.id in chosen)
    t.compact(budget_tokens=budget, config=config)
    if newest.shown_tokens <= fraction * budget:
        assert shown_result(t, "big") == fresh
    view = t.visible_messages()
    assert t.visible_messages().canonical_json() == view.canonical_json()
