"""The breaker counts failures of the model summarizer only (issue 21's amendment of SPEC §7): rounds
that did not ask the model neither add to the count nor reset it, hopeless rounds never count, the
cool-down counts the rounds that would have asked, and an open breaker always says why."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from mutate.breaker import NO_ERROR_TEXT, Breaker
from planner import CompactConfig
from planner.summary import SummaryRequest
from transcript import Message, Store, ToolCall, Transcript
from transcript.model.result import CompactResult

# Fresh outputs kept whole (no oversize excerpts): every large step then needs a full round, so the
# model is asked often enough to reach the cool-down.
CONFIG = CompactConfig(max_consecutive_failures=3, breaker_cooldown_rounds=4, micro_oversize_fraction=0.0)


class Down:
    """A model summarizer that is down: it raises, and counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, request: SummaryRequest) -> str:
        self.asked += 1
        raise ConnectionError("model endpoint unreachable")


def _step(t: Transcript, n: int, size: int) -> None:
    call = ToolCall(id=f"c{n}", name="Bash", input={"command": f"cat part_{n}.log"})
    output = "".join(f"line {n}.{i} of the log, nothing new\n" for i in range(size // 36 + 1))
    t.append_turn(
        [Message.assistant(f"reading part {n}", tool_calls=[call]), Message.tool_result(call.id, output)]
    )


def _session(summarizer: Down) -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=CONFIG, summarizer=summarizer)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user("collect what the logs say about the failing job"))
    return t


def _rounds(summarizer: Down, steps: int, budget: int) -> list[tuple[CompactResult, int]]:
    """Each round of a session growing by steps of mixed sizes, with how often it asked the model."""
    t = _session(summarizer)
    found = []
    for n in range(steps):
        _step(t, n, 3_000 if n % 3 == 0 else 400)  # big outputs to shorten, and steady growth
        before = summarizer.asked
        result = t.compact(budget_tokens=budget)
        found.append((result, summarizer.asked - before))
    return found


def test_a_model_that_is_down_is_asked_max_failures_times_then_once_per_cool_down() -> None:
    down = Down()
    rounds = _rounds(down, 160, 3_000)
    kinds = {r.outcome for r, _ in rounds}
    assert "micro_applied" in kinds and "full_applied" in kinds  # micro and full rounds alternate
    asked = [i for i, (_, n) in enumerate(rounds) if n]
    assert all(rounds[i][1] == 1 for i in asked)  # one request per round (no prompt-too-long retries)
    # Exactly max_consecutive_failures asks before the breaker opens, micro rounds between them or not.
    third = asked[CONFIG.max_consecutive_failures - 1]
    assert [rounds[i][0].breaker for i in asked[:3]] == ["closed", "closed", "open"]
    assert rounds[third][0].consecutive_failures == 3 and rounds[third][0].last_error
    # Then once per cool-down: every later ask is a half-open round that completed the cool-down.
    later = asked[3:]
    assert later, "the session is long enough to reach the cool-down"
    for previous, current in zip(asked[2:], later, strict=False):
        counted = [rounds[i][0].rounds_since_open for i in range(previous + 1, current)]
        # The cool-down counts only the rounds that would have asked: each wrote its checkpoint with
        # the local summarizer instead; micro rounds between them leave the count as it was.
        steps = [b - a for a, b in zip([0, *counted], counted, strict=False)]
        assert set(steps) <= {0, 1} and counted[-1] == CONFIG.breaker_cooldown_rounds - 1
        for i, step in zip(range(previous + 1, current), steps, strict=True):
            assert (step == 1) == (rounds[i][0].checkpoint is not None and rounds[i][0].fallback_used)
        assert rounds[current][0].breaker == "open" and rounds[current][0].rounds_since_open == 0
    for result, _ in rounds[third:]:
        assert result.breaker != "closed" and result.last_error  # never open without saying why


def test_rounds_that_ask_no_model_neither_add_to_the_count_nor_reset_it() -> None:
    failed = Breaker(failures=2, state="closed", last_error="ConnectionError: down")
    assert failed.finished(manual=False, asked=False, failed=False, config=CONFIG) == failed
    assert failed.finished(manual=False, asked=True, failed=False, config=CONFIG) == Breaker()
    opened = failed.finished(manual=False, asked=True, failed=True, config=CONFIG)
    assert opened.state == "open" and opened.failures == 3 and opened.last_error == "ConnectionError: down"


def test_hopeless_rounds_end_irreducible_and_never_open_the_breaker() -> None:
    down = Down()
    t = _session(down)
    for n in range(12):
        _step(t, n, 30_000)  # every newest step alone exceeds the budget
        result = t.compact(budget_tokens=2_000)
        assert result.breaker == "closed" and result.consecutive_failures == 0 and not result.last_error
    assert result.outcome == "over_budget_irreducible"
    assert down.asked == 0


def test_an_open_breaker_without_an_error_text_still_says_why() -> None:
    silent = Breaker(failures=2)
    opened = silent.finished(manual=False, asked=True, failed=True, config=CONFIG)
    assert opened.state == "open" and opened.last_error == NO_ERROR_TEXT


@given(
    events=st.lists(
        st.tuples(st.booleans(), st.booleans(), st.booleans(), st.text(max_size=5)), min_size=1, max_size=40
    )
)
@settings(max_examples=200, deadline=None)
def test_the_breaker_never_opens_without_a_reason_nor_counts_what_did_not_ask(
    events: list[tuple[bool, bool, bool, str]],
) -> None:
    breaker = Breaker()
    for would_ask, failed, manual, error in events:
        before = breaker
        asked = False
        if would_ask:
            breaker, asked = breaker.consulted(manual=manual, config=CONFIG)
        after = breaker.finished(
            manual=manual, asked=asked, failed=failed and asked, config=CONFIG, error=error
        )
        if not asked and not manual:
            assert (after.failures, after.state) == (before.failures, breaker.state)
        if after.state == "open":
            assert after.last_error
        breaker = after
