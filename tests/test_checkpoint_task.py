"""The checkpoint keeps the task, accumulates over rounds, and keeps failures: issue 14.

The goal is the first real user request (command wrappers read for their arguments, harness markup,
observations, demonstrations and continuation prompts never taken), a later redirect follows it and
answers become decisions; a model summarizer's reply is merged into the previous checkpoint; a split
turn's part is sent once; errors ride on the result, the breaker and `status()`; the host is asked to
re-inject after every full step.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given, strategies as st

from mutate.breaker import Breaker
from planner import CompactConfig
from planner.config import InvalidConfig
from planner.full import BARE_HINT, clip_goal, fit
from planner.intent import (
    REDIRECT_MARK,
    answers,
    constraints,
    edited_files,
    first_request,
    is_answer,
    task_goal,
)
from planner.summary import REPLY_FIELDS, LocalSummarizer, SummaryRequest, complete, prompt_text, serialize
from tests.test_full import GOAL, _grow, _over
from transcript import Message, Store, ToolCall, Transcript
from transcript.formats import detect_format, parse
from transcript.model.checkpoint import Checkpoint, parse_checkpoint, to_json, to_markdown
from transcript.model.errors import PromptTooLong

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"

# Full rounds as the priced policy reached them (policy 3's excerpts defend these budgets alone).
PRICED = CompactConfig.priced()


def _call(name: str, **arguments: object) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=f"id-{name}", name=name, input=dict(arguments))])


AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_slash_command_is_read_for_its_arguments_and_markup_is_no_request() -> None:
    messages = [
        Message.user(
            "<command-message>review is running…</command-message>\n<command-name>/review</command-name>"
            "\n<command-args>check the cache module for races</command-args>"
        ),
        Message.user("<command-name>/clear</command-name><command-message>clear</command-message>"),
        Message.user("<local-command-stdout>(no content)</local-command-stdout>"),
        Message.user("[Request interrupted by user for tool use]"),
        Message.continuation("Continue with the task from where you stopped."),
    ]
    assert first_request(messages) == "check the cache module for races"
    assert task_goal(messages) == "check the cache module for races"  # nothing after it is a request
    only_markup = [Message.user("<command-name>/compact</command-name><command-args></command-args>")]
    assert first_request(only_markup) == ""


def test_observations_and_demonstrations_are_never_the_task() -> None:
    demo = Message.user("Here is a demonstration: fix a typo", metadata={"demo": True})
    task = Message.user("Fix the date parser so that it accepts ISO weeks.")
    output = Message.user("<bash-stdout>total 0</bash-stdout>")
    assert first_request([demo, output, task]) == task.text


def test_a_redirect_follows_the_task_and_answers_become_decisions() -> None:
    messages = [
        Message.user(GOAL),
        Message.assistant("Shall I also fix the tests?"),
        Message.user("yes, fix it"),
        Message.user("do you have a link to the docs?"),
        Message.user("Actually, leave the parser and port the CLI to click instead. Don't touch the tests."),
    ]
    goal = task_goal(messages)
    assert goal.startswith(GOAL) and goal.endswith("port the CLI to click instead. Don't touch the tests.")
    assert answers(messages) == ["user: yes, fix it", "user: do you have a link to the docs?"]
    assert constraints(messages) == ["Don't touch the tests."]
    assert is_answer("continue") and is_answer("ok, go ahead with the second option")
    assert not is_answer("Thanks! Please update CLAUDE.md for current changes")


def test_an_earlier_redirect_the_goal_no_longer_carries_is_a_decision() -> None:
    first, second = "add a regression test for combining characters", "now write the release notes"
    part = [Message.user(GOAL), Message.assistant("on it"), Message.user(first), Message.assistant("done")]
    session_task = task_goal([*part, Message.user(second)])  # the cut keeps the second redirect
    assert answers(part, task=session_task) == [f"user asked: {first}"]
    assert answers([*part, Message.user(second)]) == [f"user asked: {first}"]  # the goal carries the 2nd


def test_the_aggressive_step_keeps_the_task_and_its_redirect_in_the_goal(tmp_path: Path) -> None:
    redirect = "Actually, instead of that, please rewrite the lexer so that it handles tabs correctly"
    replies: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        replies.append(request)
        return '{"goal": "rewrite the lexer", "done": ["step"]}'

    for summarizer in (None, model):
        with Transcript.open(tmp_path / f"{summarizer is None}.db", session_id="s", config=PRICED) as t:
            t.append(Message.system("You are an agent. " + "rule words here now. " * 300))
            t.append(Message.user("fix the parser module so that unicode input works"))
            for k in range(13):
                if k == 10:
                    t.append(Message.user(redirect))
                call = ToolCall(id=f"c{k}", name="Bash", input={"command": f"cmd {k}"})
                t.append_turn(
                    [
                        Message.assistant(f"step {k}", tool_calls=[call]),
                        Message.tool_result(call.id, "out words here\n" * 100, name="Bash"),
                    ]
                )
            result = t.compact(budget_tokens=2_700, config=CompactConfig.previous(), summarizer=summarizer)
            assert result.strategy == "aggressive-checkpoint" and result.checkpoint is not None
            goal = result.checkpoint.goal
            assert goal.startswith("fix the parser module") and redirect in goal, goal
            assert goal.count("Current aim") <= 1
            assert t.status().goal.startswith("fix the parser module")
    assert replies


def test_the_local_summary_keeps_the_first_request_across_later_answers() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED)
    t.append(Message.user(GOAL))
    _grow(t, 6)
    t.append(Message.user("yes, fix it"))
    _grow(t, 10, start=10)
    checkpoint = t.compact(budget_tokens=_over(t, 2.0)).checkpoint
    assert checkpoint is not None and checkpoint.goal == GOAL
    assert "user: yes, fix it" in checkpoint.key_decisions
    assert t.status().goal == GOAL


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (_call("Write", file_path="/a/new.py", content="x"), "/a/new.py"),
        (_call("MultiEdit", file_path="/a/b.py", edits=[]), "/a/b.py"),
        (_call("NotebookEdit", notebook_path="/a/n.ipynb", new_source="x"), "/a/n.ipynb"),
        (_call("str_replace_editor", command="insert", path="/w/c.c", new_str="x"), "/w/c.c"),
        (_call("write_file", file_path="/g/w.rs", content="x"), "/g/w.rs"),
        (_call("replace", file_path="/g/r.rs", old_string="a", new_string="b"), "/g/r.rs"),
    ],
    ids=[
        "claude-write",
        "claude-multiedit",
        "notebook",
        "openhands-insert",
        "gemini-write",
        "gemini-replace",
    ],
)
def test_edited_files_per_format(call: Message, path: str) -> None:
    assert edited_files([call]) == [path]


def test_views_and_reads_are_not_edits() -> None:
    reads = [
        _call("str_replace_editor", command="view", path="/w/c.c"),
        _call("Read", file_path="/a/b.py"),
        _call("open", path="src/x.py"),
    ]
    assert edited_files(reads) == []


def test_swe_agent_edits_change_the_file_open_and_codex_patches_name_theirs() -> None:
    opened = [
        _call("open", path="src/x.py"),
        _call("edit", search="a", replace="b"),
        _call("create", filename="r.py"),
    ]
    assert edited_files(opened) == ["src/x.py", "r.py"]
    text_actions = [
        Message.assistant("Let me open it.\n\n```\nopen pkg/handler.py 293\n```"),
        Message.assistant("Now fix it.\n\n```\nedit 287:295\n    pass\nend_of_edit\n```"),
    ]
    assert edited_files(text_actions) == ["pkg/handler.py"]
    path = FORMATS / "codex" / "rollout_0.80.0_built.jsonl"
    (session,) = parse(path, detect_format(path))
    assert edited_files(session.messages) == ["cli.py"]  # from the apply_patch header


class OnlyNew:
    """A model summarizer in checkpoint-delta style: it returns only what is new in each request."""

    def __init__(self) -> None:
        self.round = 0

    def __call__(self, request: SummaryRequest) -> str:
        self.round += 1
        n = self.round
        reply = {"goal": "keep going", "done": [f"step {n} done"], "key_decisions": [f"decision {n}"]}
        if n == 1:
            reply["next_steps"] = ["step 2", "step 3"]
        elif n == 2:
            reply["done"] = ["step 2"]
        return msgspec.json.encode(reply).decode()


def test_a_delta_round_keeps_what_the_model_left_out_over_three_rounds() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=OnlyNew())
    t.append(Message.user(GOAL))
    checkpoints = []
    for start in (0, 100, 200):
        _grow(t, 12, start=start, tool="Edit")
        result = t.compact(budget_tokens=_over(t, 2.0))
        assert result.outcome == "full_applied" and not result.fallback_used
        checkpoints.append(result.checkpoint)
    first, second, third = checkpoints
    assert first is not None and second is not None and third is not None
    assert third.key_decisions == ("decision 1", "decision 2", "decision 3")
    assert third.done == ("step 1 done", "step 2", "step 3 done")
    assert third.next_steps == ("step 3",)  # step 2 is done: it left the next steps
    # The model's goal lacks the task: the task leads, the model's aim follows it.
    assert third.goal.startswith(GOAL) and "keep going" in third.goal
    # Every file edited in the summarized history survives the merges.
    assert {"src/m0.py", "src/m100.py", "src/m200.py"} <= set(third.files)


def test_the_list_cap_is_configurable_and_drops_the_oldest_items() -> None:
    with pytest.raises(InvalidConfig, match="checkpoint_list_cap"):
        CompactConfig(checkpoint_list_cap=0)
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=OnlyNew())
    t.append(Message.user(GOAL))
    config = CompactConfig.priced(checkpoint_list_cap=2)
    for start in (0, 100, 200):
        _grow(t, 12, start=start, tool="Edit")
        checkpoint = t.compact(budget_tokens=_over(t, 2.0), config=config).checkpoint
    assert checkpoint is not None
    assert checkpoint.key_decisions == ("decision 2", "decision 3")
    assert len(checkpoint.files) == 2 and checkpoint.files[-1].startswith("src/m2")


def test_a_split_turn_is_sent_once_in_its_own_section() -> None:
    seen: list[SummaryRequest] = []

    def model(request: SummaryRequest) -> str:
        seen.append(request)
        return '{"goal": "g"}'

    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=model)
    t.append(Message.user("an older request that opened the first turn"))
    _grow(t, 4)
    t.append(Message.user("could you also look at the readers?"))
    _grow(t, 16, start=10)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.split_turn and seen
    prompt = prompt_text(seen[0])
    assert prompt.count("could you also look at the readers?") == 1
    assert prompt.count("step 10: reading src/m10.py") == 1
    turn = prompt.index("The current turn began before the cut")
    assert prompt.index("could you also look at the readers?") > turn
    assert prompt.index("an older request") < turn


def test_the_prompt_asks_only_for_what_is_new_and_says_the_task_once() -> None:
    previous = Checkpoint(
        goal=GOAL,
        done=("read the parser",),
        in_progress=("the week parser",),
        files=("src/p.py",),
        generated_at=AT,
        source_item_count=9,
    )
    history = (Message.assistant("fixed the week parser"), Message.tool_result("c1", "ok", name="Bash"))
    request = SummaryRequest(
        system_prompt="s",
        items=tuple(serialize(m) for m in history),
        messages=history,
        previous_checkpoint=previous,
        max_output_tokens=300,
        goal_hint=GOAL,
    )
    prompt = prompt_text(request)
    for name, _ in REPLY_FIELDS:
        assert f"- {name}: " in prompt
    assert "adds to the previous checkpoint" in prompt and "Do not repeat what the previous" in prompt
    assert prompt.count(GOAL) == 1 and "leave it out" in prompt
    # Of the previous checkpoint, only what a reply may move (its open items): the rest is merged in.
    shown = prompt.split("Previous checkpoint's open items:\n", 1)[1].split("\n", 1)[0]
    assert parse_checkpoint(shown) == Checkpoint(in_progress=("the week parser",))
    # No task anywhere: the model is asked for the goal; nothing to show of an empty conversation.
    bare = msgspec.structs.replace(request, goal_hint="", previous_checkpoint=None, prefix_items=2)
    prompt = prompt_text(bare)
    assert 'Also give "goal"' in prompt and "Previous checkpoint" not in prompt
    assert "Conversation to summarize" not in prompt and "fixed the week parser" in prompt


def test_a_model_reply_and_the_local_reply_are_completed_alike() -> None:
    history = (
        Message.user(GOAL),
        Message.assistant(
            "writing it", tool_calls=[ToolCall(id="w", name="Write", input={"file_path": "a.py"})]
        ),
        Message.tool_result("w", "ok", name="Write"),
    )
    request = SummaryRequest(
        system_prompt="s",
        items=tuple(serialize(m) for m in history),
        messages=history,
        previous_checkpoint=Checkpoint(goal=GOAL, in_progress=("the parser",), files=("b.py",)),
        max_output_tokens=300,
    )
    reply = Checkpoint(done=("the parser",))
    done = complete(reply, request)
    assert done.goal == GOAL and done.files == ("b.py", "a.py")
    assert done.done == ("the parser",) and not done.in_progress  # moved, not repeated
    local = LocalSummarizer()
    assert local.checkpoint(request) == complete(local.reply(request), request)
    assert local.checkpoint(request).source_item_count == len(history)
    assert parse_checkpoint(local(request)) == local.reply(request)  # what a model would send: no metadata


LONG_TASK = "Fix the ISO week parser in src/dates/parse.py so that it accepts 2024-W05 and 2024W05. " * 12
REDIRECT = "Now instead make the CLI print week numbers with a new --weeks flag and add tests for it"


def _redirected(task: str) -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user(task))
    _grow(t, 6)
    t.append(Message.user(REDIRECT))
    _grow(t, 14, start=6)
    return t


@pytest.mark.parametrize(
    "reply",
    [
        '{"done": ["read the modules"]}',  # as the prompt asks: no goal
        msgspec.json.encode({"goal": LONG_TASK.strip()}).decode(),  # the first request said again
    ],
)
def test_a_long_task_keeps_its_redirect_in_the_goal(reply: str) -> None:
    t = _redirected(LONG_TASK)
    result = t.compact(budget_tokens=_over(t, 2.0), summarizer=lambda request: reply, force=True)
    assert result.checkpoint is not None and not result.fallback_used
    goal = result.checkpoint.goal
    assert goal.startswith(LONG_TASK[:200]) and goal.endswith(REDIRECT) and "Current aim" not in goal


def test_a_retry_without_the_oldest_quarter_still_shows_the_task() -> None:
    prompts: list[str] = []

    def model(request: SummaryRequest) -> str:
        prompts.append(prompt_text(request))
        if len(prompts) == 1:
            raise PromptTooLong("prompt too long")
        return '{"goal": "add week support", "done": ["read the modules"]}'

    t = _redirected("make the date parser accept ISO weeks")
    result = t.compact(budget_tokens=_over(t, 2.0), summarizer=model, force=True)
    assert len(prompts) == 2 and result.checkpoint is not None
    assert "The task the user gave: make the date parser accept ISO weeks" in prompts[1]
    assert result.checkpoint.goal == (
        "make the date parser accept ISO weeks\n\nThen the user asked: "
        f"{REDIRECT}\n\nCurrent aim: add week support"
    )


def test_a_checkpoint_shrunk_to_fit_the_view_is_carried_whole_to_the_next_round() -> None:
    def model(request: SummaryRequest) -> str:
        facts = [f"parse_week_{i} lives in src/module_{i}/parser.py line {i * 7}" for i in range(60)]
        return msgspec.json.encode({"critical_context": facts}).decode()

    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=model)
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user(GOAL))
    _grow(t, 20, size=3000)
    budget = t.visible_messages().tokens // 6
    result = t.compact(budget_tokens=budget, config=CompactConfig.previous(), force=True)
    shown, carried = result.checkpoint, result.carried_checkpoint
    assert shown is not None and carried is not None and result.tokens_after <= budget
    assert len(shown.critical_context) < len(carried.critical_context)
    summary = next(m for m in t.visible_messages().messages if m.kind == "summary")
    assert to_markdown(shown, brief=True) in summary.text
    assert t.latest_checkpoint() == carried and t.status().summary == to_markdown(carried)
    prompt = t.continuation_prompt(result)  # re-anchors on what the view shows, no more
    assert shown.critical_context[-1] in prompt and carried.critical_context[0] not in prompt
    seen: list[SummaryRequest] = []

    def recorder(request: SummaryRequest) -> str:
        seen.append(request)
        return "{}"

    t.compact(budget_tokens=budget * 6, summarizer=recorder, force=True)
    assert seen and seen[0].previous_checkpoint is not None
    assert seen[0].previous_checkpoint.critical_context == carried.critical_context


def test_a_failing_summarizer_leaves_its_error_on_the_result_the_breaker_and_status() -> None:
    def broken(request: SummaryRequest) -> str:
        raise RuntimeError("HTTP 529 overloaded " + "x" * 2_000)

    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=broken)
    t.append(Message.user(GOAL))
    _grow(t, 20)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.fallback_used and result.failed
    assert result.summarizer_error.startswith("RuntimeError: HTTP 529 overloaded")
    assert len(result.summarizer_error) <= 500  # bounded: 500 chars, the clipping note included
    assert result.last_error == result.summarizer_error
    assert Breaker.after(result).last_error == result.summarizer_error
    assert t.status().last_error == result.summarizer_error


def test_a_reply_that_does_not_parse_keeps_its_parse_error() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session(
        "s", config=PRICED, summarizer=lambda request: "Sure! Done."
    )
    t.append(Message.user(GOAL))
    _grow(t, 20)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.fallback_used and result.failed and not result.summarizer_error
    assert result.parse_error.startswith("CheckpointParseError: no checkpoint found")
    assert t.status().last_error == result.parse_error
    # A later round whose model call succeeds clears what the breaker kept.
    t.summarizer = lambda request: '{"goal": "x", "done": ["ok"]}'
    _grow(t, 20, start=100)
    again = t.compact(budget_tokens=_over(t, 2.0))
    assert again.outcome == "full_applied" and not again.failed
    assert again.last_error == "" and t.status().last_error == ""


def test_the_host_is_asked_to_reinject_even_without_a_read() -> None:
    asked: list[tuple[Sequence[str], int]] = []

    def skills(paths: Sequence[str], budget: int) -> list[tuple[str, str]]:
        asked.append((paths, budget))
        return [("skill: release-notes", "Write release notes as a bulleted list. " * 400)]

    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, reinject=skills)
    t.append(Message.user(GOAL))
    _grow(t, 20, tool="Bash")
    config = CompactConfig.priced(reinject_max_tokens=200)
    result = t.compact(budget_tokens=_over(t, 2.0), config=config)
    assert result.outcome == "full_applied"
    assert asked and list(asked[0][0]) == [] and asked[0][1] <= 200
    (summary,) = [m for m in t.visible_messages().messages if m.kind == "summary"]
    assert "### skill: release-notes" in summary.text and "Write release notes" in summary.text
    reinjected = summary.text[summary.text.index("### skill: release-notes") :]
    assert len(reinjected) <= 200 * 4 + 100  # the budget, with the clipping note and the fences


def test_files_round_trip_in_both_forms_and_local_merges_keep_them() -> None:
    checkpoint = Checkpoint(goal="g", files=("a.py", "b/c.ts"))
    assert parse_checkpoint(to_markdown(checkpoint)) == checkpoint
    assert parse_checkpoint(to_json(checkpoint)) == checkpoint
    request = SummaryRequest(
        system_prompt="",
        items=("[assistant → Write] {}",),
        messages=(_call("Write", file_path="d.py", content=""),),
        previous_checkpoint=checkpoint,
        max_output_tokens=500,
    )
    assert LocalSummarizer().checkpoint(request).files == ("a.py", "b/c.ts", "d.py")


def test_a_model_goal_that_holds_the_task_is_kept() -> None:
    def model(request: SummaryRequest) -> str:
        return msgspec.json.encode({"goal": f"{GOAL}; now on the week-number edge cases"}).decode()

    t: Transcript = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=model)
    t.append(Message.user(GOAL))
    _grow(t, 20)
    checkpoint = t.compact(budget_tokens=_over(t, 2.0)).checkpoint
    assert checkpoint is not None and checkpoint.goal == f"{GOAL}; now on the week-number edge cases"


def test_the_continuation_prompt_names_the_files_edited() -> None:
    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED)
    t.append(Message.user(GOAL))
    _grow(t, 20, tool="Write")
    result = t.compact(budget_tokens=_over(t, 2.0))
    prompt = t.continuation_prompt(result)
    assert "Files edited:\n- src/m0.py" in prompt


def test_the_task_said_again_is_no_answer() -> None:
    messages = [
        Message.user("fix tests"),
        Message.user("Operation stopped by hook: busy"),
        Message.user("fix tests"),
    ]
    assert task_goal(messages) == "fix tests" and answers(messages) == []


def test_fit_drops_the_oldest_files_last_and_then_fits() -> None:
    files = tuple(f"src/pkg/module_{i:03d}/implementation_file.py" for i in range(40))
    fitted = fit(Checkpoint(goal="g" * 2_000, done=("a", "b"), files=files), 800)
    assert len(to_markdown(fitted, brief=True)) <= 800
    assert not fitted.done and fitted.files == files[len(files) - len(fitted.files) :] and fitted.files
    roomy = fit(Checkpoint(goal="g" * 2_000, done=("a",), files=files[:3]), 1_200)
    assert roomy.files == files[:3] and not roomy.done  # lists and the goal give way before files


@pytest.mark.parametrize("max_chars", [200, 120, 60, 10])
def test_fit_lets_the_goal_give_way_last_and_stops_at_the_empty_checkpoint(max_chars: int) -> None:
    task = "make the date parser accept ISO weeks and ordinal dates, " * 10
    fitted = fit(
        Checkpoint(goal=f"{task}\n\nThen the user asked: also the CLI", files=("a.py",)),
        max_chars,
        give_way=True,
    )
    empty = len(to_markdown(Checkpoint(), brief=True))
    assert len(to_markdown(fitted, brief=True)) <= max(max_chars, empty)
    assert not fitted.files
    assert not fitted.goal or fitted.goal.startswith("make the date parser")


def _one_big_newest_step(asked: list[SummaryRequest]) -> tuple[Transcript, int]:
    """A session whose newest step is most of its view, and that step's tokens."""

    def model(request: SummaryRequest) -> str:
        asked.append(request)
        return "{}"

    t = Store.open(":memory:", tokenizer="chars/4").session("s", config=PRICED, summarizer=model)
    t.append(Message.user(GOAL))
    _grow(t, 6)
    call = ToolCall(id="big", name="Bash", input={"command": "cat big.log"})
    t.append_turn(
        [Message.assistant("reading the log", tool_calls=[call]), Message.tool_result("big", "x " * 4_000)]
    )
    entries = [t.entry(m.id) for m in t.visible_messages().messages[-2:]]
    return t, sum(e.token_count for e in entries if e is not None)


