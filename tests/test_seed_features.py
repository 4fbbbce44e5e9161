"""The design sources' mechanisms, one test per feature, named after the sources' own words.

`../shared/seeds/000_*` (the checkpoint source: `CodingSession`, its compact API, the outer loop, the
options) and `../shared/seeds/004_*` (the multi-round stability source: marks, directives, the single
mutator). Each test pins a behaviour the sources describe that the session did not have before.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import typing
from collections.abc import Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import openai
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from planner import CompactConfig, LoopPolicy, MicroPlan, plan_micro
from planner.full import ERROR_CHARS
from planner.intent import clip_within
from planner.overflow import is_context_overflow, overflow_sizes, retry_budget
from planner.summary import SummaryRequest
from planner.trigger import RoundPlan
from projection.view import View
from tests.conftest import PROJECT_ROOT
from tests.helpers import grow_reads, reading_session
from transcript import FormatError, Message, Store, ToolCall, Transcript, WriteRefused, verify
from transcript.cli import cli
from transcript.model import (
    EVENT_ENCODER,
    TRUNCATE,
    CompactionRecorded,
    CompactResult,
    DirectiveEntry,
    Event,
    ImportRecorded,
    MessageAppended,
    MessageMarked,
    TitleSet,
)
from transcript.model.errors import IneligiblePlan, InvalidArgument
from transcript.model.hashing import event_hash
from transcript.model.state import ExportedEvent
from transcript.store.explained import unexplained_marks
from transcript.store.recorder import EventRow, RecorderWrite
from transcript.store.writer import FlagWriter, writer_for

GOAL = "make the date parser accept ISO weeks"


_grow = grow_reads


def _session(**settings: object) -> Transcript:
    # Full rounds as the priced policy reached them (policy 3's excerpts defend these budgets alone).
    settings.setdefault("config", CompactConfig.priced())
    return reading_session(GOAL, **settings)


def _over(t: Transcript, use: float) -> int:
    """A budget the current view uses `use` of."""
    return int(t.visible_messages().tokens / use)


# 3.1 "drainPendingAutoCompactResults()：取走本轮自动 compact 结果，用于宿主事件流"


def test_drain_pending_auto_compact_results() -> None:
    t = _session()
    automatic = t.compact(budget_tokens=_over(t, 0.8))
    _grow(t, 5, start=100)
    manual = t.compact(budget_tokens=_over(t, 0.5), manual=True, force=True)
    assert automatic.outcome == "micro_applied" and not automatic.manual and manual.manual
    assert t.drain_compact_results(automatic_only=True) == [automatic]
    assert t.drain_compact_results() == []  # drained: the manual round was taken too
    _grow(t, 5, start=200)
    again = t.compact(budget_tokens=_over(t, 0.5), manual=True, force=True)
    assert t.drain_compact_results() == [again]


# 3.1 "getLastAutoCompactResult() / getLatestCompactResult()：读取最近 compact 诊断"


def test_get_last_auto_compact_result() -> None:
    t = _session()
    assert t.last_auto_compact_result() is None
    automatic = t.compact(budget_tokens=_over(t, 0.8))
    _grow(t, 5, start=100)
    manual = t.compact(budget_tokens=_over(t, 0.5), manual=True, force=True)
    assert t.latest_compact_result() == manual
    assert t.last_auto_compact_result() == automatic
    reopened = Transcript.attach(t.events, "s")  # it is read from the log: it survives a restart
    assert reopened.last_auto_compact_result() == automatic


# 7.4 "auto-compact circuit breaker ... 将错误保留到宿主状态里" (the README: at most 500 characters)


def test_auto_compact_circuit_breaker_keeps_the_error_in_host_state() -> None:
    def broken(request: SummaryRequest) -> str:
        raise RuntimeError("HTTP 529 overloaded " + "x" * 2_000)

    t = _session(summarizer=broken)
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.failed and result.summarizer_error.startswith("RuntimeError: HTTP 529 overloaded")
    assert len(result.summarizer_error) <= ERROR_CHARS and result.summarizer_error.endswith("chars]")
    assert t.status().last_error == result.last_error == result.summarizer_error


@given(st.text(max_size=1_200), st.integers(min_value=1, max_value=600))
def test_a_kept_error_never_passes_its_limit(text: str, limit: int) -> None:
    kept = clip_within(text, limit)
    assert len(kept) <= limit
    if len(text) <= limit:
        assert kept == text
    else:
        assert text.startswith(kept.split(" … [clipped ")[0])


# 9 "stopOnExplicitQuestion：模型显式向用户提问时是否停住" — in both languages of the sources.


def _replied(text: str) -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("q")
    t.append(Message.user(GOAL))
    t.append(Message.assistant(text))
    return t


@pytest.mark.parametrize(
    "reply",
    [
        "我已经找到了失败的断言。要继续吗？",
        "补丁已经准备好。要我现在应用吗？」",
        "The patch is ready. Shall I apply it?\n\n```diff\n- return None\n+ return week\n```\n",
        "我应该运行哪个命令？\n```bash\nmake test\n```",
    ],
)
def test_stop_on_explicit_question(reply: str) -> None:
    step = LoopPolicy(auto_continue=True).after_reply(_replied(reply).messages())
    assert step.code == "explicit_question" and not step.proceed
    assert step.reason.rstrip().endswith(("?", "？"))


_PROSE = st.text(
    st.characters(blacklist_characters="`~?？\n", blacklist_categories=["Cs"]), min_size=1, max_size=60
)
_CODE = st.text(st.characters(blacklist_characters="`~", blacklist_categories=["Cs"]), max_size=80)


@given(
    _PROSE,
    st.sampled_from(["?", "？"]),
    st.lists(st.tuples(st.sampled_from(["", "bash", "diff"]), _CODE), max_size=3),
)
def test_a_question_before_trailing_code_blocks_is_a_question(
    prose: str, mark: str, blocks: list[tuple[str, str]]
) -> None:
    reply = prose.strip() + mark + "".join(f"\n\n```{lang}\n{code}\n```" for lang, code in blocks)
    assert LoopPolicy(auto_continue=True).after_reply(_replied(reply).messages()).code == "explicit_question"
    closing = "Done." + "".join(f"\n```{lang}\n{code}?\n```" for lang, code in blocks)
    assert LoopPolicy(auto_continue=True).after_reply(_replied(closing).messages()).code == "follow_up"


@pytest.mark.parametrize(
    "reply",
    ["修好了。", "Fixed it.\n```\nwhat now?\n```", "Done: the test passes. Next I could ask?\nNo, all done."],
)
def test_stop_on_explicit_question_only_for_a_question(reply: str) -> None:
    step = LoopPolicy(auto_continue=True).after_reply(_replied(reply).messages())
    assert step.code == "follow_up"


# 9 "autoCompactEnabled：是否启用自动 compact"


def test_auto_compact_enabled() -> None:
    t = _session()
    off = CompactConfig.priced(auto_compact_enabled=False)
    version = t.version
    result = t.compact(budget_tokens=_over(t, 2.0), config=off)
    assert result.outcome == "skipped" and result.reason == "automatic compaction is disabled"
    assert t.version == version and t.latest_compact_result() is None
    manual = t.compact(budget_tokens=_over(t, 2.0), config=off, manual=True)  # the user still may
    assert manual.outcome == "full_applied"


# 9 "toolResultMicroCompactEnabled：是否启用 microcompact"


def test_tool_result_micro_compact_enabled() -> None:
    t = _session()
    off = CompactConfig.priced(micro_compact_enabled=False)
    below_full = t.compact(budget_tokens=_over(t, 0.8), config=off)
    assert below_full.outcome == "skipped" and below_full.compacted_count == 0
    assert not any(e.flags.truncated for e in t.messages().entries)
    over = t.compact(budget_tokens=_over(t, 2.0), config=off)
    assert over.outcome == "full_applied" and over.compacted_count == 0
    assert not any(e.flags.truncated for e in t.messages().entries)
    fresh = _session()
    assert fresh.compact(budget_tokens=_over(fresh, 0.8)).outcome == "micro_applied"


# 3.1 "compact(String summary)：手工触发 compact"; 4 "结构化 JSON ... 已渲染的 markdown checkpoint"

PROSE = "We read every module. The parser lives in src/m3.py; it rejects ISO weeks such as 2024-W05."


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ('{"done": ["found the parser"], "next_steps": ["fix parse_week"]}', {"done": ("found the parser",)}),
        ("## Goal\n\n_none_\n\n## Next steps\n\n- fix parse_week\n", {"next_steps": ("fix parse_week",)}),
        (PROSE, {"summary": PROSE}),
    ],
)
def test_compact_string_summary(summary: str, expected: dict[str, object]) -> None:
    def never(request: SummaryRequest) -> str:
        raise AssertionError("a caller's summary asks no summarizer")

    t = _session(summarizer=never)
    result = t.compact(budget_tokens=_over(t, 0.5), summary=summary)
    assert result.outcome == "full_applied" and result.manual and result.forced
    assert result.reason == "a summary the caller wrote"
    assert not result.fallback_used and not result.failed and result.summary_input_tokens == 0
    checkpoint = t.latest_checkpoint()
    assert checkpoint is not None and checkpoint.goal == GOAL  # the goal is still the user's task
    for name, value in expected.items():
        assert getattr(checkpoint, name) == value
    view = t.visible_messages()
    assert any(m.kind == "summary" and PROSE[:40] in m.text for m in view.messages) == (summary == PROSE)


def test_compact_string_summary_is_kept_through_a_delta() -> None:
    t = _session()
    t.compact(budget_tokens=_over(t, 0.5), summary=PROSE)
    _grow(t, 20, start=100)
    again = t.compact(budget_tokens=_over(t, 2.0))
    assert again.strategy == "checkpoint-delta"
    checkpoint = t.latest_checkpoint()
    assert checkpoint is not None and checkpoint.summary == PROSE
    assert PROSE in t.status().summary


@pytest.mark.parametrize("summary", ["", "  \n", 42, "bad \ud800 text"])
def test_compact_string_summary_refuses_what_is_no_summary(summary: object) -> None:
    t = _session()
    version = t.version
    with pytest.raises(InvalidArgument):
        t.compact(budget_tokens=_over(t, 0.5), summary=summary)  # type: ignore[arg-type]
    assert t.version == version


# 3.2 "/compact 是主动压缩" — `transcript compact --summary FILE`


def test_cli_compact_with_a_summary_file(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Transcript.open(db, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user(GOAL))
        _grow(t, 20)
        budget = _over(t, 0.5)
    summary = tmp_path / "summary.md"
    summary.write_text(PROSE + "\n", encoding="utf-8")
    run = CliRunner().invoke(
        cli, ["compact", "--db", str(db), "--budget", str(budget), "--summary", str(summary)]
    )
    assert run.exit_code == 0, run.output
    assert run.output.startswith("checkpoint: ")
    shown = CliRunner().invoke(cli, ["checkpoint", "--db", str(db), "--format", "json"])
    assert msgspec.json.decode(shown.output)["summary"] == PROSE
    piped = CliRunner().invoke(
        cli, ["compact", "--db", str(db), "--budget", str(budget), "--summary", "-"], input="\xff"
    )
    assert piped.exit_code == 0  # "ÿ" is text: it is taken as prose
    summary.write_bytes(b"\xff\xfe not text")
    bad = CliRunner().invoke(
        cli, ["compact", "--db", str(db), "--budget", str(budget), "--summary", str(summary)]
    )
    assert bad.exit_code == 1 and "not UTF-8" in bad.output
    both = CliRunner().invoke(
        cli, ["compact", "--db", str(db), "--budget", "9", "--summary", str(summary), "--shadow"]
    )
    assert both.exit_code == 2


# 4 "processSnapshots"; 8 "隐藏 continuation prompt 会重新注入 ... process snapshots"; 10.1 "进程概况"

SERVER = {
    "id": "web",
    "command": "npm run dev",
    "state": "running",
    "started": "2025-06-01T10:00:00Z",
    "output_tail": "compiled\nready on http://localhost:3000\n",
}


def test_process_snapshots_in_the_local_checkpoint() -> None:
    t = _session()  # no model summarizer: the local one writes the checkpoint
    t.set_processes([SERVER])
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.outcome == "full_applied" and result.fallback_used
    assert result.checkpoint is not None
    (line,) = result.checkpoint.process_snapshots
    assert line.startswith("web: `npm run dev` running since 2025-06-01 10:00:00Z")
    assert "ready on http://localhost:3000" in line
    assert line in t.continuation_prompt(result) and "Processes:" in t.continuation_prompt(result)


def test_the_continuation_prompt_reinjects_the_latest_process_snapshots() -> None:
    t = _session(summarizer=lambda request: '{"process_snapshots": ["a stale server the model remembers"]}')
    t.set_processes([SERVER])
    result = t.compact(budget_tokens=_over(t, 2.0))
    assert result.checkpoint is not None and not result.fallback_used
    assert result.checkpoint.process_snapshots[0].startswith("web:")  # the host's word wins
    t.set_processes([{**SERVER, "state": "exited", "exit_code": 0}])
    assert "web: `npm run dev` exited since 2025-06-01 10:00:00Z (exit 0)" in t.continuation_prompt()
    t.set_processes([])
    assert "Processes:" not in t.continuation_prompt()


def test_snapshot_shows_the_process_overview() -> None:
    t = _session()
    version = t.version
    t.set_processes([SERVER, {"id": "tests", "command": "pytest -x", "state": "failed", "exit_code": 1}])
    t.set_processes([SERVER, {"id": "tests", "command": "pytest -x", "state": "failed", "exit_code": 1}])
    assert t.version == version + 1  # recorded once: the second call changed nothing
    status = t.status()
    assert [p.id for p in status.processes] == ["web", "tests"]
    assert status.overview.processes[1] == "tests: `pytest -x` failed (exit 1)"
    reopened = Transcript.attach(t.events, "s")
    assert reopened.processes == t.processes and reopened.status().processes == status.processes
    restored = Store(t.events, tokenizer="chars/4").restore(t.export_state(), session_id="s2")
    assert restored.processes == t.processes  # an exported state carries them


@pytest.mark.parametrize(
    "processes",
    [
        "npm run dev",
        [{"id": "", "command": "x"}],
        [{"command": "x"}],
        [{"id": "a", "command": "x", "started": "2025-06-01T10:00:00"}],  # no timezone
        [{"id": "a", "command": "x"}, {"id": "a", "command": "y"}],
        [{"id": "a", "command": "x", "state": "running \ud800"}],
        [42],
    ],
)
def test_set_processes_refuses_bad_snapshots(processes: object) -> None:
    t = _session()
    version = t.version
    with pytest.raises(InvalidArgument):
        t.set_processes(processes)  # type: ignore[arg-type]
    assert t.version == version


def test_a_process_output_tail_keeps_its_end() -> None:
    t = _session()
    t.set_processes([{"id": "log", "command": "tail -f app.log", "output_tail": "x" * 5_000 + "THE END"}])
    (process,) = t.processes
    assert len(process.output_tail) == 2_000 and process.output_tail.endswith("THE END")


# 11.2 "宿主不必重新理解 compact 逻辑": the host sees a round's plan before it is written, and may veto it.


def test_host_before_compact_hook_vetoes_an_automatic_compact() -> None:
    seen: list[RoundPlan] = []

    def hook(plan: RoundPlan) -> bool:
        seen.append(plan)
        return False

    t = _session(before_compact=hook)
    before = t.messages()
    result = t.compact(budget_tokens=_over(t, 2.0))
    (plan,) = seen
    assert (
        plan.action in ("full", "micro_then_full") and plan.full and plan.view_tokens == result.tokens_before
    )
    assert result.outcome == "vetoed" and "before_compact" in result.reason and result.version == t.version
    after = t.messages()
    assert [e.flags for e in after.entries] == [e.flags for e in before.entries]  # nothing else written
    assert t.latest_compact_result() == result and t.compact_results() == [result]
    assert LoopPolicy().after_round(result).code == "no_compaction"
    assert t.compact(budget_tokens=_over(t, 2.0), manual=True).outcome == "full_applied"  # not asked
    assert len(seen) == 1


@pytest.mark.parametrize("answer", [True, None])
def test_host_before_compact_hook_lets_a_compact_run(answer: bool | None) -> None:
    seen: list[RoundPlan] = []

    def hook(plan: RoundPlan) -> bool | None:
        seen.append(plan)
        return answer

    t = _session(before_compact=hook)
    result = t.compact(budget_tokens=_over(t, 0.8))
    assert result.outcome == "micro_applied" and seen[0].action == "micro" and not seen[0].full
    assert set(seen[0].micro_ids) == set(result.compacted_ids)
    quiet = t.compact(budget_tokens=_over(t, 0.1))
    assert quiet.outcome == "skipped" and len(seen) == 1  # a round that writes nothing asks nothing


def test_a_vetoed_round_leaves_the_breaker_as_it_was() -> None:
    def broken(request: SummaryRequest) -> str:
        raise RuntimeError("HTTP 500")

    t = _session(summarizer=broken)
    failed = t.compact(budget_tokens=_over(t, 2.0))
    assert failed.consecutive_failures == 1
    _grow(t, 20, start=100)
    t.before_compact = lambda plan: False
    vetoed = t.compact(budget_tokens=_over(t, 2.0))
    assert vetoed.outcome == "vetoed" and vetoed.consecutive_failures == 1 and vetoed.breaker == "closed"
    assert vetoed.last_error == failed.last_error


# 004 "planner ... 只读扫描 transcript，生成投影计划"; "mutate ... 唯一写标记的出口": the single mutator
# re-checks a plan it is handed before it writes a mark.


def _hand_plan(t: Transcript, seq: int) -> MicroPlan:
    """A plan made by hand that truncates the first part of the message at `seq`."""
    snapshot = t.messages()
    entry = snapshot.entries[seq]
    proposed = DirectiveEntry(
        message_id=entry.message.id,
        target="part",
        action=TRUNCATE,
        part_index=0,
        keep_head=20,
        keep_tail=10,
        original_chars=len(entry.message.text),
        original_tokens=entry.token_count,
        rendered_tokens=10,
    )
    return MicroPlan(
        session_id=snapshot.session_id,
        version=snapshot.version,
        entries=(proposed,),
        estimated_saved_tokens=entry.token_count - 10,
        scanned_to=seq + 1,
        examined=1,
        positions=((entry.message.id, seq),),
    )


def _mixed_session() -> Transcript:
    t = _session()
    t.append(Message.user("and keep the old week format working " * 30))
    call = ToolCall(id="todo", name="TodoWrite", input={"todos": ["fix"]})
    t.append_turn(
        [Message.assistant("noting it", tool_calls=[call]), Message.tool_result("todo", "ok " * 300)]
    )
    call = ToolCall(id="bad", name="Bash", input={"command": "pytest"})
    t.append_turn(
        [
            Message.assistant("testing", tool_calls=[call]),
            Message.tool_result("bad", "E " * 400, is_error=True),
        ]
    )
    _grow(t, 4, start=300)
    return t


def _seq(t: Transcript, match: object) -> int:
    return next(e.seq for e in t.messages().entries if match(e.message))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("pick", "why"),
    [
        (lambda m: m.role == "user" and m.text.startswith("and keep"), "the user's own message"),
        (lambda m: m.role == "user" and m.text == GOAL, "the user's own message"),
        (lambda m: m.role == "tool" and m.tool_results[0].call_id == "todo", "protected tool 'TodoWrite'"),
        (lambda m: m.role == "tool" and m.tool_results[0].call_id == "bad", "an error result"),
        (lambda m: m.role == "assistant" and m.text == "testing", "the model's own message"),
        (lambda m: m.role == "system", "a system message"),
        (lambda m: m.role == "tool" and m.tool_results[0].call_id == "c303", "in the last 3 steps"),
    ],
)
def test_apply_micro_plan_rechecks_eligibility(pick: object, why: str) -> None:
    t = _mixed_session()
    before, version = t.messages(), t.version
    with pytest.raises(IneligiblePlan, match=why):
        t.apply_micro_plan(_hand_plan(t, _seq(t, pick)))
    assert t.version == version and t.messages() == before


def test_apply_micro_plan_takes_an_eligible_plan() -> None:
    t = _mixed_session()
    seq = _seq(t, lambda m: m.role == "tool" and m.tool_results[0].call_id == "c0")
    result = t.apply_micro_plan(_hand_plan(t, seq))  # its own keep_head and keep_tail are its business
    assert result.outcome == "micro_applied" and result.manual
    assert t.messages().entries[seq].flags.truncated
    planned = plan_micro(t.messages(), t.config)
    assert t.apply_micro_plan(planned).compacted_count == len(planned.message_ids) > 0


# 7.1 "prompt-too-long retry", for the main model call too: a provider's refusal compacts and retries once.


def _provider_error(sdk: object, message: str, body: object, status: int = 400) -> Exception:
    """A real SDK error, as the SDK raises it from an HTTP response."""
    error_class = sdk.BadRequestError  # type: ignore[attr-defined]
    response_class = typing.get_type_hints(error_class.__init__)["response"]
    http = importlib.import_module(response_class.__module__.split(".")[0])  # the SDK's HTTP library
    request = http.Request("POST", "https://provider.invalid/v1/messages")
    response = response_class(status, request=request)
    error: Exception = error_class(message, response=response, body=body)
    return error


def _anthropic_too_long() -> Exception:
    said = "prompt is too long: 208403 tokens > 200000 maximum"
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
    return _provider_error(anthropic, f"Error code: 400 - {body}", body)


def _openai_too_long() -> Exception:
    said = (
        "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "131072 tokens. Please reduce the length of the messages."
    )
    body = {
        "message": said,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return _provider_error(openai, f"Error code: 400 - {{'error': {body}}}", body)


class Provider:
    """A fake model behind a real SDK's errors: refuses the first `refusals` calls as too long."""

    def __init__(self, refusals: list[Exception]) -> None:
        self.refusals = refusals
        self.views: list[int] = []

    def __call__(self, view: View) -> str:
        self.views.append(view.tokens)
        view.to_anthropic()  # what a host sends
        if self.refusals:
            raise self.refusals.pop(0)
        return "the reply"


