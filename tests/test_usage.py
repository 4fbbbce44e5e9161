"""Billed usage: recorded against the served view it answers, filled by importers, shown by stats.

A live loop records a call's usage (`record_usage`, or `append_turn(..., usage=)`) against the view it
served; importers record what Claude Code (`message.usage`) and Codex (`token_count` events) wrote.
Each call's estimate sits beside its bill, and a fit per model (billed ≈ slope × estimate +
intercept) predicts the bill; fitted on the first half of a corpus file's calls, it must predict the
second half within 5% (median).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from tests.conftest import CORPUS, PROJECT_ROOT
from tests.test_codecs import anthropic_reply, responses_reply
from transcript import (
    InvalidArgument,
    Message,
    Store,
    ToolCall,
    Transcript,
    Usage,
    from_anthropic,
    from_responses,
    verify,
)
from transcript.cli import cli
from transcript.model.usage import Calibration, codex_usage, relative_error
from transcript.session.billing import holdout

CODEX = PROJECT_ROOT / "fixtures" / "formats" / "codex"
USAGE_FILES = ["claude-code_ccviewer_5c0375b4.jsonl", "claude-code_ccviewer_fe5e1c67.jsonl"]


def _started(t: Transcript) -> None:
    t.append(Message.system("You edit files."))
    t.append(Message.user("make both edits"))


def test_usage_is_tied_to_the_served_view_it_answers(tmp_path: Path) -> None:
    with Transcript.open(tmp_path / "t.db", session_id="s") as t:
        _started(t)
        view = t.visible_messages(record=True)
        served = t.version
        record = t.record_usage(Usage(input_tokens=10, cache_read_tokens=900, output_tokens=5, model="m"))
        assert (record.served, record.estimate) == (served, view.tokens)
    with Transcript.open(tmp_path / "t.db", session_id="s") as t:  # it survives a restart
        (call,) = t.billing().calls
        assert (call.served, call.estimate, call.billed, call.model) == (served, view.tokens, 910, "m")
        assert t.status().last_call == call and t.status().billed_calls == 1


def test_a_reply_and_its_usage_are_one_transaction() -> None:
    t = Store.open(":memory:").session("s")
    _started(t)
    t.visible_messages(record=True)
    reply = from_anthropic(anthropic_reply())
    before = t.version
    t.append_turn([reply, *(Message.tool_result(c.id, "ok") for c in reply.tool_calls)], usage=reply)
    assert t.version == before + 1 + 1 + len(reply.tool_calls)  # usage, reply, results
    (call,) = t.billing().calls
    assert (call.message_id, call.billed, call.cache_read_tokens) == (reply.id, 18_712, 18_000)


def test_with_no_served_view_to_answer_usage_is_refused_and_nothing_is_written() -> None:
    t = Store.open(":memory:").session("s")
    _started(t)
    version = t.version
    with pytest.raises(InvalidArgument, match="served no view"):
        t.record_usage(Usage(input_tokens=1))
    reply = from_responses(responses_reply())
    with pytest.raises(InvalidArgument):
        t.append_turn([reply], usage=reply)
    assert t.version == version and len(t) == 2


@pytest.mark.parametrize(
    ("usage", "served"),
    [
        ("not usage", None),
        ({"input_tokens": 3}, None),
        (Message.assistant("no usage in this message"), None),
        (Usage(input_tokens=1), 999),
        (Usage(input_tokens=1), True),
        (Usage(input_tokens=1), "3"),
    ],
)
def test_usage_of_the_wrong_shape_or_for_no_served_view_is_refused(usage: Any, served: Any) -> None:
    t = Store.open(":memory:").session("s")
    _started(t)
    t.visible_messages(record=True)
    version = t.version
    with pytest.raises(InvalidArgument):
        t.record_usage(usage, served=served)
    assert t.version == version


def test_a_served_view_takes_one_usage_record() -> None:
    t = Store.open(":memory:").session("s")
    _started(t)
    t.visible_messages(record=True)
    first = t.version
    t.record_usage(Usage(input_tokens=1))
    with pytest.raises(InvalidArgument, match="already has its usage"):
        t.record_usage(Usage(input_tokens=2))
    t.visible_messages(record=True)
    t.record_usage(Usage(input_tokens=3))
    assert [c.served for c in t.billing().calls] == [first, t.version - 1]


@pytest.mark.parametrize("field", ["input_tokens", "cache_read_tokens", "output_tokens"])
@pytest.mark.parametrize("value", [-1, 1.5, True, "3"])
def test_usage_counts_are_whole_numbers(field: str, value: Any) -> None:
    with pytest.raises(InvalidArgument):
        Usage(**{field: value})


def _raw_claude_code_usage(path: Path) -> dict[str, int]:
    """Per API message id, the prompt Claude Code recorded (read here from the file, line by line)."""
    billed: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        message = record.get("message") if isinstance(record, dict) else None
        if record.get("type") != "assistant" or not isinstance(message, dict) or "usage" not in message:
            continue
        if record.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
            continue
        usage = message["usage"]
        billed[message["id"]] = sum(
            usage.get(k) or 0
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
    return billed


@pytest.mark.parametrize("name", USAGE_FILES)
def test_a_claude_code_import_records_every_calls_usage(name: str) -> None:
    store = Store.open(":memory:")
    report = store.import_file(CORPUS / name)
    recorded: dict[str, int] = {}
    for session in report.sessions:
        t = store.session(session.session_id, create=False)
        entries = {e.message.id: e.message for e in t.messages().entries}
        for call in t.billing().calls:
            assert call.message_id is not None
            api_id = (entries[call.message_id].metadata or {})["api_message_id"]
            recorded[api_id] = call.billed
    assert recorded == _raw_claude_code_usage(CORPUS / name)


def test_a_codex_import_records_each_token_count_once() -> None:
    path = CODEX / "rollout_0.39.0_vibecodingtracker_head.jsonl"
    totals = []
    for line in path.read_text(encoding="utf-8").splitlines():
        payload = json.loads(line)["payload"]
        if (
            payload.get("type") == "token_count"
            and payload.get("info")
            and payload["info"]["total_token_usage"] not in totals
        ):
            totals.append(payload["info"]["total_token_usage"])
    store = Store.open(":memory:")
    (session,) = store.import_file(path).sessions
    calls = store.session(session.session_id, create=False).billing().calls
    assert len(calls) == len(totals) > 0
    assert calls[0].billed == 5645 and calls[0].cache_read_tokens == 5504 and calls[0].reasoning_tokens == 640
    assert all(c.message_id is not None for c in calls)


def test_codex_usage_counts_cached_tokens_inside_the_input() -> None:
    usage = codex_usage(
        {"last_token_usage": {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 7}}
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.prompt_tokens) == (40, 60, 100)


def test_stats_prints_estimate_against_bill_per_call_and_the_fit(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    Store.open(db).import_file(CORPUS / USAGE_FILES[0])
    session = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    run = CliRunner().invoke(cli, ["stats", "--db", str(db), "--session", session])
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    header = next(k for k, line in enumerate(lines) if line.startswith("call  point"))
    assert lines[header + 1].split()[:5] == ["1", "4", "claude-sonnet-4-20250514", "972", "18,768"]
    assert any(line.startswith("fit claude-sonnet-4-20250514: billed = ") for line in lines)
    assert any("before calibration" in line for line in lines)
    data = json.loads(
        CliRunner().invoke(cli, ["stats", "--db", str(db), "--session", session, "--format", "json"]).output
    )
    assert len(data["billing"]["calls"]) == 10 and data["billing"]["holdout"]["checked"] == 5


def holdout_by_file() -> dict[str, tuple[int, float, float]]:
    """Per corpus file with usage: calls checked, and the median error on the second half of each
    session's calls before and after a fit on the first half (`Billing.holdout`, pooled per file)."""
    out = {}
    for name in USAGE_FILES:
        store = Store.open(":memory:")
        before: list[float] = []
        after: list[float] = []
        for session in store.import_file(CORPUS / name).sessions:
            calls = store.session(session.session_id, create=False).billing().calls
            half = max(1, len(calls) // 2)
            if len(calls) < 2:
                continue
            fit = Calibration.fit((c.estimate, c.billed) for c in calls[:half])
            before += [relative_error(c.estimate, c.billed) for c in calls[half:]]
            after += [relative_error(fit.predict(c.estimate), c.billed) for c in calls[half:]]
        out[name] = (len(after), statistics.median(before), statistics.median(after))
    return out


def test_a_fit_on_the_first_half_predicts_the_second_half_within_five_percent() -> None:
    for name, (checked, before, after) in holdout_by_file().items():
        store = Store.open(":memory:")
        sessions = [s.session_id for s in store.import_file(CORPUS / name).sessions]
        pooled = holdout(*(store.session(s, create=False).billing().calls for s in sessions))
        assert pooled is not None and (pooled.checked, pooled.before, pooled.after) == (
            checked,
            before,
            after,
        )
        print(
            f"{name}: {checked} calls checked, "
            f"median error {before:.1%} before calibration, {after:.1%} after"
        )
        assert checked >= 5
        assert after <= 0.05 < before


@given(
    slope=st.floats(0.3, 3.5),
    intercept=st.integers(0, 50_000),
    estimates=st.lists(st.integers(1, 200_000), min_size=2, max_size=40, unique=True),
)
def test_a_fit_recovers_a_line_and_its_budget_is_the_largest_that_fits(
    slope: float, intercept: int, estimates: list[int]
) -> None:
    points = [(x, round(slope * x + intercept)) for x in estimates]
    fit = Calibration.fit(points)
    assert all(abs(fit.predict(x) - y) <= 2 + y * 1e-6 for x, y in points)
    prefix = Calibration.fit(points[:1])
    assert Calibration.fit(points[1:]).calls + prefix.calls == fit.calls
    rest = prefix
    for x, y in points[1:]:
        rest = rest.add(x, y)
    assert rest == fit  # a prefix folded, then the rest, is the fit of all
    limit = max(y for _, y in points)
    budget = fit.view_budget(limit)
    assert fit.slope * budget + fit.intercept <= limit + 1e-6
    assert fit.slope * (budget + 1) + fit.intercept > limit - 1e-6


def test_a_fork_keeps_none_of_the_parents_usage() -> None:
    store = Store.open(":memory:")
    t = store.session("s")
    _started(t)
    t.visible_messages(record=True)
    t.record_usage(Usage(input_tokens=5))
    t.append(Message.assistant("ok", [ToolCall(id="c", name="n")]))
    store.fork("s", at="last", new_session_id="f")
    assert store.session("f", create=False).billing().calls == ()
    state = t.export_state()
    copy = store.restore(state, session_id="s-copy")
    assert len(copy.billing().calls) == 1


def test_a_turn_appended_again_records_its_usage_once() -> None:
    t = Store.open(":memory:").session("s")
    _started(t)
    t.visible_messages(record=True)
    reply = from_anthropic(anthropic_reply())
    turn = [reply, *(Message.tool_result(c.id, "ok") for c in reply.tool_calls)]
    t.append_turn(turn, usage=reply)
    version = t.version
    t.append_turn(turn, usage=reply)  # the loop was unsure after a crash
    assert t.version == version and len(t.billing().calls) == 1


def test_usage_recorded_while_another_writer_appends_still_lands() -> None:
    store = Store.open(":memory:")
    t = store.session("s")
    _started(t)
    t.visible_messages(record=True)
    other = store.session("s")
    other.append(Message.user("and one more thing"))
    record = t.record_usage(Usage(input_tokens=7))
    assert record.served == 3 and t.billing().calls[0].billed == 7


def test_an_import_with_hidden_records_and_usage_verifies(tmp_path: Path) -> None:
    """A bill beside a reply sits between an import's hidden-record marks and the record explaining
    them; the write is taken and the file verifies."""
    db = tmp_path / "t.db"
    store = Store.open(db)
    (main_session, *_) = store.import_file(
        PROJECT_ROOT / "fixtures" / "formats" / "claude-code" / "agent_progress_2.1_built.jsonl"
    ).sessions
    assert main_session.hidden and store.session(main_session.session_id, create=False).billing().calls
    store.close()
    assert verify(db).ok