def test_no_summarizer_is_asked_when_no_summary_fits_beside_the_newest_step() -> None:
    asked: list[SummaryRequest] = []
    t, newest = _one_big_newest_step(asked)
    result = t.compact(budget_tokens=newest + 10)  # the newest step fits; no summary beside it does
    assert not asked and result.summary_input_tokens == 0 and result.checkpoint is None
    assert result.reason == "no summary fits beside the newest step: it would leave the view over budget"


def test_when_only_the_short_hint_fits_the_view_shows_it_and_the_record_carries_the_checkpoint() -> None:
    asked: list[SummaryRequest] = []
    t, newest = _one_big_newest_step(asked)
    bare = t.compact(budget_tokens=newest + 25)  # room for the short hint alone
    assert asked and bare.outcome == "full_applied" and bare.tokens_after <= newest + 25
    summary = next(m for m in t.visible_messages().messages if m.kind == "summary")
    assert summary.text == BARE_HINT and bare.checkpoint is not None and not bare.checkpoint.goal
    assert bare.carried_checkpoint is not None and bare.carried_checkpoint.goal.startswith(GOAL[:50])
    assert "Goal:" not in t.continuation_prompt(bare)
    t, newest = _one_big_newest_step(asked)
    fitted = t.compact(budget_tokens=newest + 60)  # room for the hint and the goal's opening
    assert fitted.outcome == "full_applied" and fitted.tokens_after <= newest + 60
    assert fitted.checkpoint is not None and fitted.checkpoint.goal.startswith(GOAL[:20])
    whole = fitted.carried_checkpoint or fitted.checkpoint
    assert whole.goal.startswith(GOAL[:50])