@pytest.mark.parametrize("refusal", [_anthropic_too_long, _openai_too_long])
def test_prompt_too_long_retry_on_the_main_model_call(refusal: typing.Callable[[], Exception]) -> None:
    t = _session()
    budget = _over(t, 0.9)  # within the budget by our count: the provider counts otherwise
    model = Provider([refusal()])
    call = t.call_model(model, budget_tokens=budget)
    assert call.proceed and call.decision.code == "overflow_recovered" and call.reply == "the reply"
    recovery = call.recovery
    assert recovery is not None and recovery.outcome == "full_applied" and recovery.forced
    assert not recovery.manual and recovery.reason.startswith("context_overflow: the provider refused")
    assert len(model.views) == 2 and model.views[1] < model.views[0] and call.view.tokens == model.views[1]
    assert t.compact_results()[-1] == recovery  # recorded like any round
    last = t.stored_messages()[-1]
    assert last.kind == "meta" and (last.metadata or {}).get("continuation") == "compacted"


def test_prompt_too_long_retry_stops_on_a_second_overflow() -> None:
    t = _session()
    model = Provider([_anthropic_too_long(), _anthropic_too_long()])
    call = t.call_model(model, budget_tokens=_over(t, 0.9))
    assert not call.proceed and call.decision.code == "overflow_again" and call.reply is None
    assert "too long again" in call.decision.reason and "208403 tokens" in call.decision.reason
    assert isinstance(call.error, anthropic.BadRequestError) and len(model.views) == 2


