"""A full round summarizes the newest step too when keeping it whole would only put the next full
round off to the next call (`CompactConfig.fold_newest_step`, `planner.cut.folds_newest_step`).

Under tight budgets the newest step is often most of the budget (a file the model wrote, a
sub-agent's report): kept whole beside the summary it leaves less room than another step of its
size, so the next call summarizes it all the same, with a second summarizer request and a second
cache break. Only a finished step is folded (every call answered, no user request after it), and
only one that fits the budget; `CompactConfig.priced()` keeps the newest step whole, as before.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
from hypothesis import given, settings, strategies as st

from planner import CompactConfig
from planner.cut import floor_tokens, folds_newest_step, newest_step_start
from projection import check_view_order
from transcript import Message, Store, ToolCall, Transcript

SHIPPED = CompactConfig()
KEEPS = msgspec.structs.replace(SHIPPED, fold_newest_step=False)


def _new(config: CompactConfig = SHIPPED, path: str = ":memory:") -> Transcript:
    t = Store.open(path, tokenizer="chars/4").session("s", config=config)
    t.append(Message.system("sys"))
    t.append(Message.user("write the report module and its tests"))
    return t


def _write(t: Transcript, n: int, size: int) -> None:
    """A step whose size is the model's own writing (a file's content), answered briefly."""
    content = "".join(f"def f{n}_{i}(x):\n    return x + {i}\n" for i in range(size // 36 + 1))[:size]
    call = ToolCall(id=f"w{n}", name="Write", input={"file_path": f"/src/m{n}.py", "content": content})
    t.append_turn(
        [
            Message.assistant(f"writing m{n}.py", tool_calls=[call]),
            Message.tool_result(f"w{n}", f"File created successfully at: /src/m{n}.py", name="Write"),
        ]
    )


def _ids(t: Transcript) -> set[str]:
    return {m.id for m in t.visible_messages().messages}


def _newest_ids(t: Transcript) -> set[str]:
    entries = t.messages().entries
    return {e.message.id for e in entries[entries[-1].seq - 1 :]}


def _session(config: CompactConfig) -> tuple[Transcript, int]:
    """Small steps, then one that is most of the budget: the view is over it."""
    t = _new(config)
    for n in range(4):
        _write(t, n, 400)
    _write(t, 9, 2400)
    newest = floor_tokens(t.messages(), newest_step_start(t.messages()))
    return t, int(newest * 1.5)


def test_a_step_that_leaves_no_room_for_another_is_summarized_with_the_rest() -> None:
    t, budget = _session(SHIPPED)
    newest = _newest_ids(t)
    assert folds_newest_step(t.messages(), SHIPPED, budget)
    result = t.compact(budget_tokens=budget)
    assert result.outcome == "full_applied" and result.kept_steps == 0
    view = t.visible_messages()
    assert not newest & _ids(t) and view.messages[-1].kind == "summary"
    assert "/src/m9.py" in view.messages[-1].text  # the file written is an outcome of the checkpoint
    assert view.tokens <= budget and check_view_order(view.messages).ok
    # The next step arrives in the room the fold left: no round is needed for it.
    _write(t, 10, 400)
    assert t.compact(budget_tokens=budget).checkpoint is None


def test_the_previous_policy_keeps_the_newest_step_and_summarizes_it_one_call_later() -> None:
    t, budget = _session(KEEPS)
    newest = _newest_ids(t)
    assert not folds_newest_step(t.messages(), KEEPS, budget)
    assert t.compact(budget_tokens=budget).outcome == "full_applied"
    assert newest <= _ids(t)
    _write(t, 10, 400)
    assert t.compact(budget_tokens=budget).outcome == "full_applied"  # the second summary
    assert not newest & _ids(t)


def test_a_step_that_leaves_room_for_another_stays_whole() -> None:
    t = _new()
    for n in range(8):
        _write(t, n, 400)
    budget = int(t.visible_messages().tokens * 0.9)
    assert not folds_newest_step(t.messages(), SHIPPED, budget)
    newest = _newest_ids(t)
    assert t.compact(budget_tokens=budget).outcome == "full_applied"
    assert newest <= _ids(t)


def test_an_unfinished_step_or_one_followed_by_a_request_is_never_folded() -> None:
    t, budget = _session(SHIPPED)
    t.append(Message.user("and add a README"))
    assert not folds_newest_step(t.messages(), SHIPPED, budget)
    pending = _new()
    _write(pending, 0, 400)
    calls = [ToolCall(id=f"p{i}", name="Write", input={"content": "x" * 1200}) for i in range(2)]
    pending.append(Message.assistant("two files", tool_calls=calls))
    pending.append(Message.tool_result("p0", "File created successfully", name="Write"))
    size = floor_tokens(pending.messages(), newest_step_start(pending.messages()))
    assert not folds_newest_step(pending.messages(), SHIPPED, int(size * 1.2))
    pending.append(Message.tool_result("p1", "File created successfully", name="Write"))
    assert folds_newest_step(pending.messages(), SHIPPED, int(size * 1.2))


def test_a_step_over_the_budget_is_not_folded() -> None:
    t, _ = _session(SHIPPED)
    newest = floor_tokens(t.messages(), newest_step_start(t.messages()))
    assert not folds_newest_step(t.messages(), SHIPPED, newest - 1)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=40, max_value=3000), min_size=2, max_size=9),
    fraction=st.floats(min_value=0.15, max_value=0.8),
)
def test_views_with_folds_are_provider_valid_and_survive_reopen(sizes: list[int], fraction: float) -> None:
    """Whatever the steps' sizes and the budget: every round leaves a provider-valid view, a fold
    happens exactly when the rule says so (and leaves no message of the newest step), and a reopened
    store shows the same view."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "fold.db")
        t = _new(path=path)
        total = sum(sizes) // 4 + 20
        budget = max(60, int(total * fraction))
        for n, size in enumerate(sizes):
            _write(t, n, size)
            snapshot = t.messages()
            view_before = t.visible_messages().tokens
            folds = folds_newest_step(snapshot, SHIPPED, budget)
            newest = _newest_ids(t)
            result = t.compact(budget_tokens=budget)
            view = t.visible_messages()
            assert check_view_order(view.messages).ok
            if result.outcome == "full_applied":
                assert not newest & _ids(t) if folds else newest <= _ids(t)
            assert view.tokens <= max(budget, view_before)
        t.close()
        with Transcript.open(path, session_id="s", readonly=True) as again:
            reopened = again.visible_messages()
        assert reopened.canonical_json() == view.canonical_json() and reopened.tokens == view.tokens