@example(  # a goal whose clipping around the redirect once made no progress
    task="make the date parser accept ISO weeks " * 13,
    redirect="also the CLI please, and the docs " * 2,
    done=[],
    max_chars=111,
)
@given(
    task=st.text(max_size=600),
    redirect=st.text(max_size=200),
    done=st.lists(st.text(max_size=40), max_size=3),
    max_chars=st.integers(0, 600),
)
def test_fit_giving_way_ends_within_the_room_or_at_the_empty_checkpoint(
    task: str, redirect: str, done: list[str], max_chars: int
) -> None:
    goal = f"{task}{REDIRECT_MARK}{redirect}" if redirect else task
    fitted = fit(Checkpoint(goal=goal, done=tuple(done), files=("a.py",)), max_chars, give_way=True)
    empty = len(to_markdown(Checkpoint(), brief=True))
    assert len(to_markdown(fitted, brief=True)) <= max(max_chars, empty)


@given(task=st.text(max_size=400), redirect=st.text(max_size=200), limit=st.integers(0, 700))
def test_a_clipped_goal_is_never_longer_than_the_goal(task: str, redirect: str, limit: int) -> None:
    goal = f"{task}{REDIRECT_MARK}{redirect}"
    assert len(clip_goal(goal, limit)) <= len(goal)


def test_a_clipped_goal_keeps_the_redirect_when_that_is_shorter() -> None:
    goal = f"{'make the parser accept ISO weeks ' * 20}{REDIRECT_MARK}{'now port the CLI to click ' * 10}"
    clipped = clip_goal(goal, 300)
    assert len(clipped) < len(goal) and REDIRECT_MARK in clipped
    assert clipped.startswith("make the parser") and clipped.split(REDIRECT_MARK)[1].startswith("now port")