def test_prompt_too_long_retry_leaves_other_errors_alone() -> None:
    t = _session()
    version = t.version
    limited = _provider_error(anthropic, "rate limited", {"error": {"type": "rate_limit_error"}}, status=429)
    with pytest.raises(anthropic.BadRequestError):
        t.call_model(Provider([limited]), budget_tokens=_over(t, 0.9))
    assert t.compact_results() == [] and t.version == version + 1  # the served view's record only


def test_prompt_too_long_retry_async() -> None:
    t = _session()
    model = Provider([_openai_too_long()])

    async def call(view: View) -> str:
        return model(view)

    result = asyncio.run(t.acall_model(call, budget_tokens=_over(t, 0.9)))
    assert result.decision.code == "overflow_recovered" and result.reply == "the reply"


@pytest.mark.parametrize(
    ("error", "overflow"),
    [
        (RuntimeError("prompt is too long: 208403 tokens > 200000 maximum"), True),
        (
            ValueError(
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
            ),
            True,
        ),
        (RuntimeError("Input is too long for requested model."), True),
        (RuntimeError("Your input exceeds the context window of this model."), True),
        (type("ContextWindowExceededError", (Exception,), {})("litellm says no"), True),
        (RuntimeError("rate limit exceeded, retry in 20s"), False),
        (RuntimeError("invalid x-api-key"), False),
    ],
)
def test_the_providers_prompt_too_long_errors_are_recognised(error: Exception, overflow: bool) -> None:
    assert is_context_overflow(error) == overflow
    assert (LoopPolicy().after_overflow(error, retried=False) is None) != overflow


