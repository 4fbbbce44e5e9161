"""The planner: config validation, staleness in steps or turns, eligibility, incremental planning."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import msgspec
import pytest

from planner import (
    CompactConfig,
    ConfigWarning,
    determine_compact_action,
    is_observation,
    plan_micro,
    stale_boundary,
)
from planner.config import InvalidConfig, _field_types
from transcript import Message, Store, ToolCall, Transcript
from transcript.model import ImagePart, TextPart

MICRO_ONLY = CompactConfig(full_compact_enabled=False)
# SPEC §6's micro rules as the priced policy applied them (projection policy 3 has tests/test_policy3.py).
SPEC = CompactConfig.priced()


def _step(t: Transcript, n: int, output: str, *, tool: str = "Bash", is_error: bool = False) -> None:
    call = ToolCall(id=f"c{n}", name=tool, input={"n": n})
    t.append_turn(
        [
            Message.assistant(f"step {n}", tool_calls=[call]),
            Message.tool_result(f"c{n}", output, name=tool, is_error=is_error),
        ]
    )


@pytest.fixture
def session() -> Transcript:
    t = Store.open(":memory:", tokenizer="chars/4").session("s")
    t.append(Message.system("sys"))
    t.append(Message.user("goal"))
    return t


def _results(t: Transcript) -> list[str]:
    return [e.message.id for e in t.messages().entries if e.message.role == "tool"]


def test_defaults_match_the_spec() -> None:
    # SPEC §6's thresholds are the priced policy's; the economy policy (the default, issue 21) lets
    # payback-gated micro rounds start at 40% of the budget and full rounds aim lower.
    priced = CompactConfig.priced()
    assert (priced.micro_compact_threshold, priced.auto_compact_threshold) == (0.75, 0.95)
    assert priced.full_compact_target == 0.3 and priced.micro_oversize_fraction == 0
    config = CompactConfig()
    assert (config.micro_compact_threshold, config.auto_compact_threshold) == (0.4, 0.95)
    assert config.full_compact_target == 0.2 and config.micro_oversize_fraction == 0.05
    assert config.micro_compact_stale_steps == 3 and config.micro_stale_unit == "step"
    assert (
        config.micro_field_threshold_chars,
        config.micro_field_keep_head_chars,
        config.micro_field_keep_tail_chars,
    ) == (500, 350, 100)
    assert config.max_consecutive_failures == 3
    assert all(config.is_protected(name) for name in ("task", "TASK", "agent", "todowrite", "Goal"))


def test_thresholds_outside_the_unit_interval_are_clamped_with_a_warning() -> None:
    with pytest.warns(ConfigWarning, match="outside"):
        config = CompactConfig.from_mapping({"micro_compact_threshold": -0.5, "auto_compact_threshold": 0.9})
    assert config.micro_compact_threshold == 0.0
    with pytest.warns(ConfigWarning, match="outside"):
        assert CompactConfig(auto_compact_threshold=3.0).auto_compact_threshold == 1.0


def test_smart_compact_is_accepted_deprecated_and_off() -> None:
    with pytest.warns(ConfigWarning, match="deprecated"):
        config = CompactConfig.from_mapping({"smart_compact_enabled": True})
    assert config.smart_compact_enabled is False


@pytest.mark.parametrize(
    "data", [{"unknown": 1}, {"micro_compact_stale_steps": "3"}, {"micro_stale_unit": "day"}]
)
def test_bad_config_data_is_refused(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid compaction config"):
        CompactConfig.from_mapping(data)


def test_every_default_is_of_its_declared_type_so_a_config_of_defaults_needs_no_check() -> None:
    # `CompactConfig` checks only the fields given other than their defaults (the annotations are
    # resolved for those alone): each default must already be what the check would make of it.

    kinds = dict(_field_types(CompactConfig))
    for field in msgspec.structs.fields(CompactConfig):
        default = field.default
        if default is msgspec.NODEFAULT:  # (a factory's value is never the default object: checked)
            continue
        converted = msgspec.convert(default, kinds[field.name])
        assert converted == default and type(converted) is type(default), field.name
        assert not isinstance(default, float) or math.isfinite(default), field.name


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"excerpt_lines": "6"}, "excerpt_lines"),
        ({"micro_compact_stale_steps": 3.0}, "micro_compact_stale_steps"),  # equal to the default
        ({"payback_confidence": math.nan}, "finite"),
    ],
)
def test_a_value_given_is_still_checked_and_converted(given: dict[str, object], error: str) -> None:
    with pytest.raises(InvalidConfig, match=error):
        CompactConfig(**given)  # type: ignore[arg-type]
    assert type(CompactConfig(payback_confidence=1).payback_confidence) is float  # converted


def test_the_last_three_steps_are_never_planned(session: Transcript) -> None:
    for n in range(5):
        _step(session, n, "x" * 600)
    plan = plan_micro(session.messages(), SPEC)
    planned = set(plan.message_ids)
    results = _results(session)
    assert planned == set(results[:2])


def test_turn_unit_counts_turn_groups_like_the_seed(session: Transcript) -> None:
    for n in range(6):
        _step(session, n, "x" * 600)
    snapshot = session.messages()
    assert plan_micro(snapshot, CompactConfig(micro_stale_unit="turn")).entries == ()
    assert stale_boundary(snapshot, CompactConfig(micro_stale_unit="turn")) == 0


def test_turn_unit_truncates_results_of_old_turn_groups(session: Transcript) -> None:
    _step(session, 0, "x" * 600)
    for n in range(3):
        session.append(Message.user(f"next task {n}"))
        _step(session, n + 1, "y" * 600)
    plan = plan_micro(session.messages(), CompactConfig.priced(micro_stale_unit="turn"))
    assert plan.message_ids == (_results(session)[0],)


def test_threshold_is_strict_and_counts_code_points(session: Transcript) -> None:
    _step(session, 0, "a" * 500)
    _step(session, 1, "漢" * 501)
    _step(session, 2, "🎉" * 500)
    for n in range(3, 6):
        _step(session, n, "z")
    plan = plan_micro(session.messages(), SPEC)
    assert plan.message_ids == (_results(session)[1],)
    assert plan.entries[0].original_chars == 501


def test_errors_protected_tools_and_inputs_are_left_whole(session: Transcript) -> None:
    _step(session, 0, "e" * 900, is_error=True)
    _step(session, 1, "t" * 900, tool="task")
    _step(session, 2, "q" * 900, tool="AskUserQuestion")
    _step(session, 3, "b" * 900)
    for n in range(4, 7):
        _step(session, n, "z")
    plan = plan_micro(session.messages(), SPEC)
    assert plan.message_ids == (_results(session)[3],)
    assert all(e.target == "part" and e.part_index == 0 for e in plan.entries)


def test_protection_follows_the_calls_name_when_the_result_has_none(session: Transcript) -> None:
    call = ToolCall(id="c0", name="Agent", input={"prompt": "explore"})
    session.append_turn([Message.assistant("", tool_calls=[call]), Message.tool_result("c0", "r" * 900)])
    for n in range(1, 4):
        _step(session, n, "z")
    assert plan_micro(session.messages(), SPEC).entries == ()


def test_multi_part_results_get_one_entry_per_long_text_and_media_item(session: Transcript) -> None:
    content = (
        TextPart(text="short"),
        TextPart(text="L" * 800),
        ImagePart(media_type="image/png", data="AAAA"),
    )
    session.append_turn(
        [
            Message.assistant("", tool_calls=[ToolCall(id="m", name="Read", input={})]),
            Message.tool_result("m", content, name="Read"),
        ]
    )
    for n in range(3):
        _step(session, n, "z")
    entries = plan_micro(session.messages(), SPEC).entries
    assert [(e.action, e.item_index) for e in entries] == [("truncate", 1), ("placeholder", 2)]


def test_rounds_only_look_at_what_earlier_rounds_did_not_touch(session: Transcript) -> None:
    config = SPEC
    for n in range(6):
        _step(session, n, "x" * 900)
    cursor = plan_micro(session.messages(), config).scanned_to  # where the round below stops looking
    first = session.compact(
        budget_tokens=1, config=CompactConfig.priced(full_compact_enabled=False), manual=True
    )
    truncated = set(first.compacted_ids)
    assert truncated
    for n in range(6, 9):
        _step(session, n, "y" * 900)
    plan = plan_micro(session.messages(), config, since=cursor)
    assert not truncated & set(plan.message_ids)
    assert plan.message_ids and plan.examined == plan.scanned_to - cursor
    assert plan.examined < len(session.messages().entries) // 2
    full = plan_micro(session.messages(), config)
    assert set(full.message_ids) == set(plan.message_ids)


def test_rebuild_mode_plans_truncated_messages_again(session: Transcript) -> None:
    for n in range(5):
        _step(session, n, "x" * 900)
    session.compact(budget_tokens=1, config=MICRO_ONLY, manual=True)
    snapshot = session.messages()
    assert plan_micro(snapshot, SPEC).entries == ()
    assert len(plan_micro(snapshot, SPEC, skip_existing_truncated=False).message_ids) == 2


@pytest.mark.parametrize(
    ("tokens", "savings", "kind"),
    [
        (740, 0, "none"),
        (800, 100, "micro"),
        (900, 10, "micro"),
        (960, 10, "micro_then_full"),
        (960, 0, "full"),
    ],
)
def test_trigger_decisions(tokens: int, savings: int, kind: str) -> None:
    action = determine_compact_action(tokens, 1000, SPEC, micro_savings=savings)
    assert action.kind == kind


def test_forced_rounds_go_straight_to_full() -> None:
    assert determine_compact_action(10, 1000, SPEC, force=True).kind == "full"


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        determine_compact_action(10, 0, SPEC)


def test_planner_runs_on_a_snapshot_read_through_a_read_only_connection(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "ro.db"
    with Transcript.open(path, session_id="s", tokenizer="chars/4") as t:
        t.append(Message.user("goal", created_at=datetime(2026, 1, 1, tzinfo=UTC)))
        for n in range(5):
            _step(t, n, "x" * 900)
    with Transcript.open(path, session_id="s", readonly=True) as t:
        plan = plan_micro(t.messages(), SPEC)
    assert len(plan.message_ids) == 2


def _pair(previous: Message | None, message: Message) -> bool:
    return is_observation(message, previous)


def test_observations_are_named_by_metadata_by_a_text_action_before_them_or_by_a_wrapper() -> None:
    acted = Message.assistant("let me look", metadata={"action": "ls -la\n"})
    said = Message.assistant("done; anything else?")
    assert _pair(acted, Message.user("total 0\ndrwxr-xr-x ..."))  # the action's output
    assert not _pair(said, Message.user("yes, fix it"))  # an answer to a question is intent
    assert _pair(None, Message.user("Added workspace context", metadata={"observation": "recall"}))
    assert _pair(None, Message.user("[result of tool call 'c1' ...]", metadata={"orphan_result": "c1"}))
    assert _pair(said, Message.user("<bash-stdout>hello</bash-stdout><bash-stderr></bash-stderr>"))
    assert not _pair(None, Message.user("make the failing test pass"))
    assert not _pair(acted, Message.assistant("more"))
    assert not _pair(acted, Message.tool_result("c1", "x"))
