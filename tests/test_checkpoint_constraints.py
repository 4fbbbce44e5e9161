"""A user message that only adds a rule joins the checkpoint's constraints, not its goal (issue 42).

The goal is the user's task and their latest redirect; "use tabs", "don't touch the tests" or "keep
it under 100 lines" later in the session set rules for that work and ask for no new work, so they
must not take the redirect's place in the goal (an auto-continuing loop would then be re-anchored on
"use tabs"). A real redirect still replaces the one before it.
"""

from __future__ import annotations

import pytest

from planner import CompactConfig
from planner.intent import REDIRECT_MARK, answers, constraints, is_constraint, task_goal
from tests.helpers import grow_reads
from transcript import Message, Store, Transcript

GOAL = "make the date parser accept ISO weeks"
REDIRECT = "actually, fix the login bug instead"

RULES = [
    "use tabs",
    "Use tabs.",
    "don't touch the tests",
    "keep it under 100 lines",
    "Please use tabs, not spaces.",
    "Also, never push to main.",
    "no new dependencies",
    "avoid regex here",
    "Prefer pathlib over os.path.",
    "only touch files under src/",
    "the output must stay valid JSON",
    "always run the linter before you commit",
    "Do not change the public API; keep the old names working.",
]
NOT_RULES = [
    REDIRECT,
    "now write the release notes",
    "use the new API to fix the login bug",
    "Actually, leave the parser and port the CLI to click instead. Don't touch the tests.",
    "don't change the API; fix the tokenizer instead",
    "you should add caching to the parser",
    "yes, fix it",
    "no thanks",
    "continue",
    "why?",
    "keep going with the migration and then update the changelog and the README, " * 3,  # too long
]


@pytest.mark.parametrize("text", RULES)
def test_a_message_that_only_sets_rules_is_a_constraint(text: str) -> None:
    assert is_constraint(text)


@pytest.mark.parametrize("text", NOT_RULES)
def test_a_message_that_asks_for_work_or_answers_is_no_constraint(text: str) -> None:
    assert not is_constraint(text)


def _history(*later: str) -> list[Message]:
    messages = [Message.user(GOAL), Message.assistant("on it")]
    for text in later:
        messages += [Message.user(text), Message.assistant("ok")]
    return messages


@pytest.mark.parametrize("rule", ["use tabs", "don't touch the tests", "keep it under 100 lines"])
def test_a_constraint_leaves_the_goal_and_joins_the_constraints(rule: str) -> None:
    alone = _history(rule)
    assert task_goal(alone) == GOAL
    assert constraints(alone) == [rule]
    assert answers(alone) == []  # a rule, not a decision
    after_redirect = _history(REDIRECT, rule)
    assert task_goal(after_redirect) == f"{GOAL}{REDIRECT_MARK}{REDIRECT}"  # the redirect stays the aim
    assert constraints(after_redirect) == [rule]


def test_a_real_redirect_still_replaces_the_one_before_it() -> None:
    messages = _history("use tabs", "now port the CLI to click", "don't touch the tests", REDIRECT)
    assert task_goal(messages) == f"{GOAL}{REDIRECT_MARK}{REDIRECT}"
    assert constraints(messages) == ["use tabs", "don't touch the tests"]
    assert answers(messages) == ["user asked: now port the CLI to click"]  # the earlier redirect


def test_the_task_asked_again_is_no_redirect() -> None:
    assert task_goal(_history(GOAL)) == GOAL
    back = _history(REDIRECT, GOAL)  # redirected, then back to the task
    assert task_goal(back) == GOAL


def _session(*later: str) -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=CompactConfig.priced())
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user(GOAL))
    grow_reads(t, 8)
    for n, text in enumerate(later):
        t.append(Message.user(text))
        grow_reads(t, 8, start=100 * (n + 1))
    return t


def test_a_rounds_checkpoint_keeps_the_redirect_as_its_goal_and_the_rule_as_a_constraint() -> None:
    t = _session(REDIRECT, "keep it under 100 lines")
    result = t.compact(budget_tokens=t.visible_messages().tokens // 2)
    assert result.outcome == "full_applied"
    kept = result.carried_checkpoint or result.checkpoint
    assert kept is not None
    assert kept.goal == f"{GOAL}{REDIRECT_MARK}{REDIRECT}"
    assert "keep it under 100 lines" in kept.constraints
    status = t.status()
    assert status.goal == kept.goal
    assert "Then the user asked: actually, fix the login bug instead" in t.continuation_prompt(result)


def test_a_rule_given_after_a_checkpoint_leaves_its_goal_in_the_next_round() -> None:
    t = _session(REDIRECT)
    first = t.compact(budget_tokens=t.visible_messages().tokens // 2)
    assert first.checkpoint is not None and first.checkpoint.goal.endswith(REDIRECT)
    t.append(Message.user("use tabs"))
    grow_reads(t, 16, start=900)
    second = t.compact(budget_tokens=t.visible_messages().tokens // 2)
    assert second.outcome == "full_applied" and second.strategy == "checkpoint-delta"
    kept = second.carried_checkpoint or second.checkpoint
    assert kept is not None and kept.goal == f"{GOAL}{REDIRECT_MARK}{REDIRECT}"
    assert "use tabs" in kept.constraints
