"""Full compaction: checkpoints, summarizers and their failures, the breaker, state export/restore.

These pin the behaviours the seed (000) lists, translated into the mark-not-delete store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from planner import CompactConfig
from planner.continuation import SPLIT_TURN_WARNING
from planner.full import REINJECT_HEADING
from planner.summary import LocalSummarizer, SummaryRequest
from projection import check_view_order
from tests.helpers import grow_reads, reading_session
from transcript import ConflictError, Message, Store, ToolCall, Transcript
from transcript.model.errors import PromptTooLong

GOAL = "make the date parser accept ISO weeks"


class Recorder:
    """A model summarizer that answers with JSON and remembers every request."""

    def __init__(self, *, fail: int = 0, too_long: int = 0) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail
        self.too_long = too_long

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.too_long:
            self.too_long -= 1
            raise PromptTooLong("prompt too long for the model")
        if self.fail:
            self.fail -= 1
            raise RuntimeError("HTTP 500 from the model")
        done = f"read {len(request.items)} items"
        reply = msgspec.json.encode({"goal": GOAL, "done": [done], "next_steps": ["run tests"]}).decode()
        return f"```json\n{reply}\n```"


_grow = grow_reads


def _session(**settings: object) -> Transcript:
    # Full rounds as the priced policy reached them (policy 3's excerpts would defend these budgets
    # without a summary: tests/test_policy3.py).
    settings.setdefault("config", CompactConfig.priced())
    return reading_session(GOAL, **settings)


def _over(t: Transcript, use: float = 1.2) -> int:
    """A budget the current view exceeds by `use`."""
    return int(t.visible_messages().tokens / use)


def test_manual_compaction_gives_a_checkpoint_with_the_goal() -> None:
    t = _session()
    result = t.compact(budget_tokens=_over(t, 0.5), manual=True, force=True)
    assert result.outcome == "full_applied" and result.strategy == "checkpoint"
    assert result.checkpoint is not None and result.checkpoint.goal == GOAL
    assert result.fallback_used and not result.failed  # the local summarizer by choice is no failure
    assert t.latest_checkpoint() == result.checkpoint


def test_auto_compaction_over_budget_reduces_tokens_below_the_budget() -> None:
    t = _session()
    budget = _over(t, 2.0)
    result = t.compact(budget_tokens=budget)
    assert result.outcome == "full_applied" and result.tokens_after < result.tokens_before
    assert t.visible_messages().tokens == result.tokens_after <= budget
    assert check_view_order(t.visible_messages().messages).ok


def test_micro_alone_suffices_without_calling_the_summarizer() -> None:
    model = Recorder()
    t = _session(summarizer=model)
    result = t.compact(budget_tokens=_over(t, 0.8))
    assert result.outcome == "micro_applied" and model.requests == []


def test_prompt_too_long_once_is_retried_without_fallback() -> None:
    model = Recorder(too_long=1)
    t = _session(summarizer=model)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.outcome == "full_applied" and not result.fallback_used and not result.failed
    assert len(model.requests) == 2
    assert len(model.requests[1].items) < len(model.requests[0].items)
    assert result.checkpoint is not None and result.checkpoint.next_steps == ("run tests",)


def test_retries_exhausted_fall_back_to_the_local_summary() -> None:
    model = Recorder(too_long=10)
    t = _session(summarizer=model)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert len(model.requests) == 4  # the first try and 3 retries
    assert result.outcome == "full_applied" and result.fallback_used and result.failed
    assert result.checkpoint is not None and result.checkpoint.goal == GOAL


def test_a_failing_model_is_an_outcome_not_an_exception() -> None:
    t = _session(summarizer=Recorder(fail=1))
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.fallback_used and result.failed and result.consecutive_failures == 1


def test_a_second_full_compaction_updates_the_checkpoint_with_the_delta() -> None:
    t = _session(summarizer=Recorder())
    first = t.compact(budget_tokens=_over(t, 2.0))
    _grow(t, 20, start=100)
    second = t.compact(budget_tokens=first.budget_tokens)
    assert second.strategy == "checkpoint-delta" and second.checkpoint_reused and second.delta_count > 0
    summaries = [m for m in t.visible_messages().messages if m.kind == "summary"]
    assert len(summaries) == 1  # the earlier summary was folded into the new one
    assert all(
        e.flags.excluded
        for e in t.messages().entries
        if e.message.kind == "summary" and e.message.id != summaries[0].id
    )


def test_the_aggressive_path_reuses_the_old_checkpoint() -> None:
    # The previous policy: its kept window (`keep_recent_tokens`) leaves the view over budget, so the
    # step is made aggressive; the priced policy sizes the window for its target instead.
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=CompactConfig.previous())
    t.append(Message.system("Project rules. " * 400))  # a large system prompt: ~1,500 tokens
    t.append(Message.user(GOAL))
    _grow(t, 20, size=600)
    budget = 2_300
    first = t.compact(budget_tokens=budget)
    assert first.strategy == "aggressive-checkpoint" and not first.checkpoint_reused
    _grow(t, 20, start=100, size=600)
    result = t.compact(budget_tokens=budget)
    assert result.strategy == "aggressive-checkpoint-delta" and result.checkpoint_reused
    assert result.tokens_after <= budget and t.visible_messages().tokens == result.tokens_after


def test_the_breaker_opens_then_half_opens_and_closes() -> None:
    model = Recorder(fail=3)
    # The previous policy: every one of these rounds needs a full step (micro alone is never enough).
    config = CompactConfig.previous(breaker_cooldown_rounds=2)
    t = _session(summarizer=model, config=config)
    results = []
    for round_number in range(3):
        _grow(t, 15, start=100 * (round_number + 1))
        results.append(t.compact(budget_tokens=_over(t, 2.0)))
    assert [r.consecutive_failures for r in results] == [1, 2, 3]
    assert results[-1].breaker == "open"
    calls = len(model.requests)
    _grow(t, 15, start=1000)
    still_open = t.compact(budget_tokens=_over(t, 2.0))
    assert still_open.breaker == "open" and len(model.requests) == calls  # no model call while open
    assert still_open.fallback_used and still_open.outcome == "full_applied"
    _grow(t, 15, start=2000)
    trial = t.compact(budget_tokens=_over(t, 2.0))
    assert len(model.requests) > calls and trial.breaker == "closed" and trial.consecutive_failures == 0


def test_manual_success_closes_an_open_breaker_and_is_not_counted() -> None:
    model = Recorder(fail=10)
    t = _session(summarizer=model, config=CompactConfig.priced(max_consecutive_failures=1))
    assert t.compact(budget_tokens=_over(t, 2.0)).breaker == "open"
    _grow(t, 15, start=500)
    manual = t.compact(budget_tokens=_over(t, 2.0), manual=True, summarizer=LocalSummarizer())
    assert manual.manual and manual.breaker == "closed" and manual.consecutive_failures == 0


def test_breaker_state_survives_restart_and_export_restore(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Transcript.open(
        path,
        session_id="s",
        tokenizer="chars/4",
        summarizer=Recorder(fail=5),
        config=CompactConfig.priced(max_consecutive_failures=1),
    ) as t:
        t.append(Message.user(GOAL))
        _grow(t, 20)
        failed = t.compact(budget_tokens=_over(t, 2.0))
        state = t.export_state()
        view = t.visible_messages()
    assert failed.breaker == "open"
    with Transcript.open(path, session_id="s", readonly=True) as again:
        assert again.latest_compact_result() == failed and again.status().breaker == "open"
    other = Store.open(tmp_path / "other.db", tokenizer="cl100k_base")
    restored = other.restore(state, session_id="copy")
    assert restored.latest_compact_result() == failed
    assert restored.visible_messages().canonical_json() == view.canonical_json()
    assert restored.visible_messages().tokens == view.tokens


def test_async_loops_use_acompact_with_an_async_summarizer() -> None:
    seen: list[SummaryRequest] = []

    async def summarize(request: SummaryRequest) -> str:
        seen.append(request)
        await asyncio.sleep(0)
        return f'{{"goal": "{GOAL}"}}'

    t = _session()
    result = asyncio.run(t.acompact(budget_tokens=_over(t, 2.0), summarizer=summarize))
    assert len(seen) == 1 and not result.fallback_used and result.checkpoint is not None


def test_an_async_summarizer_in_a_sync_round_falls_back_with_a_clear_reason() -> None:
    async def summarize(request: SummaryRequest) -> str:
        return "{}"

    t = _session()
    result = t.compact(budget_tokens=_over(t, 2.0), summarizer=summarize)
    assert result.fallback_used and result.failed


def test_an_append_during_summarization_does_not_throw_the_summary_away(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user(GOAL))
        _grow(t, 20)

    def racing(request: SummaryRequest) -> str:
        with Transcript.open(path, session_id="s", tokenizer="chars/4") as other:
            other.append(Message.user("meanwhile, another writer", id="meanwhile"))
        return f'{{"goal": "{GOAL}"}}'

    # The priced policy's full round (policy 3's excerpts would defend this budget without a summary).
    with Transcript.open(
        path, session_id="s", tokenizer="chars/4", summarizer=racing, config=CompactConfig.priced()
    ) as t:
        result = t.compact(budget_tokens=_over(t, 2.0))
        assert result.outcome == "full_applied" and not result.fallback_used
        stored = [m.id for m in t.stored_messages()]
        summary = next(m.id for m in t.stored_messages() if m.kind == "summary")
        assert stored.index("meanwhile") < stored.index(summary)
        assert result.tokens_after == t.visible_messages().tokens


def test_a_lost_race_during_summarization_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user(GOAL))
        _grow(t, 20)

    def racing(request: SummaryRequest) -> str:  # another writer compacts the same history meanwhile
        with Transcript.open(path, session_id="s", tokenizer="chars/4") as other:
            other.compact(budget_tokens=_over(other, 2.0), force=True)
        return f'{{"goal": "{GOAL}"}}'

    with Transcript.open(
        path, session_id="s", tokenizer="chars/4", summarizer=racing, config=CompactConfig.priced()
    ) as t:
        budget = _over(t, 2.0)
        with pytest.raises(ConflictError):
            t.compact(budget_tokens=budget)
        assert len([m for m in t.stored_messages() if m.kind == "summary"]) == 1  # the other's alone


def test_reinjection_only_through_the_host_callback() -> None:
    asked: list[tuple[tuple[str, ...], int]] = []

    def current(paths: object, budget: int) -> list[tuple[str, str]]:
        asked.append((tuple(paths), budget))  # type: ignore[arg-type]
        return [("src/m3.py", "def f3():\n    return 'current'\n")]

    t = _session(reinject=current)
    t.compact(budget_tokens=_over(t, 2.0))
    (summary,) = [m for m in t.visible_messages().messages if m.kind == "summary"]
    assert "return 'current'" in summary.text and asked and "src/m3.py" in asked[0][0]
    plain = _session()
    plain.compact(budget_tokens=_over(plain, 2.0))
    (summary,) = [m for m in plain.visible_messages().messages if m.kind == "summary"]
    assert REINJECT_HEADING not in summary.text


def test_the_local_summary_keeps_goal_errors_approvals_and_files() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=CompactConfig.priced())
    t.append(Message.user(GOAL))
    t.append_turn(
        [
            Message.assistant("", tool_calls=[ToolCall(id="e", name="Bash", input={"command": "make"})]),
            Message.tool_result("e", "make: *** no rule to make target", name="Bash", is_error=True),
        ]
    )
    t.append_turn(
        [
            Message.assistant("", tool_calls=[ToolCall(id="d", name="Edit", input={"file_path": "a.py"})]),
            Message.tool_result(
                "d", "The user doesn't want to proceed with this tool use.", name="Edit", is_error=True
            ),
        ]
    )
    _grow(t, 10, start=10)
    result = t.compact(budget_tokens=_over(t, 2.0))
    checkpoint = result.checkpoint
    assert checkpoint is not None and checkpoint.goal == GOAL
    assert any("no rule to make target" in item for item in checkpoint.blocked)
    assert any("doesn't want to proceed" in item for item in checkpoint.blocked)
    assert checkpoint.files == ("a.py",)


def test_the_goal_is_never_taken_from_a_summary_message() -> None:
    t = _session()
    t.compact(budget_tokens=_over(t, 2.0))
    _grow(t, 20, start=100)
    second = t.compact(budget_tokens=_over(t, 2.0))
    assert second.checkpoint is not None and second.checkpoint.goal == GOAL


def test_a_split_turn_is_reported_and_the_continuation_prompt_warns() -> None:
    t = _session()
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.split_turn  # the whole session is one turn group: the cut falls inside it
    prompt = t.continuation_prompt(result)
    assert GOAL in prompt and SPLIT_TURN_WARNING in prompt


def test_forced_compaction_with_nothing_old_summarizes_all_but_the_last_step() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s")
    t.append(Message.user(GOAL))
    _grow(t, 2)
    result = t.compact(budget_tokens=10**6, manual=True, force=True)
    assert result.outcome == "full_applied"
    view = t.visible_messages().messages
    assert view[0].kind == "summary" and view[1].role == "assistant" and len(view) == 3


def test_drained_results_are_each_round_recorded_since_the_last_drain(tmp_path: Path) -> None:
    t = _session()
    assert t.drain_compact_results() == []
    first = t.compact(budget_tokens=_over(t, 2.0))
    below = t.compact(budget_tokens=10**6)  # below the threshold: not a recorded round
    assert below.outcome == "skipped"
    assert t.drain_compact_results() == [first]
    assert t.drain_compact_results() == []
    _grow(t, 20, start=100)
    second = t.compact(budget_tokens=_over(t, 2.0))
    assert t.drain_compact_results() == [second] and t.compact_results() == [first, second]
