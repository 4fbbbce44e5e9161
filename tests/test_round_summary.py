"""What a round's result says of the model's view and of the host's hook (issue 42).

`CompactResult.summary` is the rendered checkpoint the round put in the view — the summary message's
own text, the files re-injected after it aside — so a host shows it without rendering `checkpoint`
itself; it is recorded with the result and read back after a restart. A `before_compact` hook that
raises vetoes nothing: the round does what it would have done without the hook, and says what the
hook raised (`hook_error`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from planner import CompactConfig
from planner.full import BARE_HINT, CONTINUATION_HINT, REINJECT_HEADING
from planner.summary import SummaryRequest
from planner.trigger import RoundPlan
from tests.helpers import grow_reads, reading_session
from tests.test_checkpoint_task import _one_big_newest_step
from transcript import Message, Transcript
from transcript.model.checkpoint import to_markdown

GOAL = "make the date parser accept ISO weeks"
PRICED = CompactConfig.priced()  # full rounds at these budgets (policy 3's excerpts would defend them)


def _over(t: Transcript, use: float = 2.0) -> int:
    """A budget the current view exceeds by `use`."""
    return int(t.visible_messages().tokens / use)


def _summary_shown(t: Transcript) -> str:
    """The text of the summary message the view shows."""
    (summary,) = [m for m in t.visible_messages().messages if m.kind == "summary"]
    return summary.text


def test_the_summary_is_the_rendered_checkpoint_the_model_is_given() -> None:
    t = reading_session(GOAL, config=PRICED)
    result = t.compact(budget_tokens=_over(t))
    assert result.outcome == "full_applied" and result.checkpoint is not None
    assert result.summary == _summary_shown(t)
    assert result.summary.startswith(CONTINUATION_HINT) and GOAL in result.summary
    assert to_markdown(result.checkpoint, brief=True) in result.summary
    grow_reads(t, 20, start=20)  # a second round: the delta checkpoint's text, not the first one's
    second = t.compact(budget_tokens=_over(t))
    assert second.strategy == "checkpoint-delta" and second.summary == _summary_shown(t)
    assert second.summary != result.summary


def test_a_model_summarizers_checkpoint_is_the_summary_too() -> None:
    def model(request: SummaryRequest) -> str:
        return '{"done": ["found parse_week in src/m3.py"], "next_steps": ["handle 2026-W53"]}'

    t = reading_session(GOAL, config=PRICED, summarizer=model)
    result = t.compact(budget_tokens=_over(t))
    assert not result.fallback_used and result.summary == _summary_shown(t)
    assert "handle 2026-W53" in result.summary


def test_the_files_reinjected_after_the_summary_are_not_part_of_it() -> None:
    def reinject(paths: list[str], budget: int) -> list[tuple[str, str]]:
        return [("src/m19.py (current)", "def parse_week(text): ...")]

    t = reading_session(GOAL, config=PRICED, reinject=reinject)
    result = t.compact(budget_tokens=_over(t))
    shown = _summary_shown(t)
    assert result.outcome == "full_applied" and "def parse_week" in shown
    assert shown.startswith(result.summary + f"\n\n{REINJECT_HEADING}")
    assert "def parse_week" not in result.summary


def test_when_the_view_shows_only_the_short_hint_that_is_the_summary() -> None:
    t, newest = _one_big_newest_step([])
    bare = t.compact(budget_tokens=newest + 25)  # room for the short hint alone
    assert bare.outcome == "full_applied" and bare.summary == BARE_HINT == _summary_shown(t)


def test_a_round_that_puts_no_checkpoint_in_the_view_has_no_summary() -> None:
    t = reading_session(GOAL)  # policy 3: excerpts defend this budget, no summary is written
    micro = t.compact(budget_tokens=_over(t, 1.2))
    assert micro.outcome == "micro_applied" and micro.checkpoint is None and micro.summary == ""
    quiet = t.compact(budget_tokens=10**9)
    assert quiet.outcome == "skipped" and quiet.summary == ""


def test_the_summary_is_recorded_with_the_round(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Transcript.open(db, session_id="s", tokenizer="chars/4", config=PRICED) as t:
        t.append(Message.user(GOAL))
        grow_reads(t, 20)
        result = t.compact(budget_tokens=_over(t))
    with Transcript.open(db, session_id="s", tokenizer="chars/4") as again:
        recorded = again.latest_compact_result()
        assert recorded is not None and recorded.summary == result.summary == _summary_shown(again)


def _raising(plan: RoundPlan) -> bool | None:
    raise RuntimeError(f"the host's dashboard is down (asked about {plan.action})")


def test_a_hook_that_raises_is_reported_and_the_round_goes_on() -> None:
    hooked = reading_session(GOAL, config=PRICED, before_compact=_raising)
    plain = reading_session(GOAL, config=PRICED)
    budget = _over(plain)
    result = hooked.compact(budget_tokens=budget)
    alone = plain.compact(budget_tokens=budget)
    # The round did what it does without a hook: the same outcome, the same view.
    assert result.outcome == alone.outcome == "full_applied"
    assert result.tokens_after == alone.tokens_after and result.summary == alone.summary
    assert hooked.visible_messages().tokens == plain.visible_messages().tokens
    assert result.hook_error == "RuntimeError: the host's dashboard is down (asked about micro_then_full)"
    assert alone.hook_error == ""
    recorded = hooked.latest_compact_result()
    assert recorded is not None and recorded.hook_error == result.hook_error


def test_a_hook_error_is_kept_bounded_and_a_micro_round_reports_it_too() -> None:
    def verbose(plan: RoundPlan) -> bool | None:
        raise ValueError("x" * 5_000)

    t = reading_session(GOAL, before_compact=verbose)  # policy 3: a micro round
    result = t.compact(budget_tokens=_over(t, 1.2))
    assert result.outcome == "micro_applied"
    assert result.hook_error.startswith("ValueError: xxx") and len(result.hook_error) <= 500


def test_a_hook_that_raises_in_an_async_round_is_reported_too() -> None:
    t = reading_session(GOAL, config=PRICED, before_compact=_raising)
    result = asyncio.run(t.acompact(budget_tokens=_over(t)))
    assert result.outcome == "full_applied" and result.hook_error.startswith("RuntimeError:")


def test_a_hook_that_says_no_still_vetoes_and_one_that_is_not_asked_reports_nothing() -> None:
    t = reading_session(GOAL, config=PRICED, before_compact=lambda plan: False)
    assert t.compact(budget_tokens=_over(t)).outcome == "vetoed"
    t.before_compact = _raising
    manual = t.compact(budget_tokens=_over(t), manual=True)  # a manual round asks no hook
    assert manual.outcome == "full_applied" and manual.hook_error == ""


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_raised_in_the_hook_is_not_swallowed(error: type[BaseException]) -> None:
    def interrupted(plan: RoundPlan) -> bool | None:
        raise error

    t = reading_session(GOAL, config=PRICED, before_compact=interrupted)
    version = t.version
    with pytest.raises(error):
        t.compact(budget_tokens=_over(t))
    assert t.version == version  # nothing written