def test_the_forced_round_is_sized_by_the_refusal() -> None:
    error = RuntimeError("prompt is too long: 250000 tokens > 200000 maximum")
    assert overflow_sizes(error) == (250_000, 200_000)
    assert retry_budget(error, 100_000, 1_000_000) == int(100_000 * 0.95 * 200_000 / 250_000)
    assert retry_budget(RuntimeError("Input is too long."), 10_000, 1_000_000) == 8_000
    assert retry_budget(error, 100_000, 5_000) == 5_000  # never more than the caller's budget


# 004 "跨会话装回标记" for a session Codex compacted itself: its `compacted` record is an imported
# compaction, and the view after it is what Codex sent.

CODEX = PROJECT_ROOT / "fixtures" / "formats" / "codex"
COMPACTED = CODEX / "rollout_compacted_0.46.0_built.jsonl"
REPLACED = CODEX / "rollout_compacted_replacement_0.63.0_built.jsonl"


def _compacted_line(path: Path) -> tuple[int, dict[str, Any]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        record = json.loads(line)
        if record["type"] == "compacted":
            return number, record["payload"]
    raise AssertionError("no compacted record")


def _texts(t: Transcript) -> list[tuple[str, str, str]]:
    return [(m.role, m.kind, m.text) for m in t.visible_messages().messages]


def test_codex_compacted_record_is_an_imported_compaction() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    (report,) = store.import_file(COMPACTED).sessions
    assert report.compactions == 1 and not any("'compacted' record" in w for w in report.warnings)
    t = store.session(report.session_id)
    (result,) = t.compact_results()
    assert result.outcome == "full_applied" and result.strategy == "imported"
    assert result.reason == "codex compacted" and result.tokens_after < result.tokens_before
    line, payload = _compacted_line(COMPACTED)
    assert [m.id for m in t.visible_messages().messages if m.kind == "summary"] == [
        f"{report.session_id}/{line}"
    ]
    view = _texts(t)
    summary = next(v for v in view if v[1] == "summary")
    assert summary == ("user", "summary", payload["message"])
    before = view[: view.index(summary)]
    # What Codex rebuilds: its initial context (instructions, environment), then the user's requests.
    assert [kind for _, kind, _ in before] == ["meta", "message", "message", "message"]
    assert before[1][2].startswith("<environment_context>")
    assert [text for _, _, text in before[2:]] == [
        "Make parse_date in dates/parse.py accept ISO week dates such as 2024-W05-3.",
        "Keep the plain YYYY-MM-DD format working too, and add a test for both.",
    ]
    after = view[view.index(summary) + 1 :]
    assert [role for role, _, _ in after] == ["assistant", "tool", "assistant"]
    assert t.stored_messages()[-1].text == after[-1][2]
    assert len(t.stored_messages()) == report.messages  # nothing of the history is dropped
    assert t.visible_messages().to_anthropic() and t.visible_messages().to_openai()


def test_codex_compaction_with_a_replacement_history() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    (report,) = store.import_file(REPLACED).sessions
    t = store.session(report.session_id)
    (result,) = t.compact_results()
    assert result.strategy == "imported"
    _, payload = _compacted_line(REPLACED)
    wanted = [
        "".join(part["text"] for part in item["content"])
        for item in payload["replacement_history"]
        if item["type"] == "message"
    ]
    view = [text for _, _, text in _texts(t)]
    shown = view[: view.index(payload["message"]) + 1]
    assert sorted(shown) == sorted(wanted)  # exactly the replacement history, its summary last
    added = [m for m in t.stored_messages() if m.id.endswith("/0")]
    assert [m.role for m in added] == ["system"]  # the one item no earlier message repeats
    assert any("ghost_snapshot" in w for w in report.warnings)


def test_replay_shows_a_codex_compaction_as_a_compact_point(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    runner = CliRunner()
    imported = runner.invoke(cli, ["import", "--db", str(db), str(COMPACTED)])
    assert imported.exit_code == 0, imported.output
    replay = runner.invoke(cli, ["replay", "--db", str(db), "--format", "json"])
    assert replay.exit_code == 0, replay.output
    points = msgspec.json.decode(replay.output)
    compact = [p for p in points if p["kind"] == "compact"]
    assert len(compact) == 1 and compact[0]["result"]["strategy"] == "imported"
    calls = [p for p in points if p["kind"] == "model-call"]
    assert calls[-1]["view_tokens"] < max(p["view_tokens"] for p in calls)  # Codex sent less after it
    text = runner.invoke(cli, ["replay", "--db", str(db)])
    assert any(" compact " in line and "imported:" in line for line in text.output.splitlines())


def test_a_codex_compacted_record_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    lines = COMPACTED.read_text(encoding="utf-8").splitlines()
    number, _ = _compacted_line(COMPACTED)
    lines[number - 1] = json.dumps(
        {"timestamp": "2025-10-20T09:00:40.000Z", "type": "compacted", "payload": {"replacement_history": 7}}
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store.open(":memory:", tokenizer="chars/4")
    with pytest.raises(FormatError, match=f"line {number}: .*replacement_history"):
        store.import_file(path)
    assert store.sessions() == []


# 004 "mutate ... 唯一写标记的出口": the writer capability is the mutator's, a mark comes only with the round
# or import that explains it, and `verify` names a mark no round explains.


def test_mutate_is_the_only_exit_that_writes_marks() -> None:
    from mutate.commit import commit

    t = _session()
    victim = t.messages().entries[3].message.id
    before = t.messages()
    with pytest.raises(WriteRefused, match="mutator"):
        FlagWriter(t.events)  # the capability cannot be made by user code
    with pytest.raises(WriteRefused, match="mutator"):
        writer_for(t.events)  # nor asked for
    with pytest.raises(WriteRefused, match="no compaction or import record"):
        commit(t.events, "s", t.version, [MessageMarked(message_id=victim, excluded=True)])
    t._sync(force=True)
    assert t.messages() == before


def _forge(store: Store, session_id: str, event: Event) -> None:
    """Append an event past the library, chained as the log chains it (an editor of the file could)."""
    recorder = store.events.recorder  # type: ignore[attr-defined]
    version, prev = store.events.head(session_id)
    at = datetime.now(UTC).isoformat(timespec="microseconds")
    payload = EVENT_ENCODER.encode(event)
    row = EventRow(
        version + 1,
        event.kind,
        None,
        None,
        at,
        payload.decode(),
        event_hash(prev, session_id, version + 1, at, payload),
    )
    recorder.insert([RecorderWrite(session_id, (version, prev), [], [row])])


def test_verify_names_a_mark_no_round_explains(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = Store.open(path, tokenizer="chars/4")
    t = store.session("s")
    t.append(Message.system("You are a coding agent."))
    t.append(Message.user(GOAL))
    _grow(t, 20)
    t.compact(budget_tokens=_over(t, 0.8))  # micro
    t.compact(budget_tokens=_over(t, 2.0))  # full
    store.fork("s", new_session_id="f")
    store.restore(t.export_state(), session_id="r")
    store.import_file(
        PROJECT_ROOT / "fixtures" / "formats" / "claude-code" / "agent_progress_2.1_built.jsonl"
    )
    assert verify(path).ok  # rounds, a fork, a restore, an import with a record kept out of the view
    victim = t.messages().entries[5].message.id
    _forge(store, "s", MessageMarked(message_id=victim, excluded=True))
    store.close()
    report = verify(path)
    (problem,) = report.problems
    assert problem.code == "mark_unexplained" and problem.session_id == "s" and problem.message_id == victim


def test_a_restored_state_with_an_unexplained_mark_is_refused() -> None:
    t = _session()
    state = t.export_state()
    victim = t.messages().entries[1].message.id  # the request: a view without it can still be sent
    forged = msgspec.structs.replace(
        state,
        head="",  # (a forger drops the head the document states, which its events no longer reach)
        events=(
            *state.events,
            ExportedEvent(
                version=len(state.events) + 1,
                recorded_at=state.events[-1].recorded_at,
                event=MessageMarked(message_id=victim, excluded=True),
            ),
        ),
    )
    store = Store.open(":memory:", tokenizer="chars/4")
    with pytest.raises(WriteRefused, match="no compaction or import record"):
        store.restore(forged, session_id="copy")
    assert store.sessions() == []


def test_an_import_records_the_marks_it_writes() -> None:
    store = Store.open(":memory:", tokenizer="chars/4")
    (report,) = [
        s
        for s in store.import_file(
            PROJECT_ROOT / "fixtures" / "formats" / "claude-code" / "agent_progress_2.1_built.jsonl"
        ).sessions
        if s.hidden
    ]
    records, _ = store.events.read_log(report.session_id)
    (record,) = [r.event for r in records if isinstance(r.event, ImportRecorded)]
    hidden = [e.message.id for e in store.session(report.session_id).messages().entries if e.flags.excluded]
    assert set(record.hidden) <= set(hidden) and len(record.hidden) == report.hidden
    assert record.source.startswith("claude-code:")


_STEPS = st.lists(st.sampled_from(["micro", "full", "import", "forged", "append", "title"]), max_size=12)


@given(_STEPS)
def test_every_mark_the_mutator_writes_is_explained_and_a_forged_one_is_not(steps: list[str]) -> None:
    """A log of steps as the mutator writes them, with marks slipped in past it: exactly those are named."""
    events: list[tuple[int, Hashable, Event]] = []
    forged: list[int] = []
    summaries: set[str] = set()

    def add(commit: int, *written: Event) -> None:
        events.extend((len(events) + 1, commit, event) for event in written)

    for commit, step in enumerate(steps):
        mid = f"m{commit}"
        if step == "micro":
            add(
                commit,
                MessageMarked(message_id=mid, truncated=True),
                CompactionRecorded(result=CompactResult(outcome="micro_applied", compacted_ids=(mid,))),
            )
        elif step == "full":
            summaries.add(f"sum{commit}")
            add(
                commit,
                MessageMarked(message_id=mid, excluded=True),
                MessageAppended(seq=0, message_id=f"sum{commit}", body_hash=""),
                CompactionRecorded(result=CompactResult(outcome="full_applied")),
            )
        elif step == "import":
            add(
                commit,
                MessageAppended(seq=0, message_id=mid, body_hash=""),
                MessageMarked(message_id=mid, excluded=True),
                MessageAppended(seq=0, message_id="x", body_hash=""),
                ImportRecorded(hidden=(mid,)),
            )
        elif step == "forged":
            add(commit, MessageMarked(message_id=mid, excluded=True))
            forged.append(len(events))
        elif step == "append":
            add(commit, MessageAppended(seq=0, message_id=mid, body_hash=""))
        else:
            add(commit, TitleSet(title=mid))
    named = [version for version, _ in unexplained_marks(events, summaries)]
    assert sorted(named) == forged
